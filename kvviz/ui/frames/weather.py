"""Frames of the "Today weather is so" page (docs/design.md §2): the four heads, the prose/tensor notes
of the prefill, and the stale cached key that the append-only decode reads."""
from __future__ import annotations

from kvviz.decoding.staleness import Diagnosis, comparison_table, diagnose
from kvviz.decoding.stepper import Event, Run
from kvviz.decoding.trace import kv_column
from kvviz.models.weather import D_K, HEADS, W_VOCAB, WeatherModel
from kvviz.models.weather_notes import LESSON_REPAIR_LINE, lesson_account, plus_one_positions, prose_vs_tensor, reads
from kvviz.ui.app import fmt
from kvviz.ui.frames import (
    Payload,
    Tr,
    alert_block,
    counters,
    details_block,
    html_block,
    lang_of,
    lines_block,
    moments,
    note_block,
    notice_block,
    strip_block,
    table_block,
)
from kvviz.ui.frames.steps import (
    attention_blocks,
    cache_frame_table,
    choice_sentence,
    logits_blocks,
    next_choice,
    next_pass,
    run_notice,
    source,
)

BASE = 1                       # docs/design.md §2 numbers positions 1..n; so does this page
TEXT_KEYS = 8                  # the heatmaps print their weights up to 8 keys (the default run reaches 6)


def head_title(h: int, tr: Tr) -> str:
    return tr("weather.head_title", i=h + 1, name=tr(f"weather.head{h + 1}"))


def head_titles(tr: Tr) -> list[str]:
    return [head_title(h, tr) for h in range(len(HEADS))]


def short_heads(tr: Tr) -> list[str]:
    return [tr("weather.head_short", i=h + 1) for h in range(len(HEADS))]


def num(x: float, lang: str = fmt.REFERENCE) -> str:
    """Numbers in sentences: 12.5, 10.33, 6.0 (the tables carry 4 decimals), in ``lang``."""
    text = f"{x:.4g}"
    return fmt.num(x, ".4g", lang=lang) if any(c in text for c in ".e") else fmt.num(x, ".1f", lang=lang)


def _pos(p: int, tokens: list[str]) -> str:
    return f"{p + BASE} ({tokens[p]})"


def _reads_text(att_row, tokens: list[str], lang: str) -> str:
    """'2:weather 0.50 · 4:so 0.50' from one attention row [T] (labels as on the heatmaps)."""
    return " · ".join(f"{r.position + BASE}:{r.token} {fmt.fixed(r.weight, 2, lang=lang)}"
                      for r in reads(att_row, tokens))


def sentences(ev: Event, run: Run, tr: Tr) -> tuple[str, str]:
    """What just happened, and what has not happened yet, in plain words."""
    if ev.phase == "prefill":
        return (tr("weather.did_prefill", prompt=" ".join(run.prompt), n=len(run.prompt)),
                tr("weather.not_yet_prefill"))
    if ev.phase == "choose":
        return (choice_sentence(ev, WeatherModel.logit_tokens, tr(
                    "weather.did_choose", tok=ev.chosen,
                    logit=fmt.fixed(ev.logits[ev.choice.index], 3, lang=lang_of(tr)), seq=" ".join(ev.sequence)), tr),
                tr("weather.not_yet_choose", tok=ev.chosen, n=ev.cache_len, pos=ev.positions[0] + BASE))
    return (tr("weather.did_decode", tok=ev.tokens[0], pos=ev.positions[0] + BASE, n=ev.cache_len),
            tr("weather.not_yet_decode"))


def reads_block(src: Event, tr: Tr) -> dict:
    """For each head: where its keys are +1 and what the pass's last query reads."""
    plus = plus_one_positions(src.cache.keys[0][0])            # keys [H, T, d_k]
    q, tokens = src.positions[-1], src.sequence
    lines = []
    for h in range(len(HEADS)):
        where = [p + BASE for p in plus[h]]
        lines.append(tr("weather.reads_line", head=head_title(h, tr), where=where, pos=_pos(q, tokens),
                        reads=_reads_text(src.record.attention[0, h, -1], tokens, lang_of(tr)),
                        ctx=num(float(src.record.output[-1, h]), lang_of(tr))))
    return html_block(f"**{tr('weather.reads_heading', pos=_pos(q, tokens))}**\n\n"
                      + "\n".join(f"- {line}" for line in lines), explain=True)


