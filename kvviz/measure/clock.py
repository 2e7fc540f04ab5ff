"""The one timing helper of kvviz and the lock every measurement shares.

One wall time is not a measurement on a shared machine: another job, the allocator, a page being
drawn can double a run. ``interleaved`` pays first-call costs in untimed warm-ups, then runs each
piece of work several times, taking turns (so all meet the same load), and keeps every sample in a
``Timing``. **The statistic kvviz reports is the median of the repeated runs** (``Timing.median``):
one slow outlier does not move it, as it moves a mean, and unlike the minimum it does not reward a
lucky run. The range (``low`` .. ``high``) says how much to trust it: two ranges that overlap say
the difference is within the machine's noise.
"""
from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from kvviz.limits import LimitError, check_int

_LOCK = threading.Lock()


@dataclass(frozen=True)
class Timing:
    """Repeated wall times of one piece of work, in seconds, in the order they were taken."""

    samples: tuple[float, ...]

    @property
    def median(self) -> float:
        """The reported time (the module docstring says why the median)."""
        return statistics.median(self.samples)

    @property
    def low(self) -> float:
        return min(self.samples)

    @property
    def high(self) -> float:
        return max(self.samples)

    @property
    def spread(self) -> float:
        """Slowest ÷ fastest run: far above 1 means a busy machine."""
        return self.high / self.low if self.low > 0 else float("inf")

    def overlaps(self, other: Timing) -> bool:
        """Do the two ranges (fastest to slowest run) share any time? Then no order is shown."""
        return self.low <= other.high and other.low <= self.high

    def to_dict(self) -> dict:
        return {"median_s": self.median, "min_s": self.low, "max_s": self.high, "samples_s": list(self.samples)}


def interleaved(work: Mapping[str, Callable[[], object]], repeats: int, warmups: int = 1,
                clock: Callable[[], float] = time.perf_counter, budget_s: float = 0.0,
                max_samples: int = 200) -> dict[str, Timing]:
    """Time every function of ``work`` ``repeats`` times, taking turns (a, b, b, a, a, b …: the
    order alternates so neither always runs right after the other), after ``warmups`` untimed
    rounds that pay first-call costs (allocations, lazy initialisation). With ``budget_s``, more
    rounds (up to ``max_samples``) while they fit in that many seconds, so fast work gets enough
    samples to shrug off the noise of a shared machine."""
    check_int("Repeats", repeats, 1, 50)
    names = list(work)
    for _ in range(warmups):
        for name in names:
            work[name]()
    samples: dict[str, list[float]] = {name: [] for name in names}
    start = clock()
    i = 0
    while i < repeats or (i < max_samples and clock() - start < budget_s):
        for name in (names if i % 2 == 0 else names[::-1]):
            t0 = clock()
            work[name]()
            samples[name].append(clock() - t0)
        i += 1
    return {name: Timing(tuple(v)) for name, v in samples.items()}


def time_runs(fn: Callable[[], object], repeats: int, warmups: int = 1, clock: Callable[[], float] = time.perf_counter,
              budget_s: float = 0.0, max_samples: int = 200) -> Timing:
    """``interleaved`` for a single piece of work."""
    return interleaved({"work": fn}, repeats, warmups, clock, budget_s, max_samples)["work"]


def run_locked(fn: Callable[[], object], threads: int = 1):
    """Run one measurement at a time, on ``threads`` torch threads (one lock for every measurement
    of the process: kvviz.measure's sweeps and kvviz.speculative's speed-up).

    One thread by default: on a shared, busy machine two threads that wait for each other at every
    matrix product made a tiny-shape step 10-50× slower in our runs; one thread stays steady.
    """
    if not _LOCK.acquire(timeout=30):
        raise LimitError("Another measurement is running on this server; try again in a moment.")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        return fn()
    finally:
        torch.set_num_threads(before)
        _LOCK.release()
