"""Frames of the "A real LLM" page (SmolLM2): what one step shows, for one layer and head.

SmolLM2 has 30 × 9 = 270 attention heads, so a frame carries only what the step shows: the chosen
head's attention map, the chosen layer's nine queries of the newest token over its three K/V heads
(grouped-query attention), one number per head for the model view (the newest query's weight on
the first token), the top-10 next-token probabilities and the chosen layer's cache rows. Another
layer or head is another payload (the page caches one per choice).

Every token and every piece of a visitor's text is shown literally: ``literal`` in sentences,
``theme.plain`` in chart labels; the browser escapes the rest.
"""
from __future__ import annotations

import torch

from kvviz import cost
from kvviz.cost.hybrid import hybrid_cache_bytes
from kvviz.decoding.loops import next_token_probs
from kvviz.decoding.stepper import Event, Run
from kvviz.decoding.trace import cache_shapes
from kvviz.models.base import FLOAT32_TOLERANCE
from kvviz.ui.app import fmt
from kvviz.ui.frames import (
    Payload,
    Tr,
    counters,
    details_block,
    figure_words,
    html_block,
    lang_of,
    lines_block,
    literal,
    moments,
    note_block,
    notice_block,
    presenter_only,
    strip_block,
    strip_tail,
    table_block,
)
from kvviz.ui.frames.steps import cache_frame_table, next_choice, next_pass, source
from kvviz.viz.attention import attention_heatmap_spec, head_grid_spec
from kvviz.viz.logits import top_probs_bar_spec
from kvviz.viz.theme import plain

# a recompute differs by rounding only: float32 ≈ 1e-5 in the logits; bfloat16 keeps 8 bits of
# mantissa, and logits of ≈ 20 then differ by up to ≈ 0.7 (measured on the default run)
CHECK_TOL = {"float32": FLOAT32_TOLERANCE, "bfloat16": 1.0}
COST_DTYPE = {"float32": "fp32", "bfloat16": "bf16"}
BYTES = {"float32": 4, "bfloat16": 2}
PRESENT_TOP_K = 5
POSITION_TICKS = 14         # the newest query's map: keys labelled by position (the token strip names them)
STRIP_TAIL = 64             # a longer text's token strip shows its last 64 tokens
PRESENT_TICK = 14           # presenter mode: the newest query's map's tick labels (present_gqa)
PRESENT_STRIP = 100         # presenter mode: one row of chips beside its label, in characters (strip_tail)
TABLE_FOLD = 128            # a cache table longer than this shows the rows that matter (fold_rows)
TABLE_SINKS = 4             # ... its first rows (the sinks every query reads),
TABLE_TAIL = 16             # ... its newest rows and those the event wrote (the last 16 of a prefill)
MAP_KEYS = 128              # the newest query's map: at most this many key cells (pooled_keys)


def shown_text(text: str) -> str:
    """Decoded text inside a sentence (in italics): line breaks as ⏎ (a sentence is one line), the
    ends trimmed (italics need a letter at each end), then literal."""
    return literal(text.replace("\r", "").replace("\n", "⏎").strip()) or "⏎"


_CONTROL = str.maketrans({"\n": "⏎", "\r": "␍", "\t": "⇥"})


def visible(tok: str) -> str:
    """A token as it can be seen: line breaks and tabs as signs (Gemma's tokenizer keeps them as
    characters, where SmolLM2's byte-level one writes Ċ); empty or other tokens unchanged."""
    return tok.translate(_CONTROL)


def key_labels(tokens: list[str], n: int) -> list[str]:
    return [f"{i}:{plain(visible(tok))}" for i, tok in enumerate(tokens[:n])]


