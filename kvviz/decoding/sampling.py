"""Selection rules: how the next token is chosen from the logits (docs/design.md §3).

A rule is any object with ``choose(logits, generator) -> Choice``. The stepper only talks to that
seam, so greedy and sampling rules plug in the same way.

``Sampler`` is one pipeline in a fixed order: temperature, then top-k, then top-p, then a draw from a
seeded ``torch.Generator``. ``stages(logits)`` returns every stage (what it removed, the distribution
after it), so a page can draw each one. Temperature 0 means greedy.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from kvviz.limits import MAX_DRAWS, MAX_SEED, LimitError, check_int

NEG_INF = float("-inf")
# Mass comparisons in top-p allow this much rounding, so "the mass before B is 0.6" reaches p = 0.6
# even when softmax returns 0.5999999999999999 (probabilities are computed in float64).
MASS_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Choice:
    """The outcome of one selection: the index into the logits and what led to it."""

    index: int
    probs: list[float]               # the distribution the draw used (after every filter)
    kept: list[int]                  # indices the filters allowed (the kept set)
    rule: dict = field(default_factory=dict)  # JSON-ready description of the rule and its settings


class SelectionRule(Protocol):
    def choose(self, logits: torch.Tensor, generator: torch.Generator | None) -> Choice:
        """logits: [V] float tensor; returns the chosen index and what led to it."""
        ...

    def draw(self, logits: torch.Tensor, generator: torch.Generator | None) -> int:
        """The index ``choose`` picks for the same logits and generator state, without the lists
        (the fast generation loops use this)."""
        ...

    def describe(self) -> dict:
        """JSON-ready name and settings (recorded in the trace)."""
        ...

    def settings(self) -> dict:
        """Keyword arguments of ``make_rule`` that rebuild this rule (hashable values, for caches)."""
        ...


# ---------------------------------------------------------------- validation

def check_logits(logits: torch.Tensor) -> torch.Tensor:
    """Refuse logits no rule can choose from: NaN, +inf, an empty last axis, or a row of only -inf.

    -inf is allowed (it means "removed"). logits: [..., V]. Returns ``logits`` unchanged.
    """
    if logits.ndim == 0 or logits.shape[-1] == 0:
        raise LimitError("There are no logits to choose from (the vocabulary is empty).")
    if torch.isnan(logits).any():
        raise LimitError("The logits contain NaN (not a number); every logit must be a number or -inf.")
    if torch.isposinf(logits).any():
        raise LimitError("The logits contain +inf; every logit must be a finite number or -inf.")
    if torch.isneginf(logits).all(dim=-1).any():
        raise LimitError("Every logit is -inf: no token is left to choose.")
    return logits


def check_temperature(temperature: object) -> float:
    """A finite number ≥ 0 (0 means greedy)."""
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) \
            or not math.isfinite(float(temperature)) or float(temperature) < 0:
        raise LimitError(f"Temperature must be a finite number ≥ 0 (0 means greedy), got {temperature!r}.")
    return float(temperature)


def check_top_k(k: object) -> int:
    """A whole number ≥ 1 (a k larger than the vocabulary keeps every token)."""
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or int(k) < 1:
        raise LimitError(f"Top-k must be a whole number ≥ 1, got {k!r}.")
    return int(k)


def check_top_p(p: object) -> float:
    """A number in (0, 1] (1 keeps every token)."""
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 < float(p) <= 1.0:
        raise LimitError(f"Top-p must be a number in (0, 1], got {p!r}.")
    return float(p)


# ------------------------------------------------------- the filters (public, the lesson's names)

def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits along the last axis; set the rest to -inf.

    Ties at the k-th value are all kept (the lesson's ``logits < v[..., -1]``, docs/design.md §3), so a
    tie is never split by index; k ≥ V keeps everything. logits: [..., V] (any leading batch dimensions).
    """
    k = check_top_k(k)
    check_logits(logits)
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]   # [..., 1]
    return logits.masked_fill(logits < kth, NEG_INF)


