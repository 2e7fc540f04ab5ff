"""Frame pieces every stepper run shares (A/B/C, weather, tiny GPT): read ``Run`` / ``Event`` records,
return blocks. Pure: engine records and ``tr`` in, dicts out."""
from __future__ import annotations

from collections.abc import Sequence

from kvviz.decoding.stepper import Event, Run
from kvviz.decoding.trace import cache_table
from kvviz.ui.app import fmt
from kvviz.ui.frames import Payload, Tr, figure_words, lang_of, note_block, notice_block, table_headers
from kvviz.viz.attention import attention_heads_spec, attention_heatmap_spec
from kvviz.viz.logits import logits_bar_spec


def source(run: Run, ev: Event) -> Event:
    """The pass behind an event: itself on prefill/decode, the pass before it on choose."""
    return ev if ev.record is not None else run.events[ev.index - 1]


def next_choice(run: Run, ev: Event) -> Event | None:
    """On a pass event, the choose event that follows it (its choice is highlighted in the logits)."""
    i = ev.index
    return run.events[i + 1] if i + 1 < len(run.events) and ev.phase != "choose" else None


def choice_sentence(ev: Event, logit_tokens: Sequence[str], greedy_text: str, tr: Tr) -> str:
    """'What just happened' on a choose event: ``greedy_text`` for greedy, the draw otherwise."""
    c = ev.choice
    if c.rule.get("name") == "greedy":
        return greedy_text
    return tr("stepper.did_draw", tok=ev.chosen, p=fmt.fixed(c.probs[c.index], 3, lang=lang_of(tr)),
              seq=" ".join(ev.sequence), kept=", ".join(logit_tokens[i] for i in c.kept))


def attention_blocks(pl: Payload, ev: Event, src: Event, tr: Tr, layer: int = 0, head: int = 0,
                     title: str | None = None, head_titles: Sequence[str] | None = None,
                     position_base: int = 0, max_text_keys: int = 5) -> list[dict]:
    """Heatmap of a pass's attention (queries × keys); on a choose event the pass before it, with a
    note. ``head_titles``: every head of ``layer`` side by side on one colour scale, each cell's weight
    printed while there are at most ``max_text_keys`` keys."""
    att = src.record.attention[layer]                     # [H, N, T]
    keys = [f"{i + position_base}:{tok}" for i, tok in enumerate(src.sequence[: att.shape[-1]])]
    queries = [f"{p + position_base}:{src.sequence[p]}" for p in src.positions]
    title = title or tr("stepper.attention_title", phase=src.phase)
    if head_titles:
        fig = attention_heads_spec(att, queries, keys, head_titles, title, max_text_keys=max_text_keys,
                                   words=figure_words(tr))
        if len(keys) > 5:         # narrower cells: the weights in 12 px, cells 1 px apart (plotly hides a text
            for trace in fig["data"]:        # that does not fit its cell)
                trace.update(textfont={"size": 12}, xgap=1)
    else:
        fig = attention_heatmap_spec(att[head], queries, keys, title, words=figure_words(tr))
    out = [pl.fig(fig, tr("stepper.attention_alt"))]
    if src is not ev:
        out.append(note_block(tr("stepper.no_attention", i=src.index), explain=True))
    return out


def logits_blocks(pl: Payload, ev: Event, logit_tokens: Sequence[str], nxt: Event | None, tr: Tr) -> list[dict]:
    """Logits of the last processed position; the choice highlighted on a choose event only (a pass
    has chosen nothing yet, docs/colours.md); with sampling the tokens the rule removes greyed and
    the draw's probabilities listed (the next event's rule on a pass: it depends on the logits alone)."""
    choice = ev.choice or (nxt.choice if nxt is not None else None)
    chosen = ev.choice.index if ev.choice is not None else None
    sampled = choice is not None and choice.rule.get("name") != "greedy"
    fig = logits_bar_spec(ev.logits.tolist(), list(logit_tokens), chosen, tr("stepper.logits_title"),
                     kept=choice.kept if sampled else None)
    out = [pl.fig(fig, tr("stepper.logits_alt"))]
    if sampled:   # the distribution the draw used, most likely first (at most 8 tokens named)
        ranked = sorted(choice.kept, key=lambda i: -choice.probs[i])
        probs = " · ".join(f"{logit_tokens[i]} {fmt.fixed(choice.probs[i], 3, lang=pl.lang)}" for i in ranked[:8])
        more = tr("stepper.draw_more", n=len(ranked) - 8) if len(ranked) > 8 else ""
        out.append(note_block(tr("stepper.draw_probs", probs=probs + more)))
    return out


