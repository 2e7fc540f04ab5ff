"""Frames of the Smaller caches page: one prompt stepped with the full cache and a smaller one
(``kvviz.compress.StepComparison``), event by event. The layer and head are view options: one
payload per choice.

Per event: the variant's attention (the sink columns outlined for a window with sinks; a quantized
cache shows the quantization error of every cached row under it, and only that in presenter mode),
both next-token distributions side by side with KL and top-1 agreement, and the variant's cache
table with evicted rows greyed.
"""
from __future__ import annotations

from collections.abc import Sequence

from kvviz.compress import StepComparison, Variant, pass_event, row_errors, sink_mass
from kvviz.decoding.stepper import Event
from kvviz.ui.app import fmt
from kvviz.ui.app.i18n import join
from kvviz.ui.frames import Payload, Tr, lang_of, lines_block, metrics, moments, note_block, notice_block, strip_block
from kvviz.ui.frames.steps import cache_frame_table
from kvviz.viz.compress import attention_sinks_spec, next_token_pair_spec, row_error_heatmap_spec

TOP_K = 6             # tokens per distribution in the side-by-side bars (the union of both top-k)
NAMED_TOKENS = 3      # what to notice names the tokens of at most this many evicted or quantized rows


# ---------------------------------------------------------------- words

def variant_name(v: Variant, tr: Tr) -> str:
    """A variant's short name in ``tr``'s language (``Variant.label`` is the English one)."""
    if v.kind == "window":
        name = tr("compress.name_window_sinks" if v.sinks else "compress.name_window", w=v.window, s=v.sinks)
        return name + (tr("compress.name_cache_positions") if v.positions == "cache" else "")
    if v.kind == "quant":
        name = tr("compress.name_quant", bits=v.bits, axis=tr("compress.axis_" + str(v.key_axis)), g=v.group_size)
        return name + (tr("compress.name_residual", r=v.residual) if v.residual else "")
    if v.kind == "gqa":
        return tr("compress.name_gqa", h=v.kv_heads)
    if v.kind == "h2o":
        return tr("evict.name_h2o", b=v.budget, r=v.recent)
    if v.kind in ("snapkv", "pyramid"):
        return tr("evict.name_" + v.kind, b=v.budget, w=v.obs_window) + (tr("evict.name_held") if v.hold else "")
    if v.kind == "fp8":
        return tr("evict.name_fp8_" + str(v.scale))
    if v.kind == "latent":
        return tr("evict.name_latent", r=v.rank)
    return tr("compress.name_full")


def figure_labels(tr: Tr) -> dict:
    """The words kvviz.viz.compress draws, in ``tr``'s language."""
    keys = ("tradeoff_title", "bytes", "kl", "top1", "exact", "errors_title", "row", "error", "quantized",
            "full_precision", "evicted", "dist_title", "full", "prob", "agree", "differs", "att_title", "query",
            "key", "weight", "channels_title", "channel", "position", "magnitude")
    out = {k: tr("compress.fig_" + k) for k in keys}
    out["kinds"] = {k: tr("compress.kind_" + k) for k in ("full", "window", "quant", "gqa")}
    out["kinds"].update({k: tr("evict.kind_" + k) for k in ("h2o", "snapkv", "pyramid", "fp8", "latent")})
    return out


def evict_labels(tr: Tr) -> dict:
    """The words of the eviction and latent figures (kvviz.viz.compress.EVICT_LABELS), in ``tr``'s language."""
    keys = ("evict_title", "head", "position", "score", "evicted", "drift_title", "kl", "step", "first_diff",
            "latent_title", "rank", "elements", "full_kv", "drift", "remains_title", "query_head", "weight")
    return {k: tr("evict.fig_" + k) for k in keys}


