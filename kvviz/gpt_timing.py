"""What the cache saves on paper (FLOPs, DESIGN.md §1.3) and what it saves on the clock.

FLOPs count multiply-adds as 2 and leave out LayerNorm, softmax and embeddings. With d = n_embd and L
layers, one position costs 24·L·d² in the projections and MLP (q, k, v: 3d², output d², MLP 8d²),
one query over T keys costs 4·L·T·d in attention (QKᵀ and the weighted sum of V), and the lm_head
costs 2·d·V once per pass (only the last position's logits are needed). Without a cache, step t
reruns all P + t tokens: O(N²d²) + O(N³d) in total; with it, O(Nd²) + O(N²d).

The measured speed-up is far below the FLOP ratio on a CPU: a one-token decode step still pays a
fixed cost per pass (dozens of small operations dispatched from Python, and every weight read from
memory for a single token). ``PassTimes`` measures that cost and ``predicted_speedup`` shows that
per-pass times, not FLOPs, explain the speed-up.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from kvviz.gpt_generate import StaticKVCache, lean_gpt, generate, generate_cached, max_cached_new_tokens
from kvviz.limits import GPT_MAX_SWEEP_TOKENS, LimitError, check_int
from kvviz.models.gpt import GPT, GPTConfig
from kvviz.sampling import SelectionRule


@dataclass(frozen=True)
class Flops:
    dense: int        # projections + MLP
    attention: int    # QKᵀ and weights·V
    head: int         # lm_head on the last position of each pass

    @property
    def total(self) -> int:
        return self.dense + self.attention + self.head


def pass_flops(cfg: GPTConfig, n_new: int, start_pos: int) -> Flops:
    """One forward pass of ``n_new`` tokens at positions start_pos.. (query i sees start_pos + i + 1 keys)."""
    L, d = cfg.n_layer, cfg.n_embd
    keys = n_new * start_pos + n_new * (n_new + 1) // 2       # Σ_i (start_pos + i + 1)
    return Flops(24 * L * d * d * n_new, 4 * L * d * keys, 2 * d * cfg.vocab_size)


def generation_flops(cfg: GPTConfig, prompt_len: int, n_new: int, cached: bool) -> Flops:
    """FLOPs to generate ``n_new`` tokens after a ``prompt_len``-token prompt (the last choice is not processed)."""
    passes: list[Flops] = []
    if cached:
        passes.append(pass_flops(cfg, prompt_len, 0))                       # prefill
        passes += [pass_flops(cfg, 1, prompt_len + t - 1) for t in range(1, n_new)]   # decode steps
    else:
        for t in range(n_new):
            n = min(prompt_len + t, cfg.block_size)                         # cropped text, rerun whole
            passes.append(pass_flops(cfg, n, 0))
    return Flops(sum(p.dense for p in passes), sum(p.attention for p in passes), sum(p.head for p in passes))


def flop_ratio(cfg: GPTConfig, prompt_len: int, n_new: int) -> float:
    return generation_flops(cfg, prompt_len, n_new, False).total / generation_flops(cfg, prompt_len, n_new, True).total


def cache_bytes_formula(cfg: GPTConfig, positions: int, bytes_per_value: int = 4, batch: int = 1) -> int:
    """2 · L · T · d · bytes (× batch): K and V, every layer, every position, the full model width."""
    return 2 * cfg.n_layer * positions * cfg.n_embd * bytes_per_value * batch


def weight_bytes(model: GPT) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def _best_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


@dataclass(frozen=True)
class SweepPoint:
    n: int                    # new tokens
    seconds_uncached: float   # best wall time of generate (no cache)
    seconds_cached: float     # best wall time of generate_cached (prefill included)
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
    """Best seconds of single passes: a full pass over n tokens (no cache), and one cached decode step."""

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
    config: GPTConfig = field(default_factory=GPTConfig)

    def noisy(self, limit: float = 1.5) -> bool:
        """Did repeated runs disagree by more than ``limit``× (another job competing for the CPU)?"""
        return any(p.spread > limit for p in self.points)

    def predicted_speedup(self, n: int) -> float:
        """The time model: Σ full-pass times of the uncached loop ÷ (prefill + (n − 1) cached steps)."""
        p = self.prompt_len
        uncached = sum(self.passes.full_at(min(p + t, self.config.block_size)) for t in range(n))
        return uncached / (self.passes.full_at(p) + (n - 1) * self.passes.step)

    def explanation(self) -> dict:
        """The measured numbers behind the sentence that explains the gap (for the largest N)."""
        last = self.points[-1]
        n_full = min(self.prompt_len + last.n - 1, self.config.block_size)
        full_s = self.passes.full_at(n_full)
        step_flops = pass_flops(self.config, 1, self.passes.step_context - 1).total
        full_flops = pass_flops(self.config, n_full, 0).total
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
    top = min(max_n, max_cached_new_tokens(model, prompt_len), GPT_MAX_SWEEP_TOKENS)
    ns, n = [], 8
    while n < top:
        ns.append(n)
        n *= 2
    return ns + [top]


@torch.inference_mode()
def measure_passes(model: GPT, prompt_ids: Sequence[int], repeats: int = 3,
                   lengths: Sequence[int] = (8, 32, 64, 128, 192, 256)) -> PassTimes:
    """Time single passes of the loops' own forward (LeanGPT): full passes at several lengths, and
    one decode step at a mid-size context."""
    lean = lean_gpt(model)
    block, vocab = model.config.block_size, model.config.vocab_size
    base = torch.tensor(list(prompt_ids), dtype=torch.long)
    full = {}
    for n in sorted({min(n, block) for n in lengths} | {len(prompt_ids)}):
        idx = (base.repeat(n // len(base) + 1)[:n] % vocab).unsqueeze(0)               # [1, n]
        lean(idx)                                                                        # warm-up
        full[n] = _best_time(lambda: lean(idx), repeats)
    context = min(128, block)
    cache = StaticKVCache(model, context + repeats)
    lean(base.repeat(context // len(base) + 1)[:context - 1].unsqueeze(0), cache, 0)   # prefill context − 1
    tok = base[:1].unsqueeze(0)
    times = []
    for i in range(repeats + 1):                                                         # the first is a warm-up
        t0 = time.perf_counter()
        lean(tok, cache, context - 1 + i)
        times.append(time.perf_counter() - t0)
    return PassTimes(full, min(times[1:]), context)


def measure_point(model: GPT, prompt_ids: Sequence[int], n: int, rule: SelectionRule | None = None,
                  seed: int = 0, repeats: int = 1) -> SweepPoint:
    """Best of ``repeats`` runs of each loop, interleaved so both meet the same load. Noise on a
    shared machine only ever adds time, so the fastest run is the best estimate of the cost."""
    cfg = model.config
    uncached, cached = [], []
    for _ in range(repeats):
        uncached.append(generate(model, prompt_ids, n, rule, seed, keep_logits=False))
        cached.append(generate_cached(model, prompt_ids, n, rule, seed, keep_logits=False))
    p = len(prompt_ids)
    spread = max(max(g.seconds for g in runs) / min(g.seconds for g in runs) for runs in (uncached, cached))
    return SweepPoint(n, min(g.seconds for g in uncached), min(g.seconds for g in cached),
                      generation_flops(cfg, p, n, False).total, generation_flops(cfg, p, n, True).total,
                      all(a.tokens == b.tokens for a, b in zip(uncached, cached)), spread)


def measure_sweep(model: GPT, prompt_ids: Sequence[int], ns: Sequence[int], rule: SelectionRule | None = None,
                  seed: int = 0, repeats: int = 1,
                  progress: Callable[[float, str], None] | None = None) -> Sweep:
    """Time generate and generate_cached for every N in ``ns``, then single passes; ``progress(frac, label)``."""
    repeats = check_int("Repeats", repeats, 1, 5)
    if not ns:
        raise LimitError("Give at least one token count to measure.")
    top = max_cached_new_tokens(model, len(prompt_ids))
    for n in ns:
        check_int("Tokens to time", n, 1, min(GPT_MAX_SWEEP_TOKENS, top))
    # work grows ~ with N² without the cache: weight the progress bar by it
    weights = [n * n + 8 * n for n in ns]
    done, total = 0.0, sum(weights) * 1.1
    generate_cached(model, prompt_ids, 4, keep_logits=False)       # warm-up (first-call allocations)
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
    return Sweep(len(prompt_ids), points, passes, weight_bytes(model), model.config)
