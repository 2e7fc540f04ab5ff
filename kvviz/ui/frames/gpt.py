"""Frames of the tiny GPT page: one layer and head of attention, every layer and head at once (the
model view, whose cells choose the one shown large), the top next-token probabilities, the cache of
every layer. The layer and head are view options: one payload per choice."""
from __future__ import annotations

import torch

from kvviz import cost
from kvviz.decoding.loops import next_token_probs
from kvviz.decoding.stepper import Event, Run
from kvviz.decoding.trace import cache_shapes
from kvviz.models.base import FLOAT32_TOLERANCE
from kvviz.ui.app import fmt
from kvviz.ui.frames import (
    PRESENT_TOP_K,
    Payload,
    Tr,
    counters,
    figure_words,
    html_block,
    lang_of,
    lines_block,
    moments,
    note_block,
    presenter_only,
    strip_block,
    table_block,
)
from kvviz.ui.frames.steps import attention_blocks, cache_frame_table, next_choice, run_notice, source
from kvviz.viz.attention import attention_model_view_spec
from kvviz.viz.logits import top_probs_bar_spec

CHECK_TOL = FLOAT32_TOLERANCE          # float32: a recompute differs by rounding only (~1e-6)


def sentences(ev: Event, run: Run, model, tr: Tr) -> tuple[str, str]:
    """What just happened, and what has not happened yet, in plain words (``model``: GPTModel)."""
    cfg = model.config
    if ev.phase == "prefill":
        return (tr("gpt.did_prefill", n=len(run.prompt), layers=cfg.n_layer, heads=cfg.n_head, hs=cfg.head_dim),
                tr("gpt.not_yet_prefill"))
    if ev.phase == "choose":
        p = next_token_probs(ev.logits)[ev.choice.index]
        text = model.tokenizer.decode([model.tokenizer.index[w] for w in ev.sequence])
        return (tr("gpt.did_choose", tok=ev.chosen, p=fmt.fixed(p, 3, lang=lang_of(tr)), seq=text),
                tr("gpt.not_yet_choose", tok=ev.chosen, n=ev.cache_len, pos=ev.positions[0]))
    return (tr("gpt.did_decode", tok=ev.tokens[0], pos=ev.positions[0], n=ev.cache_len,
               heads=cfg.n_head, hs=cfg.head_dim),
            tr("gpt.not_yet_decode"))




def probs_blocks(pl: Payload, ev: Event, nxt: Event | None, model, tr: Tr) -> list[dict]:
    choice = ev.choice or (nxt.choice if nxt is not None else None)
    chosen = ev.choice.index if ev.choice is not None else None      # marked once chosen (docs/colours.md)
    probs = next_token_probs(ev.logits)
    fig = top_probs_bar_spec(probs, model.logit_tokens, chosen, tr("gpt.probs_title", pos=ev.cache_len - 1),
                             axis_title=tr("gpt.probs_axis"))
    # presenter mode sizes charts to the screen: ten bars in a chart of a fifth of it are slivers
    # (five, and no axis title under them: the chart's title says what they are)
    short = top_probs_bar_spec(probs, model.logit_tokens, chosen, tr("gpt.probs_title_present", pos=ev.cache_len - 1),
                               k=PRESENT_TOP_K, axis_title="")
    out = [pl.fig(fig, tr("gpt.probs_alt"), explain=True), presenter_only(pl.fig(short, tr("gpt.probs_alt_present")))]
    if choice is not None and choice.rule.get("name") != "greedy":
        out.append(note_block(tr("gpt.probs_sampled", kept=len(choice.kept),
                                 p=fmt.fixed(choice.probs[choice.index], 3, lang=pl.lang))))
    if ev.pending:
        out.append(html_block(tr("gpt.pending", tok=ev.pending, pos=len(ev.sequence) - 1), explain=True))
    return out


