"""The same stream served again and again: over block sizes (what the block size does to paging's
slack) and under both batching policies."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvviz.decoding.batching import BatchModel
from kvviz.serving.records import ServeRun
from kvviz.serving.scheduler import POLICIES, serve
from kvviz.serving.workload import Request


@dataclass(frozen=True)
class SizePoint:
    """One block size in ``block_size_sweep``: peak bytes and mean waste over the steps with a pass."""

    block_size: int
    num_blocks: int
    used: int                  # peak bytes holding K/V
    paged: int                 # peak bytes in held blocks
    contiguous: int            # peak bytes under contiguous reservation
    waste_paged: float         # mean fraction of held block bytes not holding K/V (the slack)
    waste_contiguous: float    # the same for contiguous reservation
    total_steps: int
    preemptions: int


def block_size_sweep(model: BatchModel, requests: Sequence[Request], sizes: Sequence[int] = (1, 2, 4, 8, 16),
                     pool_positions: int = 256, **options) -> tuple[SizePoint, ...]:
    """The same stream served from pools of ``pool_positions`` positions cut into blocks of each
    size: what the block size does to paging's slack (only the last block of a sequence has any)."""
    out = []
    for bs in sizes:
        run = serve(model, requests, block_size=bs, num_blocks=max(1, pool_positions // bs), **options)
        busy = [s.memory for s in run.steps if s.running]
        out.append(SizePoint(bs, run.num_blocks, run.peak("used"), run.peak("paged"), run.peak("contiguous"),
                             sum(m.waste("paged") for m in busy) / len(busy),
                             sum(m.waste("contiguous") for m in busy) / len(busy),
                             run.total_steps, run.preemptions))
    return tuple(out)


def compare_policies(model: BatchModel, requests: Sequence[Request], **options) -> dict[str, ServeRun]:
    """The same stream under continuous and static batching (same pool, batch size, caching)."""
    return {p: serve(model, requests, policy=p, **options) for p in POLICIES}
