"""Decode and prefill times against batch, context and prompt length, on the machine the app runs
on: kvviz's own GPT (kvviz.models.gpt) with random weights in a kvviz.cost shape.

``MeasuredGPT`` builds the GPT of ``kvviz.models.gpt`` in a ``kvviz.cost`` shape (the tiny shape or
GPT-2 small: token + learned position embeddings, pre-LayerNorm blocks with fused QKV and
``F.scaled_dot_product_attention``, a 4d GELU MLP, a final LayerNorm, a readout tied to the
embedding) and gives it a ``kvviz.cache.StaticCache``: K/V **preallocated** as
``[B, H, T_max, hd]`` per layer, so a decode step only writes one column. Every call is the GPT's
own forward, ``model(ids, cache, start, last_only=True)``, as in the generation loops.

The weights are random (GPT-2's initialisation, seeded): timing depends only on the shapes, and the
cost formulas of ``kvviz.cost`` describe exactly this network (``param_count`` equals its parameter
count, and ``pass_flops`` equals what torch's FLOP counter sees in a decode step with explicit
attention products).

Measurements run one at a time per process (a lock) and are capped (``kvviz.limits``), so one
visitor of a shared deployment cannot tie up the server for long.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import torch

from kvviz.cache import StaticCache
from kvviz.cost import GPT2_SMALL, TINY_GPT, ModelConfig, cache_bytes_per_token, param_count, pass_flops
from kvviz.limits import (
    MAX_MEASURE_BATCH,
    MAX_MEASURE_CACHE_BYTES,
    MAX_MEASURE_CONTEXT,
    MAX_MEASURE_GFLOP,
    MAX_MEASURE_STEPS,
    LimitError,
    check_int,
)
from kvviz.measure.clock import run_locked, time_runs
from kvviz.models.gpt import gpt_config, random_gpt

__all__ = ["SHAPES", "DecodePoint", "MeasuredGPT", "Measurements", "PrefillPoint", "build_stack", "measure_all",
           "measure_batch_sweep", "measure_context_sweep", "measure_prefill", "planned_flops", "run_locked",
           "stack_cache_bytes"]

SHAPES: dict[str, ModelConfig] = {"tiny": TINY_GPT, "gpt2": GPT2_SMALL}
Progress = Callable[[float, str], None]
T = TypeVar("T")


class MeasuredGPT:
    """kvviz's GPT in the shape ``cfg`` (random weights, frozen) with a preallocated StaticCache.

    ``device="meta"`` builds shapes only (no memory), for counting parameters.
    """

    def __init__(self, cfg: ModelConfig, max_batch: int, max_len: int, *, seed: int = 0,
                 device: str | torch.device = "cpu") -> None:
        self.cfg, self.device = cfg, torch.device(device)
        with self.device:
            self.model = random_gpt(gpt_config(cfg), seed).requires_grad_(False)
        self.reset_cache(max_batch, max_len)

    def reset_cache(self, max_batch: int, max_len: int) -> None:
        """(Re)allocate the cache: K and V ``[B, H, max_len, hd]`` per layer, once (not timed)."""
        if max_len > self.cfg.learned_positions:
            raise LimitError(f"{self.cfg.name} has {self.cfg.learned_positions} positions; asked for {max_len}.")
        if hasattr(self, "cache"):
            del self.cache                       # free the old cache before allocating the new one
        c = self.model.config
        self.cache = StaticCache(c.n_layer, max_len).allocate(max_batch, c.kv_heads, c.head_dim,
                                                              device=self.device)
        self.batch = max_batch

    def cache_nbytes(self) -> int:
        return self.cache.nbytes()

    @torch.inference_mode()
    def __call__(self, ids: torch.Tensor, start: int) -> torch.Tensor:
        """ids: [B, N] tokens at positions start..start+N-1 -> logits of the last one [B, V];
        their K/V go to cache columns start..start+N-1 (a repeated call overwrites the same ones)."""
        if ids.shape[0] != self.batch:
            raise ValueError(f"the cache holds batch {self.batch}, not {ids.shape[0]}")
        if start > self.cache.get_seq_length():
            raise ValueError(f"positions 0..{start - 1} must be in the cache first (see ``fill``)")
        if start:                                # drop what an earlier call wrote after start
            self.cache.crop(start)
        else:
            self.cache.reset()
        return self.model(ids, self.cache, start, last_only=True)

    @torch.inference_mode()
    def fill(self, positions: int) -> None:
        """Put ``positions`` positions into the cache (one untimed prefill of token 0), so a decode
        step can then read them."""
        self.cache.reset()
        if positions > 0:
            self.model(torch.zeros(self.batch, positions, dtype=torch.long), self.cache, 0, last_only=True)


def stack_cache_bytes(cfg: ModelConfig, batch: int, max_len: int) -> int:
    """Bytes of MeasuredGPT's preallocated fp32 cache (a StaticCache: K and V of every layer)."""
    return cache_bytes_per_token(cfg, "fp32") * batch * max_len


