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


# --- paging ---------------------------------------------------------------------------------------

def block_hash(parent: str | None, tokens: Sequence[int]) -> str:
    """The name of a full block for prefix caching (vLLM): its tokens together with the hash of all
    blocks before it, so equal tokens after different prefixes never share. sha256, not ``hash()``:
    the same names in every process (records and JSON stay reproducible)."""
    text = f"{parent or ''}|{','.join(str(int(t)) for t in tokens)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BlockEvent:
    """One action of the allocator, in the order it happened (``PagedCache.drain_events``).

    kind: "take" (a free block for new rows; ``evicted`` if it still held a cached prefix block),
    "copy" (copy-on-write: ``block`` is the new copy of ``source``), "share" (a sequence attached an
    existing block: prefix hit or fork), "release" (a holder let go, others still hold it),
    "free" (the last holder let go: back on the free list)."""

    kind: str
    block: int
    seq: int
    source: int | None = None
    evicted: bool = False


class PoolExhausted(LimitError):
    """The write needs more free blocks than the pool has (a scheduler preempts before this)."""


class _Sequence:
    """One sequence's view of the pool: its block table and its length in every layer."""

    def __init__(self, n_layers: int) -> None:
        self.blocks: list[int] = []          # block table: logical block i -> physical block
        self.lengths = [0] * n_layers        # positions written per layer (layer 0 runs ahead in a pass)
        self.hashes: list[str] = []          # prefix-cache names of its first full blocks


