"""Plain data the weather page puts into words: what each head reads, and where the lesson's prose
and its tensor disagree (docs/design.md §2). Pure functions of engine records (no streamlit)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.models.weather import HEADS


@dataclass(frozen=True)
class Read:
    """One key a query reads with a visible weight."""

    position: int     # 0-based
    token: str
    weight: float


def reads(attention_row: torch.Tensor, tokens: Sequence[str], min_weight: float = 0.005) -> list[Read]:
    """Keys of one attention row [T] with weight >= min_weight (softmax never gives exactly 0)."""
    return [Read(j, tokens[j], float(w)) for j, w in enumerate(attention_row.tolist()) if w >= min_weight]


def plus_one_positions(keys: torch.Tensor) -> list[list[int]]:
    """keys [H, T, d_k] of ±1 rows -> per head the 0-based positions whose key is +1."""
    return [[int(p) for p in (keys[h, :, 0] > 0).nonzero().flatten()] for h in range(keys.shape[0])]


@dataclass(frozen=True)
class ProseNote:
    """A cell of the prefill contexts where the lesson's prose and its tensor disagree."""

    head: int                 # 0-based head index
    position: int             # 0-based position
    prose_token: str | None   # the token the prose says the head reads (None: "no even token")
    prose_value: float | None
    tensor_value: float       # what the tensor computes (and the app shows)


def prose_vs_tensor(prompt: Sequence[str], contexts: torch.Tensor, values: dict[str, float],
                    tol: float = 1e-6) -> list[ProseNote]:
    """The lesson's two disagreements (docs/design.md §2), computed for any prompt.

    contexts: [N, H] prefill contexts. Head 1 at position 1: the prose says "no even token", the
    tensor gives the first token's value (the only visible key gets weight 1 even though it says
    "not even"). Head 2 at positions 2..N-1: the prose says "the current token", the tensor marks
    only the prompt's last position, so those queries see no +1 key and average what they see.
    """
    notes = [ProseNote(0, 0, None, None, float(contexts[0, 0]))]
    last_head = next(i for i, h in enumerate(HEADS) if h.name == "last token")
    for pos in range(1, len(prompt) - 1):
        prose = values[prompt[pos]]
        tensor = float(contexts[pos, last_head])
        if abs(prose - tensor) > tol:
            notes.append(ProseNote(last_head, pos, prompt[pos], prose, tensor))
    return notes