def _shape(name: str) -> ModelConfig:
    if name not in SHAPES:
        raise LimitError(f"Unknown shape {name!r}; choose one of {', '.join(SHAPES)}.")
    return SHAPES[name]


def _check_cache(cfg: ModelConfig, batch: object, max_len: object) -> tuple[int, int]:
    batch = check_int("Batch size", batch, 1, MAX_MEASURE_BATCH)
    max_len = check_int("Context length", max_len, 1, MAX_MEASURE_CONTEXT)
    need = stack_cache_bytes(cfg, batch, max_len)
    if need > MAX_MEASURE_CACHE_BYTES:
        raise LimitError(f"A cache for batch {batch} × {max_len} tokens of {cfg.name} needs "
                         f"{need / 2**20:,.0f} MiB; the limit here is {MAX_MEASURE_CACHE_BYTES / 2**20:,.0f} MiB. "
                         "Use a smaller batch or context.")
    return batch, max_len


def build_stack(name: str, batch: int, max_len: int) -> MeasuredGPT:
    """The GPT of shape ``name`` with a cache within the caps: batch, length and cache bytes."""
    cfg = _shape(name)
    return MeasuredGPT(cfg, *_check_cache(cfg, batch, max_len))


def _ready(name: str, batch: int, max_len: int, stack: MeasuredGPT | None) -> MeasuredGPT:
    """``stack`` with a fresh cache of the asked size (its weights reused), or a new one."""
    if stack is None:
        return build_stack(name, batch, max_len)
    if stack.cfg != _shape(name):
        raise ValueError("the GPT has another shape")
    stack.reset_cache(*_check_cache(stack.cfg, batch, max_len))
    return stack


def _time_ms(fn: Callable[[], object], repeats: int, warmup: int = 1, budget_s: float = 0.15,
             max_samples: int = 200) -> float:
    """The median wall time of ``fn`` in milliseconds (kvviz.measure.clock): at least ``repeats``
    calls, and more (up to ``max_samples``) while they fit in ``budget_s``, so fast shapes get
    enough samples to shrug off the noise of a shared machine."""
    return time_runs(fn, repeats, warmup, budget_s=budget_s, max_samples=max_samples).median * 1000


@dataclass(frozen=True)
class DecodePoint:
    """Median time of one decode step for ``batch`` sequences, each query reading ``context`` keys
    (the cached ones and its own)."""

    batch: int
    context: int
    ms_per_step: float
    flops: int                # per step, from kvviz.cost
    bytes_moved: int          # weights + caches read, fp32

    @property
    def tokens_per_s(self) -> float:
        return self.batch / (self.ms_per_step / 1000)

    @property
    def gflops(self) -> float:
        return self.flops / (self.ms_per_step / 1000) / 1e9

    @property
    def gbytes_per_s(self) -> float:
        return self.bytes_moved / (self.ms_per_step / 1000) / 1e9


@dataclass(frozen=True)
class PrefillPoint:
    """Time to first token (one prefill pass over the prompt) and time per output token after it."""

    prompt_len: int
    ttft_ms: float
    tpot_ms: float


