"""The scheduler's one seam to the paged cache, after vLLM's ``KVCacheManager``: it answers what the
scheduler needs (free blocks, what a prompt or a decode step would take, which rows the next pass
runs) and reports the blocks for the records, so the scheduler never reads the cache's tables,
reference counts or prefix names itself. Below it: kvviz.cache's PagedCache (tensors, block tables)
on its BlockPool (free list, reference counts, prefix names)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import PagedCache
from kvviz.serving.records import BlockState, Memory


@dataclass(frozen=True)
class PromptBlocks:
    """What admitting a prompt takes from the pool.

    hits     full blocks of its beginning already cached (attached, not computed)
    revived  of those, blocks on the free list (still named): attaching takes them off it
    fresh    blocks its prefill writes into (the rest of the prompt)"""

    hits: int
    revived: int
    fresh: int

    @property
    def taken(self) -> int:
        """Free blocks the admission uses up: the fresh ones and the revived cached ones."""
        return self.fresh + self.revived


class KVCacheManager:
    """One paged cache of ``num_blocks`` blocks of ``block_size`` positions, per request id."""

    def __init__(self, n_layers: int, block_size: int, num_blocks: int) -> None:
        self.cache = PagedCache(n_layers, block_size, num_blocks)     # what the model's pass writes and reads
        self.block_size = self.cache.block_size

    @property
    def num_free_blocks(self) -> int:
        return self.cache.num_free_blocks

    def blocks_to_grow(self, seq_ids: Sequence[int], n_new: int = 1) -> int:
        """Free blocks a write of ``n_new`` positions to every one of ``seq_ids`` takes (a new block
        when the last one is full, a copy when it is shared)."""
        return sum(self.cache.blocks_needed(s, n_new) for s in seq_ids)

    def prompt_blocks(self, token_ids: Sequence[int], prefix_caching: bool, mode: str = "hash") -> PromptBlocks:
        """What a prompt of ``token_ids`` takes if admitted now (nothing is attached yet). ``mode``:
        "hash" shares named full blocks; "radix" shares to the token, a partly matched last block
        copied on its first write when someone else holds it (that copy counted as fresh)."""
        bs = self.block_size
        holders = self.cache.refcounts()
        copy = 0
        if not prefix_caching:
            hits: Sequence[int] = []
        elif mode == "radix":
            n, hits = self.cache.radix_hits(token_ids)
            copy = int(bool(n % bs) and holders[hits[-1]] > 0)
        else:
            hits = self.cache.prefix_hits(token_ids)
        revived = sum(1 for b in hits if holders[b] == 0)
        return PromptBlocks(len(hits), revived, -(-len(token_ids) // bs) - len(hits) + copy)

    def attach_prefix(self, seq_id: int, token_ids: Sequence[int], mode: str = "hash") -> int:
        """Attach the cached blocks that begin ``token_ids``; the positions they hold (not prefilled)."""
        if mode == "radix":
            return self.cache.match_radix(seq_id, token_ids)
        return self.cache.match_prefix(seq_id, token_ids)

    def name_blocks(self, seq_id: int, token_ids: Sequence[int], mode: str = "hash") -> None:
        """Name the sequence's full blocks for prefix caching (``token_ids`` from position 0); radix
        mode also keeps its cached tokens to the token."""
        self.cache.register(seq_id, token_ids)
        if mode == "radix":
            self.cache.remember(seq_id, token_ids)

    def computed(self, seq_id: int) -> int:
        """Positions of ``seq_id`` in the cache (its next pass starts there)."""
        return self.cache.seq_length(seq_id)

    def set_rows(self, seq_ids: Sequence[int], n_new: Sequence[int] | None = None) -> torch.Tensor:
        """Batch row b of the next pass is ``seq_ids[b]`` with ``n_new[b]`` new positions; the key
        mask ``[B, T]`` of what that pass reads."""
        return self.cache.set_active(seq_ids, n_new)

    def fork(self, src: int, dst: int) -> None:
        """``dst`` shares every block of ``src`` (copy-on-write when one of them writes)."""
        self.cache.fork(src, dst)

    def free(self, seq_id: int) -> None:
        """Release every block of a finished or preempted request."""
        self.cache.free_sequence(seq_id)

    def block_table(self, seq_id: int) -> tuple[int, ...]:
        return self.cache.block_table(seq_id)

    def memory(self, seq_ids: Sequence[int], max_lengths: Sequence[int]) -> Memory:
        """KV memory now, for the running ``seq_ids`` whose longest lengths are ``max_lengths``."""
        held = [b for b, n in enumerate(self.cache.refcounts()) if n > 0]
        filled = self.cache.filled()
        return Memory(slot_bytes=self.cache.slot_bytes(), used=sum(filled[b] for b in held),
                      logical=sum(self.cache.seq_length(i) for i in seq_ids),
                      paged=len(held) * self.block_size, contiguous=sum(max_lengths))

    def pool_keys(self) -> torch.Tensor | None:
        """A copy of layer 0's K pool (a record keeps it to draw the cached rows)."""
        return self.cache.pool_keys(0)

    def state(self, table_ids: Sequence[int]) -> BlockState:
        """The blocks now and what the pool did since the last call (its events are drained), with the
        block tables of ``table_ids``."""
        events = self.cache.drain_events()
        return BlockState(
            tables=tuple((i, self.cache.block_table(i)) for i in table_ids),
            refcounts=self.cache.refcounts(), filled=self.cache.filled(), cached=self.cache.named(),
            free_blocks=self.cache.free_blocks(),
            taken=tuple(e.block for e in events if e.kind in ("take", "copy")),
            freed=tuple(e.block for e in events if e.kind == "free"),
            copied=tuple((e.source, e.block) for e in events if e.kind == "copy"),   # type: ignore[misc]
            shared=tuple(e.block for e in events if e.kind == "share"))
