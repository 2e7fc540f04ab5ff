"""Bytes moved against arithmetic done: arithmetic intensity of prefill and decode, the time to send a
prompt's cache over a link, and the memory-bound floor of one decode step (docs/design.md §4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kvviz.cost.flops import pass_flops
from kvviz.cost.memory import cache_bytes, cache_bytes_per_token, weight_bytes
from kvviz.cost.shapes import ModelConfig
from kvviz.limits import MAX_COST_BATCH, MAX_COST_TOKENS, LimitError, check_int


@dataclass(frozen=True)
class Intensity:
    """FLOPs of one pass over the bytes it must move (weights once, plus the cache it reads/writes)."""

    flops: int
    bytes_moved: int

    @property
    def flops_per_byte(self) -> float:
        return self.flops / self.bytes_moved


def prefill_intensity(cfg: ModelConfig, prompt_len: int, batch: int, dtype: str = "fp16") -> Intensity:
    """A prefill of ``batch`` prompts of ``prompt_len`` tokens: read the weights, write the cache."""
    prompt_len = check_int("Prompt length", prompt_len, 1, MAX_COST_TOKENS)
    batch = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    f = pass_flops(cfg, prompt_len, 0).scaled(batch).total
    moved = weight_bytes(cfg, dtype) + batch * prompt_len * cache_bytes_per_token(cfg, dtype)
    return Intensity(f, moved)


def decode_intensity(cfg: ModelConfig, context: int, batch: int, dtype: str = "fp16") -> Intensity:
    """One decode step for ``batch`` sequences at ``context`` tokens: read the weights and every
    sequence's cache, compute one new position each."""
    context = check_int("Context", context, 1, MAX_COST_TOKENS)
    batch = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    f = pass_flops(cfg, 1, context - 1).scaled(batch).total
    moved = weight_bytes(cfg, dtype) + batch * context * cache_bytes_per_token(cfg, dtype)
    return Intensity(f, moved)


def decode_intensity_limit(cfg: ModelConfig, context: int, dtype: str = "fp16") -> float:
    """What decode intensity tends to as the batch grows: each sequence's own FLOPs over its own
    cache bytes (the shared weights stop mattering)."""
    context = check_int("Context", context, 1, MAX_COST_TOKENS)
    return pass_flops(cfg, 1, context - 1).total / (context * cache_bytes_per_token(cfg, dtype))


@dataclass(frozen=True)
class Transfer:
    """Sending a prefilled cache from a prefill machine to a decode machine."""

    bytes: int
    seconds: float
    per_layer_bytes: int


def cache_transfer(cfg: ModelConfig, prompt_len: object, batch: object, dtype: str,
                   link_gbit_s: object) -> Transfer:
    """Bytes of the prompt's cache and the time to send it over a link of ``link_gbit_s`` Gbit/s."""
    try:
        speed = float(link_gbit_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LimitError(f"Link speed must be a number, got {link_gbit_s!r}.") from None
    if not math.isfinite(speed) or not 0.001 <= speed <= 1_000_000:
        raise LimitError(f"Link speed must be between 0.001 and 1,000,000 Gbit/s, got {link_gbit_s}.")
    total = cache_bytes(cfg, prompt_len, batch, dtype)
    return Transfer(total, total * 8 / (speed * 1e9), total // cfg.n_layers)


def decode_step_floor(cfg: ModelConfig, context: int, batch: int, dtype: str,
                      bandwidth_tb_s: object) -> float:
    """Seconds one decode step needs at least just to read the weights and every sequence's cache
    once at ``bandwidth_tb_s`` TB/s (the memory-bound floor; arithmetic is ignored)."""
    try:
        bw = float(bandwidth_tb_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LimitError(f"Memory bandwidth must be a number, got {bandwidth_tb_s!r}.") from None
    if not math.isfinite(bw) or not 0.001 <= bw <= 1_000:
        raise LimitError(f"Memory bandwidth must be between 0.001 and 1,000 TB/s, got {bandwidth_tb_s}.")
    moved = weight_bytes(cfg, dtype) + cache_bytes(cfg, context, batch, dtype)
    return moved / (bw * 1e12)
