"""The Tiny GPT's verification times (kvviz.measure.timing.time_loops): warmed, repeated, interleaved,
reported as a median with its range, and called noise when the ranges overlap. A fake clock makes
the arithmetic exact; one short real run checks the record a page and the CLI read."""
from __future__ import annotations

import pytest

from kvviz.measure.timing import VERIFY_REPEATS, LoopTimes, Timing, interleaved, time_loops


class FakeClock:
    """A clock that advances only when the work says so: ``work(seconds)`` makes a function that takes that long."""

    def __init__(self) -> None:
        self.now, self.calls = 0.0, []

    def __call__(self) -> float:
        return self.now

    def work(self, name: str, seconds: list[float]):
        it = iter(seconds)

        def run() -> None:
            self.calls.append(name)
            self.now += next(it)
        return run


def test_warm_up_is_not_timed_and_the_loops_take_turns():
    clock = FakeClock()
    # the first call of each is a slow warm-up (1 s) that must not count
    times = interleaved({"a": clock.work("a", [1.0, 0.010, 0.012, 0.011, 0.013, 0.010]),
                         "b": clock.work("b", [1.0, 0.002, 0.003, 0.002, 0.002, 0.004])}, repeats=5, clock=clock)
    assert clock.calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a", "a", "b"]
    assert times["a"].samples == pytest.approx((0.010, 0.012, 0.011, 0.013, 0.010))
    assert times["b"].samples == pytest.approx((0.002, 0.003, 0.002, 0.002, 0.004))
    assert times["a"].median == pytest.approx(0.011) and times["a"].low == pytest.approx(0.010)
    assert times["a"].high == pytest.approx(0.013)
    result = LoopTimes(8, times["a"], times["b"])
    assert not result.within_noise and result.ratio == pytest.approx(0.011 / 0.002)


def test_overlapping_ranges_are_called_noise_and_one_outlier_moves_no_median():
    # the numbers a lecturer saw as single samples: 15.2 ms vs 704.6 ms, then 38.7 vs 51.8 ms
    uncached = Timing((0.0152, 0.0387, 0.0161, 0.0149, 0.0170, 0.0158, 0.0155))
    cached = Timing((0.7046, 0.0518, 0.0101, 0.0098, 0.0120, 0.0105, 0.0110))
    loops = LoopTimes(8, uncached, cached)
    assert cached.median == pytest.approx(0.0110)          # the 704.6 ms run is one of seven
    assert loops.within_noise                              # but the ranges overlap: no claim either way
    apart = LoopTimes(8, Timing((0.050, 0.052, 0.055)), Timing((0.010, 0.011, 0.012)))
    assert not apart.within_noise and apart.ratio == pytest.approx(0.052 / 0.011)
    d = loops.to_dict()
    assert d["within_noise"] is True and d["repeats"] == 7 and d["cached"]["median_s"] == pytest.approx(0.0110)
    assert d["uncached"]["samples_s"] == list(uncached.samples)


def test_time_loops_times_both_real_loops_several_times():
    from kvviz.models.gpt import load_tiny_gpt
    model = load_tiny_gpt().model
    loops = time_loops(model, [1, 2, 3], 3, repeats=3)
    assert loops.new_tokens == 3
    for timing in (loops.uncached, loops.cached):
        assert len(timing.samples) == 3 and all(s > 0 for s in timing.samples)
        assert timing.low <= timing.median <= timing.high
    assert VERIFY_REPEATS >= 5                             # what the page uses: never a single sample
