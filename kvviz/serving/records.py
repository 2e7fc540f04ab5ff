"""What a served run leaves: per step a ``StepRecord`` (who prefilled, decoded, waited, finished or was
preempted; the blocks after the step; memory during its pass), per request a ``RequestResult``, and
the whole ``ServeRun``. Frozen: pages and the CLI only read them."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from kvviz.serving.workload import Request


@dataclass(frozen=True)
class Memory:
    """KV memory during one step's pass, in positions ("slots") of every layer; × ``slot_bytes``
    (one position's K and V in every layer, measured from the pool) gives bytes.

    used         positions the running requests' blocks hold (a shared block counted once)
    logical      the running requests' cache lengths summed (what they hold without sharing)
    paged        blocks held × block size: what paging reserves
    contiguous   each running request's maximum length (prompt + new tokens − 1) summed: what a
                 system that reserves one contiguous region per request at admission holds
    """

    slot_bytes: int
    used: int
    logical: int
    paged: int
    contiguous: int

    @property
    def slack(self) -> int:
        """Reserved but empty slots under paging: only the last block of each sequence."""
        return self.paged - self.used

    def bytes(self, what: str) -> int:
        return getattr(self, what) * self.slot_bytes

    def waste(self, what: str) -> float:
        """Fraction of ``what`` ("paged" or "contiguous") reserved but not holding K/V."""
        total = getattr(self, what)
        return (total - self.used) / total if total else 0.0


@dataclass(frozen=True)
class BlockState:
    """The paged cache's blocks after a step, as a record keeps them (KVCacheManager.state).

    Per block (index = block id): ``refcounts`` holders, ``filled`` slots holding a position,
    ``cached`` named for prefix caching (a free cached block can still be shared); ``free_blocks`` in
    the order they will be taken; ``tables`` (sequence, block table) of the sequences asked for.
    What the pool did since the last state: ``taken`` / ``freed`` blocks taken from / returned to
    the free list, ``copied`` (source, copy) pairs of copy-on-write, ``shared`` blocks attached by a
    prefix hit or a fork."""

    tables: tuple[tuple[int, tuple[int, ...]], ...]
    refcounts: tuple[int, ...]
    filled: tuple[int, ...]
    cached: tuple[bool, ...]
    free_blocks: tuple[int, ...]
    taken: tuple[int, ...]
    freed: tuple[int, ...]
    copied: tuple[tuple[int, int], ...]
    shared: tuple[int, ...]


@dataclass(frozen=True)
class StepRecord:
    """One step of a run (built with ``StepRecord.of``): who prefilled, decoded, waited, finished or was
    preempted, ``blocks`` (a ``BlockState``: tables, refcounts, filled, cached, free, and what the pool
    did this step) after the step (finished requests' blocks already freed), ``memory`` during its
    pass. The block state's fields read through the record too (``step.refcounts``, ``step.taken``,
    …; ``block_tables`` is ``blocks.tables``). ``chosen``: (request, token) picked this step;
    ``contexts``: (request, tokens in its cache after the pass). ``budget`` and ``chunks``: the step's
    token budget (chunked prefill) and what filled it, (request, positions processed). ``pool_keys``:
    layer 0's K pool after the pass when the run keeps it.
    """

    step: int
    prefill: tuple[int, ...]           # prefilled this step (admitted; a recompute too)
    decode: tuple[int, ...]
    waiting: tuple[int, ...]           # arrived and not running, after admission
    finished: tuple[int, ...]
    preempted: tuple[int, ...]         # preempted at the start of this step (blocks released)
    recomputed: tuple[int, ...]        # prefilled again after a preemption (prompt + tokens so far)
    blocks: BlockState                 # the paged cache's blocks after the step
    chosen: tuple[tuple[int, str], ...]
    contexts: tuple[tuple[int, tuple[str, ...]], ...]
    memory: Memory
    prefill_saved: int                 # prompt positions not computed this step thanks to prefix hits
    max_abs_diff: float | None         # this step's rows vs their cold solo runs (check=True)
    pool_keys: torch.Tensor | None = field(default=None, repr=False)
    budget: int | None = None          # the step's token budget (chunked prefill; None: unlimited)
    chunks: tuple[tuple[int, int], ...] = ()   # (request, positions its row processed) in the pass
    seconds: float | None = None       # the pass's measured wall time (a timed run; kvviz.measure.clock)

    @classmethod
    def of(cls, step: int, blocks: BlockState, memory: Memory, *, prefill: Sequence[int] = (),
           decode: Sequence[int] = (), waiting: Sequence[int] = (), finished: Sequence[int] = (),
           preempted: Sequence[int] = (), recomputed: Sequence[int] = (), chosen: Sequence[tuple[int, str]] = (),
           contexts: Sequence[tuple[int, tuple[str, ...]]] = (), prefill_saved: int = 0,
           max_abs_diff: float | None = None, pool_keys: torch.Tensor | None = None,
           budget: int | None = None, chunks: Sequence[tuple[int, int]] = (),
           seconds: float | None = None) -> StepRecord:
        """The one way a step record is made: who did what this step, and the blocks after it."""
        return cls(step=step, prefill=tuple(prefill), decode=tuple(decode), waiting=tuple(waiting),
                   finished=tuple(finished), preempted=tuple(preempted), recomputed=tuple(recomputed),
                   blocks=blocks, chosen=tuple(chosen), contexts=tuple(contexts), memory=memory,
                   prefill_saved=prefill_saved, max_abs_diff=max_abs_diff, pool_keys=pool_keys,
                   budget=budget, chunks=tuple(chunks), seconds=seconds)

    # the block state's fields, read through the step (one copy of them: ``blocks``)
    @property
    def block_tables(self) -> tuple[tuple[int, tuple[int, ...]], ...]:
        return self.blocks.tables

    @property
    def refcounts(self) -> tuple[int, ...]:
        return self.blocks.refcounts

    @property
    def filled(self) -> tuple[int, ...]:
        return self.blocks.filled

    @property
    def cached(self) -> tuple[bool, ...]:
        return self.blocks.cached

    @property
    def free_blocks(self) -> tuple[int, ...]:
        return self.blocks.free_blocks

    @property
    def taken(self) -> tuple[int, ...]:
        return self.blocks.taken

    @property
    def freed(self) -> tuple[int, ...]:
        return self.blocks.freed

    @property
    def copied(self) -> tuple[tuple[int, int], ...]:
        return self.blocks.copied

    @property
    def shared(self) -> tuple[int, ...]:
        return self.blocks.shared

    @property
    def tables(self) -> dict[int, tuple[int, ...]]:
        return dict(self.block_tables)

    @property
    def running(self) -> tuple[int, ...]:
        return self.prefill + self.decode

    @property
    def tokens_used(self) -> int:
        """Positions this step's pass processed (at most ``budget`` under chunked prefill)."""
        return sum(n for _, n in self.chunks)

    def logical_keys(self, request_id: int) -> torch.Tensor | None:
        """Layer 0's K of a request still running after this step, read from ``pool_keys`` through
        its block table: ``[kv_heads, T, head_dim]`` in position order (None without a kept pool)."""
        table = self.tables.get(request_id)
        if self.pool_keys is None or table is None:
            return None
        k = self.pool_keys[list(table)]                                  # [blocks, H, block_size, d]
        n_blocks, heads, size, d = k.shape
        return k.permute(1, 0, 2, 3).reshape(heads, n_blocks * size, d)[:, :len(dict(self.contexts)[request_id])]


@dataclass(frozen=True)
class RequestResult:
    request: Request
    tokens: tuple[str, ...]            # generated
    admitted_step: int                 # first admission
    first_token_step: int
    finish_step: int
    preemptions: int
    prefill_saved: int                 # prompt positions taken from cached blocks (all admissions)
    blocks_saved: int                  # blocks attached instead of taken (prefix hits)
    max_abs_diff: float | None         # vs its cold solo run, over every step (check=True)
    solo_tokens: tuple[str, ...] | None = None
    token_steps: tuple[int, ...] = ()  # the step that chose each token (a recomputed one counts once)

    @property
    def id(self) -> int:
        return self.request.id

    @property
    def gaps(self) -> tuple[int, ...]:
        """Steps between consecutive tokens (inter-token gaps; 1 = a token every step)."""
        return tuple(b - a for a, b in zip(self.token_steps, self.token_steps[1:]))

    @property
    def ttft(self) -> int:
        """Time to first token in steps: from arrival to the step that chose it, inclusive."""
        return self.first_token_step - self.request.arrival_step + 1

    @property
    def tpot(self) -> float | None:
        """Steps per output token after the first (None for a one-token request)."""
        n = len(self.tokens)
        return (self.finish_step - self.first_token_step) / (n - 1) if n > 1 else None


@dataclass(frozen=True)
class ServeRun:
    model_name: str
    policy: str
    block_size: int
    num_blocks: int
    max_batch: int
    prefix_caching: bool
    requests: tuple[RequestResult, ...]
    steps: tuple[StepRecord, ...]
    tolerance: float                   # how close a row must come to its solo run (1e-4 fp32, 1e-9 fp64)
    chunk_budget: int | None = None    # tokens per step's pass (chunked prefill; None: whole prompts)

    @property
    def total_steps(self) -> int:
        return len(self.steps)

    @property
    def mean_ttft(self) -> float:
        return sum(r.ttft for r in self.requests) / len(self.requests)

    @property
    def mean_tpot(self) -> float | None:
        vals = [r.tpot for r in self.requests if r.tpot is not None]
        return sum(vals) / len(vals) if vals else None

    @property
    def preemptions(self) -> int:
        return sum(r.preemptions for r in self.requests)

    @property
    def prefill_saved(self) -> int:
        return sum(r.prefill_saved for r in self.requests)

    @property
    def blocks_saved(self) -> int:
        return sum(r.blocks_saved for r in self.requests)

    def seconds_until(self, step: int) -> float | None:
        """Measured seconds from the start of the run to the end of ``step``'s pass (a timed run)."""
        times = [s.seconds for s in self.steps[:step + 1]]
        return None if not times or None in times else float(sum(times))   # type: ignore[arg-type]

    def measured(self, r: RequestResult) -> tuple[float, tuple[float, ...]] | None:
        """A request's measured TTFT (from the start of its arrival step to the end of the pass that
        chose its first token) and inter-token gaps, in seconds (a timed run; else None)."""
        if not r.token_steps or self.seconds_until(r.token_steps[-1]) is None:
            return None
        start = self.seconds_until(r.request.arrival_step - 1) or 0.0
        ends = [self.seconds_until(t) or 0.0 for t in r.token_steps]
        return ends[0] - start, tuple(b - a for a, b in zip(ends, ends[1:]))

    def peak(self, what: str) -> int:
        """The largest ``Memory`` count ``what`` over the steps, in bytes."""
        return max((s.memory.bytes(what) for s in self.steps), default=0)
