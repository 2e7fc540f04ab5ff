"""Speculative decoding's speed-up, measured on this machine (the tiny GPT with its draft model;
``measure_self_speedup``: prompt lookup and early exit on a transformers model such as SmolLM2).

``measure_speedup`` times speculative against plain cached decoding of the tiny GPT for each γ, with
the acceptance rate α, the cost ratio c = draft pass / target pass and the cost of the verification
pass over γ + 1 positions measured in the same run, and puts the expected improvement of
kvviz.cost.speculative (Leviathan et al.'s formula, and the same with the verification pass's
measured cost) beside the measured one. Like kvviz.measure: capped (kvviz.limits), one at a time per
process (the same lock), and timed by kvviz.measure.clock: every time shown is the median of the
repeated runs, the fastest run beside it as the low end of their range.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvviz.cost import pass_flops, speculative_speedup, speculative_tokens_per_pass
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import SelectionRule, make_rule
from kvviz.limits import (
    SELF_SPEC_MEASURE_MAX_PROMPTS,
    SELF_SPEC_MEASURE_MAX_RUNS,
    SELF_SPEC_MEASURE_MAX_TOKENS,
    SPECULATIVE_MAX_GAMMA,
    SPECULATIVE_MEASURE_MAX_RUNS,
    SPECULATIVE_MEASURE_MAX_TOKENS,
    LimitError,
    check_int,
)
from kvviz.measure.clock import Timing, run_locked, time_runs
from kvviz.models.base import CausalLM
from kvviz.speculative.decoding import check_speculation, speculative_generate
from kvviz.speculative.early_exit import check_early_exit, early_exit_generate
from kvviz.speculative.prompt_lookup import check_prompt_lookup, prompt_lookup_generate
from kvviz.speculative.records import Speculation

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class SpeedRuns:
    """Speculative against plain cached decoding of the same tokens, timed by kvviz.measure.clock: the
    median of the runs of each, and the fastest run of each (the low end of their range)."""

    new_tokens: int
    speculative_s: float            # median time of the speculative runs (prefill included; the measurement's clock)
    plain_s: float                  # median time of generate_cached, same prompt, rule and N
    speculative_best_s: float       # fastest run of each
    plain_best_s: float

    @property
    def speculative_tps(self) -> float:
        return self.new_tokens / self.speculative_s

    @property
    def plain_tps(self) -> float:
        return self.new_tokens / self.plain_s

    @property
    def measured(self) -> float:
        """Measured improvement: plain time / speculative time (medians); above 1 is faster."""
        return self.plain_s / self.speculative_s

    @property
    def measured_best(self) -> float:
        return self.plain_best_s / self.speculative_best_s


@dataclass(frozen=True)
class SpeedPoint(SpeedRuns):
    """A draft model at one γ (``measure_speedup``)."""

    gamma: int
    acceptance_rate: float          # α: accepted / tested over all runs
    tokens_per_target_pass: float   # new tokens per verification pass, over all runs
    verify_ms: float                # the target's pass over γ + 1 positions (the verification pass), median
    expected: float                 # kvviz.cost.speculative_speedup(α, γ, c): the paper's formula (v = 1)
    expected_with_verify: float     # the same with v = verify_ms / target_ms measured
    # inside the fastest speculative run: where a round's time goes
    rounds: int = 0
    run_draft_ms: float = 0.0       # mean draft pass
    run_verify_ms: float = 0.0      # mean verification pass
    run_other_ms: float = 0.0       # per round, the rest: draws, the acceptance test, records (and the prefill)

    @property
    def expected_tokens_per_pass(self) -> float:
        """(1 − α^(γ+1)) / (1 − α) with the measured α, beside ``tokens_per_target_pass``."""
        return speculative_tokens_per_pass(self.acceptance_rate, self.gamma)


@dataclass(frozen=True)
class SpeedMeasurements:
    """What every speed-up measurement holds: its points, the tokens asked for, runs per point,
    torch threads, and how long it took."""

    points: list
    new_tokens: int                 # asked for (a self-drafted run stops earlier at an end token)
    runs: int
    threads: int
    seconds: float


@dataclass(frozen=True)
class SpeedMeasurement(SpeedMeasurements):
    """A draft model's measurement: every γ, and the single-pass times the formula needs."""

    target_ms: float        # one target decode pass (one position), median of 30
    draft_ms: float         # one draft decode pass, median of 30
    context: int            # cached positions those passes read (mid-run)
    c_flops: float          # the same ratio in FLOPs (kvviz.cost.pass_flops): what c would be if time were arithmetic
    rule: dict
    prompt_len: int
    clock: str = "wall"     # what the times are: "wall" or "cpu" (process time)

    @property
    def c(self) -> float:
        """The cost ratio of Leviathan et al.: draft pass time / target pass time."""
        return self.draft_ms / self.target_ms