def sentences(ev: Event, run: Run, model, tr: Tr) -> tuple[str, str | None]:
    """What just happened, and what has not happened yet (``model``: the run's SmolLM2)."""
    kv, hs, heads, layers = model.n_kv_heads, model.head_dim, model.n_heads, model.n_layers
    if ev.phase == "prefill":
        return (tr("llm.did_prefill", n=len(run.prompt), layers=layers, heads=heads, kv=kv, hs=hs),
                tr("llm.not_yet_prefill"))
    if ev.phase == "choose":
        p = next_token_probs(ev.logits)[ev.choice.index]
        answer = model.decode(ev.sequence[len(run.prompt):])
        did = tr("llm.did_choose", tok=literal(visible(ev.chosen)), id=model.vocab.index(ev.chosen),
                 p=fmt.fixed(p, 3, lang=lang_of(tr)), text=shown_text(answer))
        if ev.chosen in model.end_tokens:
            return did, tr("llm.ended", tok=literal(visible(ev.chosen)))
        return did, tr("llm.not_yet_choose", tok=literal(visible(ev.chosen)), n=ev.cache_len, pos=ev.positions[0])
    return (tr("llm.did_decode", tok=literal(visible(ev.tokens[0])), pos=ev.positions[0], n=ev.cache_len, kv=kv, hs=hs,
               heads=heads, per=heads // kv), tr("llm.not_yet_decode"))


def visible_keys(positions: list[int], T: int, window: int | None) -> torch.Tensor:
    """[N, T] which keys each query position may read: the causal triangle, and on a sliding-window
    layer only the last ``window`` positions (the band; what lies before it is blank)."""
    q = torch.tensor(positions).unsqueeze(-1)                          # [N, 1]
    k = torch.arange(T).unsqueeze(0)                                   # [1, T]
    ok = k <= q
    return ok & (q - k < window) if window is not None else ok


def attention_blocks(pl: Payload, ev: Event, src: Event, model, layer: int, head: int, tr: Tr) -> list[dict]:
    """The chosen layer's queries of the newest position grouped by the K/V head they read (GQA),
    the chosen head outlined; for the prefill first the chosen head's whole map (queries × keys). A
    decode pass has one query per head: the chosen head's map is its outlined row (one figure
    fewer to draw at a step press). In presenter mode the prefill's whole map (a row per prompt
    token: 37 for the default chat) is left out: the newest query's map is what fits a projector."""
    att = src.record.attention[layer]                                  # [H, N, T]
    T = att.shape[-1]
    keys = key_labels(src.sequence, T)
    phase = tr("llm.phase_" + src.phase)
    window = model.layout[layer].window                                 # None: a global layer
    out = []
    whole = getattr(src.record, "attention_map", None)                 # a long pass: its map pooled
    if whole is not None:
        fig, _ = pooled_map_spec(src, model, layer, head, tr)
        out.append(pl.fig(fig, tr("hybrid.pooled_alt"), explain=True))
    elif len(src.positions) > 1:
        queries = [f"{p}:{plain(visible(src.sequence[p]))}" for p in src.positions]
        fig = attention_heatmap_spec(att[head], queries, keys, tr("llm.attention_title", phase=phase, layer=layer + 1,
                                                                   head=head + 1, kv=model.kv_group(head) + 1),
                                     allowed=None if window is None else visible_keys(src.positions, T, window),
                                     words=figure_words(tr), row_px=45 if len(queries) <= 8 else 20)
        out.append(pl.fig(fig, tr("llm.attention_alt"), explain=True))
    rows = [tr("llm.gqa_row", q=h + 1, kv=model.kv_group(h) + 1) for h in range(model.n_heads)]
    newest = att[:, -1, :]                                              # [H, T]: what the newest query reads
    allowed = visible_keys([src.positions[-1]] * model.n_heads, T, window)
    newest, allowed, b = pooled_keys(newest, allowed)                   # a long text: blocks of b keys
    title = tr("llm.gqa_title", layer=layer + 1, pos=src.positions[-1], heads=model.n_heads, head=head + 1)
    if b > 1:
        keys = span_labels(0, newest.shape[-1], b, T - 1)
        title += " · " + tr("hybrid.gqa_pooled", b=b)
    gqa = attention_heatmap_spec(newest, rows, keys, title, allowed=allowed, words=figure_words(tr), row_px=28,
                                 outline_row=head, position_ticks=POSITION_TICKS)
    if b > 1:                                                           # ticks: each cell's first position
        every = -(-len(keys) // POSITION_TICKS)
        gqa["layout"]["xaxis"].update(ticktext=[k.split("–")[0] for k in keys[::every]])
    short = present_gqa(gqa)
    out += [pl.fig(gqa, tr("llm.gqa_alt"), explain=True), presenter_only(pl.fig(short, tr("llm.gqa_alt")))]
    return out


def present_gqa(spec: dict) -> dict:
    """The newest query's map on a projector: no title on its key axis (its ticks are positions, which
    the token strip numbers) and 14 px ticks (nine rows of 16 px labels and the axis title took the
    1280×720 screen's last rows, those of the cache table)."""
    lay = spec["layout"]
    tick = {**lay.get("yaxis", {}).get("tickfont", {}), "size": PRESENT_TICK}
    return {**spec, "layout": {**lay, "xaxis": {**lay["xaxis"], "title": None, "tickfont": tick},
                               "yaxis": {**lay["yaxis"], "tickfont": tick}}}


def span_labels(start: int, n: int, block: int, end: int) -> list[str]:
    """Labels of ``n`` pooled cells of ``block`` positions each from ``start``: "a–b" (the last cell
    ends at ``end``, the last position)."""
    return [f"{a}–{min(a + block - 1, end)}" if block > 1 else str(a)
            for a in range(start, start + n * block, block)]


def pooled_map_spec(src: Event, model, layer: int, head: int, tr: Tr) -> tuple[dict, int]:
    """A long pass's whole map as the record keeps it (kvviz.models.base.Keep): the weights averaged
    over blocks of b × b, each cell labelled by its positions; on a sliding-window layer the cells
    with no visible key left blank (the band). → (figure, b)."""
    rec = src.record
    grid, b = rec.attention_map[layer, head], rec.map_block                  # [⌈N/b⌉, ⌈T/b⌉]
    T = rec.attention.shape[-1]
    window = model.layout[layer].window
    seen = visible_keys(src.positions, T, window).float()
    allowed = torch.nn.functional.avg_pool2d(seen[None, None], b, b, ceil_mode=True)[0, 0] > 0
    queries = span_labels(src.positions[0], grid.shape[0], b, src.positions[-1])
    keys = span_labels(0, grid.shape[1], b, T - 1)
    title = tr("hybrid.pooled_title", n=len(src.positions), layer=layer + 1, head=head + 1,
               kv=model.kv_group(head) + 1, b=b)
    fig = attention_heatmap_spec(grid, queries, keys, title, zmax=max(1e-6, float(grid.max())), allowed=allowed,
                                 words=figure_words(tr), show_values=False, row_px=max(3, 480 // grid.shape[0]))
    return fig, b


def attention_notes(ev: Event, src: Event, model, layer: int, tr: Tr) -> list[dict]:
    """The notes under the figures. They come after every figure of the column, so that a choose
    event's extra note leaves the figures' places as they are: the stepper keeps a figure drawn in
    its place, and a figure that moves is drawn again at the step press."""
    T = src.record.attention.shape[-1]
    per = model.n_heads // model.n_kv_heads
    out = [note_block(tr("llm.gqa_note", heads=model.n_heads, kv=model.n_kv_heads, per=per, layer=layer + 1, T=T,
                         hs=model.head_dim), explain=True)]
    window = model.layout[layer].window
    if window is not None:
        out.append(note_block(tr("hybrid.band_note", layer=layer + 1, window=window, T=T,
                                 hidden=max(0, src.positions[-1] - window + 1)), explain=True))
    if src is not ev:
        out.append(note_block(tr("stepper.no_attention", i=src.index), explain=True))
    return out


def model_view_blocks(pl: Payload, src: Event, model, layer: int, head: int, tr: Tr) -> list[dict]:
    """One number per head, chosen by clicking it: the newest query's weight on the first token."""
    first = src.record.attention[:, :, -1, 0]                           # [L, H]
    fig = head_grid_spec(first, tr("llm.model_view_title", n=model.n_layers * model.n_heads),
                         selected=(layer, head), layer_word=tr("llm.model_view_layer"),
                         head_word=tr("llm.model_view_head"), value_word=tr("llm.model_view_value"))
    return [pl.pick_fig(fig, tr("llm.model_view_alt"))]


def model_view_note(src: Event, model, tr: Tr) -> dict:
    return note_block(tr("llm.model_view_note", layers=model.n_layers, heads=model.n_heads,
                         token=literal(visible(src.sequence[0]))), explain=True)


def probs_blocks(pl: Payload, ev: Event, nxt: Event | None, shown_vocab: list[str], tr: Tr) -> list[dict]:
    choice = ev.choice or (nxt.choice if nxt is not None else None)
    chosen = ev.choice.index if ev.choice is not None else None      # marked once chosen (docs/colours.md)
    probs = next_token_probs(ev.logits)
    fig = top_probs_bar_spec(probs, shown_vocab, chosen, tr("llm.probs_title", pos=ev.cache_len - 1),
                             axis_title=tr("llm.probs_axis"))
    short = top_probs_bar_spec(probs, shown_vocab, chosen, tr("projector.probs_title", pos=ev.cache_len - 1),
                               k=PRESENT_TOP_K, axis_title="")
    out = [pl.fig(fig, tr("llm.probs_alt"), explain=True), presenter_only(pl.fig(short, tr("llm.probs_alt_present")))]
    if choice is not None and choice.rule.get("name") != "greedy":
        out.append(note_block(tr("llm.probs_sampled", kept=len(choice.kept),
                                 p=fmt.fixed(choice.probs[choice.index], 3, lang=pl.lang))))
    if ev.pending:
        out.append(html_block(tr("llm.pending", tok=literal(visible(ev.pending)), pos=len(ev.sequence) - 1),
                              explain=True))
    return out


def growth_blocks(ev: Event, model, layer: int, tr: Tr) -> list[dict]:
    """The cache of every layer, [1, K/V heads, T, head size], its bytes measured against the cost
    model's 2 · L · H_kv · d · bytes per token, and what it would be with a K/V head per query head."""
    lang = lang_of(tr)
    dtype = COST_DTYPE[model.dtype_name]
    cfg = model.cost_config
    per_token = cost.cache_bytes_per_token(cfg, dtype)
    mha = cost.memory_report(cfg, max(1, ev.cache_len), 1, dtype).mha_total // max(1, ev.cache_len)
    # a hybrid cache (sliding layers hold window − 1 rows) by its own formula; all-global: per_token · T
    lay = model.layout[0]
    measured = ev.cache.nbytes()
    formula = hybrid_cache_bytes(model.windows, lay.n_kv_heads, lay.head_dim, BYTES[model.dtype_name], ev.cache_len)
    shapes = cache_shapes(ev.cache)
    rows = [[r["layer"], r["K shape"], r["V shape"], fmt.integer(r["bytes (K + V)"], lang=lang)]
            for _, r in shapes.iterrows()]
    table = table_block([tr("llm.col_layer"), tr("llm.col_k_shape"), tr("llm.col_v_shape"), tr("llm.col_bytes")], rows,
                        title=f"**{tr('llm.cache_growth_title')}**", row_marks=[(layer, "bold")])
    return [note_block(tr("llm.cache_bytes_line", measured=measured, layers=cfg.n_layers,
                          kv=cfg.n_kv_heads, hs=cfg.head_dim, b=cost.DTYPE_BITS[dtype] // 8, T=ev.cache_len,
                          formula=fmt.integer(formula, lang=lang), per_token=per_token,
                          mha=mha, heads=cfg.n_heads,
                          ok="✓" if measured == formula else "✗")),
            details_block(tr("llm.cache_growth_summary", layers=cfg.n_layers), [table])]


def token_strip(ev: Event, prompt_len: int, tr: Tr) -> dict:
    """The token chips of ``ev``'s text; a long text's last STRIP_TAIL only, numbered by their positions
    and labelled so (hundreds of chips redrawn at every step press are slow to draw and to read; the
    token view above the stepper lists them all)."""
    seq = [visible(x) for x in ev.sequence]
    if len(seq) <= STRIP_TAIL:
        return strip_block(seq, prompt_len, ev.cache_len)
    off = len(seq) - STRIP_TAIL
    return strip_block(seq[off:], prompt_len - off, ev.cache_len - off, position_base=off,
                       label=tr("hybrid.strip_tail", n=STRIP_TAIL, total=len(seq), first=off, last=len(seq) - 1))


def present_strip(strip: dict, tr: Tr) -> list[dict]:
    """The token strip, and on a projector its newest tokens, one row of them: SmolLM2's 37-token chat
    prompt takes three rows of chips there, and the step's point is at the strip's end."""
    return strip_tail(strip, PRESENT_STRIP, lambda n: tr("projector.strip_tail", n=n))


def present_lines(ev: Event, did: str, todo: str | None) -> list[dict]:
    """What happened and what not yet; on a projector a prefill's or decode's ✓ line only: its ⌛ line
    (no token chosen yet) is what the next event shows, where a choice's ⌛ line (the chosen token
    not in the cache yet) is the point of its step."""
    both = lines_block(did, todo)
    if ev.phase == "choose" or todo is None:
        return [both]
    return [{**both, "x": 1}, presenter_only(lines_block(did))]


def fold_rows(ev: Event, window: int | None) -> list[int] | None:
    """The cache table's rows drawn for a long text (None: all of them; the CSV download keeps every
    row): the first TABLE_SINKS, the newest TABLE_TAIL, those the event wrote (a prefill's last
    TABLE_TAIL), rows it rewrote (their last TABLE_TAIL), the edge of what it evicted (its newest
    evicted row and the next), and on a sliding-window layer the two rows at the edge of what the
    newest query reads. The table says "⋯ N not shown" between them (step_view.js): hundreds
    of rows rebuilt at each step press are slow to draw and to read."""
    rows = ev.cache.rows
    n = len(rows)
    if n <= TABLE_FOLD:
        return None
    keep = set(range(TABLE_SINKS)) | set(range(n - TABLE_TAIL, n))
    written = [i for i, r in enumerate(rows) if ev.record is not None and r.position in set(ev.positions)]
    keep |= set(written[-TABLE_TAIL:])
    keep |= set([i for i, r in enumerate(rows) if r.rewritten_at == ev.index][-TABLE_TAIL:])
    evicted = [i for i, r in enumerate(rows) if r.evicted_at == ev.index]
    if evicted:                                             # the newest row this pass evicted, the next one kept
        keep |= {evicted[-1], evicted[-1] + 1}
    if window is not None and n > window:
        edge = n - window                                   # the oldest key the newest query still reads
        keep |= {edge - 1, edge}
    return sorted(k for k in keep if 0 <= k < n)


def long_table(table: dict, ev: Event, window: int | None) -> dict:
    """A frame's cache table with the rows it draws (``shown``, indices into its rows) when it is long."""
    shown = fold_rows(ev, window)
    return table if shown is None else {**table, "shown": shown}


def pooled_keys(weights: torch.Tensor, allowed: torch.Tensor, keys: int = MAP_KEYS
                ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """[N, T] weights of a long text's queries over its keys, summed over blocks of b keys (a cell:
    the weight on those positions; a row still sums to 1) so that at most ``keys`` cells remain;
    ``allowed`` [N, T] → a cell is allowed when any of its keys is. → (weights, allowed, b)."""
    T = weights.shape[-1]
    b = -(-T // keys)
    if b <= 1:
        return weights, allowed, 1
    pad = (-T) % b
    w = torch.nn.functional.pad(weights.float(), (0, pad)).reshape(weights.shape[0], -1, b).sum(-1)
    ok = torch.nn.functional.pad(allowed, (0, pad)).reshape(allowed.shape[0], -1, b).any(-1)
    return w, ok, b


def notice_blocks(src: Event, model, tr: Tr) -> list[dict]:
    """One line of what to notice in a long text's frame: the pooled map of a long prefill, or, once the
    text is longer than a sliding window, the positions only the global layers still read."""
    rec = src.record
    if getattr(rec, "attention_map", None) is not None:
        return [note_block(tr("hybrid.notice_pooled", n=len(src.positions), b=rec.map_block,
                              rows=rec.attention.shape[-2]))]
    windows = [w for w in model.windows if w is not None]
    hidden = src.positions[-1] - min(windows) + 1 if windows else 0
    if hidden > 0 and None in model.windows:
        return [note_block(tr("hybrid.notice_far", edge=hidden - 1,
                              globals=", ".join(str(i + 1) for i, w in enumerate(model.windows) if w is None)))]
    return []


def first_drop(run: Run) -> int | None:
    """The first event whose cache has a row a sliding window dropped (moments.run's first eviction)."""
    return next((e.index for e in run.events if any(r.evicted_at is not None for r in e.cache.rows)), None)


def notice(run: Run, ev: Event, model, layer: int, tr: Tr) -> dict:
    """What to notice (kvviz/ui/frames/steps.py ``run_notice``'s sentences, the tokens shown literally):
    after the prefill the cache table's rows and why they are few (grouped K/V heads: the query heads
    per K/V head); a choice's row not added yet; a decode's one new row and the counters. On a sliding
    layer the row this pass greyed (outside its window), or, before any, the jump to the first."""
    window = model.layout[layer].window
    dropped = [r.position for r in ev.cache.rows if ev.record is not None and r.evicted_at == ev.index]
    first = first_drop(run) if window is not None else None
    jump = (first, tr("notice_llm.jump_drop", j=first)) if first is not None and first > ev.index else (None, None)
    if ev.phase == "prefill":
        per = model.n_heads // model.n_kv_heads
        text = (tr("notice_llm.prefill", n=ev.cache_len, kv=model.n_kv_heads, heads=model.n_heads, per=per) if per > 1
                else tr("notice_llm.prefill_mha", n=ev.cache_len, heads=model.n_heads))
        if window is not None:
            text += " " + tr("notice_llm.sliding_prefill" if dropped else "notice_llm.sliding_wait",
                             layer=layer + 1, w=window)
        return notice_block(text, *jump)
    if ev.phase == "choose":
        tok = literal(visible(ev.chosen))
        key = "notice.run_choose" if next_pass(run, ev) is not None else "notice.run_choose_last"
        return notice_block(tr(key, tok=tok, n=ev.cache_len), *jump)
    tok = literal(visible(ev.tokens[0]))
    if window is not None and dropped:
        return notice_block(tr("notice_llm.sliding_decode", tok=tok, pos=ev.positions[0], layer=layer + 1, w=window,
                               old=dropped[-1]))
    return notice_block(tr("notice.run_decode", tok=tok, pos=ev.positions[0], kv=ev.kv_computed,
                           re=ev.kv_recompute), *jump)


def build(run: Run, model, layer: int, head: int, tr: Tr) -> Payload:
    """``model``: the run's SmolLM2 (any HFCausalLM); ``layer``, ``head``: 0-based, the view shown."""
    pl = Payload(tr, ratio=(3, 2), csv=model.name)
    pl.set_pick(model.n_layers, model.n_heads, (layer, head),
                [[tr("llm.model_view_cell", layer=r + 1, head=c + 1) for c in range(model.n_heads)]
                 for r in range(model.n_layers)], tr("llm.model_view_grid"), tr("llm.model_view_fold"))
    shown_vocab = [plain(visible(t)) for t in model.vocab]                      # chart labels, literally
    labels = [f"K/V {g + 1}" for g in range(model.n_kv_heads)]
    mine = labels[model.kv_group(head)]
    present = ["position", "token", f"k ({mine})", f"v ({mine})", "phase"]
    tol = CHECK_TOL[model.dtype_name]
    last = len(run.events) - 1
    for ev in run.events:
        src = source(run, ev)
        did, todo = sentences(ev, run, model, tr)
        # the model view (30 × 9 tiles) under the attention map; in presenter mode under the next-token
        # chart, where its fold button takes no row of its own (one figure, sent once, either way)
        view = model_view_blocks(pl, src, model, layer, head, tr)          # built once, placed twice
        main = (attention_blocks(pl, ev, src, model, layer, head, tr) + [{**b, "x": 1} for b in view]
                + [model_view_note(src, model, tr)] + attention_notes(ev, src, model, layer, tr))
        side = probs_blocks(pl, ev, next_choice(run, ev), shown_vocab, tr) + [presenter_only(dict(b)) for b in view]
        m = counters(ev, tr, tol=tol)
        m["notes"] = [html_block(tr("llm.check_note_" + model.dtype_name, tol=fmt.sci(tol, 0, lang=pl.lang)))["html"]]
        pl.add(tr("llm.event_heading", i=ev.index, last=last, phase=tr("llm.phase_" + ev.phase)),
               top=notice_blocks(src, model, tr) + present_strip(token_strip(ev, len(run.prompt), tr), tr)
               + present_lines(ev, did, todo),
               main=main, side=side, metrics=m,
               table=long_table(cache_frame_table(pl, ev, tr, labels, layer, present_cols=present), ev,
                                model.layout[layer].window),
               more=[note_block(tr("llm.cache_table_note", layer=layer + 1, kv=model.n_kv_heads, hs=model.head_dim),
                                explain=True)] + growth_blocks(ev, model, layer, tr),
               notice=notice(run, ev, model, layer, tr))
    moments.run(pl, run, tr)
    return pl
