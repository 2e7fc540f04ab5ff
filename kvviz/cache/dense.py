"""The plain caches: one that grows and one preallocated.

- ``DynamicCache(n_layers)``: grows by concatenation (a new tensor per update, so older tensors
  handed out stay valid: the stepper keeps them as snapshots).
- ``StaticCache(n_layers, max_length)``: K/V preallocated on the first update from the key's shape
  and dtype, written in place; what the fast generation loops use.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from kvviz.cache.base import KV, Cache, CacheLayer
from kvviz.cache.hybrid import DynamicSlidingWindowLayer
from kvviz.limits import LimitError


class DynamicLayer(CacheLayer):
    """Grows by concatenation: every update allocates the longer K and V."""

    is_croppable = True

    def __init__(self) -> None:
        self.keys = self.values = None

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        if self.keys is None:
            self.keys, self.values = key.detach().clone(), value.detach().clone()
        else:
            self.keys = torch.cat([self.keys, key.detach()], dim=-2)
            self.values = torch.cat([self.values, value.detach()], dim=-2)
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def crop(self, max_length: int) -> None:
        if self.keys is not None and max_length < self.get_seq_length():
            # clone: a slice would keep the dropped rows' storage alive
            self.keys = self.keys[..., :max_length, :].clone()
            self.values = self.values[..., :max_length, :].clone()

    def reset(self) -> None:
        self.keys = self.values = None

    def kv(self) -> KV | None:
        return None if self.keys is None else (self.keys, self.values)


class StaticLayer(CacheLayer):
    """``[batch, kv_heads, max_length, head_dim]`` allocated once; updates write in place. ``update``
    returns views of the rows written so far (not the whole preallocated tensor, as transformers'
    StaticLayer does), so attention needs no mask for the unwritten rows."""

    is_croppable = True
    supports_early_init = True      # transformers' early_initialization may allocate it

    def __init__(self, max_length: int) -> None:
        self.max_length = max_length
        self.keys = self.values = None
        self.length = 0

    def allocate(self, key_shape: Sequence[int], value_shape: Sequence[int], dtype: torch.dtype,
                 device: torch.device | str | None = None) -> None:
        """K ``[batch, kv_heads, max_length, head_dim]`` and V alike, zeros (``*_shape`` give batch,
        heads and head size; their seq entry is ignored)."""
        b, h, _, d = key_shape
        self.keys = torch.zeros(b, h, self.max_length, d, dtype=dtype, device=device)
        self.values = torch.zeros(value_shape[0], value_shape[1], self.max_length, value_shape[-1],
                                  dtype=dtype, device=device)

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        if self.keys is None:   # allocate from the first key: batch, heads, head size and dtype
            self.allocate(key.shape, value.shape, key.dtype, key.device)
        start, end = self.length, self.length + key.shape[-2]
        if end > self.max_length:
            raise LimitError(f"The cache holds {self.max_length} positions; position {end - 1} does not fit.")
        self.keys.narrow(-2, start, end - start).copy_(key)      # narrow: a view, cheaper than [..., a:b, :]
        self.values.narrow(-2, start, end - start).copy_(value)
        self.length = end
        return self.keys.narrow(-2, 0, end), self.values.narrow(-2, 0, end)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        if self.keys is None:
            self.allocate(key_states.shape, value_states.shape, key_states.dtype, key_states.device)

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return self.max_length

    def crop(self, max_length: int) -> None:
        self.length = min(self.length, max(0, max_length))   # the rows stay allocated

    def reset(self) -> None:
        self.length = 0

    def kv(self) -> KV | None:
        if self.keys is None:
            return None
        return self.keys.narrow(-2, 0, self.length), self.values.narrow(-2, 0, self.length)

    def snapshot_kv(self) -> KV | None:
        kv = self.kv()          # views of the preallocated tensors: later writes would change them
        return None if kv is None else (kv[0].clone(), kv[1].clone())


class DynamicCache(Cache):
    """A cache that grows with every update (the stepper's cache).

    ``windows``: per layer, None (a global layer) or the sliding window of a sliding-attention layer,
    which keeps only the last ``window − 1`` positions (kvviz.cache.hybrid; ``layer_windows(config)``
    reads them from a transformers config, as its ``DynamicCache(config=...)`` does)."""

    def __init__(self, n_layers: int, windows: Sequence[int | None] | None = None) -> None:
        windows = [None] * n_layers if windows is None else list(windows)
        if len(windows) != n_layers:
            raise ValueError(f"{len(windows)} windows for {n_layers} layers")
        super().__init__([DynamicLayer() if w is None else DynamicSlidingWindowLayer(w) for w in windows])


class StaticCache(Cache):
    """A preallocated cache of ``max_length`` positions per layer (the fast loops' cache).

    Allocated on the first update from the key's shape, or up front with ``allocate``."""

    def __init__(self, n_layers: int, max_length: int) -> None:
        super().__init__([StaticLayer(max_length) for _ in range(n_layers)])
        self.max_length = max_length

    def allocate(self, batch: int, kv_heads: int, head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> StaticCache:
        """Allocate every layer now (so a timed loop never pays for it); returns self."""
        for layer in self.layers:
            layer.allocate((batch, kv_heads, 0, head_dim), (batch, kv_heads, 0, head_dim), dtype, device)
        return self