def prefill_blocks(src: Event, values: dict[str, float], tr: Tr) -> list[dict]:
    """Contexts heads × positions; the cells where the lesson's prose and its tensor disagree
    (docs/design.md §2) marked, with notes."""
    out = src.record.output                                     # [N, H]
    n = out.shape[0]
    cols = [f"{p + BASE}:{w}" for p, w in enumerate(src.sequence[:n])]
    notes = prose_vs_tensor(src.sequence[:n], out, values)
    rows = [[head_title(h, tr)] + [fmt.fixed(x, 4, lang=lang_of(tr)) for x in out[:, h].tolist()]
            for h in range(out.shape[1])]
    table = table_block([tr("weather.col_head")] + cols, rows, title=f"**{tr('weather.contexts_heading')}**",
                        row_head=True, marks=[(nt.head, nt.position + 1, "mark") for nt in notes], explain=True)
    items = []
    for nt in notes:
        where = _pos(nt.position, src.sequence)
        if nt.prose_token is None:
            items.append(tr("weather.prose_head1", pos=where, tensor=fmt.fixed(nt.tensor_value, 4, lang=lang_of(tr))))
        else:
            items.append(tr("weather.prose_head2", pos=where, prose=num(nt.prose_value, lang_of(tr)),
                            tok=nt.prose_token, tensor=fmt.fixed(nt.tensor_value, 4, lang=lang_of(tr)), last=n))
    return [table, alert_block("warn", tr("weather.prose_heading") + "\n\n" + "\n".join(f"- {i}" for i in items),
                               explain=True)]


def lesson_code_block(src: Event, diag: Diagnosis, values: dict[str, float], tr: Tr) -> dict | None:
    """The lesson's own decode, said exactly (docs/design.md §2): its code holds the repair line, its
    printout is what the code gives without it. None for any run but the lesson's."""
    acc = lesson_account(src.sequence[:diag.position + 1], values, [d.cached for d in diag.outputs],
                         [d.recomputed for d in diag.outputs])
    if acc is None:
        return None
    lang = lang_of(tr)
    return html_block(f"**{tr('lesson.code_heading')}**\n\n" + tr(
        "lesson.code_body", line=LESSON_REPAIR_LINE, head=head_title(acc.head, tr),
        pos=_pos(acc.position, src.sequence),
        with_line=num(acc.with_line, lang), printed=num(acc.printed, lang), without=num(acc.without_line, lang),
        uncached=num(acc.printed_uncached, lang)), explain=True)


