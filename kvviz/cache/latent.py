"""A latent cache (MLA-style): per token and layer one low-rank latent vector instead of K and V.

DeepSeek-V2/V3's multi-head latent attention caches c = W_DKV·x (512 elements) and expands it to
every head's K and V with up-projections. An existing model converts so (MHA2MLA, Ji et al. 2025):
factor its K and V projections jointly, ``[W_K; W_V] = U Σ Vᵀ`` (``[D, C]``, D = 2 · K/V heads ·
head size), keep the top ``rank`` singular directions: the down-projection is Σ_r V_rᵀ and the
up-projection U_r. Since ``[k; v] = W x + b``, the latent is ``c = U_rᵀ([k; v] − b)`` — what the
cache stores, computed from the K/V a model hands to ``update`` — and ``U_r c + b`` is what attention
reads back. At full rank (rank W) U_r U_rᵀ is the identity on W's range: exact up to rounding.

**Rotary positions: rotation after reconstruction.** A rotary model hands the cache its keys
already rotated at their positions. The layer turns each new key back by its own position (an
orthogonal rotation: nothing lost), stores the latent of the position-free K with V, and rotates the
reconstructed keys again at every read. So the model's own positional arithmetic is unchanged and
no fine-tuning is needed. MHA2MLA instead removes RoPE from most dimensions and keeps a few rotary
ones beside the latent (as DeepSeek keeps a decoupled 64-wide rotary key), which lets the
up-projection be absorbed into the query at inference but changes the model, so it must be
fine-tuned; without fine-tuning that change alone costs more than the low rank does. Here the
reconstruction is paid at every read (this is about what the cache holds, not about speed).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from kvviz.cache.base import KV, Cache, CacheLayer, storage_bytes
from kvviz.cache.window import per_layer_freqs, rerotate
from kvviz.limits import LimitError


class LatentLayer(CacheLayer):
    """One layer's latents ``[1, S, rank]``; ``basis`` U_r ``[D, rank]``, ``bias`` ``[D]`` (K then V,
    heads side by side)."""

    def __init__(self, basis: torch.Tensor, bias: torch.Tensor, kv_heads: int, head_dim: int,
                 inv_freq: torch.Tensor | None) -> None:
        self.basis, self.bias = basis, bias
        self.kv_heads, self.head_dim, self.inv_freq = kv_heads, head_dim, inv_freq
        self.reset()

    def reset(self) -> None:
        self.keys = None              # the latents [1, S, rank] (named keys: transformers' layers have them)
        self.values = None
        self.seen = 0

    @property
    def rank(self) -> int:
        return self.basis.shape[1]

    def _flat(self, t: torch.Tensor) -> torch.Tensor:
        """[1, H_kv, n, d] → [1, n, H_kv·d] (heads side by side, as the projection's rows)."""
        return t.transpose(1, 2).reshape(t.shape[0], t.shape[2], -1)

    def _heads(self, t: torch.Tensor) -> torch.Tensor:
        return t.reshape(t.shape[0], t.shape[1], self.kv_heads, self.head_dim).transpose(1, 2)

    def _turn(self, keys: torch.Tensor, start: int, sign: int) -> torch.Tensor:
        if self.inv_freq is None:
            return keys
        shift = sign * torch.arange(start, start + keys.shape[-2])
        return rerotate(keys, shift, self.inv_freq)

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        n, dtype = key.shape[-2], key.dtype
        plain = self._turn(key.detach().double(), self.seen, -1)                           # position-free K
        kv = torch.cat([self._flat(plain), self._flat(value.detach().double())], dim=-1)   # [1, n, D]
        latent = ((kv - self.bias) @ self.basis).to(dtype)                                  # [1, n, rank]
        self.keys = latent if self.keys is None else torch.cat([self.keys, latent], dim=1)
        self.seen += n
        self.dtype = dtype
        return self.kv()

    def kv(self) -> KV | None:
        if self.keys is None:
            return None
        full = self.keys.double() @ self.basis.T + self.bias                              # [1, S, D]
        width = self.kv_heads * self.head_dim
        keys = self._turn(self._heads(full[..., :width]), 0, 1)
        return keys.to(self.dtype), self._heads(full[..., width:]).to(self.dtype)

    def get_seq_length(self) -> int:
        return self.seen

    def crop(self, max_length: int) -> None:
        m = max(0, max_length)
        if m >= self.seen:
            return
        self.keys = self.keys[:, :m].clone() if m else None
        self.seen = m

    def nbytes(self) -> int:
        return 0 if self.keys is None else storage_bytes([self.keys])


class LatentCache(Cache):
    """One latent per token and layer (``bases``: per layer (U_r ``[D, rank]``, bias ``[D]``), e.g.
    from kvviz.compress.latent; ``inv_freq``: the model's rotary frequencies, one set or one per
    layer, None for learned positions)."""

    def __init__(self, bases: Sequence[tuple[torch.Tensor, torch.Tensor]], kv_heads: int, head_dim: int,
                 inv_freq: torch.Tensor | Sequence[torch.Tensor] | None = None) -> None:
        for basis, bias in bases:
            if basis.shape[0] != 2 * kv_heads * head_dim or bias.shape != (basis.shape[0],):
                raise LimitError("A latent basis must have 2 · K/V heads · head size rows.")
        super().__init__([LatentLayer(b.double(), c.double(), kv_heads, head_dim, inv)
                          for (b, c), inv in zip(bases, per_layer_freqs(inv_freq, len(bases)))])

    def ranks(self) -> list[int]:
        return [layer.rank for layer in self.layers]
