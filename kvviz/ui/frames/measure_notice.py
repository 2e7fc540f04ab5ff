"""What to notice in the measured results shown after a button press: the Speculative decoding page's
draft-model table (kvviz.speculative.SpeedMeasurement) and self-drafted speed-up chart
(SelfSpeedMeasurement), and the Smaller caches page's trade-off of variants (kvviz.compress.Evaluation,
for every model and the policies at equal bytes). One line each, from the record the view shows,
saying what to look at and why it matters. Pure: records and ``tr`` in, text out (the pages show it
with ``step_view.notice``)."""
from __future__ import annotations

from collections.abc import Mapping

from kvviz.compress import Evaluation
from kvviz.speculative import SpeedMeasurement
from kvviz.speculative.measure import SelfSpeedMeasurement
from kvviz.ui.app import fmt
from kvviz.ui.frames import Tr, lang_of
from kvviz.ui.frames.compress import variant_name

# ---- Speculative decoding: the tiny GPT's draft model, γ = 1..6 ------------------------------------

def draft_notice(m: SpeedMeasurement, tr: Tr) -> str:
    """The γ whose run was fastest (its row), its measured speed-up against the formula's with v = 1
    and with the verification pass's measured cost (above the formula: noise, said so), and what makes
    the gap: the verification pass's cost v and each round's own work (the page's paragraph below the
    table says the rest: c measured against c in FLOPs)."""
    lang = lang_of(tr)
    best = max(m.points, key=lambda p: p.measured)
    common = dict(g=best.gamma, measured=fmt.factor(best.measured, 2, lang=lang),
                  expected=fmt.factor(best.expected, 2, lang=lang),
                  expected_v=fmt.factor(best.expected_with_verify, 2, lang=lang))
    key = ("draft_slower" if best.measured <= 1 else "draft_best" if best.measured <= best.expected
           else "draft_above")
    head = tr("measure_notice." + key, **common)
    why = tr("measure_notice.draft_why", g=best.gamma, v=fmt.fixed(best.verify_ms / m.target_ms, 2, lang=lang),
             other=fmt.fixed(best.run_other_ms, 3, lang=lang))
    return " ".join([head, why, tr("measure_notice.on_this_server")])


# ---- Speculative decoding: a real model drafting for itself ------------------------------------------

def self_notice(m: SelfSpeedMeasurement, method: str, cases: Mapping[str, str], tr: Tr) -> str:
    """``method``'s bars (the page's draft source; the measurement's first if it has none): the prompt
    where it pays most, its acceptance rate and tokens per verification pass there and on the other
    prompts, why a pass pays or costs, and whether its tokens are plain greedy's (the ✓ column).
    ``cases``: a prompt's name → its label on the chart."""
    lang = lang_of(tr)
    pts = [p for p in m.points if p.method == method] or [p for p in m.points if p.method == m.points[0].method]
    name = tr("specllm.w_" + pts[0].method.replace("-", "_"))

    def numbers(p) -> dict:
        accepted = (tr("measure_notice.self_no_proposal") if p.acceptance_rate is None
                    else tr("measure_notice.self_rate", rate=fmt.percent(p.acceptance_rate, 0, lang=lang)))
        return dict(case=cases.get(p.prompt, p.prompt), x=fmt.factor(p.measured, 2, lang=lang), accepted=accepted,
                    tpp=round(p.tokens_per_pass, 2))                 # a count: "1 token", "2.5 tokens"
    best = max(pts, key=lambda p: p.measured)
    parts = [tr("measure_notice.self_pays" if best.measured > 1 else "measure_notice.self_pays_not",
                method=name, **numbers(best))]
    parts += [tr("measure_notice.self_other", **numbers(p)) for p in pts if p is not best]
    parts.append(tr("measure_notice.self_why"))
    differ = [p for p in pts if not p.same_tokens]
    parts.append(tr("measure_notice.self_same", k=len(pts)) if not differ else
                 tr("measure_notice.self_differ", case=cases.get(differ[0].prompt, differ[0].prompt)))
    parts.append(tr("measure_notice.on_this_server"))
    return " ".join(parts)


# ---- Smaller caches: the trade-off of variants ---------------------------------------------------------

def tradeoff_notice(ev: Evaluation, tr: Tr) -> str:
    """The trade-off's points that matter, from the evaluation's results: the smallest cache that
    keeps the most top-1 tokens (its bytes, share of the full cache's, KL), the one whose top-1
    agreement drops most, the lossless ones at KL 0 that hold the full cache's bytes, and why both
    panels count. The full cache is the reference (the largest cache where an evaluation has none)."""
    lang = lang_of(tr)
    results = list(ev.results)
    ref = next((r for r in results if r.variant.kind == "full"), None)
    full = ref.bytes_per_token if ref is not None else max(r.bytes_per_token for r in results)
    others = [r for r in results if r is not ref]
    smaller = [r for r in others if r.bytes_per_token < full]
    num = lambda r: dict(name=variant_name(r.variant, tr), bytes=round(r.bytes_per_token),  # noqa: E731
                         pct=fmt.percent(r.bytes_per_token / full, 0, lang=lang), kl=fmt.g(r.kl_mean, lang=lang),
                         top=fmt.percent(r.top1_agreement, 1, lang=lang))
    parts = []
    if not smaller:
        parts.append(tr("measure_notice.tradeoff_none_smaller", n=len(others)))
    else:
        top = max(r.top1_agreement for r in smaller)
        keep = min((r for r in smaller if r.top1_agreement == top), key=lambda r: (r.bytes_per_token, r.kl_mean))
        parts.append(tr("measure_notice.tradeoff_keeps_all" if top == 1 else "measure_notice.tradeoff_keeps_most",
                        full=fmt.integer(round(full), lang=lang), **num(keep)))
        worst = min(smaller, key=lambda r: (r.top1_agreement, -r.kl_mean))
        if worst.top1_agreement < top:
            parts.append(tr("measure_notice.tradeoff_drops", **num(worst)))
        elif top == 1:
            parts.append(tr("measure_notice.tradeoff_no_drop"))
    zero = [r for r in others if r.kl_mean == 0]
    if zero:
        saving = [r for r in zero if r.bytes_per_token < full]
        parts.append(tr("measure_notice.tradeoff_zero_saves", **num(min(saving, key=lambda r: r.bytes_per_token)))
                     if saving else tr("measure_notice.tradeoff_zero", n=len(zero)))
    parts.append(tr("measure_notice.tradeoff_why"))
    return " ".join(parts)
