"""A hybrid cache's bytes: global layers keep every position, sliding-window layers the last window − 1.

transformers' ``DynamicSlidingWindowLayer`` (and kvviz/cache/hybrid.py) keeps ``window − 1`` rows
after a pass: the next query's own row makes the window. Gemma 3 270M (3 global, 15 sliding layers
of window 512, 1 K/V head of 256) in float32 after T positions: 2 · 1 · 256 · 4 · (3 · T + 15 · min(T, 511))
bytes (docs/measured-gemma3.md).
"""
from __future__ import annotations

from collections.abc import Sequence


def held_positions(window: int | None, T: int) -> int:
    """Rows a layer holds after T positions: T for a global layer, min(T, window − 1) for a sliding one."""
    return T if window is None else min(T, window - 1)


def hybrid_cache_bytes(windows: Sequence[int | None], n_kv_heads: int, head_dim: int, bytes_per_value: int,
                       T: int) -> int:
    """2 · kv_heads · head_dim · bytes · Σ_layers held_positions(window, T) (K and V)."""
    return 2 * n_kv_heads * head_dim * bytes_per_value * sum(held_positions(w, T) for w in windows)


def all_global_bytes(n_layers: int, n_kv_heads: int, head_dim: int, bytes_per_value: int, T: int) -> int:
    """The same model's cache had every layer been global: 2 · L · kv_heads · head_dim · bytes · T."""
    return hybrid_cache_bytes([None] * n_layers, n_kv_heads, head_dim, bytes_per_value, T)