def decode_blocks(src: Event, diag: Diagnosis, tr: Tr, values: dict[str, float] | None = None) -> list[dict]:
    """Cached vs recomputed contexts, which heads differ and why, the repair, the lesson's own code,
    the BERT question."""
    heads = head_titles(tr)
    table = comparison_table(diag, heads)
    bad = {d.component for d in diag.differing()}
    tokens = src.sequence
    rows = [[row[0]] + [fmt.fixed(x, 4, lang=lang_of(tr)) for x in row[1:]] for row in table.itertuples(index=False)]
    out = [table_block([tr("weather.col_head"), tr("weather.col_cached"), tr("weather.col_recomputed"),
                        tr("weather.col_diff")], rows,
                       title=f"**{tr('weather.compare_heading', pos=_pos(diag.position, tokens))}**", row_head=True,
                       marks=[(r, c, "bad") for r in sorted(bad) for c in range(1, 4)], explain=True)]
    if bad:
        lang = lang_of(tr)
        for d in diag.differing():       # kept in presenter mode: the point of this page
            out.append(alert_block("bad", tr("weather.head_differs", head=heads[d.component],
                                             diff=num(d.abs_diff, lang), cached=num(d.cached, lang),
                                             recomputed=num(d.recomputed, lang))))
        why = [tr("weather.stale_key", head=heads[row.head], pos=_pos(row.position, tokens),
                  cached=fmt.num(row.cached[0].item(), "+g", lang=lang_of(tr)),
                  recomputed=fmt.num(row.recomputed[0].item(), "+g", lang=lang_of(tr)),
                  event=row.computed_at, d_k=D_K)
               for row in diag.stale if row.kind == "key"]
        out.append(html_block(f"**{tr('weather.why_heading')}**\n\n" + "\n".join(f"- {w}" for w in why)
                              + "\n\n" + tr("weather.why_body"), explain=True))
        for d in diag.differing():
            h = d.component
            out.append(html_block(tr("weather.reads_compare", head=heads[h],
                                     cached=_reads_text(src.record.attention[0, h, -1], tokens, lang_of(tr)),
                                     recomputed=_reads_text(diag.recomputed_attention[0, h], tokens, lang_of(tr)),
                                     c=num(d.cached, lang_of(tr)), r=num(d.recomputed, lang_of(tr))), explain=True))
        out.append(alert_block("info", tr("weather.repair_hint"), explain=True))
        if values is not None and (account := lesson_code_block(src, diag, values, tr)) is not None:
            out.append(account)
    elif src.repaired:
        rows_ = [r for r in src.cache.rows if r.rewritten_at == src.index]
        out.append(alert_block("ok", tr("weather.repaired", rows=[_pos(r.position, tokens) for r in rows_])))
    else:
        out.append(alert_block("ok", tr("weather.agree"), explain=True))
    out.append(html_block(f"**{tr('weather.assumption_heading')}**\n\n{tr('weather.assumption_body')}", explain=True))
    out.append(html_block(f"**{tr('weather.bert_question')}**", explain=True))
    out.append(details_block(tr("weather.bert_reveal"), [html_block(tr("weather.bert_answer"))]))
    return out


def logits_formula_block(src: Event, tr: Tr) -> dict:
    """logits = context × W_vocab, with the numbers of this pass (the sums come from the record)."""
    ctx = src.record.output[-1].tolist()                        # [H]
    parts = []
    for j, word in enumerate(WeatherModel.logit_tokens):
        lang = lang_of(tr)
        terms = " + ".join(f"{fmt.sig(W_VOCAB[h, j].item(), lang=lang)}·{num(ctx[h], lang)}" for h in range(len(HEADS)))
        parts.append(f"{word} = {terms} = **{fmt.fixed(src.record.logits[-1, j].item(), 3, lang=lang_of(tr))}**")
    avg = sum(ctx) / len(ctx)
    return html_block(tr("weather.logits_formula", pos=src.positions[-1] + BASE) + "\n" + "\n".join(parts)
                      + "\n\n" + tr("lesson.heads_combined", h=len(HEADS), avg=num(avg, lang_of(tr))), explain=True)


def notice(run: Run, ev: Event, diagnoses: dict[int, Diagnosis], stale_at: int | None, tr: Tr) -> dict:
    """What to notice: the last row of the heatmaps after the prefill (and where the cache will go
    stale), the cached key a choice leaves as it was, the flagged stale key of a decode and what it
    does to its head's context (docs/design.md §2), or the rows the repair rewrote."""
    lang = lang_of(tr)
    src = source(run, ev)
    diag = diagnoses[src.index]
    jump = {} if stale_at is None or stale_at <= ev.index else {"jump": stale_at,
                                                                "jump_label": tr("notice.jump_stale", j=stale_at)}
    if ev.phase == "prefill":
        ctx = ", ".join(num(x, lang) for x in src.record.output[-1].tolist())
        j = int(src.record.logits[-1].argmax())
        return notice_block(tr("notice.weather_prefill", pos=src.positions[-1] + BASE, ctx=ctx,
                               tok=WeatherModel.logit_tokens[j],
                               logit=fmt.fixed(src.record.logits[-1, j].item(), 3, lang=lang)), **jump)
    if ev.phase == "choose":
        nxt = next_pass(run, ev)
        if nxt is not None and nxt.index == stale_at:
            return notice_block(tr("notice.weather_choose", tok=ev.chosen, n=ev.cache_len,
                                   last=_pos(ev.positions[0] - 1, ev.sequence)), **jump)
        return run_notice(run, ev, tr, BASE)
    keys = [r for r in diag.stale if r.kind == "key"]
    bad = {d.component: d for d in diag.differing()}
    if keys and keys[0].head in bad:
        row, d = keys[0], bad[keys[0].head]
        return notice_block(tr("notice.weather_stale", head=row.head + 1, pos=_pos(row.position, ev.sequence),
                               cached=fmt.num(row.cached[0].item(), "+g", lang=lang),
                               recomputed=fmt.num(row.recomputed[0].item(), "+g", lang=lang),
                               c=num(d.cached, lang), r=num(d.recomputed, lang)))
    if src.repaired:
        return notice_block(tr("notice.weather_repaired"))
    return notice_block(tr("notice.weather_agree"), **jump)