# what a measurement's times are: wall time (what a visitor waits), or the process's CPU time (what
# the work itself costs when other jobs share the cores; with one torch thread, the time on one core)
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _pass_ms(model: CausalLM, n: int, context: int, repeats: int,
             clock: Callable[[], float] = time.perf_counter) -> float:
    """The median of ``repeats`` passes over ``n`` new positions after ``context`` cached ones, in ms,
    as the loops call it (one position: logits of the last only; more: every position's logits, as a
    verification), after two warm-ups (kvviz.measure.clock)."""
    cache = model.new_cache("static", max_length=context + n)
    model.logits([0] * context, cache, 0, keep=1)                                    # untimed fill
    ids = [0] * n

    def one() -> None:
        cache.crop(context)
        model.logits(ids, cache, context, keep=1 if n == 1 else 0)
    return time_runs(one, repeats, warmups=2, clock=clock).median * 1e3


def _gammas(gammas: Sequence[int]) -> list[int]:
    vals = sorted({check_int("Gamma", g, 1, SPECULATIVE_MAX_GAMMA) for g in gammas})
    if not vals:
        raise LimitError("Give at least one γ to measure.")
    return vals


@torch.inference_mode()
def measure_speedup(target: CausalLM, draft: CausalLM, prompt_ids: Sequence[int], gammas: Sequence[int] = range(1, 7),
                    new_tokens: int = 48, rule: SelectionRule | None = None, runs: int = 3,
                    progress: Progress | None = None, threads: int = 1, clock: str = "wall") -> SpeedMeasurement:
    """For each γ: ``runs`` speculative runs (seeds 0..runs−1) interleaved with as many plain
    ``generate_cached`` runs, then single passes of both models for c and the verification cost.
    ``clock``: "wall" (the default) or "cpu" (the process's CPU time, steadier on a shared machine;
    the per-round breakdown stays in wall time, inside the fastest run).

    Capped: γ ≤ SPECULATIVE_MAX_GAMMA, N ≤ SPECULATIVE_MEASURE_MAX_TOKENS, runs ≤ SPECULATIVE_MEASURE_MAX_RUNS; one
    measurement at a time per process (kvviz.measure.scaling.run_locked), one torch thread by default.
    """
    gammas = _gammas(gammas)
    n = check_int("New tokens", new_tokens, 2, SPECULATIVE_MEASURE_MAX_TOKENS)
    runs = check_int("Runs", runs, 1, SPECULATIVE_MEASURE_MAX_RUNS)
    threads = check_int("Threads", threads, 1, 64)
    if clock not in CLOCKS:
        raise LimitError(f"The clock must be one of {', '.join(CLOCKS)}, not {clock!r}.")
    now = CLOCKS[clock]
    ids = list(prompt_ids)
    check_speculation(target, draft, len(ids), n, max(gammas))
    context = len(ids) + n // 2

    def go() -> SpeedMeasurement:
        t0 = time.perf_counter()
        if progress:
            progress(0.0, "warm-up")
        speculative_generate(target, draft, ids, 4, 2, rule)          # first-call allocations, both loops
        generate_cached(target, ids, 4, rule, keep_logits=False)
        target_ms = _pass_ms(target, 1, context, 30, now)
        draft_ms = _pass_ms(draft, 1, context, 30, now)
        points = []
        for i, g in enumerate(gammas):
            if progress:
                progress(0.05 + 0.95 * i / len(gammas), f"γ = {g}")
            spec: list[Speculation] = []
            spec_s: list[float] = []
            plain: list[float] = []
            for seed in range(runs):
                t = now()
                spec.append(speculative_generate(target, draft, ids, n, g, rule, seed))
                spec_s.append(now() - t)
                t = now()
                generate_cached(target, ids, n, rule, seed, keep_logits=False)
                plain.append(now() - t)
            fastest = spec[spec_s.index(min(spec_s))]
            d_s, v_s = fastest.pass_seconds()
            rounds = len(fastest.rounds)
            accepted, tested = sum(s.accepted for s in spec), sum(s.tested for s in spec)
            alpha = accepted / tested
            verify_ms = _pass_ms(target, g + 1, context, 30, now)
            c = draft_ms / target_ms
            spec_t, plain_t = Timing(tuple(spec_s)), Timing(tuple(plain))
            points.append(SpeedPoint(
                n, spec_t.median, plain_t.median, spec_t.low, plain_t.low, gamma=g, acceptance_rate=alpha,
                tokens_per_target_pass=sum(len(s.tokens) for s in spec) / sum(len(s.rounds) for s in spec),
                verify_ms=verify_ms, expected=speculative_speedup(alpha, g, c),
                expected_with_verify=speculative_speedup(alpha, g, c, verify_ms / target_ms),
                rounds=rounds, run_draft_ms=d_s * 1e3 / max(1, fastest.proposed), run_verify_ms=v_s * 1e3 / rounds,
                run_other_ms=(fastest.seconds - d_s - v_s) * 1e3 / rounds))
        if progress:
            progress(1.0, "done")
        flops = [pass_flops(m.cost_config, 1, context, last_only=True).total for m in (draft, target)]
        return SpeedMeasurement(points, n, runs, threads, time.perf_counter() - t0, target_ms=target_ms,
                                draft_ms=draft_ms, context=context, c_flops=flops[0] / flops[1],
                                rule=(rule or make_rule()).describe(), prompt_len=len(ids), clock=clock)
    return run_locked(go, threads)


