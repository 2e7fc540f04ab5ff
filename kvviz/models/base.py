"""The model protocol every kvviz model follows, and the record of one forward pass."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import torch

from kvviz.cache import KVCache


@dataclass(frozen=True)
class PassRecord:
    """What one forward pass computed for its *new* positions.

    Shapes (L layers, H heads, N new positions, T total visible positions):
      q          [L, H, N, d_q]
      k, v       [L, H, N, d_k] / [L, H, N, d_v]   (the rows this pass computed)
      attention  [L, H, N, T]   after the causal mask and softmax
      output     [N, d_out]     the model's readout before the vocabulary projection
      logits     [N, V_out]     over ``model.logit_tokens``
    """

    positions: list[int]
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    attention: torch.Tensor
    output: torch.Tensor
    logits: torch.Tensor


class Model(Protocol):
    """One protocol for the toy models and the tiny GPT."""

    name: str
    vocab: list[str]          # tokens that may appear in the input
    logit_tokens: list[str]   # tokens the logits are over (a subset of vocab, same order as logits)
    n_layers: int
    n_heads: int
    output_labels: list[str]  # names of the output components (e.g. h0, h1 or head 1..4)

    def forward(self, token_ids: Sequence[int], cache: KVCache | None, start_pos: int) -> PassRecord:
        """Run ``token_ids`` (positions start_pos..) against ``cache``; append their K/V to it."""
        ...


def causal_softmax(scores: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Mask future keys and softmax over the last axis.

    scores: [..., N, T] where query i sits at absolute position start_pos + i and key j at j.
    """
    n, t = scores.shape[-2], scores.shape[-1]
    q_pos = torch.arange(start_pos, start_pos + n).unsqueeze(1)   # [N, 1]
    k_pos = torch.arange(t).unsqueeze(0)                          # [1, T]
    allowed = k_pos <= q_pos                                       # [N, T]
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def encode(model: Model, tokens: Sequence[str]) -> list[int]:
    """Token strings to ids; raises ValueError naming every unknown token."""
    unknown = [t for t in tokens if t not in model.vocab]
    if unknown:
        raise ValueError(f"Unknown token(s) {', '.join(repr(u) for u in dict.fromkeys(unknown))}; "
                         f"the vocabulary is {' '.join(model.vocab)}.")
    return [model.vocab.index(t) for t in tokens]


def split_prompt(text: str, max_chars: int = 2_000) -> list[str]:
    """Whitespace- or comma-separated prompt text to token strings; raises ValueError when too long."""
    if len(text) > max_chars:
        raise ValueError(f"The prompt is {len(text):,} characters long; the limit is {max_chars:,}.")
    return text.replace(",", " ").split()