class PagedLayer(CacheLayer):
    """One layer's pool: K ``[num_blocks, kv_heads, block_size, head_dim]`` and V alike. The block
    tables live in the PagedCache: one table addresses the same block in every layer's pool."""

    def __init__(self, owner: "PagedCache", layer_idx: int) -> None:
        self.owner, self.layer_idx = owner, layer_idx
        self.keys = self.values = None

    def allocate(self, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device | str | None = None,
                 v_heads: int | None = None, v_dim: int | None = None) -> None:
        n, bs = self.owner.num_blocks, self.owner.block_size
        self.keys = torch.zeros(n, kv_heads, bs, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros(n, v_heads or kv_heads, bs, v_dim or head_dim, dtype=dtype, device=device)

    def update(self, key: torch.Tensor, value: torch.Tensor) -> KV:
        return self.owner.update(key, value, self.layer_idx)

    def get_seq_length(self) -> int:
        return self.owner.get_seq_length(self.layer_idx)

    def crop(self, max_length: int) -> None:
        self.owner.crop(max_length)

    def reset(self) -> None:
        self.owner.reset()

    def kv(self) -> KV | None:
        return self.owner.gather(self.layer_idx)


class PagedCache(Cache):
    """K/V in fixed-size blocks of a shared pool, after vLLM's PagedAttention (Kwon et al., 2023).

    Every layer has a pool of ``num_blocks`` physical blocks ``[num_blocks, kv_heads, block_size,
    head_dim]`` (allocated from the first key's shape and dtype, or with ``allocate``); each sequence
    has a block table (logical block i → physical block) that is the same for every layer. A block
    is taken from the free list when a sequence's last block is full, and counted: a reference count
    per block says how many sequences hold it, so sequences can share blocks (a common prefix, a
    fork) and a block returns to the free list when its last holder lets go.

    **Which sequence is batch row b.** ``update(key, value, layer_idx)`` stays the interface the
    network calls; ``set_active(seq_ids, n_new)`` says beforehand that row b of the next passes is
    sequence ``seq_ids[b]`` and that the last ``n_new[b]`` of the N new columns are real (the rest is
    left padding, never written). Without ``set_active`` the cache serves one sequence, id 0, so the
    stepper and the fast loops run it like any other cache. ``update`` returns every active
    sequence's K/V gathered through its block table into ``[batch, kv_heads, T, head_dim]``, each row
    right-aligned (T = the longest; the new columns are the last N of every row), which is the layout
    ``models.base.allowed_keys`` expects: ``set_active`` returns the matching key mask ``[B, T]``.

    Prefix caching (``match_prefix`` / ``register``, vLLM): only full blocks are shared; a block is
    named by ``block_hash`` of its tokens and of everything before it. A freed block keeps its
    name until it is taken again for new rows, so a later request (or a preempted one, recomputing)
    can still find it; the free list hands out the longest-free blocks first.
    """

    def __init__(self, n_layers: int, block_size: int, num_blocks: int) -> None:
        self.block_size = check_int("Block size", block_size, 1, MAX_PAGED_BLOCK_SIZE)
        self.num_blocks = check_int("Number of blocks", num_blocks, 1, MAX_PAGED_BLOCKS)
        if self.block_size * self.num_blocks > MAX_PAGED_SLOTS:
            raise LimitError(f"{num_blocks} blocks of {block_size} positions make {num_blocks * block_size:,} "
                             f"positions; the limit is {MAX_PAGED_SLOTS:,}.")
        super().__init__([PagedLayer(self, i) for i in range(n_layers)])
        self.reset()

    # -- the allocator ------------------------------------------------------------------------

    def reset(self) -> None:
        """Every sequence gone, every block free and unnamed (the pool stays allocated)."""
        self.refcount = [0] * self.num_blocks
        self._free: dict[int, None] = dict.fromkeys(range(self.num_blocks))   # an ordered set: oldest first
        self.hash_of: list[str | None] = [None] * self.num_blocks
        self.cached: dict[str, int] = {}     # prefix-cache name -> block
        self.seqs: dict[int, _Sequence] = {}
        self.active: tuple[int, ...] = (0,)
        self._n_new: tuple[int, ...] | None = None
        self._events: list[BlockEvent] = []
        self._version = 0                    # bumped whenever a block table changes
        self._plan: tuple | None = None

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def free_blocks(self) -> tuple[int, ...]:
        """Free block ids, in the order they will be taken."""
        return tuple(self._free)

    def _seq(self, seq_id: int) -> _Sequence:
        if seq_id not in self.seqs:
            self.seqs[seq_id] = _Sequence(len(self.layers))
        return self.seqs[seq_id]

    def _take(self, seq_id: int) -> int:
        if not self._free:
            raise PoolExhausted(f"All {self.num_blocks} blocks are in use.")
        block = next(iter(self._free))
        del self._free[block]
        name = self.hash_of[block]
        if name is not None:                 # new rows overwrite a cached prefix block: forget it
            del self.cached[name]
            self.hash_of[block] = None
        self.refcount[block] = 1
        self._version += 1
        self._events.append(BlockEvent("take", block, seq_id, evicted=name is not None))
        return block

    def _hold(self, block: int, seq_id: int) -> None:
        if self.refcount[block] == 0:        # a cached block on the free list comes back
            del self._free[block]
        self.refcount[block] += 1
        self._events.append(BlockEvent("share", block, seq_id))

    def _release(self, block: int, seq_id: int) -> None:
        self.refcount[block] -= 1
        if self.refcount[block] == 0:
            self._free[block] = None
            self._events.append(BlockEvent("free", block, seq_id))
        else:
            self._events.append(BlockEvent("release", block, seq_id))
        self._version += 1

    def drain_events(self) -> tuple[BlockEvent, ...]:
        """The allocator's actions since the last call (a scheduler records them per step)."""
        out, self._events = tuple(self._events), []
        return out

    # -- sequences ----------------------------------------------------------------------------

    def set_active(self, seq_ids: Sequence[int], n_new: Sequence[int] | None = None) -> torch.Tensor:
        """Row b of the next passes is sequence ``seq_ids[b]`` (a new id starts an empty sequence);
        of the N new columns of each pass, the last ``n_new[b]`` are real (None: all N). Returns the
        key mask ``[B, T]`` of the K/V those passes read (True = a real position of that row)."""
        ids = tuple(int(s) for s in seq_ids)
        if not ids or len(set(ids)) != len(ids):
            raise ValueError(f"active sequences must be distinct and at least one, got {ids}")
        if n_new is not None and (len(n_new) != len(ids) or min(n_new) < 0):
            raise ValueError(f"n_new must give a count ≥ 0 per sequence, got {list(n_new)}")
        self.active = ids
        self._n_new = None if n_new is None else tuple(int(n) for n in n_new)
        total = [self._seq(s).lengths[0] + (0 if n_new is None else n) for s, n in zip(ids, n_new or [0] * len(ids))]
        width = max(total)
        return torch.arange(width).unsqueeze(0) >= torch.tensor([width - t for t in total]).unsqueeze(1)

    def block_table(self, seq_id: int) -> tuple[int, ...]:
        return tuple(self.seqs[seq_id].blocks) if seq_id in self.seqs else ()

    def seq_length(self, seq_id: int, layer_idx: int = 0) -> int:
        return self.seqs[seq_id].lengths[layer_idx] if seq_id in self.seqs else 0

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Positions of the longest active sequence in layer ``layer_idx`` (the T ``update`` returns
        before the next write)."""
        return max(self.seq_length(s, layer_idx) for s in self.active)

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` positions of every active sequence; blocks past them are
        released. A kept block that is now partly filled is written in place next time only if no one
        else holds it (else the write copies it first), and it loses its prefix-cache name."""
        for s in self.active:
            self.crop_sequence(s, max_length)

    def crop_sequence(self, seq_id: int, max_length: int) -> None:
        seq = self._seq(seq_id)
        keep = max(0, max_length)
        seq.lengths = [min(n, keep) for n in seq.lengths]
        n_blocks = -(-max(seq.lengths) // self.block_size)
        for block in seq.blocks[n_blocks:]:
            self._release(block, seq_id)
        del seq.blocks[n_blocks:]
        full = min(seq.lengths) // self.block_size
        del seq.hashes[full:]
        if full < n_blocks:                  # the last kept block is partial now: its name no longer fits
            last = seq.blocks[-1]
            name = self.hash_of[last]
            if name is not None and self.refcount[last] == 1:
                del self.cached[name]
                self.hash_of[last] = None
        self._version += 1

    def free_sequence(self, seq_id: int) -> None:
        """Release every block of ``seq_id`` and forget it (a finished or preempted request)."""
        if seq_id in self.seqs:
            for block in self.seqs.pop(seq_id).blocks:
                self._release(block, seq_id)

    def fork(self, src: int, dst: int) -> None:
        """``dst`` becomes a copy of ``src`` that shares all its blocks (parallel sampling, beam
        search): no K/V is copied until one of them writes into a shared, partly filled block."""
        if dst in self.seqs and self.seqs[dst].blocks:
            raise ValueError(f"sequence {dst} is not empty")
        a, b = self._seq(src), self._seq(dst)
        for block in a.blocks:
            self._hold(block, dst)
        b.blocks, b.lengths, b.hashes = list(a.blocks), list(a.lengths), list(a.hashes)
        self._version += 1

    # -- prefix caching -----------------------------------------------------------------------

    def prefix_hits(self, token_ids: Sequence[int]) -> list[int]:
        """Cached blocks that hold the first full blocks of ``token_ids``, in order (nothing is
        attached). At most ``len - 1`` tokens can hit: the last prompt token must be computed to get
        the logits of the next one (vLLM recomputes a fully cached prompt's last block too)."""
        hits: list[int] = []
        parent = None
        bs = self.block_size
        for i in range((len(token_ids) - 1) // bs):
            parent = block_hash(parent, token_ids[i * bs:(i + 1) * bs])
            block = self.cached.get(parent)
            if block is None:
                break
            hits.append(block)
        return hits

    def match_prefix(self, seq_id: int, token_ids: Sequence[int]) -> int:
        """Attach the cached blocks that begin ``token_ids`` to the empty sequence ``seq_id``;
        returns the positions they hold (the prefill positions saved)."""
        seq = self._seq(seq_id)
        if seq.blocks:
            raise ValueError(f"sequence {seq_id} is not empty")
        for block in self.prefix_hits(token_ids):
            self._hold(block, seq_id)
            seq.blocks.append(block)
            seq.hashes.append(self.hash_of[block])       # type: ignore[arg-type]
        n = len(seq.blocks) * self.block_size
        seq.lengths = [n] * len(self.layers)
        self._version += 1
        return n

    def register(self, seq_id: int, token_ids: Sequence[int]) -> None:
        """Name the full blocks of ``seq_id`` (every layer written) by their tokens, so later
        prompts that begin the same way can share them. ``token_ids``: the sequence's tokens from
        position 0 (at least its cached ones)."""
        seq, bs = self.seqs[seq_id], self.block_size
        full = min(min(seq.lengths), len(token_ids)) // bs
        for i in range(len(seq.hashes), full):
            name = block_hash(seq.hashes[-1] if i else None, token_ids[i * bs:(i + 1) * bs])
            seq.hashes.append(name)
            block = seq.blocks[i]
            if self.hash_of[block] is None and name not in self.cached:   # the first block with these tokens
                self.hash_of[block] = name
                self.cached[name] = block

    # -- writing and reading ------------------------------------------------------------------

    def blocks_needed(self, seq_id: int, n_new: int) -> int:
        """Free blocks a write of ``n_new`` positions to ``seq_id`` would take (new blocks, and a
        copy if its last block is shared and partly filled)."""
        seq = self.seqs.get(seq_id)
        start = 0 if seq is None else seq.lengths[0]
        have = 0 if seq is None else len(seq.blocks)
        need = max(0, -(-(start + n_new) // self.block_size) - have)
        i = start // self.block_size
        if n_new > 0 and seq is not None and i < have and self.refcount[seq.blocks[i]] > 1:
            need += 1
        return need

    def _ensure_blocks(self, layer_idx: int, ids: tuple[int, ...], ns: Sequence[int]) -> None:
        """Give every row the blocks its write needs: copy a shared block before writing into it,
        take a new block when the last one is full. Nothing changes if the pool is too small."""
        bs = self.block_size
        plans = []
        for s, n in zip(ids, ns):
            seq = self._seq(s)
            start = seq.lengths[layer_idx]
            if n == 0:
                continue
            first, last = start // bs, (start + n - 1) // bs
            copy = [i for i in range(first, min(last + 1, len(seq.blocks))) if self.refcount[seq.blocks[i]] > 1]
            plans.append((s, seq, copy, max(0, last + 1 - len(seq.blocks))))
        need = sum(len(c) + t for _, _, c, t in plans)
        if need > self.num_free_blocks:
            raise PoolExhausted(f"This pass needs {need} free blocks; {self.num_free_blocks} of "
                                f"{self.num_blocks} are free.")
        for s, seq, copy, take in plans:
            # Copy-on-write. Prefix caching only shares full blocks, which are never written again;
            # a shared block is written only after a fork (both sequences hold the partly filled
            # last block) or a crop back into a shared block. The writer gets its own copy, in
            # every layer (the other layers' rows of this block are already there), and the other
            # holders keep the original.
            for i in copy:
                old = seq.blocks[i]
                new = self._take(s)
                for layer in self.layers:
                    if layer.keys is not None:
                        layer.keys[new].copy_(layer.keys[old])
                        layer.values[new].copy_(layer.values[old])
                taken = self._events[-1]
                self._events[-1] = BlockEvent("copy", new, s, source=old, evicted=taken.evicted)
                self._release(old, s)
                seq.blocks[i] = new
            for _ in range(take):
                seq.blocks.append(self._take(s))

    def _plan_for(self, layer_idx: int, ids: tuple[int, ...], ns: Sequence[int]) -> dict:
        """Where this pass writes and reads (the same for every layer of a pass, so computed once).

        When every row is equally long and has no padding (one sequence; a batch decoding in step)
        the pass reads whole blocks: ``table`` [B, blocks] and the first new position ``start``.
        Otherwise slot numbers ``block · block_size + offset``: ``rows`` [R] picks the real new
        columns from the [B·N] new columns, ``new`` [R] their slots, ``read`` [B, T] every row's
        slots, right-aligned (left padding reads slot 0 and is masked)."""
        key = (ids, tuple(self.seqs[s].lengths[layer_idx] for s in ids), tuple(ns), self._version)
        if self._plan is not None and self._plan[0] == key:
            return self._plan[1]
        bs = self.block_size
        starts = key[1]
        totals = [a + n for a, n in zip(starts, ns)]
        width, n_cols = max(totals), max(ns)
        n_tab = max(1, max(len(self.seqs[s].blocks) for s in ids))
        table = torch.tensor([self.seqs[s].blocks + [0] * (n_tab - len(self.seqs[s].blocks)) for s in ids])  # [B, nb]
        plan: dict = {"table": table, "width": width, "start": starts[0],
                      "blockwise": min(totals) == width and min(ns) == n_cols and n_tab * bs >= width}
        if not plan["blockwise"]:
            pos = torch.arange(width).unsqueeze(0) - torch.tensor([width - t for t in totals]).unsqueeze(1)  # [B, T]
            pos = pos.clamp(min=0)
            read = table.gather(1, pos // bs) * bs + pos % bs                                             # [B, T]
            if min(ns) == n_cols:            # no padding: every new column is written
                rows, new = None, read[:, width - n_cols:].flatten()
            else:
                rows = torch.tensor([b * n_cols + c for b, n in enumerate(ns) for c in range(n_cols - n, n_cols)],
                                    dtype=torch.long)
                new = torch.cat([read[b, width - n:] for b, n in enumerate(ns)])                          # [R]
            plan.update(rows=rows, new=new, read=read)
        self._plan = (key, plan)
        return plan

    def _slots(self, plan: dict, name: str, heads: int) -> torch.Tensor:
        """``plan[name]`` slots as rows of a pool viewed as [num_blocks · heads · block_size, d]:
        block b, head h, offset o is row (b · heads + h) · block_size + o. Flat, in the order of
        the new columns ``[R, H]`` ("new") or of the gathered K/V ``[B, H, T]`` ("read")."""
        memo = (name, heads)
        if memo not in plan:
            slot = plan[name]
            rows = (slot // self.block_size) * (heads * self.block_size) + slot % self.block_size
            head = torch.arange(heads) * self.block_size
            rows = rows.unsqueeze(-1) + head if name == "new" else rows.unsqueeze(1) + head.view(1, -1, 1)
            plan[memo] = rows.flatten()
        return plan[memo]

    def update(self, key: torch.Tensor, value: torch.Tensor, layer_idx: int) -> KV:
        """Write the new K/V ``[B, kv_heads, N, head_dim]`` of the active sequences into their blocks
        (taking or copying blocks as needed) and return each row's whole K/V gathered through its
        block table, ``[B, kv_heads, T, head_dim]`` (right-aligned; see the class notes)."""
        layer = self.layers[layer_idx]
        ids = self.active
        B, n_cols = key.shape[0], key.shape[-2]
        if B != len(ids):
            raise ValueError(f"{B} batch rows but {len(ids)} active sequences {ids}")
        ns = self._n_new or (n_cols,) * B
        if max(ns) > n_cols:
            raise ValueError(f"n_new {ns} exceeds the {n_cols} new columns")
        if layer.keys is None:               # the pool is sized from the first key: heads, head size, dtype
            layer.allocate(key.shape[1], key.shape[-1], key.dtype, key.device, value.shape[1], value.shape[-1])
        self._ensure_blocks(layer_idx, ids, ns)
        plan = self._plan_for(layer_idx, ids, ns)
        bs = self.block_size
        for pool, new in ((layer.keys, key), (layer.values, value)):
            heads, d = pool.shape[1], pool.shape[-1]
            if plan["blockwise"]:            # every row writes positions start.. into the same block slots
                table, pos = plan["table"], plan["start"]
                while pos < plan["width"]:
                    i, off = divmod(pos, bs)
                    n = min(bs - off, plan["width"] - pos)
                    col = pos - plan["start"]
                    pool[table[:, i], :, off:off + n] = new[:, :, col:col + n].detach()
                    pos += n
                continue
            cols = new.detach().transpose(1, 2).reshape(B * n_cols, heads, d)        # [B·N, H, d]
            if plan["rows"] is not None:                                          # drop the left padding
                cols = cols.index_select(0, plan["rows"])
            pool.view(-1, d).index_copy_(0, self._slots(plan, "new", heads), cols.reshape(-1, d))
        for s, n in zip(ids, ns):
            self.seqs[s].lengths[layer_idx] += n
        return self._read(layer, plan)

    def _read(self, layer: PagedLayer, plan: dict) -> KV:
        """Every row's K and V through its block table → ``[B, H, T, head_dim]``: whole blocks side by
        side (then the first T positions), or slot by slot when rows differ in length."""
        out = []
        for pool in (layer.keys, layer.values):
            heads, d = pool.shape[1], pool.shape[-1]
            if plan["blockwise"]:
                table = plan["table"]
                B, nb = table.shape
                # one copy: pick the blocks along a head-first view, so each head's rows come out
                # consecutive ([H, B·nb, bs, d] → [H, B, nb·bs, d] is a view)
                kv = pool.transpose(0, 1).index_select(1, table.flatten()).view(heads, B, nb * self.block_size, d)
                kv = kv.transpose(0, 1)                                                 # [B, H, nb·bs, d]
                out.append(kv if nb * self.block_size == plan["width"] else kv[:, :, :plan["width"]])
                continue
            B, T = plan["read"].shape
            out.append(pool.view(-1, d).index_select(0, self._slots(plan, "read", heads)).view(B, heads, T, d))
        return out[0], out[1]

    def gather(self, layer_idx: int) -> KV | None:
        """The K/V the active sequences hold in layer ``layer_idx`` now (copies, right-aligned)."""
        layer = self.layers[layer_idx]
        if layer.keys is None or self.get_seq_length(layer_idx) == 0:
            return None
        for s in self.active:
            self._seq(s)
        ids = self.active
        return self._read(layer, self._plan_for(layer_idx, ids, (0,) * len(ids)))

    # -- what the pool holds ------------------------------------------------------------------

    def allocate(self, kv_heads: int, head_dim: int, dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> "PagedCache":
        """Allocate every layer's pool now; returns self."""
        for layer in self.layers:
            layer.allocate(kv_heads, head_dim, dtype, device)
        return self

    def slot_bytes(self) -> int:
        """Bytes one position takes in every layer's pools (K and V), from the tensors; 0 before
        the pools exist."""
        return self.nbytes() // (self.num_blocks * self.block_size)

    def refcounts(self) -> tuple[int, ...]:
        return tuple(self.refcount)

    def filled(self) -> tuple[int, ...]:
        """Per block, the slots holding a position of some holder (in every layer)."""
        out = [0] * self.num_blocks
        bs = self.block_size
        for seq in self.seqs.values():
            n = min(seq.lengths)
            for i, block in enumerate(seq.blocks):
                out[block] = max(out[block], min(bs, max(0, n - i * bs)))
        return tuple(out)


# --- smaller caches: a sliding window with attention sinks, quantized K/V (DESIGN.md §5) --------

def _take_rows(keys: torch.Tensor, values: torch.Tensor, rows: Sequence[int], n: int) -> KV:
    """Rows ``rows`` (indices along the seq axis, of ``n``) of K and V; all of them: the tensors themselves."""
    if len(rows) == n:
        return keys, values
    idx = torch.tensor(list(rows), dtype=torch.long, device=keys.device)
    return keys.index_select(-2, idx), values.index_select(-2, idx)   # new storages: dropped rows are freed


class SlidingWindowLayer(CacheLayer):
    """The first ``sinks`` positions and the last ``window`` positions of one layer.

    What a query at position p reads: keys at positions j ≤ p with j < sinks or j > p − window (the
    ``window`` most recent positions, itself included, plus the sinks). Rows no later query can read
    are evicted (freed). ``update`` returns every held or new row that at least one of the new
    queries reads; for a pass of several positions the cache's ``attention_mask`` then gives each
    query its own view, so a long prefill computes exactly what feeding the prompt one token at a
    time would. Positions stay absolute (learned position embeddings are added before the cache).
    """

    def __init__(self, window: int, sinks: int = 0) -> None:
        self.window, self.sinks = window, sinks
        self.keys = self.values = None
        self.positions: list[int] = []     # absolute positions of the held rows (ascending)
        self.seen = 0                      # positions processed: the next one's index
        self.returned: list[int] = []      # positions of the K/V the last update returned

    def reads(self, key_pos: int, query_pos: int) -> bool:
        """Does the query at ``query_pos`` read the key at ``key_pos``?"""
        return key_pos <= query_pos and (key_pos < self.sinks or key_pos > query_pos - self.window)

    def _kept(self, positions: Sequence[int], last: int) -> list[int]:
        """Indices of ``positions`` still readable by a query at ``last`` or later."""
        return [i for i, p in enumerate(positions) if p < self.sinks or p > last - self.window]

    def update(self, key: torch.Tensor, value: torch.Tensor) -> KV:
        start, n = self.seen, key.shape[-2]
        new = list(range(start, start + n))
        if self.keys is None:
            keys, values, held = key.detach().clone(), value.detach().clone(), new
        else:
            keys = torch.cat([self.keys, key.detach()], dim=-2)
            values = torch.cat([self.values, value.detach()], dim=-2)
            held = self.positions + new
        ret = self._kept(held, start)              # the first new query reads the fewest rows
        keys, values = _take_rows(keys, values, ret, len(held))
        self.returned = [held[i] for i in ret]
        keep = self._kept(self.returned, start + n - 1)
        self.keys, self.values = _take_rows(keys, values, keep, len(self.returned))
        self.positions = [self.returned[i] for i in keep]
        self.seen = start + n
        return keys, values

    def attention_mask(self, start_pos: int, n_new: int) -> torch.Tensor | None:
        """[n_new, T] over what the last ``update`` returned: True where query start_pos + i reads
        key j. None when that is the plain causal rule over positions 0..T-1 (nothing evicted or
        hidden yet), so such a pass runs exactly the full cache's arithmetic."""
        pos = torch.tensor(self.returned)                                  # [T]
        q = torch.arange(start_pos, start_pos + n_new).unsqueeze(1)         # [N, 1]
        allowed = (pos <= q) & ((pos < self.sinks) | (pos > q - self.window))
        if self.returned == list(range(len(self.returned))) and bool(allowed.equal(pos <= q)):
            return None
        return allowed

    def get_seq_length(self) -> int:
        return self.seen

    def held_positions(self) -> list[int]:
        return list(self.positions)

    def crop(self, max_length: int) -> None:
        """Back to the first ``max_length`` positions; refused (LimitError) when the next query (at
        position ``max_length``) would read a row the window already evicted: eviction cannot be
        undone."""
        m = max(0, max_length)
        if m >= self.seen:
            return
        need = [p for p in range(m) if self.reads(p, m)]
        missing = sorted(set(need) - set(self.positions))
        if missing:
            raise LimitError(f"The window cache already evicted position {missing[0]}; going back to "
                             f"{m} positions would need it again.")
        if m == 0:
            self.reset()
            return
        keep = [i for i, p in enumerate(self.positions) if p < m and (p < self.sinks or p > m - 1 - self.window)]
        self.keys, self.values = _take_rows(self.keys, self.values, keep, len(self.positions))
        self.positions, self.seen = [self.positions[i] for i in keep], m
        self.returned = []

    def reset(self) -> None:
        self.keys = self.values = None
        self.positions, self.returned, self.seen = [], [], 0

    def kv(self) -> KV | None:
        return None if self.keys is None else (self.keys, self.values)


class SlidingWindowCache(Cache):
    """Attention sinks plus a sliding window (Xiao et al., StreamingLLM, ICLR 2024): every layer
    keeps its first ``sinks`` positions and its last ``window`` (the current one included).

    ``get_seq_length()`` counts every position processed; ``held_positions()`` lists the rows still
    held (at most sinks + window). With window ≥ the sequence length nothing is evicted and every
    pass runs the full cache's arithmetic exactly. One sequence at a time (no batched positions)."""

    def __init__(self, n_layers: int, window: int, sinks: int = 0) -> None:
        self.window = check_int("Window", window, 1, MAX_CACHE_WINDOW)
        self.sinks = check_int("Sink tokens", sinks, 0, MAX_CACHE_SINKS)
        super().__init__([SlidingWindowLayer(self.window, self.sinks) for _ in range(n_layers)])

    def attention_mask(self, layer_idx: int, start_pos: int, n_new: int) -> torch.Tensor | None:
        return self.layers[layer_idx].attention_mask(start_pos, n_new)


@dataclass(frozen=True)
class QuantizedRows:
    """Rows ``[batch, heads, n, dim]`` as asymmetric integer codes (KIVI): per group of values a
    scale and a zero point (the group's minimum); x ≈ code · scale + zero, |error| ≤ scale / 2.

    ``axis="token"``: a group is ``group_size`` channels of one row (the last group may be shorter);
    scale/zero ``[B, H, n, ceil(dim / G)]``. ``axis="channel"``: a group is one channel over
    ``group_size`` consecutive rows (n a multiple of G); scale/zero ``[B, H, n / G, dim]``.
    ``codes`` are uint8 ``[B, H, n, ceil(dim · bits / 8)]``: one int8 code, or two int4 codes per
    byte (channel 2i in the low nibble, 2i + 1 in the high one)."""

    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    bits: int
    group_size: int
    axis: str
    dim: int

    @property
    def rows(self) -> int:
        return self.codes.shape[-2]

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.codes, self.scale, self.zero

    def step(self) -> torch.Tensor:
        """The quantization step (scale) of every element, ``[B, H, n, dim]``."""
        return self._per_element(self.scale)

    def _per_element(self, t: torch.Tensor) -> torch.Tensor:
        if self.axis == "channel":
            return t.repeat_interleave(self.group_size, dim=-2)
        return t.repeat_interleave(self.group_size, dim=-1)[..., :self.dim]

    def unpacked(self) -> torch.Tensor:
        """The integer codes, ``[B, H, n, dim]`` uint8 in 0..2^bits − 1."""
        if self.bits == 8:
            return self.codes
        lo, hi = self.codes & 0x0F, self.codes >> 4
        return torch.stack([lo, hi], dim=-1).flatten(-2)[..., :self.dim]

    def dequantize(self) -> torch.Tensor:
        return self.unpacked().to(self.scale.dtype) * self.step() + self._per_element(self.zero)

    def append(self, other: "QuantizedRows") -> "QuantizedRows":
        """These rows followed by ``other``'s (new tensors; this record stays valid)."""
        return QuantizedRows(*(torch.cat([a, b], dim=-2) for a, b in zip(self.tensors(), other.tensors())),
                             self.bits, self.group_size, self.axis, self.dim)


def quantize(x: torch.Tensor, bits: int, group_size: int, axis: str) -> QuantizedRows:
    """Asymmetric quantization of ``x`` ``[B, H, n, dim]`` in groups (see QuantizedRows):
    scale = (max − min) / (2^bits − 1), code = round((x − min) / scale); a constant group gets
    scale 0 and is restored exactly."""
    if bits not in QUANT_BITS:
        raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {bits!r}.")
    levels = 2 ** bits - 1
    B, H, n, D = x.shape
    G = group_size
    if axis == "token":
        ng = -(-D // G)
        pad = ng * G - D                      # pad with the row's last value: min and max unchanged
        xp = torch.cat([x, x[..., -1:].expand(B, H, n, pad)], dim=-1) if pad else x
        groups = xp.reshape(B, H, n, ng, G)                                 # [B, H, n, ng, G]
        lo, hi = groups.amin(-1), groups.amax(-1)                           # [B, H, n, ng]
        lo_e, scale = lo.unsqueeze(-1), ((hi - lo) / levels).unsqueeze(-1)
    elif axis == "channel":
        if n % G:
            raise ValueError(f"per-channel groups need a multiple of {G} rows, got {n}")
        groups = x.reshape(B, H, n // G, G, D)                              # [B, H, n/G, G, D]
        lo, hi = groups.amin(-2), groups.amax(-2)                           # [B, H, n/G, D]
        lo_e, scale = lo.unsqueeze(-2), ((hi - lo) / levels).unsqueeze(-2)
    else:
        raise LimitError(f"Key axis must be 'channel' or 'token', got {axis!r}.")
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.where(scale > 0, torch.round((groups - lo_e) / safe), torch.zeros_like(groups))
    codes = codes.clamp(0, levels).to(torch.uint8).reshape(B, H, n, -1)[..., :D]   # [B, H, n, D]
    if bits == 4:
        if D % 2:
            codes = torch.cat([codes, torch.zeros_like(codes[..., :1])], dim=-1)
        codes = codes[..., 0::2] | (codes[..., 1::2] << 4)                  # two codes per byte
    return QuantizedRows(codes.contiguous(), scale.squeeze(-1 if axis == "token" else -2).contiguous(),
                         lo.contiguous(), bits, G, axis, D)


class QuantizedLayer(CacheLayer):
    """One layer of a KIVI-style cache: the oldest rows as codes, the newest in full precision.

    ``keys`` / ``values`` hold the full-precision rows (the residual); ``quantized_keys`` /
    ``quantized_values`` the rest (values always per token, keys per ``key_axis``). A row leaves
    full precision once it is older than the last ``residual`` positions; with per-channel keys a
    whole group of ``group_size`` rows leaves together (so residual to residual + G − 1 rows stay
    exact). Every row is quantized once, from its original values, and both K and V of a row move
    together. A pass reads its own new rows unquantized (as an inference engine's attention reads
    the K/V it just computed): a prefill is exact, the loss shows from the first decode step on."""

    def __init__(self, bits: int, group_size: int, key_axis: str, residual: int) -> None:
        self.bits, self.group_size, self.key_axis, self.residual = bits, group_size, key_axis, residual
        self.keys = self.values = None
        self.quantized_keys: QuantizedRows | None = None
        self.quantized_values: QuantizedRows | None = None

    @property
    def n_quantized(self) -> int:
        return 0 if self.quantized_keys is None else self.quantized_keys.rows

    def quantized_target(self, total: int) -> int:
        """How many of ``total`` rows this layer holds as codes."""
        over = max(0, total - self.residual)
        return over if self.key_axis == "token" else over - over % self.group_size

    def update(self, key: torch.Tensor, value: torch.Tensor) -> KV:
        """Return what this pass reads: the rows cached before it as stored (dequantized codes,
        then the full-precision rows) followed by the pass's own new rows exactly as computed (they
        have not been through the cache yet); then store, quantizing the rows that left the
        residual window."""
        before = self.kv()
        if before is None:
            keys, values = key.detach().clone(), value.detach().clone()
            out = keys, values
        else:
            keys = torch.cat([self.keys, key.detach()], dim=-2)
            values = torch.cat([self.values, value.detach()], dim=-2)
            out = (keys, values) if self.quantized_keys is None else \
                (torch.cat([before[0], key.detach()], dim=-2), torch.cat([before[1], value.detach()], dim=-2))
        move = self.quantized_target(self.n_quantized + keys.shape[-2]) - self.n_quantized
        if move > 0:
            qk = quantize(keys[..., :move, :], self.bits, self.group_size, self.key_axis)
            qv = quantize(values[..., :move, :], self.bits, self.group_size, "token")
            self.quantized_keys = qk if self.quantized_keys is None else self.quantized_keys.append(qk)
            self.quantized_values = qv if self.quantized_values is None else self.quantized_values.append(qv)
            keys, values = keys[..., move:, :].clone(), values[..., move:, :].clone()   # free the moved rows
        self.keys, self.values = keys, values
        return out

    def kv(self) -> KV | None:
        """Dequantized rows followed by the full-precision ones (what attention reads)."""
        if self.keys is None:
            return None
        if self.quantized_keys is None:
            return self.keys, self.values
        return (torch.cat([self.quantized_keys.dequantize(), self.keys], dim=-2),
                torch.cat([self.quantized_values.dequantize(), self.values], dim=-2))  # type: ignore[union-attr]

    def get_seq_length(self) -> int:
        return 0 if self.keys is None else self.n_quantized + self.keys.shape[-2]

    def quantized_positions(self) -> list[int]:
        return list(range(self.n_quantized))

    def crop(self, max_length: int) -> None:
        """Drop positions from ``max_length`` on; refused (LimitError) when a row that would then be
        in the full-precision window is already quantized: its original values are gone."""
        m = max(0, max_length)
        if self.keys is None or m >= self.get_seq_length():
            return
        if m == 0:
            self.reset()
            return
        if m < self.n_quantized or self.quantized_target(m) != self.n_quantized:
            raise LimitError(f"The quantized cache holds positions up to {self.n_quantized - 1} as codes; "
                             f"going back to {m} positions would need some of them in full precision again.")
        keep = m - self.n_quantized
        self.keys, self.values = self.keys[..., :keep, :].clone(), self.values[..., :keep, :].clone()

    def reset(self) -> None:
        self.keys = self.values = None
        self.quantized_keys = self.quantized_values = None

    def nbytes(self) -> int:
        """Codes, scales and zero points of both K and V, and the full-precision rows."""
        held = [t for t in (self.keys, self.values) if t is not None]
        for q in (self.quantized_keys, self.quantized_values):
            if q is not None:
                held.extend(q.tensors())
        return storage_bytes(held) if held else 0


class QuantizedCache(Cache):
    """KV quantization after KIVI (Liu et al., ICML 2024): keys per channel (or per token), values
    per token, groups of ``group_size``, int8 or packed int4 codes with a scale and zero point per
    group, and the last ``residual`` positions (up to residual + G − 1 with per-channel keys) kept in
    full precision. Attention reads the dequantized rows; ``nbytes()`` counts codes, scales, zero
    points and the full-precision rows (kvviz.cost.quantized_cache_bytes gives the same number)."""

    def __init__(self, n_layers: int, bits: int = 8, group_size: int = 32, key_axis: str = "channel",
                 residual: int = 0) -> None:
        if isinstance(bits, bool) or bits not in QUANT_BITS:
            raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {bits!r}.")
        bits = int(bits)
        if key_axis not in ("channel", "token"):
            raise LimitError(f"Key axis must be 'channel' or 'token', got {key_axis!r}.")
        self.bits, self.key_axis = bits, key_axis
        self.group_size = check_int("Group size", group_size, 1, MAX_QUANT_GROUP_SIZE)
        self.residual = check_int("Residual window", residual, 0, MAX_QUANT_RESIDUAL)
        super().__init__([QuantizedLayer(bits, self.group_size, key_axis, self.residual) for _ in range(n_layers)])
