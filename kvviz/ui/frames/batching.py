"""Frames of the Cost page's Batching tab: several prompts decoded together, one pass per step
(``kvviz.decoding.batching.BatchRun``). The GPT's layer and head are view options: one payload per choice."""
from __future__ import annotations

import torch

from kvviz.decoding.batching import BatchEvent, BatchRun, SoloComparison, padded_cache_table, top_logit_columns
from kvviz.models.base import allowed_keys
from kvviz.ui.app import fmt
from kvviz.ui.frames import (
    Payload,
    Tr,
    alert_block,
    cols_block,
    figure_words,
    lines_block,
    metrics,
    note_block,
    notice_block,
    strip_block,
)
from kvviz.viz.attention import attention_heatmap_spec
from kvviz.viz.cost import grouped_logits, padded_cache_grid

TOP_LOGITS = 5        # GPT: bars for each sequence's top tokens (its vocabulary has 82 words)
K_DIMS = 4            # GPT: the first K components shown per cache cell (head size 32)


def what_happened(ev: BatchEvent, tr: Tr) -> str:
    if ev.phase == "prefill":
        return tr("cost.bt_did_prefill", B=ev.batch, W=ev.n_columns, real=ev.kv_computed, pad=ev.kv_padding)
    if ev.phase == "decode":
        toks = [f"**{tok[0]}**" for tok in ev.tokens]                # joined the language's way
        return tr("cost.bt_did_decode", B=ev.batch, toks=toks, col=ev.n_columns - 1)
    return tr("cost.bt_did_choose", toks=[f"**{p}**" for p in ev.pending])


def notice(run: BatchRun, ev: BatchEvent, tr: Tr) -> dict:
    """What to notice: the padded cache grid's padding after the prefill, the column a choice has not
    added yet, the one new column a decode adds for all."""
    if ev.phase == "prefill":
        return notice_block(tr("notice.bt_prefill", B=ev.batch, pad=ev.kv_padding))
    if ev.phase == "decode":
        return notice_block(tr("notice.bt_decode", B=ev.batch, col=ev.n_columns - 1))
    toks = [f"**{p}**" for p in ev.pending]
    nxt = next((e for e in run.events[ev.index + 1:] if e.record is not None), None)
    if nxt is None:
        return notice_block(tr("notice.bt_choose_last", toks=toks))
    return notice_block(tr("notice.bt_choose", toks=toks))


def moments_of(pl: Payload, run: BatchRun, tr: Tr) -> None:
    """The first choice (chosen by each sequence, processed by none) and the first shared decode pass."""
    pl.moment(next((e.index for e in run.events if e.phase == "choose"), None), tr("notice.m_choose"))
    pl.moment(next((e.index for e in run.events if e.phase == "decode"), None), tr("notice.m_decode"))


def attention_fig(src: BatchEvent, labels: list[str], layer: int, head: int, name_head: bool, tr: Tr):
    """One heatmap for the whole pass: the real query rows of every sequence against the shared
    cache columns; padding and future columns are blank (masked)."""
    rec = src.record
    allowed = allowed_keys(src.key_mask, rec.positions.shape[1])             # [B, N, T]
    weights, masks, queries = [], [], []
    for b in range(src.batch):
        rows = rec.positions[b] >= 0
        weights.append(rec.attention[b, layer, head][rows])                   # [n_b, T]
        masks.append(allowed[b][rows])
        queries += [f"{labels[b]} · {p}:{src.sequences[b][p]}" for p in rec.positions[b][rows].tolist()]
    keys = [f"c{c}" for c in range(src.n_columns)]
    fig = attention_heatmap_spec(torch.cat(weights), queries, keys,
                            tr("cost.bt_att_title", phase=tr("abc.phase_" + src.phase)) + "<br><sup>"
                            + tr("cost.bt_att_sub")
                            + (f" · {tr('cost.bt_att_which', layer=layer + 1, head=head + 1)}" if name_head else "")
                            + "</sup>",
                            show_scale=False, allowed=torch.cat(masks), words=figure_words(tr))
    fig["layout"]["xaxis"]["title"] = {"text": tr("cost.bt_att_x")}
    fig["layout"]["yaxis"]["title"] = {"text": tr("cost.bt_att_y")}
    fig["layout"]["height"] = max(340, 170 + 42 * len(queries))
    return fig


