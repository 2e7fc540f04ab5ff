"""Key moments of a run, read from the engine's records: the events a lecturer jumps to (marked on
the stepper's slider; key M or the "Key moment" button goes to the next one). Pure: records and
``tr`` in, ``Payload.moment`` calls out. A page's payload builder calls the function of its record
once, after its frames (``moments.run(pl, run, tr)``)."""
from __future__ import annotations

from kvviz.ui.frames import Payload, Tr


def _first(items, test) -> int | None:
    return next((i for i, x in enumerate(items) if test(x)), None)


def run(pl: Payload, run, tr: Tr) -> None:
    """A stepper ``Run`` (kvviz.decoding.stepper): the first choice (chosen, not processed), the first
    decode (the cache read instead of recomputed) and the first row a sliding window or an eviction
    policy dropped (Gemma 3's sliding layers, the smaller caches)."""
    events = run.events
    pl.moment(_first(events, lambda e: e.phase == "choose"), tr("notice.m_choose"))
    pl.moment(_first(events, lambda e: e.phase == "decode"), tr("notice.m_decode"))
    pl.moment(_first(events, lambda e: any(r.evicted_at is not None for r in e.cache.rows)), tr("notice.m_evict"))


def compress(pl: Payload, cmp, tr: Tr) -> None:
    """A smaller cache against the full one (kvviz.compress.steps.StepComparison): the moments of its
    run, the first rows a quantized cache stored as codes, and the first choice where the two
    next-token distributions differ (KL above rounding) or their
    top tokens do."""
    run(pl, cmp.compressed, tr)
    pl.moment(_first(cmp.compressed.events, lambda e: any(r.quantized_at is not None for r in e.cache.rows)),
              tr("notice_pages.m_quant"))
    first = next((s for s in cmp.scores if s.kl > 1e-6 or not s.agree), None)
    pl.moment(first.event if first else None, tr("notice.m_differ"))


def paged(pl: Payload, serve_run, tr: Tr) -> None:
    """A served batch (kvviz.serving.records.ServeRun): the first preemption and the first finished
    request (its blocks go back to the pool)."""
    steps = serve_run.steps                               # one frame per step, in order
    pl.moment(_first(steps, lambda s: bool(s.preempted)), tr("notice.m_preempt"))
    pl.moment(_first(steps, lambda s: bool(s.finished)), tr("notice.m_finish"))


def prefix(pl: Payload, trace, tr: Tr) -> None:
    """Prefix caching two ways (kvviz.cache.radix.PrefixTrace, one frame per request): the first request
    that finds a cached beginning, and the first for which the radix tree finds more than block hashing."""
    steps = trace.steps
    pl.moment(_first(steps, lambda s: s.radix_hit > 0), tr("notice_pages.m_px_hit"))
    pl.moment(_first(steps, lambda s: s.radix_hit > s.hash_hit), tr("notice_pages.m_px_more"))


def speculative(pl: Payload, spec, steps, tr: Tr) -> None:
    """A speculative run (kvviz.speculative) stepped as ``steps`` (kvviz.ui.frames.speculative.plan: its
    ``Step`` records): the test of the first rejected proposal and the first round whose proposals
    were all accepted (its bonus token; a round without proposals is a plain step, no bonus). A
    self-drafted run (one step per round) marks the rounds."""
    rd = next((r for r in spec.rounds if r.rejected_at is not None), None)
    if rd is not None:
        kind = "test" if spec.source == "draft-model" else "round"
        i = rd.rejected_at if kind == "test" else 0
        pl.moment(_first(steps, lambda s: s.r == rd.index and s.kind == kind and s.i == i), tr("notice.m_reject"))
    rd = next((r for r in spec.rounds if r.rejected_at is None and r.gamma), None)
    if rd is not None:
        kind = "fix" if spec.source == "draft-model" else "round"
        pl.moment(_first(steps, lambda s: s.r == rd.index and s.kind == kind), tr("notice.m_bonus"))
