"""The paged cache's block pool, after vLLM's ``BlockPool``: which physical blocks are free, who holds
each one, and which full blocks are named for prefix caching. Bookkeeping only, no tensors (and no
torch): kvviz.cache.paged keeps the K/V and the block tables on top of it.

- a free list, oldest-freed first (a freed block keeps its prefix name until it is taken again for
  new rows, so a later request, or a preempted one recomputing, can still find it);
- a reference count per block: sequences share blocks (a common prefix, a fork), and a block returns
  to the free list when its last holder lets go;
- the prefix-cache map: a full block is named by ``block_hash`` of its tokens and of every block
  before it (vLLM's prefix caching), name → block;
- a log of ``BlockEvent``s in the order they happened (a scheduler records them per step).
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from kvviz.limits import LimitError


def block_hash(parent: str | None, tokens: Sequence[int]) -> str:
    """The name of a full block for prefix caching (vLLM): its tokens together with the hash of all
    blocks before it, so equal tokens after different prefixes never share. sha256, not ``hash()``:
    the same names in every process (records and JSON stay reproducible)."""
    text = f"{parent or ''}|{','.join(str(int(t)) for t in tokens)}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class BlockEvent:
    """One action of the allocator, in the order it happened (``BlockPool.drain_events``).

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


class BlockPool:
    """``num_blocks`` block ids with a free list, reference counts and prefix-cache names.

    ``refcount[b]`` (holders of block b) and ``hash_of[b]`` (its prefix name or None) are read by
    anyone; only the methods below change them. ``changes`` counts the takes and releases (a block
    table that reads through the pool is stale when it moved)."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.reset()

    def reset(self) -> None:
        """Every block free and unnamed."""
        self.refcount = [0] * self.num_blocks
        self._free: dict[int, None] = dict.fromkeys(range(self.num_blocks))   # an ordered set: oldest first
        self.hash_of: list[str | None] = [None] * self.num_blocks
        self._cached: dict[str, int] = {}     # prefix-cache name -> block
        self.generation = [0] * self.num_blocks   # times each block was taken: its rows are new since
        self._events: list[BlockEvent] = []
        self.changes = 0

    @property
    def num_free_blocks(self) -> int:
        return len(self._free)

    def free_blocks(self) -> tuple[int, ...]:
        """Free block ids, in the order they will be taken."""
        return tuple(self._free)

    def take(self, seq_id: int, source: int | None = None) -> int:
        """The oldest free block, now held once by ``seq_id``; a prefix name it still had is dropped
        (new rows overwrite it). ``source``: the block this one becomes a copy of (copy-on-write)."""
        if not self._free:
            raise PoolExhausted(f"All {self.num_blocks} blocks are in use.")
        block = next(iter(self._free))
        del self._free[block]
        name = self.hash_of[block]
        if name is not None:
            del self._cached[name]
            self.hash_of[block] = None
        self.refcount[block] = 1
        self.generation[block] += 1
        self.changes += 1
        kind = "take" if source is None else "copy"
        self._events.append(BlockEvent(kind, block, seq_id, source=source, evicted=name is not None))
        return block

    def hold(self, block: int, seq_id: int) -> None:
        """``seq_id`` shares ``block`` (a prefix hit or a fork); a cached block on the free list comes back."""
        if self.refcount[block] == 0:
            del self._free[block]
        self.refcount[block] += 1
        self._events.append(BlockEvent("share", block, seq_id))

    def release(self, block: int, seq_id: int) -> None:
        """``seq_id`` lets go of ``block``; the last holder puts it back on the free list (named still)."""
        self.refcount[block] -= 1
        if self.refcount[block] == 0:
            self._free[block] = None
            self._events.append(BlockEvent("free", block, seq_id))
        else:
            self._events.append(BlockEvent("release", block, seq_id))
        self.changes += 1

    def drain_events(self) -> tuple[BlockEvent, ...]:
        """The pool's actions since the last call."""
        out, self._events = tuple(self._events), []
        return out

    # -- prefix names ---------------------------------------------------------------------------

    def cached_block(self, name: str) -> int | None:
        """The block named ``name``, held or free (None: no such block)."""
        return self._cached.get(name)

    def name(self, block: int, name: str) -> None:
        """Name a full block; the first block with these tokens keeps the name."""
        if self.hash_of[block] is None and name not in self._cached:
            self.hash_of[block] = name
            self._cached[name] = block

    def overwrite(self, block: int) -> None:
        """Its one holder is about to write past what it shares of ``block``: the block's name goes
        and its generation counts up, so every earlier spelling of its rows reads as stale."""
        self.unname_if_sole(block)
        self.generation[block] += 1

    def unname_if_sole(self, block: int) -> None:
        """Drop ``block``'s name when its one holder is about to overwrite part of it (a crop into
        it); shared, it keeps the name for the others, who still read it whole."""
        name = self.hash_of[block]
        if name is not None and self.refcount[block] == 1:
            del self._cached[name]
            self.hash_of[block] = None