def _decode_point(stack: MeasuredGPT, batch: int, context: int, steps: int) -> DecodePoint:
    """Time one decode step that reads ``context`` keys: the token at position context - 1.

    Every repeat decodes at that same position (overwriting the same cache column), so each timed
    step does exactly the same work; the cache before it holds whatever is there (timing depends
    only on the shapes).
    """
    cfg = stack.cfg
    ids = torch.zeros(batch, 1, dtype=torch.long)
    stack.fill(context - 1)                                      # the cached positions it reads (untimed)
    ms = _time_ms(lambda: stack(ids, context - 1), repeats=steps, warmup=1)
    flops = pass_flops(cfg, 1, context - 1, last_only=True).scaled(batch).total
    moved = param_count(cfg) * 4 + batch * context * cache_bytes_per_token(cfg, "fp32")
    return DecodePoint(batch, context, ms, flops, moved)


def _sweep(values: Sequence[int], label: str, one: Callable[[int], T], progress: Progress | None) -> list[T]:
    """``one(v)`` for every value, reporting ``progress(fraction, "<label> <v>")`` before each."""
    out = []
    for i, v in enumerate(values):
        if progress:
            progress(i / len(values), f"{label} {v}")
        out.append(one(v))
    if progress:
        progress(1.0, "done")
    return out


def _ints(name: str, values: Sequence[int], low: int, high: int) -> list[int]:
    vals = [check_int(name, v, low, high) for v in values]
    if not vals:
        raise LimitError(f"Give at least one {name.lower()}.")
    if len(vals) > 12:
        raise LimitError(f"At most 12 values of {name.lower()} per measurement.")
    return sorted(set(vals))


def measure_batch_sweep(shape: str, batches: Sequence[int], context: int, steps: int = 6,
                        progress: Progress | None = None, stack: MeasuredGPT | None = None,
                        threads: int = 1) -> list[DecodePoint]:
    """Decode step time against batch size at a fixed context (docs/design.md §4: flat, then rising)."""
    batches = _ints("Batch size", batches, 1, MAX_MEASURE_BATCH)
    context = check_int("Context length", context, 1, MAX_MEASURE_CONTEXT)
    steps = check_int("Steps", steps, 1, MAX_MEASURE_STEPS)

    def go() -> list[DecodePoint]:
        _check_cache(_shape(shape), max(batches), context)     # the largest cache, before any work
        st = _ready(shape, batches[0], context, stack)

        def one(b: int) -> DecodePoint:
            if st.batch != b:     # a StaticCache has a fixed batch: a cache of exactly b rows (not timed)
                st.reset_cache(b, context)
            return _decode_point(st, b, context, steps)
        return _sweep(batches, "batch", one, progress)
    return run_locked(go, threads)


def measure_context_sweep(shape: str, contexts: Sequence[int], batch: int = 1, steps: int = 6,
                          progress: Progress | None = None, stack: MeasuredGPT | None = None,
                          threads: int = 1) -> list[DecodePoint]:
    """Decode step time against the number of cached tokens it reads."""
    contexts = _ints("Context length", contexts, 1, MAX_MEASURE_CONTEXT)
    batch = check_int("Batch size", batch, 1, MAX_MEASURE_BATCH)
    steps = check_int("Steps", steps, 1, MAX_MEASURE_STEPS)

    def go() -> list[DecodePoint]:
        st = _ready(shape, batch, max(contexts), stack)
        return _sweep(contexts, "context", lambda c: _decode_point(st, batch, c, steps), progress)
    return run_locked(go, threads)


def measure_prefill(shape: str, prompt_lens: Sequence[int], steps: int = 4, repeats: int = 2,
                    progress: Progress | None = None, stack: MeasuredGPT | None = None,
                    threads: int = 1) -> list[PrefillPoint]:
    """Time to first token (a prefill of the prompt) and time per output token (decode steps
    right after it), batch 1, for each prompt length."""
    lens = _ints("Prompt length", prompt_lens, 1, MAX_MEASURE_CONTEXT - 1)
    steps = check_int("Steps", steps, 1, MAX_MEASURE_STEPS)
    repeats = check_int("Repeats", repeats, 1, 10)

    def go() -> list[PrefillPoint]:
        st = _ready(shape, 1, max(lens) + 1, stack)

        def one(p: int) -> PrefillPoint:
            ids = torch.zeros(1, p, dtype=torch.long)                  # [1, P]
            ttft = _time_ms(lambda: st(ids, 0), repeats=repeats, warmup=1)  # logits of the last position only
            tpot = _decode_point(st, 1, p + 1, steps).ms_per_step    # the first token after the prompt
            return PrefillPoint(p, ttft, tpot)
        return _sweep(lens, "prompt", one, progress)
    return run_locked(go, threads)