def positions_text(positions: Sequence[int], lang: str) -> str:
    """0, 1, 2, 5, 6 → "0–2 and 5–6" (runs of consecutive positions, joined the language's way)."""
    runs: list[list[int]] = []
    for p in sorted(positions):
        if runs and p == runs[-1][-1] + 1:
            runs[-1].append(p)
        else:
            runs.append([p])
    return join([fmt.integer(r[0], lang=lang) if len(r) == 1
                 else f"{fmt.integer(r[0], lang=lang)}–{fmt.integer(r[-1], lang=lang)}" for r in runs], lang)


def cache_sentence(cmp: StepComparison, ev: Event, model, tr: Tr) -> str:
    """What the smaller cache holds after ``ev`` (read from the stepper's row log)."""
    v, lang = cmp.variant, lang_of(tr)
    rows = ev.cache.rows
    if v.kind == "window":
        evicted_now = [r.position for r in rows if r.evicted_at == ev.index]
        held = [r.position for r in ev.cache.held_rows]
        text = tr("compress.did_window", held=positions_text(held, lang), n=len(held), total=len(rows),
                  w=v.window, s=v.sinks)
        if evicted_now:
            text += " " + tr("compress.did_evicted", pos=positions_text(evicted_now, lang), n=len(evicted_now))
        return text
    if v.kind == "quant":
        coded = [r.position for r in rows if r.quantized_at is not None]
        now = [r.position for r in rows if r.quantized_at == ev.index]
        if not coded:
            return tr("compress.did_quant_none", bits=v.bits, total=len(rows))
        text = tr("compress.did_quant", bits=v.bits, coded=positions_text(coded, lang), n=len(coded),
                  exact=len(rows) - len(coded), total=len(rows))
        if now:
            text += " " + tr("compress.did_quantized_now", pos=positions_text(now, lang), n=len(now))
        return text
    n_kv = model.cost_config.n_kv_heads
    if v.kv_heads == n_kv:
        return tr("compress.did_gqa_same", h=v.kv_heads)
    return tr("compress.did_gqa", kv=v.kv_heads, h=n_kv, r=model.n_heads // int(v.kv_heads or 1))


def sentences(cmp: StepComparison, ev: Event, model, tr: Tr) -> tuple[str, str]:
    """What just happened (both runs), and what has not happened yet."""
    if ev.phase == "prefill":
        return (tr("compress.did_prefill", n=len(cmp.full.prompt)) + " " + cache_sentence(cmp, ev, model, tr),
                tr("compress.not_yet_prefill"))
    if ev.phase == "choose":
        score = cmp.score_at(ev.index)
        did = tr("compress.did_choose", tok=ev.chosen, vtop=score.variant_top1) if not score.agree \
            else tr("compress.did_choose_same", tok=ev.chosen)
        return did, tr("compress.not_yet_choose", tok=ev.chosen, pos=ev.positions[0])
    return (tr("compress.did_decode", tok=ev.tokens[0], pos=ev.positions[0]) + " " + cache_sentence(cmp, ev, model, tr),
            tr("compress.not_yet_decode"))


# ---------------------------------------------------------------- what to notice

def _changed(ev: Event, kind: str) -> list[int]:
    """Positions whose rows ``ev``'s pass evicted (a window) or stored as codes (quantized)."""
    if kind == "window":
        return [r.position for r in ev.cache.rows if r.evicted_at == ev.index]
    if kind == "quant":
        return [r.position for r in ev.cache.rows if r.quantized_at == ev.index]
    return []


def _top1(score, tr: Tr) -> str:
    if score.agree:
        return tr("notice_pages.cmp_top_same", tok=score.full_top1)
    return tr("notice_pages.cmp_top_differs", full=score.full_top1, var=score.variant_top1)


def first_change(cmp: StepComparison) -> int | None:
    """The first event whose pass evicted rows (a window) or stored rows as codes (quantized)."""
    kind = cmp.variant.kind
    return next((e.index for e in cmp.compressed.events if _changed(e, kind)), None)


def notice(cmp: StepComparison, ev: Event, model, tr: Tr, first: int | None = None,
           change: int | None = None) -> dict:
    """What to notice at ``ev`` (the variant's run), from the records: while both caches are still
    identical, that they are and the jump to where the smaller one first changes (a window's first
    eviction, the first quantized rows); at such an event the greyed rows or the error heatmap and
    why the next token can change; then the two distributions (KL, top-1) and what the smaller cache
    holds. ``first``, ``change``: ``cmp.first_difference()`` and ``first_change(cmp)``, which a
    payload computes once for all its events (computed here when not given)."""
    v, lang = cmp.variant, lang_of(tr)
    kind = "quant" if v.kind == "quant" else "window" if v.kind == "window" else "gqa"
    first = cmp.first_difference() if first is None else first
    change = first_change(cmp) if change is None else change
    score = cmp.score_at(cmp.scored_event(ev.index))     # the distributions this event shows
    kl = "—" if score is None else fmt.sci(score.kl, 1, lang=lang) if 0 < score.kl < 1e-3 \
        else fmt.num(score.kl, ".3g", lang=lang)            # prose: 2.4 × 10⁻⁷, never 2.38e-07
    rows = ev.cache.rows
    if first is None:                       # equal logits at every event of this text
        if change is not None:
            return notice_block(tr("notice_pages.cmp_never_changed", j=change))
        if kind == "window":
            return notice_block(tr("notice_pages.cmp_never_window", w=v.window, s=v.sinks, n=cmp.positions))
        if kind == "quant":
            return notice_block(tr("notice_pages.cmp_never_quant", r=v.residual, n=cmp.positions))
        return notice_block(tr("notice_pages.cmp_never_gqa", h=model.cost_config.n_kv_heads))
    now = _changed(ev, kind)
    if now:                                 # the rows this pass evicted or quantized: the step's point
        pos = positions_text(now, lang)
        if len(now) <= NAMED_TOKENS:
            pos += " (" + ", ".join(ev.sequence[p] for p in now) + ")"
        key = "notice_pages.cmp_evicted" if kind == "window" else "notice_pages.cmp_quantized"
        text = tr(key, pos=pos, n=len(now), w=v.window, s=v.sinks, bits=v.bits)
        if ev.index < first:                # the pass read the rows before they changed
            return notice_block(text + " " + tr("notice_pages.cmp_not_yet", j=first), first, tr("notice.jump", j=first))
        return notice_block(text + " " + tr("notice_pages.cmp_here", kl=kl, top=_top1(score, tr)) if score
                            else text)
    if ev.index < first:                    # nothing differs yet: say so, offer the jump
        if kind == "window":
            j = change if change is not None else first
            return notice_block(tr("notice_pages.cmp_same_window", n=len(rows), w=v.window, s=v.sinks,
                                   cap=v.window + v.sinks, j=j), j, tr("notice_pages.jump_evict", j=j)
                                if change is not None else tr("notice_pages.jump_differ", j=j))
        if kind == "quant" and (change is None or ev.index < change):
            j = change if change is not None else first
            return notice_block(tr("notice_pages.cmp_same_quant", n=len(rows), bits=v.bits, j=j), j,
                                tr("notice_pages.jump_quant", j=j) if change is not None
                                else tr("notice_pages.jump_differ", j=j))
        coded = [r.position for r in rows if r.quantized_at is not None]
        return notice_block(tr("notice_pages.cmp_coded_not_read", pos=positions_text(coded, lang), n=len(coded),
                               bits=v.bits, j=first), first, tr("notice.jump", j=first))
    if ev.phase == "choose":
        if score.agree:
            return notice_block(tr("notice_pages.cmp_choose_same", tok=ev.chosen, kl=kl))
        return notice_block(tr("notice_pages.cmp_choose_differs", tok=ev.chosen, vtop=score.variant_top1, kl=kl))
    top = _top1(score, tr) if score else "—"
    if kind == "window":
        held = [r.position for r in ev.cache.held_rows]
        return notice_block(tr("notice_pages.cmp_window_reads", held=positions_text(held, lang), n=len(held),
                               total=len(rows), kl=kl, top=top))
    if kind == "quant":
        coded = [r.position for r in rows if r.quantized_at is not None]
        return notice_block(tr("notice_pages.cmp_quant_reads", n=len(coded), total=len(rows), bits=v.bits,
                               kl=kl, top=top))
    small, full = ev.cache.nbytes(), cmp.full.events[ev.index].cache.nbytes()
    n_kv = model.cost_config.n_kv_heads
    return notice_block(tr("notice_pages.cmp_gqa", kv=v.kv_heads, h=n_kv, small=fmt.integer(small, lang=lang),
                           full=fmt.integer(full, lang=lang), r=model.n_heads // int(v.kv_heads or 1), kl=kl,
                           top=top))


# ---------------------------------------------------------------- blocks

def attention_block(pl: Payload, cmp: StepComparison, ev: Event, layer: int, head: int, tr: Tr) -> dict:
    """The variant's attention in the pass this event shows; the weight on the sinks per query
    written in the page's language."""
    spec = attention_sinks_spec(cmp, ev.index, layer, head, labels=figure_labels(tr))
    v = cmp.variant
    if v.kind == "window" and v.sinks:            # the sink weights as this language writes a share
        masses = sink_mass(pass_event(cmp.compressed, ev.index), layer, head, v.sinks)
        shares = [tr("compress.fig_sinks", mass=fmt.percent(m, lang=pl.lang)) for m in masses]
        for note, share in zip(spec["layout"].get("annotations", []), shares):
            note["text"] = share
        if len(masses) == 1:
            spec["layout"]["title"]["text"] = (tr("compress.fig_att_title", layer=layer + 1, head=head + 1)
                                               + "<br><sup>" + shares[0] + "</sup>")
    alt = "compress.attention_alt_sinks" if v.kind == "window" and v.sinks else "compress.attention_alt"
    return pl.fig(spec, tr(alt))


def distributions_block(pl: Payload, cmp: StepComparison, ev: Event, name: str, tr: Tr) -> dict:
    """Both next-token distributions; the title's KL and agreement in the page's language."""
    spec = next_token_pair_spec(cmp, ev.index, k=TOP_K, labels=figure_labels(tr), variant_name=name)
    score = cmp.score_at(cmp.scored_event(ev.index))
    title = tr("compress.fig_dist_title", variant=name)
    if score is not None:
        title += "<br><sup>" + tr("compress.fig_kl_line", kl=fmt.num(score.kl, ".3g", lang=pl.lang),
                                  agree=tr("compress.fig_agree" if score.agree else "compress.fig_differs")) + "</sup>"
    spec["layout"]["title"]["text"] = title
    return pl.fig(spec, tr("compress.dist_alt"))


def error_block(pl: Payload, cmp: StepComparison, ev: Event, layer: int, tr: Tr) -> dict:
    errors = row_errors(cmp.compressed, ev.index, layer)
    return pl.fig(row_error_heatmap_spec(errors, layer + 1, labels=figure_labels(tr)), tr("compress.errors_alt"))


def step_metrics(cmp: StepComparison, ev: Event, layer: int, head: int, tr: Tr) -> dict:
    """KL and top-1 at this step and so far, the two caches' bytes, the weight on the sinks; the
    badge says whether the logits are exactly the full cache's."""
    lang = lang_of(tr)
    at = cmp.scored_event(ev.index)
    score = cmp.score_at(at)
    kl_mean, agreement, n = cmp.mean_until(at)
    full_ev = cmp.full.events[ev.index]
    small, full = ev.cache.nbytes(), full_ev.cache.nbytes()
    items = [
        (tr("compress.m_kl"), fmt.num(score.kl, ".3g", lang=lang) if score else "—", tr("compress.m_kl_help"), None),
        (tr("compress.m_top1"), (tr("compress.m_agrees", tok=score.full_top1) if score.agree
                                 else tr("compress.m_differs", full=score.full_top1, var=score.variant_top1))
         if score else "—", tr("compress.m_top1_help"), None),
        (tr("compress.m_so_far", n=n), f"{fmt.num(kl_mean, '.3g', lang=lang)} · {fmt.percent(agreement, lang=lang)}",
         tr("compress.m_so_far_help"), None),
        (tr("compress.m_bytes"), f"{fmt.integer(small, lang=lang)} B",
         tr("compress.m_bytes_help"), tr("compress.m_bytes_full", full=fmt.integer(full, lang=lang),
                                         share=fmt.percent(small / full if full else 1.0, lang=lang))),
    ]
    v = cmp.variant
    if v.kind == "window" and v.sinks:
        mass = sink_mass(pass_event(cmp.compressed, ev.index), layer, head, v.sinks)[-1]
        items.append((tr("compress.m_sinks", layer=layer + 1, head=head + 1), fmt.percent(mass, lang=lang),
                      tr("compress.m_sinks_help", s=v.sinks), None))
    if cmp.logits_equal(ev.index):
        badge = ("ok", tr("compress.check_equal"))
    else:
        badge = ("info", tr("compress.check_differ"))
    return metrics(items, badge)


# ---------------------------------------------------------------- the payload

def build(cmp: StepComparison, model, layer: int, head: int, tr: Tr) -> Payload:
    """``model``: the full model the comparison ran (any kvviz model: its heads and ``cost_config``);
    ``layer``, ``head``: 0-based, the view shown (the head is a query head; the cache table shows
    the variant's K/V heads)."""
    pl = Payload(tr, ratio=(1, 1), csv="smaller_cache")
    v = cmp.variant
    name = variant_name(v, tr)
    run = cmp.compressed
    last = len(run.events) - 1
    kv_heads = run.events[0].record.k.shape[1]                   # the variant's K/V heads  # type: ignore[union-attr]
    labels = [f"h{h + 1}" for h in range(kv_heads)]
    kv_head = head * kv_heads // model.n_heads                   # the K/V head this query head reads
    present = ["position", "token", f"k ({labels[kv_head]})" if kv_heads > 1 else "k",
               f"v ({labels[kv_head]})" if kv_heads > 1 else "v", "phase"]
    figs: dict[str, dict] = {}
    first, change = cmp.first_difference(), first_change(cmp)
    for ev in run.events:
        did, todo = sentences(cmp, ev, model, tr)
        if ev.phase != "choose":      # a choose event shows its pass's figures: build them once
            figs = {"att": attention_block(pl, cmp, ev, layer, head, tr),
                    "dist": distributions_block(pl, cmp, ev, name, tr)}
            if v.kind == "quant":
                figs["err"] = error_block(pl, cmp, ev, layer, tr)
        # quantized: the row errors under the attention (which barely changes); in presenter mode
        # only the errors, so that they and the distributions share one row of the screen
        main = [dict(figs["att"], x=1), figs["err"]] if v.kind == "quant" else [figs["att"]]
        more = [note_block(tr("compress.table_note", layer=layer + 1, name=name, kv=kv_heads,
                              hs=model.cost_config.head_dim), explain=True)]
        if v.kind == "quant":
            more.append(note_block(tr("compress.errors_note", bits=v.bits), explain=True))
        pl.add(tr("compress.event_heading", i=ev.index, last=last, phase=tr("gpt.phase_" + ev.phase)),
               top=[strip_block(ev.sequence, len(run.prompt), ev.cache_len), lines_block(did, todo)],
               main=main + ([note_block(tr("stepper.no_attention", i=ev.index - 1), explain=True)]
                            if ev.phase == "choose" else []),
               side=[figs["dist"]], metrics=step_metrics(cmp, ev, layer, head, tr),
               table=cache_frame_table(pl, ev, tr, labels, layer, present_cols=present),
               more=more, notice=notice(cmp, ev, model, tr, first, change))
    moments.compress(pl, cmp, tr)
    return pl


def run_check(cmp: StepComparison, n_kv_heads: int, tr: Tr) -> tuple[str, str]:
    """The exact check of the whole run where one applies (``Variant.lossless_for``), else where the
    logits first differ: ("ok" | "bad" | "info", markdown) for the page to draw."""
    v, n = cmp.variant, cmp.positions
    first = cmp.first_difference()
    lang = lang_of(tr)
    if v.lossless_for(n, n_kv_heads):
        why = {"window": lambda: tr("compress.exact_window", w=v.window, s=v.sinks, n=n),
               "quant": lambda: tr("compress.exact_quant", r=v.residual, n=n),
               "gqa": lambda: tr("compress.exact_gqa", h=n_kv_heads)}[v.kind]()
        if first is None:
            return "ok", why + " " + tr("compress.exact_ok", events=len(cmp.full.events))
        return "bad", why + " " + tr("compress.exact_bad", first=first)
    reason = {"window": lambda: tr("compress.lossy_window", w=v.window, s=v.sinks, n=n),
              "quant": lambda: tr("compress.lossy_quant", r=v.residual, n=n),
              "gqa": lambda: tr("compress.lossy_gqa", kv=v.kv_heads, h=n_kv_heads)}[v.kind]()
    where = tr("compress.lossy_first", first=fmt.integer(first, lang=lang)) if first is not None \
        else tr("compress.lossy_never")
    return "info", reason + " " + where


def evict_notice(steps: Sequence, index: int, layer: int, budget: int, tr: Tr) -> str:
    """What to notice at one step of the eviction view (``steps``: kvviz.compress.trace's records),
    one line from the record: what ``layer`` evicted here and why, then whether the chosen token
    is still the full cache's (and whether it differs here for the first time)."""
    s = steps[index]
    dropped = sorted({p for head in s.evicted[layer] for p in head})
    held = max(len(h) for h in s.kept[layer]) if s.kept[layer] else 0
    lang = lang_of(tr)
    if dropped:
        first = tr("evict.notice_evicted", position=s.position, layer=layer + 1, n=len(dropped),
                   positions=positions_text(dropped, lang))
    else:
        first = tr("evict.notice_kept", position=s.position, layer=layer + 1, held=held, budget=budget)
    kl = fmt.g(s.kl, lang=lang)
    if s.agree:
        second = tr("evict.notice_same", kl=kl)
    elif all(x.agree for x in steps[:index]):
        second = tr("evict.notice_first_diff", kl=kl)
    else:
        second = tr("evict.notice_differs", kl=kl)
    return first + " " + second


def latent_notice(ranks: Sequence[int], full: int, kls: Sequence[float], rank: int, tr: Tr) -> str:
    """What to notice in the latent cache's view (``ranks`` ascending, the full rank last, ``kls`` the
    mean KL at each, ``full`` the full K and V's elements per token and layer, ``rank`` the one chosen,
    0 for none): the chosen rank's saving and drift (or how the two lines run), what the full rank
    costs, and the drift at the smallest rank."""
    lang = lang_of(tr)
    pct = lambda r: fmt.percent(r / full, 1, lang=lang)                        # noqa: E731
    kl = lambda r: fmt.g(kls[list(ranks).index(r)], lang=lang)                # noqa: E731
    top, low = ranks[-1], ranks[0]
    first = (tr("evict.notice_latent_rank", rank=rank, full=full, pct=pct(rank), kl=kl(rank)) if rank
             else tr("evict.notice_latent_lines"))
    whole = tr("evict.notice_latent_top_smaller" if top < full else "evict.notice_latent_top_same",
               top=top, kl=kl(top), pct=pct(top))
    return " ".join([first, whole, tr("evict.notice_latent_low", low=low, pct=pct(low), kl=kl(low))])


def keys_notice(layer: int, top: tuple[int, int, float], ratio: float, tr: Tr) -> str:
    """What to notice in a real model's key channels: the darkest row (``top``: K/V head, dimension,
    mean |k|, 0-based) and how far it stands above the median channel, and why that decides how
    keys are quantized."""
    lang = lang_of(tr)
    head, dim, mean = top
    return tr("evict.notice_keys", layer=layer, h=head + 1, d=dim, m=fmt.num(mean, ".3g", lang),
              ratio=fmt.num(ratio, ".3g", lang))
