"""The paged KV cache, after vLLM's PagedAttention (Kwon et al., 2023): K/V in fixed-size blocks of
one pool shared by several sequences, each with a block table.

``PagedCache(n_layers, block_size, num_blocks)`` keeps the tensors (one pool per layer), the block
tables and the plan of where a pass writes and reads; which blocks are free, shared or named for
prefix caching is its ``BlockPool`` (kvviz.cache.block_pool). Blocks are counted, shared between
sequences (prefix caching, forks) and copied on write; kvviz.serving schedules requests on it.
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from kvviz.cache.base import KV, Cache, CacheLayer, kept_length
from kvviz.cache.block_pool import BlockEvent, BlockPool, PoolExhausted, block_hash
from kvviz.limits import MAX_PAGED_BLOCK_SIZE, MAX_PAGED_BLOCKS, MAX_PAGED_SLOTS, LimitError, check_int


class _Sequence:
    """One sequence's view of the pool: its block table and its length in every layer."""

    def __init__(self, n_layers: int) -> None:
        self.blocks: list[int] = []          # block table: logical block i -> physical block
        self.lengths = [0] * n_layers        # positions written per layer (layer 0 runs ahead in a pass)
        self.hashes: list[str] = []          # prefix-cache names of its first full blocks


class PagedLayer(CacheLayer):
    """One layer's pool: K ``[num_blocks, kv_heads, block_size, head_dim]`` and V alike. The block
    tables live in the PagedCache: one table addresses the same block in every layer's pool."""

    def __init__(self, owner: PagedCache, layer_idx: int) -> None:
        self.owner, self.layer_idx = owner, layer_idx
        self.keys = self.values = None

    def allocate(self, kv_heads: int, head_dim: int, dtype: torch.dtype, device: torch.device | str | None = None,
                 v_heads: int | None = None, v_dim: int | None = None) -> None:
        n, bs = self.owner.num_blocks, self.owner.block_size
        self.keys = torch.zeros(n, kv_heads, bs, head_dim, dtype=dtype, device=device)
        self.values = torch.zeros(n, v_heads or kv_heads, bs, v_dim or head_dim, dtype=dtype, device=device)

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
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
    is taken from the pool's free list (``self.pool``, a BlockPool) when a sequence's last block is
    full, and counted: a reference count per block says how many sequences hold it, so sequences
    can share blocks (a common prefix, a fork) and a block returns to the free list when its last
    holder lets go.

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
        self.pool = BlockPool(self.num_blocks)
        self.reset()

    # -- the pool and the tables ----------------------------------------------------------------

    def reset(self) -> None:
        """Every sequence gone, every block free and unnamed (the pool stays allocated)."""
        self.pool.reset()
        self.seqs: dict[int, _Sequence] = {}
        self.active: tuple[int, ...] = (0,)
        self._n_new: tuple[int, ...] | None = None
        self._version = 0                    # bumped whenever a block table changes (with pool.changes)
        self._plan: tuple | None = None
        # token-granular prefix caching (``radix_hits``): per sequence, its cached tokens and the
        # blocks holding them with each block's generation (a block taken again holds new rows)
        self._spelled: dict[int, tuple[tuple[int, ...], tuple[tuple[int, int], ...]]] = {}

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free_blocks

    def free_blocks(self) -> tuple[int, ...]:
        """Free block ids, in the order they will be taken."""
        return self.pool.free_blocks()

    def _seq(self, seq_id: int) -> _Sequence:
        if seq_id not in self.seqs:
            self.seqs[seq_id] = _Sequence(len(self.layers))
        return self.seqs[seq_id]

    def drain_events(self) -> tuple[BlockEvent, ...]:
        """The allocator's actions since the last call (a scheduler records them per step)."""
        return self.pool.drain_events()

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
            self.crop_sequence(s, kept_length(max_length, self.seq_length(s)))

    def crop_sequence(self, seq_id: int, max_length: int) -> None:
        seq = self._seq(seq_id)
        keep = max(0, max_length)
        seq.lengths = [min(n, keep) for n in seq.lengths]
        n_blocks = -(-max(seq.lengths) // self.block_size)
        for block in seq.blocks[n_blocks:]:
            self.pool.release(block, seq_id)
        del seq.blocks[n_blocks:]
        full = min(seq.lengths) // self.block_size
        del seq.hashes[full:]
        if full < n_blocks:                  # the last kept block is partial now: its name no longer fits
            self.pool.unname_if_sole(seq.blocks[-1])
        self._version += 1

    def free_sequence(self, seq_id: int) -> None:
        """Release every block of ``seq_id`` and forget it (a finished or preempted request)."""
        if seq_id in self.seqs:
            for block in self.seqs.pop(seq_id).blocks:
                self.pool.release(block, seq_id)

    def fork(self, src: int, dst: int) -> None:
        """``dst`` becomes a copy of ``src`` that shares all its blocks (parallel sampling, beam
        search): no K/V is copied until one of them writes into a shared, partly filled block."""
        if dst in self.seqs and self.seqs[dst].blocks:
            raise ValueError(f"sequence {dst} is not empty")
        a, b = self._seq(src), self._seq(dst)
        for block in a.blocks:
            self.pool.hold(block, dst)
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
            block = self.pool.cached_block(parent)
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
            self.pool.hold(block, seq_id)
            seq.blocks.append(block)
            seq.hashes.append(self.pool.hash_of[block])  # type: ignore[arg-type]
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
            self.pool.name(seq.blocks[i], name)

    # -- token-granular prefix caching (SGLang's radix tree, over the pool's blocks) -----------

    def remember(self, seq_id: int, token_ids: Sequence[int]) -> None:
        """Keep ``seq_id``'s cached tokens and the blocks holding them, for ``radix_hits``: after the
        sequence is freed they stay findable until their blocks are taken again."""
        seq = self.seqs[seq_id]
        n = min(min(seq.lengths), len(token_ids))
        blocks = seq.blocks[:-(-n // self.block_size)]
        self._spelled[seq_id] = (tuple(int(t) for t in token_ids[:n]),
                                 tuple((b, self.pool.generation[b]) for b in blocks))

    def radix_hits(self, token_ids: Sequence[int]) -> tuple[int, tuple[int, ...]]:
        """The longest cached beginning of ``token_ids`` to the token (at most ``len - 1``: the last
        prompt token is computed) and the blocks that hold it, the last one perhaps partly: the
        radix tree's match, kept as the sequences' own blocks (nothing is attached)."""
        bs, want = self.block_size, [int(t) for t in token_ids[:len(token_ids) - 1]]
        best: tuple[int, tuple[int, ...]] = (0, ())
        for tokens, blocks in self._spelled.values():
            valid = next((i for i, (b, g) in enumerate(blocks) if self.pool.generation[b] != g), len(blocks))
            n = 0
            limit = min(len(tokens), len(want), valid * bs)
            while n < limit and tokens[n] == want[n]:
                n += 1
            if n > best[0]:
                best = (n, tuple(b for b, _ in blocks[:-(-n // bs)]))
        return best

    def match_radix(self, seq_id: int, token_ids: Sequence[int]) -> int:
        """Attach the blocks of ``radix_hits`` to the empty sequence ``seq_id``; the positions they
        hold. A partly matched last block that someone else holds is copied at once (a "copy" event);
        a free one is taken back and written in place past the match (its prefix name dropped)."""
        seq = self._seq(seq_id)
        if seq.blocks:
            raise ValueError(f"sequence {seq_id} is not empty")
        n, blocks = self.radix_hits(token_ids)
        bs = self.block_size
        partial = blocks[-1] if n % bs else None
        for b in blocks:
            if b == partial and self.pool.refcount[b] > 0:
                # someone else holds it and may write into it this very pass: copy it now, once
                new = self.pool.take(seq_id, source=b)
                for layer in self.layers:
                    if layer.keys is not None:
                        layer.keys[new].copy_(layer.keys[b])
                        layer.values[new].copy_(layer.values[b])
                seq.blocks.append(new)
                continue
            self.pool.hold(b, seq_id)
            seq.blocks.append(b)
        parent = None
        for i in range(n // bs):
            parent = block_hash(parent, token_ids[i * bs:(i + 1) * bs])
            seq.hashes.append(parent)
        if partial is not None and seq.blocks[-1] == partial:
            self.pool.overwrite(partial)                   # taken back: its slots past the match will change
        seq.lengths = [n] * len(self.layers)
        self._version += 1
        return n

    # -- writing and reading ------------------------------------------------------------------

    def blocks_needed(self, seq_id: int, n_new: int) -> int:
        """Free blocks a write of ``n_new`` positions to ``seq_id`` would take (new blocks, and a
        copy if its last block is shared and partly filled)."""
        seq = self.seqs.get(seq_id)
        start = 0 if seq is None else seq.lengths[0]
        have = 0 if seq is None else len(seq.blocks)
        need = max(0, -(-(start + n_new) // self.block_size) - have)
        i = start // self.block_size
        if n_new > 0 and seq is not None and i < have and self.pool.refcount[seq.blocks[i]] > 1:
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
            copy = [i for i in range(first, min(last + 1, len(seq.blocks))) if self.pool.refcount[seq.blocks[i]] > 1]
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
                new = self.pool.take(s, source=old)
                for layer in self.layers:
                    if layer.keys is not None:
                        layer.keys[new].copy_(layer.keys[old])
                        layer.values[new].copy_(layer.values[old])
                self.pool.release(old, s)
                seq.blocks[i] = new
            for _ in range(take):
                seq.blocks.append(self.pool.take(s))

    def _plan_for(self, layer_idx: int, ids: tuple[int, ...], ns: Sequence[int]) -> dict:
        """Where this pass writes and reads (the same for every layer of a pass, so computed once).

        When every row is equally long and has no padding (one sequence; a batch decoding in step)
        the pass reads whole blocks: ``table`` [B, blocks] and the first new position ``start``.
        Otherwise slot numbers ``block · block_size + offset``: ``rows`` [R] picks the real new
        columns from the [B·N] new columns, ``new`` [R] their slots, ``read`` [B, T] every row's
        slots, right-aligned (left padding reads slot 0 and is masked)."""
        key = (ids, tuple(self.seqs[s].lengths[layer_idx] for s in ids), tuple(ns), self._version, self.pool.changes)
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
                 device: torch.device | str | None = None) -> PagedCache:
        """Allocate every layer's pool now; returns self."""
        for layer in self.layers:
            layer.allocate(kv_heads, head_dim, dtype, device)
        return self

    def slot_bytes(self) -> int:
        """Bytes one position takes in every layer's pools (K and V), from the tensors; 0 before
        the pools exist."""
        return self.nbytes() // (self.num_blocks * self.block_size)

    def pool_keys(self, layer_idx: int = 0) -> torch.Tensor | None:
        """A copy of layer ``layer_idx``'s K pool ``[num_blocks, kv_heads, block_size, head_dim]``
        (None before the pools exist): what a record keeps to draw the rows later."""
        keys = self.layers[layer_idx].keys
        return None if keys is None else keys.clone()

    def refcounts(self) -> tuple[int, ...]:
        return tuple(self.pool.refcount)

    def named(self) -> tuple[bool, ...]:
        """Per block, whether it carries a prefix-cache name (a later prompt can share it)."""
        return tuple(h is not None for h in self.pool.hash_of)

    def filled(self) -> tuple[int, ...]:
        """Per block, the slots holding a position of some holder (in every layer)."""
        out = [0] * self.num_blocks
        bs = self.block_size
        for seq in self.seqs.values():
            n = min(seq.lengths)
            for i, block in enumerate(seq.blocks):
                out[block] = max(out[block], min(bs, max(0, n - i * bs)))
        return tuple(out)
