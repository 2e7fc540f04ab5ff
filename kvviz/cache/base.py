"""The two base classes every KV cache of kvviz builds on, after Hugging Face's ``cache_utils``.

A cache is a list of layer objects; ``update(key, value, layer_idx)`` stores the new K/V of one layer
and returns the whole K/V that layer's attention must read, ``[batch, kv_heads, seq, head_dim]``.
The caches hold tensors only: which event or request wrote a row is the caller's bookkeeping (the
stepper keeps that log, kvviz.decoding.stepper).

Every kind copies what it stores: keeping views of a fused q/k/v projection would keep Q alive too
(docs/design.md §4). ``crop(max_length)`` keeps the first ``max_length`` positions (transformers 4.x
semantics; speculative decoding rolls back with it); ``nbytes()`` counts the bytes of the storages
the cache really holds, not a formula.

A cache may restrict what a query sees beyond the causal rule (a sliding window): it then returns a
mask from ``attention_mask``; the plain caches return None and attention applies the causal rule.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

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

    def snapshot_kv(self) -> KV | None:
        """``kv()`` safe to keep: a layer that writes in place hands out copies instead."""
        return self.kv()

    def held_positions(self) -> list[int]:
        """Absolute positions of the rows held now, in the order ``kv`` returns them."""
        return list(range(self.get_seq_length()))

    def quantized_positions(self) -> list[int]:
        """Positions held as quantized codes (none for a full-precision layer)."""
        return []

    def nbytes(self) -> int:
        held = [t for t in (self.keys, self.values) if t is not None]
        return storage_bytes(held) if held else 0


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
        kvs = [layer.snapshot_kv() for layer in self.layers]
        return tuple(None if kv is None else kv[0] for kv in kvs), tuple(None if kv is None else kv[1] for kv in kvs)