def top_p_mass_before(logits: torch.Tensor) -> torch.Tensor:
    """For every token, the probability mass of the tokens *more likely* than it.

    Tokens sorted by descending logit; a token's value is the sum of the probabilities before it.
    Tied logits share the value of the first of them, so top-p keeps or drops a tie together.
    logits: [..., V] → [..., V] float64, in the original token order.
    """
    x = check_logits(logits).to(torch.float64)
    sorted_x, order = torch.sort(x, dim=-1, descending=True, stable=True)       # [..., V]
    probs = torch.softmax(sorted_x, dim=-1)
    cum = probs.cumsum(dim=-1)
    before = torch.cat([torch.zeros_like(cum[..., :1]), cum[..., :-1]], dim=-1)  # exclusive sum
    new_value = torch.ones_like(sorted_x, dtype=torch.bool)
    new_value[..., 1:] = sorted_x[..., 1:] != sorted_x[..., :-1]
    pos = torch.arange(x.shape[-1]).expand_as(sorted_x)
    first_of_tie = torch.where(new_value, pos, 0).cummax(dim=-1).values          # [..., V]
    before = before.gather(-1, first_of_tie)
    return torch.empty_like(before).scatter(-1, order, before)


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest top set whose probability reaches p; the rest → -inf.

    The rule of docs/design.md §3: a token is dropped when the mass *before* it already reached p, so the token that
    crosses p is kept and the most likely token is never dropped. p = 1 keeps every token. Ties are
    kept or dropped together (see ``top_p_mass_before``). logits: [..., V].
    """
    p = check_top_p(p)
    check_logits(logits)
    if p == 1.0:            # the mass before any token is below 1: nothing is dropped
        return logits.clone()
    return logits.masked_fill(top_p_mass_before(logits) >= p - MASS_TOLERANCE, NEG_INF)


# ---------------------------------------------------------------- stages of the pipeline

@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline, for drawing: the distribution after it and what it removed.

    name is "input", "temperature", "top-k", "top-p" or "greedy"; ``setting`` is τ, k or p, or None
    when the stage is switched off (it then changes nothing).
    """

    name: str
    setting: float | int | None
    logits: list[float]             # [V] after the stage; -inf = not allowed
    probs: list[float]              # [V] softmax of ``logits``
    removed: list[int]              # indices this stage removed
    kept: list[int]                 # indices still allowed after this stage (finite logits)
    mass_before: list[float] | None = None   # top-p: mass of the more likely tokens, at its input

    @property
    def entropy_bits(self) -> float:
        """Shannon entropy of ``probs`` in bits (0 when one token has all the mass)."""
        return float(-sum(p * math.log2(p) for p in self.probs if p > 0)) + 0.0


def _stage(name: str, setting, after: torch.Tensor, before: torch.Tensor,
           mass_before: torch.Tensor | None = None) -> Stage:
    removed = (torch.isneginf(after) & ~torch.isneginf(before)).nonzero().flatten().tolist()
    kept = (~torch.isneginf(after)).nonzero().flatten().tolist()
    return Stage(name, setting, after.tolist(), torch.softmax(after, dim=-1).tolist(), removed, kept,
                 None if mass_before is None else mass_before.tolist())


def _as_vector(logits: torch.Tensor) -> torch.Tensor:
    if logits.ndim != 1:
        raise LimitError(f"A selection rule takes one logits vector [V], got shape {list(logits.shape)}.")
    return check_logits(logits.detach().to(torch.float64))


def _as_rows(logits: torch.Tensor) -> torch.Tensor:
    """One logits vector [V] or several [..., V] (each row on its own), float64, checked."""
    if logits.ndim == 0:
        raise LimitError("A selection rule takes logits [V] or [..., V], got a single number.")
    return check_logits(logits.detach().to(torch.float64))