# ---- self-drafting on a transformers model: prompt lookup and early exit against plain decoding ----------

SELF_METHODS = ("prompt-lookup", "early-exit")


@dataclass(frozen=True)
class SelfSpeedPoint(SpeedRuns):
    """One prompt and one self-drafting method (prompt lookup, early exit) against plain cached greedy
    decoding of the same tokens (``new_tokens``: the ones both made, greedy, stopped at an end token)."""

    prompt: str                     # the prompt's name (e.g. "repeat", "open")
    method: str                     # the draft source: "prompt-lookup" or "early-exit"
    proposed: int                   # draft tokens of one run
    accepted: int
    target_passes: int              # verification passes of one run (plain: one per token)
    same_tokens: bool               # the speculative run's tokens are plain greedy's
    draft_s: float                  # inside the fastest speculative run: making the drafts
    verify_s: float                 # and the verification passes

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.proposed if self.proposed else None

    @property
    def tokens_per_pass(self) -> float:
        return self.new_tokens / self.target_passes


@dataclass(frozen=True)
class SelfSpeedMeasurement(SpeedMeasurements):
    """A self-drafting measurement: every prompt and method."""

    lookup_tokens: int
    max_ngram: int
    exit_layer: int
    draft_tokens: int


@torch.inference_mode()
def measure_self_speedup(model: CausalLM, prompts: Sequence[tuple[str, Sequence[int]]],
                         methods: Sequence[str] = SELF_METHODS, new_tokens: int = 32, lookup_tokens: int = 10,
                         max_ngram: int = 2, exit_layer: int = 24,
                         draft_tokens: int = 4, runs: int = 1, progress: Progress | None = None,
                         threads: int = 1) -> SelfSpeedMeasurement:
    """For each prompt (name, ids) and method: ``runs`` speculative runs interleaved with as many
    plain ``generate_cached`` runs (greedy, the same stop), after one untimed warm-up of each. Capped
    (kvviz.limits SELF_SPEC_MEASURE_*); one measurement at a time per process (``run_locked``, the
    lock every measurement shares), on ``threads`` torch threads."""
    n = check_int("New tokens", new_tokens, 2, min(SELF_SPEC_MEASURE_MAX_TOKENS, model.limits.max_new_tokens))
    runs = check_int("Runs", runs, 1, SELF_SPEC_MEASURE_MAX_RUNS)
    threads = check_int("Threads", threads, 1, 64)
    prompts = [(str(name), [int(i) for i in ids]) for name, ids in prompts]
    check_int("Prompts", len(prompts), 1, SELF_SPEC_MEASURE_MAX_PROMPTS)
    bad = [m for m in methods if m not in SELF_METHODS]
    if bad or not methods:
        raise LimitError(f"The methods must be some of {', '.join(SELF_METHODS)}, not {bad or 'none'}.")
    _, k, ng = check_prompt_lookup(n, lookup_tokens, max_ngram)
    ee, d = check_early_exit(model, exit_layer, draft_tokens)
    for _, ids in prompts:
        if not ids or len(ids) > model.limits.max_prompt_tokens:
            raise LimitError(f"A prompt must have 1 to {model.limits.max_prompt_tokens} tokens, not {len(ids)}.")
    run_of = {"prompt-lookup": lambda ids: prompt_lookup_generate(model, ids, n, k, ng),
              "early-exit": lambda ids: early_exit_generate(model, ids, n, ee, d)}

    def go() -> SelfSpeedMeasurement:
        t0 = time.perf_counter()
        todo = [(name, ids, m) for name, ids in prompts for m in methods]
        points = []
        for i, (name, ids, method) in enumerate(todo):
            if progress:
                progress(i / len(todo), f"{name}: {method}")
            run_of[method](ids)                                  # warm-up, untimed
            generate_cached(model, ids, 2, keep_logits=False)
            spec_s, plain_s, specs, plain_tokens = [], [], [], None
            for _ in range(runs):
                t = time.perf_counter()
                specs.append(run_of[method](ids))
                spec_s.append(time.perf_counter() - t)
                t = time.perf_counter()
                plain_tokens = generate_cached(model, ids, n, keep_logits=False).tokens
                plain_s.append(time.perf_counter() - t)
            fastest = specs[spec_s.index(min(spec_s))]
            spec_t, plain_t = Timing(tuple(spec_s)), Timing(tuple(plain_s))
            points.append(SelfSpeedPoint(
                len(fastest.tokens), spec_t.median, plain_t.median, spec_t.low, plain_t.low, prompt=name,
                method=method, proposed=fastest.proposed, accepted=fastest.accepted,
                target_passes=fastest.target_passes, same_tokens=fastest.tokens == plain_tokens,
                draft_s=sum(r.draft_seconds for r in fastest.rounds),
                verify_s=sum(r.verify_seconds for r in fastest.rounds)))
        if progress:
            progress(1.0, "done")
        return SelfSpeedMeasurement(points, n, runs, threads, time.perf_counter() - t0, lookup_tokens=k,
                                    max_ngram=ng, exit_layer=ee, draft_tokens=d)
    return run_locked(go, threads)
