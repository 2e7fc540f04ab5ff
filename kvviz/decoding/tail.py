"""Why top-k and top-p exist: the long tail of a real next-token distribution (docs/design.md §3).

A real vocabulary has tens of thousands of tokens; after almost any context most of them get a
tiny probability each, and together they are not negligible: sampled now and then, one of them
derails the text. ``tail_of`` measures that tail for one distribution with the engine's own filters
(kvviz.decoding.sampling): the mass a fixed top-k leaves out (too much when many words fit), the
tokens it lets through far below the first (when the model is sure), and the size of the top-p set,
which adapts. ``tail_draws`` makes the tail visible: seeded draws at τ = 1, and the first that lands
outside the top-p set.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.decoding.sampling import check_logits, check_top_k, check_top_p, top_k_filter, top_p_filter
from kvviz.limits import MAX_DRAWS, MAX_SEED, check_int

JUNK = 0.01         # a token the top-k set lets through "far below": under 1 % where the first has most


@torch.inference_mode()
def next_token_logits(model, tokens: Sequence[str]) -> torch.Tensor:
    """The model's logits for the token after ``tokens`` (one pass, no cache), ``[V]`` float64.
    ``model``: a kvviz model with ``ids`` and ``forward`` (SmolLM2, kvviz.models.hf)."""
    record = model.forward(model.ids(list(tokens)), None, 0)
    return record.logits[-1].to(torch.float64)


@dataclass(frozen=True)
class Tail:
    """One next-token distribution seen through top-k = ``k`` and top-p = ``p`` (at τ = 1)."""

    logits: torch.Tensor       # [V] float64
    probs: torch.Tensor        # [V] the softmax, by token id
    order: torch.Tensor        # [V] token ids, most likely first
    k: int
    p: float
    top_k_size: int            # tokens top-k keeps (ties at the k-th stay: can exceed k)
    top_p_size: int            # tokens top-p keeps

    @property
    def vocab(self) -> int:
        return self.probs.numel()

    def mass(self, n: int) -> float:
        """The probability of the ``n`` most likely tokens together."""
        return float(self.probs[self.order[:n]].sum())

    @property
    def mass_beyond_k(self) -> float:
        """What top-k cuts: the mass of every token it drops."""
        return 1.0 - self.mass(self.top_k_size)

    @property
    def mass_beyond_p(self) -> float:
        """What top-p cuts (under 1 − p: the token that crosses p stays)."""
        return 1.0 - self.mass(self.top_p_size)

    @property
    def junk_in_k(self) -> int:
        """Tokens top-k keeps that the top-p set does not, each under JUNK: let through when the
        model is sure."""
        kept = self.order[self.top_p_size:self.top_k_size]
        return int((self.probs[kept] < JUNK).sum())

    @property
    def tail_size(self) -> int:
        """Tokens outside the top-p set: the long tail."""
        return self.vocab - self.top_p_size

    def rank(self, token_id: int) -> int:
        """1 for the most likely token."""
        return int((self.order == token_id).nonzero()[0, 0]) + 1


def tail_of(logits: torch.Tensor, k: int, p: float) -> Tail:
    """The distribution ``logits`` [V] at τ = 1 with top-k = ``k`` and top-p = ``p`` applied separately."""
    x = check_logits(logits).to(torch.float64)
    k, p = check_top_k(k), check_top_p(p)
    probs = torch.softmax(x, dim=-1)
    order = torch.argsort(probs, descending=True, stable=True)
    top_k = int(torch.isfinite(top_k_filter(x, k)).sum())
    top_p = int(torch.isfinite(top_p_filter(x, p)).sum())
    return Tail(x, probs, order, k, p, top_k, top_p)


@dataclass(frozen=True)
class TailDraws:
    """``n`` seeded draws at τ = 1 from the whole distribution (no filter): how many land in the tail."""

    n: int
    seed: int
    outside_k: int             # draws of a token top-k would have cut
    outside_p: int             # draws of a token top-p would have cut
    first_tail: tuple[int, int] | None    # (draw index, token id) of the first outside the top-p set


def tail_draws(tail: Tail, n: int, seed: int) -> TailDraws:
    """Draw ``n`` times (the same draws as ``draw_counts`` with this seed) and count the tail's share."""
    n = check_int("Number of draws", n, 1, MAX_DRAWS)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    g = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(tail.probs, n, replacement=True, generator=g)           # [n]
    in_k = torch.zeros(tail.vocab, dtype=torch.bool)
    in_k[tail.order[:tail.top_k_size]] = True
    in_p = torch.zeros(tail.vocab, dtype=torch.bool)
    in_p[tail.order[:tail.top_p_size]] = True
    out_p = (~in_p[idx]).nonzero().flatten()
    first = None if out_p.numel() == 0 else (int(out_p[0]), int(idx[out_p[0]]))
    return TailDraws(n, seed, int((~in_k[idx]).sum()), int(out_p.numel()), first)


__all__ = ["JUNK", "Tail", "TailDraws", "next_token_logits", "tail_draws", "tail_of"]