def model_view_blocks(pl: Payload, ev: Event, src: Event, model, layer: int, head: int, tr: Tr) -> list[dict]:
    """Every layer and head of the pass behind ``ev`` as small heatmaps on one colour scale, the
    shown ``layer``/``head`` outlined; its cells choose the layer and head (``Payload.set_pick``)."""
    att = torch.stack(list(src.record.attention))                     # [L, H, N, T]
    fig = attention_model_view_spec(
        att, tr("gpt.model_view_title", n=model.n_layers * model.n_heads,
                                phase=tr("gpt.phase_" + src.phase)),
        selected=(layer, head), layer_word=tr("gpt.model_view_layer"), head_word=tr("gpt.model_view_head"),
        words=figure_words(tr))
    return [pl.pick_fig(fig, tr("gpt.model_view_alt")),
            note_block(tr("gpt.model_view_note", layers=model.n_layers, heads=model.n_heads), explain=True)]


def growth_blocks(ev: Event, model, layer: int, tr: Tr) -> list[dict]:
    """The cache of every layer: K/V shapes and bytes, the shown layer in bold, 2·L·T·d·4 checked."""
    cfg = model.config
    shapes = cache_shapes(ev.cache)
    rows = [[r["layer"], r["K shape"], r["V shape"], fmt.integer(r["bytes (K + V)"], lang=lang_of(tr))]
            for _, r in shapes.iterrows()]
    measured = ev.cache.nbytes()
    formula = cost.cache_bytes_per_token(model.cost_config, "fp32") * ev.cache_len   # 2·L·T·d·4
    out = [table_block([tr("gpt.col_layer"), tr("gpt.col_k_shape"), tr("gpt.col_v_shape"), tr("gpt.col_bytes")], rows,
                       title=f"**{tr('gpt.cache_growth_title')}**", row_marks=[(layer, "bold")], explain=True),
           note_block(tr("gpt.cache_bytes_line", measured=measured, layers=cfg.n_layer, T=ev.cache_len,
                         d=cfg.n_embd, formula=fmt.integer(formula, lang=lang_of(tr)),
                         ok="✓" if measured == formula else "✗"), explain=True)]
    if ev.record is not None:
        out.append(note_block(tr("gpt.cache_grew", n=len(ev.positions)), explain=True))
    return out


def build(run: Run, model, layer: int, head: int, tr: Tr) -> Payload:
    """``model``: the GPTModel of the run; ``layer``, ``head``: 0-based, the view shown."""
    pl = Payload(tr, ratio=(3, 2), csv="tiny_gpt")
    pl.set_pick(model.n_layers, model.n_heads, (layer, head),
                [[tr("gpt.model_view_cell", layer=r + 1, head=c + 1) for c in range(model.n_heads)]
                 for r in range(model.n_layers)], tr("gpt.model_view_grid"), tr("gpt.model_view_fold"))
    last = len(run.events) - 1
    labels = [f"h{h + 1}" for h in range(model.n_heads)]
    present = ["position", "token", f"k ({labels[head]})", f"v ({labels[head]})", "phase"]
    for ev in run.events:
        src = source(run, ev)
        did, todo = sentences(ev, run, model, tr)
        att = attention_blocks(pl, ev, src, tr, layer, head, title=tr(
            "gpt.attention_title", phase=tr("gpt.phase_" + src.phase), layer=layer + 1, head=head + 1))
        # a choose event's note (the pass before it) after both figures: the model view then keeps its
        # place, and the stepper shows it without drawing it again (a figure that moves is drawn again)
        mv = model_view_blocks(pl, ev, src, model, layer, head, tr)
        main = att[:1] + mv[:1] + att[1:] + mv[1:]
        m = counters(ev, tr, tol=CHECK_TOL)
        m["notes"] = [html_block(tr("gpt.check_note", tol=fmt.sci(CHECK_TOL, 0, lang=pl.lang)))["html"]]
        pl.add(tr("gpt.event_heading", i=ev.index, last=last, phase=tr("gpt.phase_" + ev.phase)),
               top=[strip_block(ev.sequence, len(run.prompt), ev.cache_len), lines_block(did, todo)],
               main=main, side=probs_blocks(pl, ev, next_choice(run, ev), model, tr), metrics=m,
               table=cache_frame_table(pl, ev, tr, labels, layer, present_cols=present),
               more=[note_block(tr("gpt.cache_table_note", layer=layer + 1, hs=model.config.head_dim), explain=True)]
               + growth_blocks(ev, model, layer, tr), notice=run_notice(run, ev, tr))
    moments.run(pl, run, tr)
    return pl
