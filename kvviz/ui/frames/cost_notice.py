"""What to notice on the Cost page's tabs without a stepper (Memory, Compute, Measure, Serving; the
Batching tab's stepper has its own, kvviz/ui/frames/batching.py): one line each, from the numbers the
tab shows (kvviz.cost's reports, the measurements), saying what to look at and why it matters.
Pure: numbers and ``tr`` in, text out (the page shows it with ``step_view.notice``)."""
from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from kvviz import cost
from kvviz.ui.app import fmt
from kvviz.ui.frames import Tr, lang_of

if TYPE_CHECKING:
    from kvviz.measure.scaling import Measurements


def ratio(a: float, b: float, lang: str) -> str:
    """a ÷ b as a factor (12.3×), or — when b is 0."""
    return "—" if b == 0 else fmt.factor(a / b, 1, lang=lang)


def memory(rep: cost.MemoryReport, tr: Tr) -> str:
    """The total the shape's cache holds, per token, and what sharing K/V heads saves (GQA, MQA)."""
    lang = lang_of(tr)
    text = tr("notice.cost_memory", tokens=rep.tokens, batch=rep.batch, total=fmt.nbytes(rep.total, lang=lang),
              per_token=fmt.nbytes(rep.bytes_per_token, lang=lang))
    if rep.kind != "MHA":
        text += " " + tr("notice.cost_memory_shared", kind=rep.kind, x=fmt.sig(rep.saving_vs_mha, lang=lang))
    return text


def compute(n: int, with_cache: cost.Flops, without: cost.Flops, step_with: cost.Flops, step_without: cost.Flops,
            tr: Tr) -> str:
    """The two totals for ``n`` new tokens, and the last step alone: how much the cache saves."""
    lang = lang_of(tr)
    return tr("notice.cost_compute", n=n, x=ratio(without.total, with_cache.total, lang),
              step=ratio(step_without.total, step_with.total, lang))


def measured(res: Measurements, tr: Tr) -> str:
    """The measured batch sweep: tokens per second and the step's
    time from the smallest batch to the largest."""
    lang = lang_of(tr)
    first, last = res.batch[0], res.batch[-1]
    return tr("first.cost_measured", a=first.batch, b=last.batch,
              rise=fmt.factor(last.ms_per_step / first.ms_per_step, 2, lang=lang),
              gain=fmt.factor(last.tokens_per_s / first.tokens_per_s, 1, lang=lang))


def intensity(xs: Sequence[int], prefill: Sequence[float], decode: Sequence[float], ridge: float, context: int,
              limit: float, tr: Tr) -> str:
    """Where each line of the intensity chart meets the ridge point: from which prompt length a prefill
    is compute-bound, and whether any batch of ``xs`` lifts decode over it (its ceiling ``limit``, set by
    every sequence reading its own cache of ``context`` tokens)."""
    lang = lang_of(tr)
    p = next((x for x, v in zip(xs, prefill) if v >= ridge), None)
    d = next((x for x, v in zip(xs, decode) if v >= ridge), None)
    r = fmt.sig(ridge, lang=lang)
    head = (tr("notice2.ai_prefill", ridge=r, p=p) if p is not None
            else tr("notice2.ai_prefill_never", ridge=r, top=xs[-1]))
    tail = (tr("notice2.ai_decode", b=d, ctx=context) if d is not None
            else tr("notice2.ai_decode_never", top=fmt.integer(xs[-1], lang=lang), ctx=context,
                    d=fmt.fixed(max(decode), 1, lang=lang), limit=fmt.fixed(limit, 1, lang=lang)))
    return head + " " + tail


def serving(transfer: cost.Transfer, floor: float, tr: Tr) -> str:
    """Shipping the prompt's cache between the machines against one decode pass's time."""
    lang = lang_of(tr)
    return tr("first.cost_serving", size=fmt.nbytes(transfer.bytes, lang=lang),
              time=fmt.duration(transfer.seconds, lang=lang),
              steps=fmt.num(transfer.seconds / floor, ",.1f", lang=lang), step=fmt.duration(floor, lang=lang))
