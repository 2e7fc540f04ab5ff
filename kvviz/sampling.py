"""Selection rules: how the next token is chosen from the logits.

A rule is any object with ``choose(logits, generator) -> Choice``. The stepper only talks to that
seam, so greedy and sampling rules plug in the same way.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch


@dataclass(frozen=True)
class Choice:
    """The outcome of one selection: the index into the logits and what led to it."""

    index: int
    probs: list[float]               # the distribution the draw used (after every filter)
    kept: list[int]                  # indices that could have been chosen
    rule: dict = field(default_factory=dict)  # JSON-ready description of the rule and its settings


class SelectionRule(Protocol):
    def choose(self, logits: torch.Tensor, generator: torch.Generator | None) -> Choice:
        """logits: [V] float tensor; returns the chosen index."""
        ...

    def describe(self) -> dict:
        ...


class Greedy:
    """Always the largest logit; ties go to the first (lowest index), as torch.argmax does."""

    def describe(self) -> dict:
        return {"name": "greedy"}

    def choose(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> Choice:
        idx = int(torch.argmax(logits))
        probs = torch.zeros_like(logits, dtype=torch.float64)
        probs[idx] = 1.0
        return Choice(idx, probs.tolist(), [idx], self.describe())


def top_k_filter(logits: torch.Tensor, k: int) -> torch.Tensor:
    """Keep the k largest logits along the last axis (ties at the k-th value are kept); the rest -> -inf.

    logits: [..., V] (any leading batch dimensions).
    """
    if k < 1:
        raise ValueError(f"top-k must be at least 1, got {k}.")
    kth = torch.topk(logits, min(k, logits.shape[-1]), dim=-1).values[..., -1:]   # [..., 1]
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: torch.Tensor, p: float) -> torch.Tensor:
    """Nucleus filter: keep the smallest top set whose probability reaches p; the rest -> -inf.

    A token is dropped when the mass *before* it already reached p, so the token that crosses p is
    kept and the most likely token is never dropped. logits: [..., V].
    """
    if not 0.0 < p <= 1.0:
        raise ValueError(f"top-p must be in (0, 1], got {p}.")
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    before = probs.cumsum(dim=-1) - probs                      # mass strictly before each token
    sorted_logits = sorted_logits.masked_fill(before >= p, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)


@dataclass(frozen=True)
class Stage:
    """One stage of the sampling pipeline, for drawing: the distribution after it and what it removed."""

    name: str
    logits: list[float]
    probs: list[float]
    removed: list[int]


class Sampler:
    """Temperature, then top-k, then top-p, then a seeded draw. temperature == 0 means greedy."""

    def __init__(self, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None) -> None:
        if not (temperature == temperature) or temperature < 0 or temperature == float("inf"):
            raise ValueError(f"temperature must be a finite number ≥ 0, got {temperature}.")
        if top_k is not None and top_k < 1:
            raise ValueError(f"top-k must be at least 1, got {top_k}.")
        if top_p is not None and not 0.0 < top_p <= 1.0:
            raise ValueError(f"top-p must be in (0, 1], got {top_p}.")
        self.temperature, self.top_k, self.top_p = float(temperature), top_k, top_p

    def describe(self) -> dict:
        if self.temperature == 0:
            return {"name": "greedy"}
        return {"name": "sample", "temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}

    def stages(self, logits: torch.Tensor) -> list[Stage]:
        """Every stage of the pipeline for one logits vector [V]."""
        x = logits.detach().to(torch.float64)
        out = [_stage("input", x, x)]
        if self.temperature == 0:
            return out
        x = x / self.temperature
        out.append(_stage("temperature", x, x))
        if self.top_k is not None:
            y = top_k_filter(x, self.top_k)
            out.append(_stage("top-k", y, x))
            x = y
        if self.top_p is not None:
            y = top_p_filter(x, self.top_p)
            out.append(_stage("top-p", y, x))
            x = y
        return out

    def choose(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> Choice:
        if self.temperature == 0:
            return Greedy().choose(logits, generator)
        final = self.stages(logits)[-1]
        probs = torch.tensor(final.probs, dtype=torch.float64)
        idx = int(torch.multinomial(probs, 1, generator=generator))
        kept = [i for i, p in enumerate(final.probs) if p > 0]
        return Choice(idx, final.probs, kept, self.describe())


def _stage(name: str, after: torch.Tensor, before: torch.Tensor) -> Stage:
    removed = [i for i in range(after.shape[-1]) if after[i] == float("-inf") and before[i] != float("-inf")]
    return Stage(name, after.tolist(), torch.softmax(after, dim=-1).tolist(), removed)