def cache_frame_table(pl: Payload, ev: Event, tr: Tr, head_labels: list[str] | None = None, layer: int = 0,
                      position_base: int = 0, flagged: Sequence[tuple[int, str]] = (),
                      present_cols: Sequence[str] | None = None) -> dict:
    """The K/V cache after ``ev`` (kvviz.decoding.trace.cache_table): rows written by this event
    highlighted, rows a repair rewrote before this pass marked, rows a sliding window evicted greyed
    (those it evicted at this event never folded away in presenter mode),
    ``flagged`` cells (0-based position, column name) marked (e.g. stale keys). ``present_cols``: the
    columns presenter mode keeps."""
    df = cache_table(ev.cache, head_labels, layer, position_base=position_base)
    cols = list(df.columns) if not df.empty else ["position", "token", "event", "phase"]
    positions = [r.position for r in ev.cache.rows]
    new = [i for i, p in enumerate(positions) if ev.record is not None and p in set(ev.positions)]
    rewritten = [i for i, r in enumerate(ev.cache.rows) if ev.record is not None and r.rewritten_at == ev.index]
    evicted = [i for i, r in enumerate(ev.cache.rows) if r.evicted_at is not None]
    evicted_now = [i for i, r in enumerate(ev.cache.rows) if r.evicted_at == ev.index]   # the step's point
    flags = [(positions.index(p), cols.index(c)) for p, c in flagged if p in positions and c in cols]
    notes = [tr("stepper.cache_new_rows")] if new else []
    if rewritten:
        notes.append(tr("stepper.cache_rewritten_rows"))
    if evicted:
        notes.append(tr("stepper.cache_evicted_rows"))
    if flags:
        notes.append(tr("stepper.cache_flagged_cells"))
    if df.empty:
        notes.append(tr("stepper.cache_empty"))
    return pl.cache_table(cols, table_headers(cols, tr), df.values.tolist(), tr("stepper.cache_title", n=ev.cache_len),
                          new=new, rewritten=rewritten, evicted=evicted, flagged=flags, keep=evicted_now,
                          notes=" ".join(notes),
                          present_cols=[cols.index(c) for c in present_cols if c in cols] if present_cols else None)


def next_pass(run: Run, ev: Event) -> Event | None:
    """The pass that processes what ``ev`` chose (None: the run ends first)."""
    return next((e for e in run.events[ev.index + 1:] if e.record is not None), None)


def run_notice(run: Run, ev: Event, tr: Tr, position_base: int = 0) -> dict:
    """What to notice on an event of a ``Run``: the cache table's rows after a prefill, the row a
    choice has not added yet (the next event adds it), the one new row of a decode and the counters' gap."""
    if ev.phase == "prefill":
        return notice_block(tr("notice.run_prefill", n=ev.cache_len))
    if ev.phase == "choose":
        nxt = next_pass(run, ev)
        if nxt is None:
            return notice_block(tr("notice.run_choose_last", tok=ev.chosen, n=ev.cache_len))
        return notice_block(tr("notice.run_choose", tok=ev.chosen, n=ev.cache_len))
    return notice_block(tr("notice.run_decode", tok=ev.tokens[0], pos=ev.positions[0] + position_base,
                           kv=ev.kv_computed, re=ev.kv_recompute))
