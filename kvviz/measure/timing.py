"""What the cache saves on paper (FLOPs, docs/design.md §4) and what it saves on the clock.

The FLOPs come from kvviz.cost (``loop_flops``: the loops' own schedule, logits of the last position
only): with d = n_embd and L layers one position costs 24·L·d² in the projections and MLP, one query
over T keys 4·L·T·d in attention, the readout 2·d·V once per pass. Without a cache, step t reruns
all P + t tokens: O(N²d²) + O(N³d) in total; with it, O(Nd²) + O(N²d).

The measured speed-up is far below the FLOP ratio on a CPU: a one-token decode step still pays a
fixed cost per pass (dozens of small operations dispatched from Python, and every weight read from
memory for a single token). ``PassTimes`` measures that cost and ``predicted_speedup`` shows that
per-pass times, not FLOPs, explain the speed-up.

Every time here comes from the one timing helper (kvviz.measure.clock.interleaved): warmed, repeated,
the loops taking turns, every sample kept; the number shown is the median of the runs, the range how
much to trust it, and two ranges that overlap say the difference is within the machine's noise.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import StaticCache
from kvviz.cost import ModelConfig, loop_flops, pass_flops, weight_bytes
from kvviz.decoding.loops import generate, generate_cached, max_cached_new_tokens
from kvviz.decoding.sampling import SelectionRule
from kvviz.limits import GPT_MAX_SWEEP_TOKENS, LimitError, check_int
from kvviz.measure.clock import Timing, interleaved, time_runs
from kvviz.models.gpt import GPT, GPTModel, cost_config
from kvviz.models.hf import HFCausalLM

__all__ = ["VERIFY_REPEATS", "DtypeComparison", "DtypeRun", "LoopTimes", "PassTimes", "Sweep", "SweepPoint",
           "Timing", "interleaved", "measure_dtypes", "measure_passes", "measure_point", "measure_sweep",
           "sweep_sizes", "time_loops"]

VERIFY_REPEATS = 7           # timed runs of each loop for the verification's times (after one warm-up)


@dataclass(frozen=True)
class LoopTimes:
    """Both generation loops timed on the same prompt, rule and seed (``time_loops``)."""

    new_tokens: int
    uncached: Timing           # generate: the whole text again at every step
    cached: Timing             # generate_cached: prefill, then one position per step

    @property
    def within_noise(self) -> bool:
        """The two ranges overlap: this machine cannot tell the loops apart at this length."""
        return self.uncached.overlaps(self.cached)

    @property
    def ratio(self) -> float:
        """Median without the cache ÷ median with it (above 1: the cache is faster)."""
        return self.uncached.median / self.cached.median

    def to_dict(self) -> dict:
        return {"new_tokens": self.new_tokens, "repeats": len(self.cached.samples),
                "uncached": self.uncached.to_dict(), "cached": self.cached.to_dict(),
                "ratio_of_medians": self.ratio, "within_noise": self.within_noise}


def time_loops(model: GPT, prompt_ids: Sequence[int], n: int, rule: SelectionRule | None = None, seed: int = 0,
               repeats: int = VERIFY_REPEATS, clock: Callable[[], float] = time.perf_counter) -> LoopTimes:
    """``generate`` and ``generate_cached`` for ``n`` new tokens, warmed and timed ``repeats`` times
    each, interleaved (no logits kept: only the loops' own work is timed)."""
    cached = GPTModel(model)
    times = interleaved({"uncached": lambda: generate(model, prompt_ids, n, rule, seed, keep_logits=False),
                         "cached": lambda: generate_cached(cached, prompt_ids, n, rule, seed, keep_logits=False)},
                        repeats, clock=clock)
    return LoopTimes(n, times["uncached"], times["cached"])


@dataclass(frozen=True)
class SweepPoint:
    n: int                    # new tokens
    seconds_uncached: float   # median wall time of generate (no cache)
    seconds_cached: float     # median wall time of generate_cached (prefill included)
    flops_uncached: int
    flops_cached: int
    same_tokens: bool         # both loops chose the same tokens
    spread: float = 1.0       # slowest ÷ fastest run of either loop: far above 1 means a busy machine

    @property
    def speedup(self) -> float:
        return self.seconds_uncached / self.seconds_cached

    @property
    def flop_ratio(self) -> float:
        return self.flops_uncached / self.flops_cached


@dataclass(frozen=True)
class PassTimes:
    """Median seconds of single passes: a full pass over n tokens (no cache), and one cached decode step."""

    full: dict[int, float]    # tokens → seconds of one full pass
    step: float               # one decode step with a cache of ``step_context`` positions
    step_context: int

    def full_at(self, n: int) -> float:
        """Full-pass time at n tokens, interpolated linearly between the measured lengths."""
        xs = sorted(self.full)
        if n <= xs[0]:
            return self.full[xs[0]]
        for a, b in zip(xs, xs[1:]):
            if n <= b:
                return self.full[a] + (self.full[b] - self.full[a]) * (n - a) / (b - a)
        return self.full[xs[-1]]


@dataclass(frozen=True)
class Sweep:
    prompt_len: int
    points: list[SweepPoint]
    passes: PassTimes
    weight_bytes: int
    config: ModelConfig                # the network's shape (kvviz.cost)

    def noisy(self, limit: float = 1.5) -> bool:
        """Did repeated runs disagree by more than ``limit``× (another job competing for the CPU)?"""
        return any(p.spread > limit for p in self.points)

    def predicted_speedup(self, n: int) -> float:
        """The time model: Σ full-pass times of the uncached loop ÷ (prefill + (n − 1) cached steps)."""
        p = self.prompt_len
        uncached = sum(self.passes.full_at(min(p + t, self.config.learned_positions)) for t in range(n))
        return uncached / (self.passes.full_at(p) + (n - 1) * self.passes.step)

    def explanation(self) -> dict:
        """The measured numbers behind the sentence that explains the gap (for the largest N)."""
        last = self.points[-1]
        n_full = min(self.prompt_len + last.n - 1, self.config.learned_positions)
        full_s = self.passes.full_at(n_full)
        step_flops = pass_flops(self.config, 1, self.passes.step_context - 1, last_only=True).total
        full_flops = pass_flops(self.config, n_full, 0, last_only=True).total
        return {
            "n": last.n, "speedup": last.speedup, "flop_ratio": last.flop_ratio,
            "share": last.speedup / last.flop_ratio,
            "step_ms": self.passes.step * 1e3, "step_gflops": step_flops / self.passes.step / 1e9,
            "full_tokens": n_full, "full_ms": full_s * 1e3, "full_gflops": full_flops / full_s / 1e9,
            "weights_mb": self.weight_bytes / 1e6,
            "time_model": self.predicted_speedup(last.n),
        }


def sweep_sizes(model: GPT, prompt_len: int, max_n: int) -> list[int]:
    """Doubling token counts from 8 up to ``max_n``, capped by GPT_MAX_SWEEP_TOKENS and by what the
    cached loop can hold after this prompt."""
    top = min(max_n, max_cached_new_tokens(GPTModel(model), prompt_len), GPT_MAX_SWEEP_TOKENS)
    ns, n = [], 8
    while n < top:
        ns.append(n)
        n *= 2
    return ns + [top]


@torch.inference_mode()
def measure_passes(model: GPT, prompt_ids: Sequence[int], repeats: int = 3,
                   lengths: Sequence[int] = (8, 32, 64, 128, 192, 256)) -> PassTimes:
    """Time single passes of the loops' own call (``model(idx, cache, start, last_only=True)``): full
    passes at several lengths, and one decode step at a mid-size context."""
    block, vocab = model.config.block_size, model.config.vocab_size
    base = torch.tensor(list(prompt_ids), dtype=torch.long)
    full = {}
    for n in sorted({min(n, block) for n in lengths} | {len(prompt_ids)}):
        idx = (base.repeat(n // len(base) + 1)[:n] % vocab).unsqueeze(0)               # [1, n]
        full[n] = time_runs(lambda idx=idx: model(idx, last_only=True), repeats).median
    context = min(128, block)
    cache = StaticCache(model.config.n_layer, context + repeats)
    prefix = base.repeat(context // len(base) + 1)[:context - 1].unsqueeze(0)          # [1, context − 1]
    model(prefix, cache, 0, last_only=True)                                            # prefill context − 1
    tok = base[:1].unsqueeze(0)

    def step() -> None:                     # the same decode step each time: position context − 1
        cache.crop(context - 1)
        model(tok, cache, context - 1, last_only=True)
    return PassTimes(full, time_runs(step, repeats).median, context)


def measure_point(model: GPT, prompt_ids: Sequence[int], n: int, rule: SelectionRule | None = None,
                  seed: int = 0, repeats: int = 1) -> SweepPoint:
    """The median of ``repeats`` runs of each loop, interleaved so both meet the same load (the
    sweep warms the loops up first, so none is added here)."""
    shape = cost_config(model.config)
    fast = GPTModel(model)
    runs: dict[str, list] = {"uncached": [], "cached": []}
    times = interleaved({
        "uncached": lambda: runs["uncached"].append(generate(model, prompt_ids, n, rule, seed, keep_logits=False)),
        "cached": lambda: runs["cached"].append(generate_cached(fast, prompt_ids, n, rule, seed, keep_logits=False))},
        repeats, warmups=0)
    p = len(prompt_ids)
    return SweepPoint(n, times["uncached"].median, times["cached"].median,
                      loop_flops(shape, p, n, False).total, loop_flops(shape, p, n, True).total,
                      all(a.tokens == b.tokens for a, b in zip(runs["uncached"], runs["cached"])),
                      max(t.spread for t in times.values()))


def measure_sweep(model: GPT, prompt_ids: Sequence[int], ns: Sequence[int], rule: SelectionRule | None = None,
                  seed: int = 0, repeats: int = 1,
                  progress: Callable[[float, str], None] | None = None) -> Sweep:
    """Time generate and generate_cached for every N in ``ns``, then single passes; ``progress(frac, label)``."""
    repeats = check_int("Repeats", repeats, 1, 5)
    if not ns:
        raise LimitError("Give at least one token count to measure.")
    top = max_cached_new_tokens(GPTModel(model), len(prompt_ids))
    for n in ns:
        check_int("Tokens to time", n, 1, min(GPT_MAX_SWEEP_TOKENS, top))
    # work grows ~ with N² without the cache: weight the progress bar by it
    weights = [n * n + 8 * n for n in ns]
    done, total = 0.0, sum(weights) * 1.1
    generate_cached(GPTModel(model), prompt_ids, 4, keep_logits=False)       # warm-up (first-call allocations)
    points = []
    for n, w in zip(ns, weights):
        if progress:
            progress(done / total, f"N = {n}")
        points.append(measure_point(model, prompt_ids, n, rule, seed, repeats))
        done += w
    if progress:
        progress(done / total, "single passes")
    passes = measure_passes(model, prompt_ids, repeats=max(5, repeats))
    if progress:
        progress(1.0, "done")
    shape = cost_config(model.config)
    return Sweep(len(prompt_ids), points, passes, weight_bytes(shape, "fp32"), shape)


# ---------------------------------------------------------------- float32 against bfloat16

@dataclass(frozen=True)
class DtypeRun:
    """One greedy run of a transformers model in one dtype: its tokens and its decode steps' times."""

    dtype: str                     # "float32" | "bfloat16"
    tokens: list[int]
    step_seconds: tuple[float, ...]  # decode steps only (the prefill left out)
    weight_bytes: int              # measured on the loaded tensors
    cache_bytes: int               # the cache after the run, measured

    @property
    def step_ms(self) -> float:
        """The median decode step, in ms (the statistic of kvviz.measure.clock)."""
        return 1e3 * Timing(self.step_seconds).median


@dataclass(frozen=True)
class DtypeComparison:
    runs: tuple[DtypeRun, ...]

    def first_difference(self) -> int | None:
        """The first new token (0-based) where the runs chose differently, None if they never do."""
        a, b = self.runs[0].tokens, self.runs[1].tokens
        return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)

    @property
    def ratio(self) -> float:
        """How many times longer the first dtype's median decode step is than the second's."""
        return self.runs[0].step_ms / self.runs[1].step_ms


def measure_dtypes(models: Sequence[tuple[str, HFCausalLM]], prompt_ids: Sequence[int], steps: int,
                   warmup: int = 2) -> DtypeComparison:
    """The same greedy run of ``steps`` decode steps in each (dtype, model), one after the other,
    after ``warmup`` untimed steps each: at batch 1 a decode step reads every weight once, so half the
    bytes per weight should take about half the time. The runs do not stop at an end token."""
    steps = check_int("Decode steps", steps, 2, 64)
    out = []
    for dtype, model in models:
        generate_cached(model, prompt_ids, warmup + 1, stop=False, keep_logits=False)
        gen = generate_cached(model, prompt_ids, steps + 1, stop=False, keep_logits=False)
        out.append(DtypeRun(dtype, gen.tokens, gen.step_seconds[1:], model.weight_bytes(), gen.cache_bytes or 0))
    return DtypeComparison(tuple(out))
