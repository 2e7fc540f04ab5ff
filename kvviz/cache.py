"""Every kind of KV cache kvviz runs, after Hugging Face's ``cache_utils``.

A cache is a list of layer objects; ``update(key, value, layer_idx)`` stores the new K/V of one layer
and returns the whole K/V that layer's attention must read, ``[batch, kv_heads, seq, head_dim]``.
The caches hold tensors only: which event or request wrote a row is the caller's bookkeeping (the
stepper keeps that log, kvviz.generation).

- ``DynamicCache(n_layers)``: grows by concatenation (a new tensor per update, so older tensors
  handed out stay valid: the stepper keeps them as snapshots).
- ``StaticCache(n_layers, max_length)``: K/V preallocated on the first update from the key's shape
  and dtype, written in place; what the fast generation loops use.
- ``PagedCache(n_layers, block_size, num_blocks)``: a pool of fixed-size blocks shared by several
  sequences, each with a block table (vLLM's PagedAttention); blocks are counted, shared between
  sequences (prefix caching, forks) and copied on write. Its allocator's state (tables, reference
  counts, free list, prefix names) is the cache itself; kvviz.serving schedules requests on it.

Every kind copies what it stores: keeping views of a fused q/k/v projection would keep Q alive too
(DESIGN.md §4). ``crop(max_length)`` keeps the first ``max_length`` positions (transformers 4.x
semantics; speculative decoding rolls back with it); ``nbytes()`` counts the bytes of the storages
the cache really holds, not a formula.

A cache may restrict what a query sees beyond the causal rule (a sliding window): it then returns a
mask from ``attention_mask``; the plain caches return None and attention applies the causal rule.

Smaller caches (DESIGN.md §5; the tiny GPT's evaluation is kvviz.compress):

- ``SlidingWindowCache(n_layers, window, sinks=0)``: keeps the first ``sinks`` positions (attention
  sinks, StreamingLLM) and the last ``window``; evicted rows are freed and gone from attention.
- ``QuantizedCache(n_layers, bits, group_size, key_axis, residual)``: KIVI-style asymmetric int8 /
  packed int4 codes with per-group scales and zero points, the newest rows in full precision.

These two keep the model's absolute positions: ``get_seq_length`` counts every position processed (the
next one's index), ``held_positions`` says which rows the cache still holds (and returns from
``update``, in that order), ``quantized_positions`` which of them are stored as codes.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Sequence

import torch

from kvviz.limits import (MAX_CACHE_SINKS, MAX_CACHE_WINDOW, MAX_PAGED_BLOCK_SIZE, MAX_PAGED_BLOCKS, MAX_PAGED_SLOTS,
                          MAX_QUANT_GROUP_SIZE, MAX_QUANT_RESIDUAL, QUANT_BITS, LimitError, check_int)

KV = tuple[torch.Tensor, torch.Tensor]


def storage_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one storage counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


class CacheLayer:
    """The K/V of one layer. Subclasses implement update / get_seq_length / crop / reset."""

    keys: torch.Tensor | None
    values: torch.Tensor | None

    def update(self, key: torch.Tensor, value: torch.Tensor) -> KV:
        raise NotImplementedError

    def get_seq_length(self) -> int:
        raise NotImplementedError

    def crop(self, max_length: int) -> None:
        raise NotImplementedError

    def reset(self) -> None:
        raise NotImplementedError

    def kv(self) -> KV | None:
        """The K/V attention would read now (None before the first update)."""
        raise NotImplementedError

    def held_positions(self) -> list[int]:
        """Absolute positions of the rows held now, in the order ``kv`` returns them."""
        return list(range(self.get_seq_length()))

    def quantized_positions(self) -> list[int]:
        """Positions held as quantized codes (none for a full-precision layer)."""
        return []

    def nbytes(self) -> int:
        held = [t for t in (self.keys, self.values) if t is not None]
        return storage_bytes(held) if held else 0


class DynamicLayer(CacheLayer):
    """Grows by concatenation: every update allocates the longer K and V."""

    def __init__(self) -> None:
        self.keys = self.values = None

    def update(self, key: torch.Tensor, value: torch.Tensor) -> KV:
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
    """``[batch, kv_heads, max_length, head_dim]`` allocated once; updates write in place."""

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

    def update(self, key: torch.Tensor, value: torch.Tensor) -> KV:
        if self.keys is None:   # allocate from the first key: batch, heads, head size and dtype
            self.allocate(key.shape, value.shape, key.dtype, key.device)
        start, end = self.length, self.length + key.shape[-2]
        if end > self.max_length:
            raise LimitError(f"The cache holds {self.max_length} positions; position {end - 1} does not fit.")
        self.keys.narrow(-2, start, end - start).copy_(key)      # narrow: a view, cheaper than [..., a:b, :]
        self.values.narrow(-2, start, end - start).copy_(value)
        self.length = end
        return self.keys.narrow(-2, 0, end), self.values.narrow(-2, 0, end)

    def get_seq_length(self) -> int:
        return self.length

    def crop(self, max_length: int) -> None:
        self.length = min(self.length, max(0, max_length))   # the rows stay allocated

    def reset(self) -> None:
        self.length = 0

    def kv(self) -> KV | None:
        if self.keys is None:
            return None
        return self.keys.narrow(-2, 0, self.length), self.values.narrow(-2, 0, self.length)


class Cache:
    """A KV cache: one layer object per transformer layer."""

    def __init__(self, layers: Sequence[CacheLayer]) -> None:
        self.layers = list(layers)

    def __len__(self) -> int:
        """The number of layers (as in transformers)."""
        return len(self.layers)

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int) -> KV:
        """Store ``key``/``value`` ``[batch, kv_heads, new, head_dim]`` of layer ``layer_idx``;
        return the whole K/V that layer's attention reads, ``[batch, kv_heads, seq, head_dim]``."""
        return self.layers[layer_idx].update(key, value)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Positions cached in layer ``layer_idx``."""
        return self.layers[layer_idx].get_seq_length()

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` positions of every layer, drop the rest."""
        for layer in self.layers:
            layer.crop(max_length)

    def reset(self) -> None:
        for layer in self.layers:
            layer.reset()

    def nbytes(self) -> int:
        """Bytes of the tensors every layer holds (allocated storage, not a formula)."""
        return sum(layer.nbytes() for layer in self.layers)

    def attention_mask(self, layer_idx: int, start_pos: int, n_new: int) -> torch.Tensor | None:
        """[n_new, seq] True where the new query i (at position start_pos + i) may read key j of
        what ``update`` returned; None means the plain causal rule over positions 0..seq-1."""
        return None

    def held_positions(self, layer_idx: int = 0) -> list[int]:
        """Absolute positions of the rows layer ``layer_idx`` holds (all of 0..seq-1 unless the
        cache evicts), in the order of the K/V that ``update`` returns and ``snapshot`` keeps."""
        return self.layers[layer_idx].held_positions()

    def quantized_positions(self, layer_idx: int = 0) -> list[int]:
        """Positions layer ``layer_idx`` holds as quantized codes (dequantized for attention)."""
        return self.layers[layer_idx].quantized_positions()

    def snapshot(self) -> tuple[tuple[torch.Tensor | None, ...], tuple[torch.Tensor | None, ...]]:
        """K and V of every layer as attention reads them now, safe to keep: later updates never
        change them (a cache that writes in place hands out copies)."""
        keys, values = [], []
        for layer in self.layers:
            kv = layer.kv()
            if kv is not None and isinstance(layer, StaticLayer):
                kv = (kv[0].clone(), kv[1].clone())
            keys.append(None if kv is None else kv[0])
            values.append(None if kv is None else kv[1])
        return tuple(keys), tuple(values)


class DynamicCache(Cache):
    """A cache that grows with every update (the stepper's cache)."""

    def __init__(self, n_layers: int) -> None:
        super().__init__([DynamicLayer() for _ in range(n_layers)])


class StaticCache(Cache):
    """A preallocated cache of ``max_length`` positions per layer (the fast loops' cache).

    Allocated on the first update from the key's shape, or up front with ``allocate``."""

    def __init__(self, n_layers: int, max_length: int) -> None:
        super().__init__([StaticLayer(max_length) for _ in range(n_layers)])
        self.max_length = max_length

    def allocate(self, batch: int, kv_heads: int, head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> "StaticCache":
        """Allocate every layer now (so a timed loop never pays for it); returns self."""
        for layer in self.layers:
            layer.allocate((batch, kv_heads, 0, head_dim), (batch, kv_heads, 0, head_dim), dtype, device)
        return self


from kvviz.limits import (MAX_CACHE_SINKS, MAX_CACHE_WINDOW, MAX_PAGED_BLOCK_SIZE, MAX_PAGED_BLOCKS, MAX_PAGED_SLOTS,
                          MAX_QUANT_GROUP_SIZE, MAX_QUANT_RESIDUAL, QUANT_BITS, LimitError, check_int)