def planned_flops(cfg: ModelConfig, batches: Sequence[int], context: int, contexts: Sequence[int],
                  prompt_lens: Sequence[int], steps: int, prefill_runs: int = 3) -> int:
    """The arithmetic ``measure_all`` will at least do: timed calls plus one warm-up each, and the
    untimed prefill that fills the cache before each decode measurement."""
    def fill(c: int, b: int = 1) -> int:
        return pass_flops(cfg, c - 1, 0, last_only=True).scaled(b).total if c > 1 else 0

    decode = sum((steps + 1) * pass_flops(cfg, 1, context - 1, last_only=True).scaled(b).total + fill(context, b)
                 for b in batches)
    decode += sum((steps + 1) * pass_flops(cfg, 1, c - 1, last_only=True).total + fill(c) for c in contexts)
    prefill = sum(prefill_runs * pass_flops(cfg, p, 0, last_only=True).total + fill(p + 1)
                  + (min(steps, 4) + 1) * pass_flops(cfg, 1, p, last_only=True).total for p in prompt_lens)
    return decode + prefill


@dataclass(frozen=True)
class Measurements:
    """The three sweeps of the cost page, measured on one GPT (weights built once)."""

    shape: str
    batch: list[DecodePoint]
    context: list[DecodePoint]
    prefill: list[PrefillPoint]
    seconds: float
    threads: int


def measure_all(shape: str, batches: Sequence[int], context: int, contexts: Sequence[int],
                prompt_lens: Sequence[int], steps: int = 6, progress: Progress | None = None,
                threads: int = 1) -> Measurements:
    """Batch sweep, context sweep and TTFT/TPOT in one go; ``progress(fraction, label)``."""
    cfg = _shape(shape)
    # validate every size before spending time on weights
    batches = _ints("Batch size", batches, 1, MAX_MEASURE_BATCH)
    contexts = _ints("Context length", contexts, 1, MAX_MEASURE_CONTEXT)
    lens = _ints("Prompt length", prompt_lens, 1, MAX_MEASURE_CONTEXT - 1)
    context = check_int("Context length", context, 1, MAX_MEASURE_CONTEXT)
    steps = check_int("Steps", steps, 1, MAX_MEASURE_STEPS)
    _check_cache(cfg, max(batches), context)
    _check_cache(cfg, 1, max(max(contexts), max(lens) + 1))
    gflop = planned_flops(cfg, batches, context, contexts, lens, steps) / 1e9
    if gflop > MAX_MEASURE_GFLOP:
        raise LimitError(f"This measurement would compute about {gflop:,.0f} GFLOP; the limit here is "
                         f"{MAX_MEASURE_GFLOP} GFLOP. Use shorter prompts or fewer and smaller batches.")

    def part(lo: float, hi: float) -> Progress | None:
        return None if progress is None else (lambda f, label: progress(lo + (hi - lo) * f, label))

    t0 = time.perf_counter()
    if progress:
        progress(0.0, "weights")
    stack = MeasuredGPT(cfg, 1, 2)
    threads = check_int("Threads", threads, 1, 64)
    b = measure_batch_sweep(shape, batches, context, steps, part(0.05, 0.45), stack, threads)
    c = measure_context_sweep(shape, contexts, 1, steps, part(0.45, 0.75), stack, threads)
    p = measure_prefill(shape, lens, min(steps, 4), 3, part(0.75, 1.0), stack, threads)
    return Measurements(shape, b, c, p, time.perf_counter() - t0, threads)
