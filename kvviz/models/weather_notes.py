"""Plain data the weather page puts into words: what each head reads, and where the lesson's prose
and its tensor disagree (docs/design.md §2). Pure functions of engine records (no streamlit)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.models.weather import DEFAULT_VALUES, HEADS, SEED_PROMPT, check_values


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


# The lesson's decode of "nice" at position 5, as it prints it (docs/design.md §2)
LESSON_UNCACHED = (12.5, 7.0, 10.0, 8.6)    # "Context for new token position": every key recomputed
LESSON_CACHED = (12.5, 6.0, 10.0, 8.6)      # "Decode context for 'nice'": its cached decode code's printout
# the line of that cached decode code that rewrites head 2's stale key (what the page's repair does)
LESSON_REPAIR_LINE = "K2[-1] = -torch.ones(d_k)  # position 4 is no longer last"


@dataclass(frozen=True)
class LessonAccount:
    """Head 2 in the lesson's cached decode: what it prints, and what its code gives with and
    without its repair line (the engine's append-only and repaired passes)."""

    head: int                 # 0-based: head 2 ("last token")
    position: int             # 0-based position of the repaired key: the prompt's last
    printed: float            # the lesson's printout for its cached decode code (6.0)
    printed_uncached: float   # its printout without a cache (7.0), which it calls identical
    without_line: float       # the engine's append-only cache: the code without the repair line
    with_line: float          # the engine's recomputed (= repaired) context: the code as written


def lesson_account(sequence: Sequence[str], values: dict[str, float], cached: Sequence[float],
                   recomputed: Sequence[float]) -> LessonAccount | None:
    """For the lesson's own decode only (its prompt and values, then *nice*): head 2's numbers.

    cached, recomputed: the decode pass's contexts [H] with the append-only cache and with every key
    recomputed. None for any other run, where the lesson prints nothing to compare with.
    """
    if list(sequence) != [*SEED_PROMPT, "nice"] or check_values(values) != DEFAULT_VALUES:
        return None
    head = next(i for i, h in enumerate(HEADS) if h.name == "last token")
    return LessonAccount(head, len(SEED_PROMPT) - 1, LESSON_CACHED[head], LESSON_UNCACHED[head],
                         float(cached[head]), float(recomputed[head]))
