"""What to notice on the Paged cache page's views without a stepper (``?pg_view=stall``, ``disagg``):
one line each, built from the engine's records (kvviz.serving.stall.StallRun, the disaggregated runs'
kvviz.serving.disagg.Shipped against kvviz.cost's formula), saying what to look at and why it matters.
Pure: records and ``tr`` in, text out (the page shows it with ``step_view.notice``)."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvviz.serving.stall import StallRun, StallSetting
from kvviz.ui.app import fmt
from kvviz.ui.frames import Tr, lang_of
from kvviz.viz.paged_serving import stall_in_ms


def stall_time(run: StallRun, lang: str) -> Callable[[float], str]:
    """Seconds as the stall view writes them, in its chart's unit (kvviz.viz.paged_serving.stall_in_ms)."""
    if stall_in_ms(run):
        return lambda x: fmt.fixed(x * 1e3, 1, lang=lang) + " ms"
    return lambda x: fmt.fixed(x, 2, lang=lang) + " s"


def smoothest(run: StallRun) -> StallSetting:
    """The budget whose running requests waited least between two tokens (what the view compares)."""
    return min(run.settings[1:], key=lambda x: x.short_max_gap_s)


def stall_notice(run: StallRun, tr: Tr) -> str:
    """The gap the long prompt's whole prefill opens in the running requests' tokens, against the
    smallest a budget leaves, and what the budget costs the long prompt (its first token, in steps and
    measured); when the measurement shows no smaller gap (a busy machine), that, and that the steps
    still do."""
    lang = lang_of(tr)
    shown = stall_time(run, lang)
    whole, best = run.settings[0], smoothest(run)
    common = dict(arrive=run.arrival_step, long=run.long_tokens, gap=shown(whole.short_max_gap_s),
                  budget=best.chunk_budget, chunk_gap=shown(best.short_max_gap_s), ttft=shown(whole.long.ttft_s),
                  chunk_ttft=shown(best.long.ttft_s), ttft_steps=whole.long.ttft_steps,
                  chunk_ttft_steps=best.long.ttft_steps)
    if best.short_max_gap_s < whole.short_max_gap_s:
        return tr("notice2.stall", x=fmt.factor(whole.short_max_gap_s / max(best.short_max_gap_s, 1e-12), 1,
                                                  lang=lang), **common)
    return tr("notice2.stall_noisy", **common)


@dataclass(frozen=True)
class ShipRow:
    """One disaggregated request as the view shows it: the formula's bytes before the run, the
    shipped bytes and the tokens' check after it (None before)."""

    request: int
    prompt_tokens: int
    formula_bytes: int
    bytes_sent: int | None = None
    same_tokens: bool | None = None


def disagg_notice(rows: Sequence[ShipRow], cfg, dtype_bytes: int, tr: Tr) -> str:
    """The first request's cache by the formula 2 · layers · K/V heads · head size · bytes · tokens
    (``cfg``: a kvviz.cost shape), and, once the two processes have run, the bytes they shipped and the
    tokens against it: equal, so the cache is all a decode machine needs; or which one differs."""
    lang = lang_of(tr)
    r = rows[0]
    common = dict(r=r.request, n=r.prompt_tokens, L=cfg.n_layers, kv=cfg.n_kv_heads, hd=cfg.head_dim,
                  b=dtype_bytes, formula=r.formula_bytes,
                  human=fmt.nbytes(r.formula_bytes, lang=lang))
    if r.bytes_sent is None:
        return tr("notice2.dg_before", **common)
    if all(x.bytes_sent == x.formula_bytes and x.same_tokens for x in rows):
        return tr("notice2.dg_same", shipped=r.bytes_sent, k=len(rows), **common)
    bad = next(x for x in rows if x.bytes_sent != x.formula_bytes or not x.same_tokens)
    if bad.bytes_sent != bad.formula_bytes:
        return tr("notice2.dg_bytes_differ", bad=bad.request, shipped=bad.bytes_sent or 0,
                  expected=bad.formula_bytes, **common)
    return tr("notice2.dg_tokens_differ", bad=bad.request, **common)