def apply_temperature(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """logits / τ (τ > 0), [..., V]. If that overflows float64 (|z|/τ > 1.8e308, e.g. τ = 1e-310), each
    row's largest logit is subtracted first: softmax gives the same probabilities, and no token
    becomes -inf."""
    y = logits / temperature
    finite = torch.isfinite(logits)
    if (finite & ~torch.isfinite(y)).any():
        top = logits.masked_fill(~finite, NEG_INF).amax(dim=-1, keepdim=True)
        y = (logits - top) / temperature
        y = torch.where(finite, y.clamp(min=torch.finfo(y.dtype).min), y)
    return y


def _greedy_stages(x: torch.Tensor) -> list[Stage]:
    idx = int(torch.argmax(x))
    one = torch.full_like(x, NEG_INF)
    one[idx] = x[idx]
    return [_stage("input", None, x, x), _stage("greedy", None, one, x)]


@dataclass(frozen=True)
class Greedy:
    """Always the largest logit; ties go to the first (lowest index), as torch.argmax does."""

    def describe(self) -> dict:
        return {"name": "greedy"}

    def settings(self) -> dict:
        return {"temperature": 0.0, "top_k": None, "top_p": None}

    def stages(self, logits: torch.Tensor) -> list[Stage]:
        """[input, greedy]: the greedy stage keeps only the argmax (probability 1)."""
        return _greedy_stages(_as_vector(logits))

    def draw(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> int:
        return int(torch.argmax(logits))

    def choose(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> Choice:
        final = self.stages(logits)[-1]
        return Choice(final.kept[0], final.probs, final.kept, self.describe())


@dataclass(frozen=True)
class Sampler:
    """Temperature, then top-k, then top-p, then a seeded draw. temperature == 0 means greedy.

    top_k / top_p = None switch that filter off. Invalid settings raise LimitError (a ValueError)
    with a message meant for the user.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperature", check_temperature(self.temperature))
        if self.top_k is not None:
            object.__setattr__(self, "top_k", check_top_k(self.top_k))
        if self.top_p is not None:
            object.__setattr__(self, "top_p", check_top_p(self.top_p))

    @property
    def is_greedy(self) -> bool:
        return self.temperature == 0

    def describe(self) -> dict:
        if self.is_greedy:
            return {"name": "greedy"}
        return {"name": "sample", "temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}

    def settings(self) -> dict:
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}

    def stages(self, logits: torch.Tensor) -> list[Stage]:
        """Every stage for one logits vector [V]: input, temperature, top-k, top-p (or input, greedy).

        All four stages are always returned; a filter that is off keeps everything.
        """
        x = _as_vector(logits)
        if self.is_greedy:
            return _greedy_stages(x)
        out = [_stage("input", None, x, x)]
        y = apply_temperature(x, self.temperature)
        out.append(_stage("temperature", self.temperature, y, x))
        x = y
        y = x if self.top_k is None else top_k_filter(x, self.top_k)
        out.append(_stage("top-k", self.top_k, y, x))
        x = y
        y = x if self.top_p is None else top_p_filter(x, self.top_p)
        out.append(_stage("top-p", self.top_p, y, x, top_p_mass_before(x)))
        return out

    def filtered(self, logits: torch.Tensor) -> torch.Tensor:
        """The logits the draw uses: float64, divided by τ, then top-k, then top-p ([V], -inf =
        removed). The same functions as ``stages``, without the bookkeeping. Several rows [..., V]
        are filtered each on its own (speculative decoding's verification pass)."""
        x = apply_temperature(_as_rows(logits), self.temperature)
        if self.top_k is not None:
            x = top_k_filter(x, self.top_k)
        if self.top_p is not None:
            x = top_p_filter(x, self.top_p)
        return x

    def draw(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> int:
        if self.is_greedy:
            return int(torch.argmax(logits))
        return _pick(torch.softmax(self.filtered(logits), dim=-1), generator)

    def choose(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> Choice:
        if self.is_greedy:
            final = self.stages(logits)[-1]
            return Choice(final.kept[0], final.probs, final.kept, self.describe())
        x = self.filtered(logits)
        probs = torch.softmax(x, dim=-1)
        kept = (~torch.isneginf(x)).nonzero().flatten().tolist()
        return Choice(_pick(probs, generator), probs.tolist(), kept, self.describe())


def _pick(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One seeded draw from ``probs`` [V] (float64): the only place a sampled token is drawn."""
    return int(torch.multinomial(probs, 1, generator=generator))


# ---------------------------------------------------------------- distributions (speculative decoding)

def is_greedy(rule: SelectionRule) -> bool:
    """True for ``Greedy()`` and for a ``Sampler`` at temperature 0."""
    return isinstance(rule, Greedy) or bool(getattr(rule, "is_greedy", False))


def rule_probs(rule: SelectionRule, logits: torch.Tensor) -> torch.Tensor:
    """The distribution ``rule.draw`` draws from, ``[V]`` float64: the softmax of the rule's filtered
    logits (temperature, then top-k, then top-p), or for a greedy rule a one-hot vector on the
    argmax (the τ → 0 limit; ties to the lowest index, like ``draw``). Logits ``[..., V]`` give one
    distribution per row, each exactly what the row alone gives.

    For a sampler, ``draw_from(rule_probs(rule, logits), g)`` draws exactly what ``rule.draw(logits, g)``
    draws and consumes the same generator state, so a loop may keep the distribution and still draw
    the same token (a greedy ``draw`` takes the argmax and consumes nothing).
    """
    if is_greedy(rule):
        x = _as_rows(logits)
        return torch.zeros_like(x).scatter_(-1, x.argmax(dim=-1, keepdim=True), 1.0)
    if not isinstance(rule, Sampler):
        raise TypeError(f"No distribution known for the rule {rule!r}: use Greedy or Sampler.")
    return torch.softmax(rule.filtered(logits), dim=-1)


def draw_from(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """One seeded draw from a probability vector ``[V]`` (e.g. ``rule_probs``, or speculative
    decoding's residual distribution): the same draw ``Sampler.draw`` makes."""
    return _pick(probs, generator)


def uniform(generator: torch.Generator | None) -> float:
    """One seeded uniform number in [0, 1) (speculative decoding's acceptance test)."""
    return float(torch.rand(1, generator=generator, dtype=torch.float64))


def make_rule(temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None) -> Greedy | Sampler:
    """The rule for these settings: Greedy when temperature is 0, else a Sampler (validated)."""
    if check_temperature(temperature) == 0:
        return Greedy()
    return Sampler(temperature, top_k, top_p)


def draw_counts(probs: Sequence[float], n: int, seed: int) -> list[int]:
    """How often each token comes up in ``n`` seeded draws from ``probs`` ([V], e.g. a final stage's).

    ``n`` is capped by ``limits.MAX_DRAWS``; the same seed gives the same counts.
    """
    n = check_int("Number of draws", n, 1, MAX_DRAWS)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    p = torch.tensor(list(probs), dtype=torch.float64)
    if p.ndim != 1 or p.numel() == 0 or not torch.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
        raise LimitError("Draws need a probability vector of non-negative numbers with a positive sum.")
    g = torch.Generator().manual_seed(seed)
    idx = torch.multinomial(p, n, replacement=True, generator=g)                  # [n]
    return torch.bincount(idx, minlength=p.numel()).tolist()
