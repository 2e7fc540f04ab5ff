"""The two base classes every KV cache of kvviz builds on, after Hugging Face's ``cache_utils``.

A cache is a list of layer objects; ``update(key, value, layer_idx)`` stores the new K/V of one layer
and returns the whole K/V that layer's attention must read, ``[batch, kv_heads, seq, head_dim]``.
The caches hold tensors only: which event or request wrote a row is the caller's bookkeeping (the
stepper keeps that log, kvviz.decoding.stepper).

Every kind copies what it stores: keeping views of a fused q/k/v projection would keep Q alive too
(docs/design.md §4). ``crop(max_length)`` keeps the first ``max_length`` positions (transformers 4.x
semantics; speculative decoding rolls back with it); ``nbytes()`` counts the bytes of the storages
the cache really holds, not a formula.

**transformers' cache interface.** The classes are transformers 5.23's own kinds of cache: a
``Cache`` is a ``transformers.cache_utils.Cache(layers=[...])`` and every layer a
``CacheLayerMixin`` (``lazy_initialization``, ``update(key_states, value_states, *args, **kwargs)``,
``get_seq_length``, ``get_mask_sizes(query_length) -> (kv_length, kv_offset)``, ``get_max_length``,
``crop``, ``reset``; ``is_sliding`` and ``is_compileable`` False), so any transformers causal LM
takes one as ``past_key_values`` (kvviz.models.hf runs SmolLM2 on them). A transformers model
calls ``update`` with its keys already rotated (RoPE) and asks ``get_mask_sizes`` before the pass
to build its causal mask. transformers 5 calls ``crop`` with a count of positions to remove, as
zero or a negative number (``crop(-2)`` drops the last two, ``crop(0)`` nothing); kvviz's own
``crop(m)`` with m ≥ 1 keeps the first m, so one method serves both (``kept_length``). An empty
cache is ``reset()``. Importing transformers' cache module costs ≈ 0.6-0.9 s on top of torch here:
no page that needs no tensors imports kvviz.cache (the home page does not).

A cache may restrict what a query sees beyond the causal rule (a sliding window): it then returns a
mask from ``attention_mask``; the plain caches return None and attention applies the causal rule.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from transformers.cache_utils import Cache as TransformersCache
from transformers.cache_utils import CacheLayerMixin

KV = tuple[torch.Tensor, torch.Tensor]


def kept_length(max_length: int, seq_length: int) -> int:
    """The positions ``crop(max_length)`` keeps of ``seq_length``: the first ``max_length`` when it
    is ≥ 1 (kvviz, transformers 4.x); zero or negative is transformers 5's count of positions to
    remove from the end (``crop(0)`` keeps everything)."""
    m = int(max_length)
    return min(m, seq_length) if m > 0 else max(0, seq_length + m)


def storage_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one storage counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


class CacheLayer(CacheLayerMixin):
    """The K/V of one layer. Subclasses implement update / get_seq_length / crop / reset.

    transformers' side of the interface has defaults here: ``lazy_initialization`` (a layer
    allocates on its first ``update``), ``get_mask_sizes`` (the rows ``update`` will return are
    positions 0 .. seq + query − 1) and ``get_max_length`` (-1: no fixed size)."""

    is_sliding = False            # transformers builds a plain causal mask (a window layer says otherwise)
    is_compileable = False        # shapes change from pass to pass: no torch.compile
    is_croppable = False          # set where crop restores exactly what was there before
    supports_early_init = False   # allocated on the first update (StaticLayer can allocate early)
    keys: torch.Tensor | None
    values: torch.Tensor | None

    @property
    def is_initialized(self) -> bool:          # transformers asks; kvviz's layers allocate in update
        return self.keys is not None

    @is_initialized.setter
    def is_initialized(self, value: bool) -> None:
        pass                                   # derived from the tensors held (see the getter)

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        """transformers' hook before the first update: nothing to do, ``update`` allocates."""

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs) -> KV:
        raise NotImplementedError

    def get_seq_length(self) -> int:
        raise NotImplementedError

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        """(kv_length, kv_offset) of the keys the next ``update`` of ``query_length`` new rows returns:
        every position from 0 (asked by transformers before the pass, for its causal mask)."""
        return self.get_seq_length() + query_length, 0

    def get_max_length(self) -> int:
        return -1

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` positions (≥ 0; ``Cache.crop`` turns transformers' negative
        counts into this)."""
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


class Cache(TransformersCache):
    """A KV cache: one layer object per transformer layer (a transformers ``Cache`` too)."""

    def __init__(self, layers: Sequence[CacheLayer]) -> None:
        super().__init__(layers=list(layers))

    def __len__(self) -> int:
        """The number of layers (as in transformers)."""
        return len(self.layers)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs) -> KV:
        """Store the new K/V ``[batch, kv_heads, new, head_dim]`` of layer ``layer_idx``; return the
        whole K/V that layer's attention reads, ``[batch, kv_heads, seq, head_dim]``. (Extra
        arguments some transformers models pass, such as RoPE's sin and cos, are not needed.)"""
        return self.layers[layer_idx].update(key_states, value_states)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Positions cached in layer ``layer_idx``."""
        return self.layers[layer_idx].get_seq_length()

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` positions of every layer, drop the rest; zero or negative:
        remove that many positions from the end (transformers 5, see ``kept_length``)."""
        for layer in self.layers:
            layer.crop(kept_length(max_length, layer.get_seq_length()))

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