def build(run: Run, values: dict[str, float], tr: Tr) -> Payload:
    """``values``: the token values the run used (the model's)."""
    model = WeatherModel(values)
    pl = Payload(tr, ratio=(3, 2), present_ratio=(5, 2), csv="weather")
    last = len(run.events) - 1
    diagnoses: dict[int, Diagnosis] = {}
    first_decode = next((e.index for e in run.events if e.phase == "decode"), None)
    shorts = short_heads(tr)
    for ev in run.events:
        if ev.record is not None:              # reruns the prefix once per pass
            diagnoses[ev.index] = diagnose(model, ev)
    stale_at = next((i for i, d in diagnoses.items() if d.differing()), None)
    repaired_at = next((e.index for e in run.events if e.record is not None and e.repaired), None)
    for ev in run.events:
        src = source(run, ev)
        diag = diagnoses[src.index]
        did, todo = sentences(ev, run, tr)
        lead = attention_blocks(pl, ev, src, tr, head_titles=head_titles(tr), position_base=BASE,
                                max_text_keys=TEXT_KEYS,
                                title=tr("weather.attention_title", phase=tr("weather.phase_" + src.phase)))
        main = [reads_block(src, tr)]
        main += (prefill_blocks(src, model.values, tr) if src.phase == "prefill"
                 else decode_blocks(src, diag, tr, model.values))
        side = logits_blocks(pl, ev, model.logit_tokens, next_choice(run, ev), tr) + [logits_formula_block(src, tr)]
        if src.phase == "decode" and src.check.logits_max_abs_diff > 1e-6:
            fresh = src.check.logits[-1]
            logits = ", ".join(f"{w} {fmt.fixed(fresh[j].item(), 3, lang=pl.lang)}"
                               for j, w in enumerate(model.logit_tokens))
            side.append(note_block(tr("weather.recomputed_logits", logits=logits), explain=True))
        flagged = [(r.position, kv_column("k" if r.kind == "key" else "v", r.head,
                                          len(HEADS) if r.kind == "key" else 1, shorts)) for r in diag.stale]
        more = ([note_block(tr("weather.decode_hint", i=first_decode), explain=True)]
                if src.phase == "prefill" and first_decode is not None else [])
        pl.add(tr("weather.event_heading", i=ev.index, last=last, phase=tr("weather.phase_" + ev.phase)),
               top=[strip_block(ev.sequence, len(run.prompt), ev.cache_len, position_base=BASE),
                    lines_block(did, todo)],
               lead=lead, main=main, side=side, metrics=counters(ev, tr),
               table=cache_frame_table(pl, ev, tr, shorts, position_base=BASE, flagged=flagged), more=more,
               notice=notice(run, ev, diagnoses, stale_at, tr))
    pl.moment(stale_at, tr("notice.m_stale"))            # before the run's own: the stale key is this page's point
    pl.moment(repaired_at, tr("notice.m_repair"))
    moments.run(pl, run, tr)
    return pl
