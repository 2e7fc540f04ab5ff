"""A model's K and V projections turned into a shared low-rank latent per layer (MLA-style; the
cache is kvviz.cache.LatentCache, whose docstring says how rotary positions are handled).

``latent_bases(model, rank)``: per layer the SVD ``[W_K; W_V] = U Σ Vᵀ`` (float64) and its top
``rank`` left singular vectors U_r with the projections' bias; ``rank=None`` is full rank
(min(D, C): exact up to rounding). ``latent_spectrum(model)`` gives the singular values (how much of
the projections each rank keeps). ``elements_per_token(model, rank)``: what one token holds per
layer, the latent against the full cache's K and V.
"""
from __future__ import annotations

from functools import lru_cache

import torch

from kvviz.cache.latent import LatentCache
from kvviz.compress._protocol import kv_projections, rope_inv_freq
from kvviz.limits import LimitError, check_int


@lru_cache(maxsize=4)
def _svd(model) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], ...]:
    """Per layer (U [D, k], S [k], bias [D]) with k = min(D, C); once per model per process."""
    out = []
    for w, b in kv_projections(model):
        u, s, _ = torch.linalg.svd(w, full_matrices=False)
        out.append((u, s, b))
    return tuple(out)


def full_rank(model) -> int:
    """min(D, C) of the stacked projections, from their shapes (no SVD: a page asks before any run)."""
    return min(min(w.shape) for w, _ in kv_projections(model))


def check_rank(model, rank: int | str | None) -> int:
    """A rank between 1 and the projections' full rank; None or "full" is the full rank."""
    top = full_rank(model)
    if rank is None or rank == "full":
        return top
    return check_int("Rank", rank, 1, top)


def latent_bases(model, rank: int | str | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    r = check_rank(model, rank)
    return [(u[:, :r], b) for u, _, b in _svd(model)]


def latent_cache(model, rank: int | str | None = None) -> LatentCache:
    """An empty latent cache of ``rank`` for ``model`` (the tiny GPT or a transformers model)."""
    cfg = model.cost_config
    return LatentCache(latent_bases(model, rank), cfg.n_kv_heads, cfg.head_dim, rope_inv_freq(model))


def latent_spectrum(model) -> list[list[float]]:
    """Per layer the singular values of [W_K; W_V], largest first."""
    return [s.tolist() for _, s, _ in _svd(model)]


def elements_per_token(model, rank: int | str | None = None) -> dict:
    """Per token and layer: the latent's elements against the full cache's K and V."""
    cfg = model.cost_config
    r = check_rank(model, rank)
    full = 2 * cfg.n_kv_heads * cfg.head_dim
    if r > full:
        raise LimitError(f"Rank {r} is more than the {full} elements K and V hold.")
    return {"rank": r, "latent": r, "full_kv": full, "ratio": r / full}
