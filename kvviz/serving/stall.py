"""The stall a long prompt causes among running decodes, with and without chunked prefill (Sarathi-Serve,
docs/measured.md "Chunked prefill"), measured on this machine: real passes, each timed once by
kvviz.measure.clock under its lock on one torch thread.

Three short requests decode from step 0; at ``arrive`` a long prompt arrives. The same stream is served
with whole-prompt prefill and under each token budget, ``repeats`` times taking turns (a step's time is
the median over the repeats: the schedule, and so the steps, are the same in every repeat). Per request:
its TTFT and inter-token gaps in steps and in measured seconds; every request's tokens are checked
against its solo greedy run (the first repeat). ``StallRun`` is what the Paged cache page, its CSV
and bench/paged_stall.py read."""
from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvviz.decoding.batching import BatchModel
from kvviz.limits import LimitError, check_int
from kvviz.measure.clock import run_locked
from kvviz.serving.records import ServeRun
from kvviz.serving.scheduler import MAX_CHUNK_BUDGET, serve
from kvviz.serving.workload import Request

LONG_TEXT = ("Today the weather is so nice that we go to the beach and eat ice cream , and tomorrow it will be "
             "cold so we stay inside and read a book . ")
SHORT_TEXTS = ("Today the weather is", "Yesterday it was", "Tomorrow it will be")
LONG_ID = len(SHORT_TEXTS)              # the long prompt's request id (after the short ones)
MAX_STALL_REPEATS = 7
MAX_STALL_LONG = 512                    # tokens of the long prompt
MAX_STALL_BUDGETS = 4


def stall_stream(model, long_tokens: int, arrive: int = 2, new: int = 8) -> tuple[Request, ...]:
    """Three short requests from step 0 (``new`` tokens each) and a ``long_tokens`` prompt (the long
    text repeated) arriving at step ``arrive``, generating 4 tokens. ``model``: one with ``tokenize``."""
    check_int("Long prompt", long_tokens, 1, MAX_STALL_LONG)
    check_int("Arrival step", arrive, 0, 64)
    words = model.tokenize(LONG_TEXT)
    long = (words * (1 + long_tokens // len(words)))[:long_tokens]
    return (*(Request(i, model.tokenize(t), new, 0) for i, t in enumerate(SHORT_TEXTS)),
            Request(LONG_ID, long, 4, arrive))


@dataclass(frozen=True)
class StallRequest:
    """One request of one setting: steps from the schedule, seconds from the measured passes."""

    id: int
    prompt_tokens: int
    arrival_step: int
    long: bool                          # the long prompt (the others run when it arrives)
    same_as_solo: bool
    ttft_steps: int
    gap_steps: tuple[int, ...]
    arrival_s: float                    # the start of its arrival step, from the start of the run
    token_s: tuple[float, ...]          # the end of the pass that chose each token, from the start of the run

    @property
    def ttft_s(self) -> float:
        return self.token_s[0] - self.arrival_s

    @property
    def gaps_s(self) -> tuple[float, ...]:
        return tuple(b - a for a, b in zip(self.token_s, self.token_s[1:]))

    @property
    def max_gap_s(self) -> float:
        return max(self.gaps_s, default=0.0)


@dataclass(frozen=True)
class StallSetting:
    """The stream served once per repeat under one budget (None: each prompt whole in one pass)."""

    chunk_budget: int | None
    steps: int
    passes_s: tuple[float, ...]         # each step's pass, the median over the repeats
    requests: tuple[StallRequest, ...]

    @property
    def long(self) -> StallRequest:
        return next(r for r in self.requests if r.long)

    @property
    def short_max_gap_s(self) -> float:
        """The largest gap between two tokens of a request that was running when the long one came."""
        return max((r.max_gap_s for r in self.requests if not r.long), default=0.0)


@dataclass(frozen=True)
class StallRun:
    model_name: str
    long_tokens: int
    arrival_step: int
    repeats: int
    settings: tuple[StallSetting, ...]  # whole prompts first, then each budget

    @property
    def all_same_as_solo(self) -> bool:
        return all(r.same_as_solo for s in self.settings for r in s.requests)

    def rows(self) -> list[dict]:
        """One row per setting and request (the page's table and CSV, the bench's JSON)."""
        return [{"chunk_budget": s.chunk_budget, "steps": s.steps, "request": r.id, "long_prompt": r.long,
                 "prompt_tokens": r.prompt_tokens, "arrival_step": r.arrival_step, "ttft_steps": r.ttft_steps,
                 "ttft_s": round(r.ttft_s, 6), "max_gap_s": round(r.max_gap_s, 6),
                 "gaps_s": " ".join(f"{g:.6f}" for g in r.gaps_s), "gap_steps": " ".join(map(str, r.gap_steps)),
                 "same_as_solo": r.same_as_solo} for s in self.settings for r in s.requests]


def _setting(runs: Sequence[ServeRun], budget: int | None) -> StallSetting:
    first = runs[0]
    step_s = [statistics.median(r.steps[k].seconds or 0.0 for r in runs) for k in range(first.total_steps)]
    ends = [sum(step_s[:k + 1]) for k in range(len(step_s))]
    reqs = []
    for r in first.requests:
        arrive = r.request.arrival_step
        reqs.append(StallRequest(r.id, len(r.request.prompt), arrive, r.id == LONG_ID, r.tokens == r.solo_tokens,
                                 r.ttft, r.gaps, ends[arrive - 1] if arrive else 0.0,
                                 tuple(ends[k] for k in r.token_steps)))
    return StallSetting(budget, first.total_steps, tuple(step_s), tuple(reqs))


def measure_stall(model: BatchModel, requests: Sequence[Request], budgets: Sequence[int], repeats: int = 3,
                  block_size: int = 16, num_blocks: int = 64,
                  progress: Callable[[int, int], None] | None = None) -> StallRun:
    """``requests`` (a ``stall_stream``) served with whole prompts and under each budget, ``repeats``
    times taking turns, each pass timed; ``progress(done, total)`` after each served run."""
    check_int("Repeats", repeats, 1, MAX_STALL_REPEATS)
    if not 1 <= len(budgets) <= MAX_STALL_BUDGETS:
        raise LimitError(f"Give 1 to {MAX_STALL_BUDGETS} chunk budgets.")
    for b in budgets:
        check_int("Chunk budget", b, 1, MAX_CHUNK_BUDGET)
    settings: list[int | None] = [None, *budgets]
    runs: dict[int | None, list[ServeRun]] = {b: [] for b in settings}
    total, done = repeats * len(settings), 0
    for i in range(repeats):                    # taking turns: a slow moment of the machine hits every setting
        for b in settings:
            runs[b].append(run_locked(lambda b=b, c=i == 0: serve(model, requests, block_size, num_blocks, check=c,
                                                                   chunk_budget=b, timed=True)))
            done += 1
            if progress is not None:
                progress(done, total)
    long = next(r for r in requests if r.id == LONG_ID)
    return StallRun(runs[None][0].model_name, len(long.prompt), long.arrival_step, repeats,
                    tuple(_setting(runs[b], b) for b in settings))
