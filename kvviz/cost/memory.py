"""KV-cache memory and weights, in bytes (docs/design.md §4).

cache memory = 2 (K and V) · layers · KV heads · head size · bytes per value · tokens · batch; with
one KV head per query head (multi-head attention) KV heads · head size = d, the 2·L·T·d of §4.
The smaller caches (a window with sinks, quantized codes) and grouped-query sharing have their
formulas here too, each equal to what kvviz.cache's objects measure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvviz.cost.shapes import DTYPE_BITS, ModelConfig, attention_kind, check_dtype
from kvviz.limits import (
    MAX_CACHE_SINKS,
    MAX_CACHE_WINDOW,
    MAX_COST_BATCH,
    MAX_COST_TOKENS,
    MAX_QUANT_GROUP_SIZE,
    QUANT_BITS,
    LimitError,
    check_int,
)

# --- the cache -------------------------------------------------------------------------------------

def cache_bytes_per_token(cfg: ModelConfig, dtype: str = "fp16") -> int:
    """K and V of one token in every layer: 2 · L · KV heads · head size · bits / 8 (always whole;
    with a V narrower than K, L · (K width + V width) · bits / 8)."""
    return cfg.n_layers * cfg.kv_width * DTYPE_BITS[check_dtype(dtype)] // 8


def cache_bytes(cfg: ModelConfig, tokens: object, batch: object = 1, dtype: str = "fp16") -> int:
    """The whole cache of ``batch`` sequences of ``tokens`` tokens each."""
    t = check_int("Tokens", tokens, 1, MAX_COST_TOKENS)
    b = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    return cache_bytes_per_token(cfg, dtype) * t * b


def window_cache_bytes(cfg: ModelConfig, tokens: object, window: object, sinks: object = 0,
                       batch: object = 1, dtype: str = "fp16") -> int:
    """A sliding-window cache with attention sinks after ``tokens`` tokens: it holds at most
    sinks + window positions (kvviz.cache.SlidingWindowCache)."""
    t = check_int("Tokens", tokens, 1, MAX_COST_TOKENS)
    w = check_int("Window", window, 1, MAX_CACHE_WINDOW)
    s = check_int("Sink tokens", sinks, 0, MAX_CACHE_SINKS)
    return cache_bytes(cfg, min(t, w + s), batch, dtype)


def quantized_rows(tokens: int, group_size: int, key_axis: str, residual: int) -> int:
    """Of ``tokens`` cached positions, how many a KIVI-style cache holds as codes: those older than
    the last ``residual``; with per-channel keys only whole groups of ``group_size`` positions."""
    over = max(0, tokens - residual)
    return over if key_axis == "token" else over - over % group_size


def quantized_cache_bytes(cfg: ModelConfig, tokens: object, bits: object, group_size: object,
                          key_axis: str = "channel", residual: object = 0, batch: object = 1,
                          dtype: str = "fp32") -> int:
    """Bytes of a quantized cache (kvviz.cache.QuantizedCache) after ``tokens`` tokens, per layer
    and sequence (D = head size, G = group size, q quantized rows, f = tokens − q full-precision ones,
    e = bytes of ``dtype``, the type of the scales, zero points and full-precision rows):

    - codes: q · heads · ⌈D · bits / 8⌉ for K and for V (int4: two codes per byte, int2: four);
    - a scale and a zero point per group: values per token, ⌈D / G⌉ groups per row and head;
      keys per token the same, or per channel (one group per channel per G rows): q / G · D;
    - full precision: f · heads · D for K and for V.
    """
    t = check_int("Tokens", tokens, 1, MAX_COST_TOKENS)
    if isinstance(bits, bool) or bits not in QUANT_BITS:
        raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {bits!r}.")
    g = check_int("Group size", group_size, 1, MAX_QUANT_GROUP_SIZE)
    if key_axis not in ("channel", "token"):
        raise LimitError(f"Key axis must be 'channel' or 'token', got {key_axis!r}.")
    r = check_int("Residual window", residual, 0, MAX_COST_TOKENS)
    b = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    if DTYPE_BITS[check_dtype(dtype)] % 8:
        raise LimitError(f"Scales and full-precision rows need whole bytes; {dtype} has {DTYPE_BITS[dtype]} bits.")
    e = DTYPE_BITS[dtype] // 8
    k_heads, k_dim = cfg.n_kv_heads, cfg.head_dim
    v_heads = k_heads if cfg.v_heads is None else cfg.v_heads
    v_dim = k_dim if cfg.v_head_dim is None else cfg.v_head_dim
    q = quantized_rows(t, g, key_axis, r)
    f = t - q
    codes = q * (k_heads * -(-k_dim * int(bits) // 8) + v_heads * -(-v_dim * int(bits) // 8))
    k_groups = q * k_heads * -(-k_dim // g) if key_axis == "token" else q // g * k_heads * k_dim
    v_groups = q * v_heads * -(-v_dim // g)
    scales = 2 * (k_groups + v_groups) * e                  # a scale and a zero point per group
    full = f * (k_heads * k_dim + v_heads * v_dim) * e
    return cfg.n_layers * b * (codes + scales + full)


def fp8_cache_bytes(cfg: ModelConfig, tokens: object, scale: str = "tensor", batch: object = 1) -> int:
    """An FP8 (E4M3) cache (kvviz.cache.Fp8Cache) after ``tokens`` tokens: one byte per K and V
    element, plus float32 scales: one for K and one for V per layer (``"tensor"``), or per layer,
    token and K/V head (``"token"``)."""
    t = check_int("Tokens", tokens, 1, MAX_COST_TOKENS)
    b = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    if scale not in ("tensor", "token"):
        raise LimitError(f"The FP8 scale must be 'tensor' or 'token', got {scale!r}.")
    v_heads = cfg.n_kv_heads if cfg.v_heads is None else cfg.v_heads
    codes = t * cfg.kv_width
    scales = 2 * 4 if scale == "tensor" else 4 * t * (cfg.n_kv_heads + v_heads)
    return cfg.n_layers * b * (codes + scales)


@dataclass(frozen=True)
class MemoryReport:
    """One calculator result, with the same cache under multi-head and multi-query attention."""

    kind: str                 # "MHA" | "GQA" | "MQA"
    bytes_per_token: int
    total: int                # bytes for tokens × batch
    mha_total: int            # if every query head had its own K/V head
    mqa_total: int            # if all query heads shared one K/V head
    tokens: int
    batch: int
    dtype: str

    @property
    def saving_vs_mha(self) -> float:
        """How many times smaller than the multi-head cache (1.0 for multi-head itself)."""
        return self.mha_total / self.total


def memory_report(cfg: ModelConfig, tokens: object, batch: object, dtype: str) -> MemoryReport:
    total = cache_bytes(cfg, tokens, batch, dtype)
    mha = cache_bytes(replace(cfg, n_kv_heads=cfg.n_heads), tokens, batch, dtype)
    mqa = cache_bytes(replace(cfg, n_kv_heads=1), tokens, batch, dtype)
    return MemoryReport(cfg.attention_kind, cache_bytes_per_token(cfg, dtype), total, mha, mqa,
                        int(tokens), int(batch), dtype)  # type: ignore[arg-type]


def kv_sharing(cfg: ModelConfig, tokens: object, batch: object, dtype: str,
               max_bars: int = 8) -> list[tuple[int, str, int]]:
    """The same cache for every valid number of K/V heads (the divisors of the query heads), as
    (KV heads, kind, bytes), from one shared K/V head to one per query head. With many divisors
    a spread of them is kept, always including 1, the chosen count and all heads."""
    divisors = [k for k in range(1, cfg.n_heads + 1) if cfg.n_heads % k == 0]
    if len(divisors) > max_bars:
        step = (len(divisors) - 1) / (max_bars - 1)
        keep = {divisors[round(i * step)] for i in range(max_bars)} | {cfg.n_kv_heads}
        divisors = sorted(keep)
    return [(k, attention_kind(cfg.n_heads, k), cache_bytes(replace(cfg, n_kv_heads=k), tokens, batch, dtype))
            for k in divisors]


def context_grid(max_tokens: int, points: int = 40) -> list[int]:
    """Context lengths from 1 to ``max_tokens``, evenly spaced on a log axis (distinct integers)."""
    max_tokens = check_int("Tokens", max_tokens, 1, MAX_COST_TOKENS)
    if max_tokens == 1:
        return [1]
    grid = {round(math.exp(math.log(max_tokens) * i / (points - 1))) for i in range(points)}
    return sorted(grid | {1, max_tokens})


def tokens_that_fit(cfg: ModelConfig, memory_bytes: int, batch: int, dtype: str) -> int:
    """The longest context whose cache (for ``batch`` sequences) fits in ``memory_bytes``."""
    return max(0, memory_bytes // (cache_bytes_per_token(cfg, dtype) * batch))


# --- parameters ---------------------------------------------------------------------------------

def param_count(cfg: ModelConfig) -> int:
    """Parameters of the whole model (embeddings, blocks, final norm, readout)."""
    d, h, kv, hd, f = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff
    norm = {"layernorm": 2 * d, "rmsnorm": d, "none": 0}[cfg.norm]
    per_layer = cfg.norms_per_layer * norm
    if cfg.qkv_proj:
        per_layer += d * (h + 2 * kv) * hd + (h + 2 * kv) * hd * cfg.qkv_bias
    if cfg.out_proj:
        per_layer += h * hd * d + d * cfg.out_bias
    n_mlp = {"gelu": 2, "gated": 3, "none": 0}[cfg.mlp]
    per_layer += n_mlp * d * f
    if cfg.mlp_bias and n_mlp:
        per_layer += (n_mlp - 1) * f + d
    embed = cfg.vocab * d + cfg.learned_positions * d
    readout = 0 if cfg.tied_embeddings else cfg.vocab * d
    final_norm = norm if cfg.norm != "none" else 0
    return embed + cfg.n_layers * per_layer + final_norm + readout


def weight_bytes(cfg: ModelConfig, dtype: str = "fp16") -> int:
    return param_count(cfg) * DTYPE_BITS[check_dtype(dtype)] // 8
