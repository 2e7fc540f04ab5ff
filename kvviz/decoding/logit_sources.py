"""Logits for the sampling page that do not come from a model: the lesson's quiz distribution (docs/design.md §3) and
logits (or probabilities) a user types.

Typed text is checked here, in the engine, so a URL or a script gets the same messages as the page.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch

from kvviz.limits import MAX_TYPED_CHARS, MAX_TYPED_TOKENS, LimitError

# The lesson's quiz (docs/design.md §3): A = 0.6, B = 0.25, C = 0.1 and the remaining 0.05 spread over the rest.
QUIZ_PROBS = {"A": 0.6, "B": 0.25, "C": 0.1}
QUIZ_REST = 0.05
QUIZ_REST_TOKENS = ["D", "E", "F", "G", "H"]     # 0.01 each
MAX_TOKEN_CHARS = 20
MAX_TYPED_MAGNITUDE = 1e6   # keeps exp() and sums of typed values far from float64 overflow


@dataclass(frozen=True)
class LogitSource:
    """Named logits over a small vocabulary. logits: [V] float64 (-inf allowed)."""

    tokens: list[str]
    logits: torch.Tensor
    prob_sum: float | None = None    # typed probabilities: their sum before normalising


def quiz_distribution(rest_tokens: list[str] | None = None) -> LogitSource:
    """The quiz: logits = ln p for A 0.6, B 0.25, C 0.1 and 0.05 spread evenly over ``rest_tokens``."""
    rest = QUIZ_REST_TOKENS if rest_tokens is None else rest_tokens
    probs = dict(QUIZ_PROBS)
    for tok in rest:
        probs[tok] = QUIZ_REST / len(rest)
    logits = torch.tensor([math.log(p) for p in probs.values()], dtype=torch.float64)
    return LogitSource(list(probs), logits)


class TypedLogitsError(LimitError):
    """Typed logits that cannot be used; ``code`` and ``params`` let a page translate the message."""

    def __init__(self, code: str, message: str, **params: object) -> None:
        super().__init__(message)
        self.code, self.params = code, params


_ENTRY = re.compile(r"^\s*(\S+?)\s*(?:=|:|\s)\s*(\S+)\s*$")


def _number(raw: str, entry: str, kind: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise TypedLogitsError("not_number", f"“{raw}” in “{entry}” is not a number.", raw=raw, entry=entry) from None
    if math.isnan(value):
        raise TypedLogitsError("nan", f"“{entry}” is NaN (not a number).", entry=entry)
    if value == math.inf:
        raise TypedLogitsError("pos_inf", f"“{entry}” is +inf; use a finite number.", entry=entry)
    if kind == "probs" and value < 0:
        raise TypedLogitsError("negative_prob", f"“{entry}” is a negative probability.", entry=entry)
    if value != -math.inf and abs(value) > MAX_TYPED_MAGNITUDE:
        raise TypedLogitsError("too_large", f"“{entry}” is too large; keep values within ±1,000,000.", entry=entry)
    return value


def parse_logits(text: str, kind: str = "logits") -> LogitSource:
    """Parse ``"A 2.0, B 1.0, C -inf"`` (also ``A=2`` or ``A: 2``; commas, semicolons or new lines
    between entries). ``kind="probs"`` reads probabilities instead: they are normalised to sum 1 and
    0 becomes -inf. Raises TypedLogitsError with a message for the user.
    """
    if kind not in ("logits", "probs"):
        raise ValueError(f"kind must be 'logits' or 'probs', got {kind!r}")
    if len(text) > MAX_TYPED_CHARS:
        raise TypedLogitsError("too_long", f"The text is {len(text):,} characters long; the limit is "
                               f"{MAX_TYPED_CHARS:,}.", n=len(text), cap=MAX_TYPED_CHARS)
    entries = [e.strip() for e in re.split(r"[,;\n]", text) if e.strip()]
    if not entries:
        raise TypedLogitsError("empty", "Type at least one token and its value, e.g. “A 2.0, B 1.0”.")
    if len(entries) > MAX_TYPED_TOKENS:
        raise TypedLogitsError("too_many", f"{len(entries)} tokens is more than the {MAX_TYPED_TOKENS} this "
                               "page draws.", n=len(entries), cap=MAX_TYPED_TOKENS)
    tokens: list[str] = []
    values: list[float] = []
    for entry in entries:
        m = _ENTRY.match(entry)
        if not m:
            raise TypedLogitsError("bad_entry", f"“{entry}” is not “token value”.", entry=entry)
        tok, raw = m.groups()
        if len(tok) > MAX_TOKEN_CHARS:
            raise TypedLogitsError("long_token", f"The token “{tok[:MAX_TOKEN_CHARS]}…” is longer than "
                                   f"{MAX_TOKEN_CHARS} characters.", token=tok[:MAX_TOKEN_CHARS], cap=MAX_TOKEN_CHARS)
        if tok in tokens:
            raise TypedLogitsError("duplicate", f"The token “{tok}” appears twice.", token=tok)
        tokens.append(tok)
        values.append(_number(raw, entry, kind))
    v = torch.tensor(values, dtype=torch.float64)                                   # [V]
    if kind == "logits":
        if torch.isneginf(v).all():
            raise TypedLogitsError("all_removed", "Every logit is -inf: no token is left to choose.")
        return LogitSource(tokens, v)
    total = float(v.sum())
    if total <= 0:
        raise TypedLogitsError("zero_sum", "The probabilities add up to 0: no token is left to choose.")
    return LogitSource(tokens, torch.log(v / total), total)