def build(run: BatchRun, comparisons: list[SoloComparison], model, layer: int, head: int, tr: Tr) -> Payload:
    """``model``: the batch's model (its logit tokens, layers and heads); ``layer``, ``head``: 0-based."""
    many = model.n_layers * model.n_heads > 1
    wide_vocab = len(model.logit_tokens) > 8
    pl = Payload(tr, ratio=None if wide_vocab else (1, 1))    # the GPT's maps: one above the other
    last = len(run.events) - 1
    dims = K_DIMS if many else None
    names = {k: tr("cost.bt_col_" + k) for k in ("column", "token", "mask", "k")}
    for ev in run.events:
        src = ev if ev.record is not None else run.events[ev.index - 1]       # the pass behind this event
        nxt = run.events[ev.index + 1] if ev.record is not None and ev.index + 1 < len(run.events) else None
        labels = [tr("cost.bt_seq", b=b + 1) for b in range(ev.batch)]
        seqs = []
        for b in range(ev.batch):
            c = comparisons[b]
            same = c.same_tokens and c.max_abs_diff <= run.tolerance
            check = (alert_block("ok", tr("cost.bt_same", diff=fmt.sci(c.max_abs_diff, 1, lang=pl.lang)), explain=True)
                     if same else
                     alert_block("bad", tr("cost.bt_differs", diff=fmt.num(c.max_abs_diff, ".3g", lang=pl.lang))))
            seqs.append([strip_block(ev.sequences[b], len(run.prompts[b]), ev.cached(b), legend=False,
                                     label=f"**{labels[b]}** · "
                                           + tr("cost.bt_prompt_was", p=" ".join(run.prompts[b]), pad=run.pad[b])),
                         check])

        n_new = src.record.positions.shape[1]
        new_cols = list(range(src.n_columns - n_new, src.n_columns)) if ev.record is not None else []
        grid = padded_cache_grid(ev.slots, ev.key_mask, [run.pad[b] + len(run.prompts[b]) for b in range(ev.batch)],
                                 new_cols, ev.pending, labels, {
                                     "pad": tr("cost.bt_pad"), "next": tr("cost.bt_next_col"),
                                     "x": tr("cost.bt_column"), "hover_pad": tr("cost.bt_hover_pad"),
                                     "hover_prompt": tr("cost.bt_hover_prompt"),
                                     "hover_processed": tr("cost.bt_hover_processed"),
                                     "hover_pending": tr("cost.bt_hover_pending"),
                                     "title": tr("cost.bt_grid_title", T=ev.n_columns, B=ev.batch)})

        choices = ev.choices or (nxt.choices if nxt is not None else None)
        chosen = [c.index for c in choices] if choices else [None] * ev.batch
        if wide_vocab:      # the GPT: each sequence's own top tokens
            shown = top_logit_columns(ev.logits, TOP_LOGITS, chosen)
            logits = grouped_logits([ev.logits[b, cols].tolist() for b, cols in enumerate(shown)],
                                    [[model.logit_tokens[i] for i in cols] for cols in shown],
                                    [cols.index(c) if c is not None else None for cols, c in zip(shown, chosen)],
                                    labels, tr("cost.bt_logits_top_title", n=TOP_LOGITS), tr("cost.bt_logit"))
        else:
            logits = grouped_logits(ev.logits.tolist(), model.logit_tokens, chosen, labels,
                                    tr("cost.bt_logits_title"), tr("cost.bt_logit"))

        table = padded_cache_table(ev, layer=layer, head=head, labels=labels, pad_label=tr("cost.bt_pad"),
                                   names=names, dims=dims)
        title = (tr("cost.bt_table_title", T=ev.n_columns)
                 + (f" · {tr('cost.bt_table_which', layer=layer + 1, head=head + 1, d=K_DIMS)}" if dims else ""))
        cols = list(table.columns)
        present = [c for c in cols if not c.endswith(" " + names["k"])]       # presenter: tokens and mask bits
        pl.add(tr("cost.bt_heading", i=ev.index, last=last, phase=tr("abc.phase_" + ev.phase), B=ev.batch),
               top=[lines_block(what_happened(ev, tr)), cols_block(seqs)],
               main=[pl.fig(attention_fig(src, labels, layer, head, many, tr), tr("stepper.attention_alt"))],
               side=[pl.fig(logits, tr("stepper.logits_alt"))],
               wide=[dict(pl.fig(grid, tr("cost.bt_grid_alt")), x=1),
                     note_block(tr("cost.bt_grid_caption"), explain=True)],
               metrics=metrics([
                   (tr("cost.bt_passes"), ev.passes, tr("cost.bt_passes_help"), None),
                   (tr("cost.bt_passes_alone"), ev.passes * ev.batch, tr("cost.bt_passes_alone_help"), None),
                   (tr("cost.bt_kv_real"), ev.kv_computed, tr("cost.bt_kv_real_help"), None),
                   (tr("cost.bt_kv_pad"), ev.kv_padding, tr("cost.bt_kv_pad_help"), None)]),
               table=pl.cache_table(cols, cols, table.values.tolist(), title, new=new_cols,
                                    notes=tr("cost.bt_table_caption"),
                                    present_cols=[cols.index(c) for c in present]),
               notice=notice(run, ev, tr))
    moments_of(pl, run, tr)
    return pl
