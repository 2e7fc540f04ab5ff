"""Shared stepping controls and views for every page that steps through a run.

Prev / Next / Reset buttons (Left / Right / Home shortcuts) and a step slider bound to the URL
(``?step=3``). Buttons change the bound slider only from callbacks, as Streamlit requires.
"""
from __future__ import annotations

import functools
import html
import json
from typing import Sequence

import pandas as pd
import streamlit as st

from kvviz.figures import COLORS, attention_heads_figure, attention_heatmap, logits_bar
from kvviz.generation import Event, Run
from kvviz.trace import cache_table, run_dict
from kvviz.ui import presenter, step_keys, urlstate
from kvviz.ui.charts import chart, figure_words, table_headers
from kvviz.ui.i18n import t

STEP_KEY = "step"


def _shift(delta: int, last: int) -> None:
    st.session_state[STEP_KEY] = min(last, max(0, st.session_state.get(STEP_KEY, 0) + delta))


def _reset() -> None:
    st.session_state[STEP_KEY] = 0


def url_step_notice(n_events: int) -> None:
    """Tell the user when ?step= in the URL was malformed or out of range (Streamlit drops it)."""
    raw = st.query_params.get(STEP_KEY)
    if raw is None:
        return
    try:
        ok = 0 <= int(raw) < n_events
    except ValueError:
        ok = False
    if not ok:
        urlstate.notice(t("stepper.bad_step", raw=raw[:40], last=n_events - 1))


def _end(last: int) -> None:
    st.session_state[STEP_KEY] = last


def step_controls(n_events: int) -> int:
    """Draw the controls; return the current event index in [0, n_events).

    Buttons (Left / Right / Home / End) in one row and the event slider below it; in presenter mode
    the slider folds into the settings expander so only the buttons remain in view.
    """
    last = n_events - 1
    if st.session_state.get(STEP_KEY, 0) > last:   # the run got shorter (new prompt)
        st.session_state[STEP_KEY] = last
    # room for the label plus its shortcut hint in every language ("Siguiente →", "Reset Home")
    cols = st.columns([1.4, 1.7, 1.7, 1.7, 1.5], vertical_alignment="bottom")
    cols[0].button(t("stepper.prev"), icon=":material/chevron_left:", shortcut="Left", key=step_keys.BUTTONS["ArrowLeft"],
                   on_click=_shift, args=(-1, last), help=t("stepper.prev_help"), width="stretch")
    cols[1].button(t("stepper.next"), icon=":material/chevron_right:", shortcut="Right", type="primary",
                   key=step_keys.BUTTONS["ArrowRight"], on_click=_shift, args=(1, last), help=t("stepper.next_help"),
                   width="stretch")
    cols[2].button(t("stepper.reset"), icon=":material/restart_alt:", shortcut="Home", key=step_keys.BUTTONS["Home"],
                   on_click=_reset, help=t("stepper.reset_help"), width="stretch")
    cols[3].button(t("stepper.end"), icon=":material/last_page:", shortcut="End", key=step_keys.BUTTONS["End"],
                   on_click=_end, args=(last,), help=t("stepper.end_help"), width="stretch")
    step_keys.install()          # presses that Streamlit's shortcuts drop mid-rerun still step
    with presenter.settings("stepper.step"):
        step = st.slider(t("stepper.step"), 0, last, key=STEP_KEY, bind="query-params",
                         help=t("stepper.step_help"))
    return int(step)


def token_strip(ev: Event, prompt_len: int, position_base: int = 0) -> None:
    """Prompt, processed and pending tokens as coloured chips, with a legend.

    ``position_base`` = 1 numbers the chips from 1 (the weather seed counts positions 1..n)."""
    token_chips(ev.sequence, prompt_len, ev.cache_len, position_base=position_base)


def token_chips(sequence: list[str], prompt_len: int, cached: int, legend: bool = True,
                position_base: int = 0) -> None:
    """Chips for ``sequence``: the first ``prompt_len`` are prompt, then processed up to ``cached``
    tokens, the rest pending (also used per sequence of a batch)."""
    chips = []
    for i, tok in enumerate(sequence):
        if i < prompt_len:
            kind = "prompt"
        elif i < cached:
            kind = "processed"
        else:
            kind = "pending"
        style = (f"border:3px {'dashed' if kind == 'pending' else 'solid'} {COLORS[kind]};"
                 f"background:{COLORS[kind]}{'22' if kind == 'pending' else '33'};")
        chips.append(
            f"<span class='kv-chip' role='listitem' title='{html.escape(t('stepper.chip_' + kind))}' style='{style}'>"
            f"<small>{i + position_base}</small> {html.escape(tok)}</span>")
    legend_html = " ".join(
        f"<span class='kv-legend' style='border-bottom:3px {'dashed' if k == 'pending' else 'solid'} "
        f"{COLORS[k]}'>{html.escape(t('stepper.legend_' + k))}</span>" for k in ("prompt", "processed", "pending"))
    st.markdown(
        "<style>.kv-chip{display:inline-block;padding:.25em .6em;margin:.15em;border-radius:.5em;"
        "font-size:1.35rem;font-family:monospace}.kv-chip small{opacity:.6;font-size:.7em}"
        ".kv-legend{margin-right:1.2em;padding-bottom:2px}</style>"
        f"<div role='list' aria-label='{html.escape(t('stepper.strip_label'))}'>{''.join(chips)}</div>"
        + (f"<div style='margin-top:.3em'>{legend_html}</div>" if legend else ""), unsafe_allow_html=True)


def counters(ev: Event, tol: float = 1e-6) -> None:
    """Cache length, the two K/V counters, and the recompute-check badge (agreement within ``tol``:
    float32 models differ from a recompute by rounding, ~1e-6, since matrices of other shapes sum
    in another order)."""
    c = st.columns(4)
    c[0].metric(t("stepper.cache_len"), ev.cache_len, help=t("stepper.cache_len_help"))
    c[1].metric(t("stepper.kv_computed"), ev.kv_computed, help=t("stepper.kv_computed_help"))
    c[2].metric(t("stepper.kv_recompute"), ev.kv_recompute,
                delta=f"{ev.kv_recompute - ev.kv_computed:+d}", delta_color="off",
                help=t("stepper.kv_recompute_help"))
    with c[3]:
        if ev.check is None:
            st.info(t("stepper.check_none"), icon=":material/hourglass_empty:")
        elif ev.check.max_abs_diff <= tol:
            st.success(t("stepper.check_ok", diff=f"{ev.check.max_abs_diff:.1e}"), icon=":material/check_circle:")
        else:
            st.error(t("stepper.check_bad", diff=f"{ev.check.max_abs_diff:.4g}"), icon=":material/error:")


def cache_view(ev: Event, head_labels: list[str] | None = None, position_base: int = 0,
               flagged: Sequence[tuple[int, str]] = (), layer: int = 0) -> pd.DataFrame:
    """The K/V cache table, rows written by this event highlighted.

    ``flagged``: cells (0-based position, column name) to mark, e.g. stale keys; rows rewritten by
    this event (a repair hook) are marked too. Returns the table (for the CSV download)."""
    df = cache_table(ev.cache, head_labels, layer, position_base=position_base)
    st.markdown(f"**{t('stepper.cache_title', n=ev.cache_len)}**")
    if df.empty:
        st.caption(t("stepper.cache_empty"))
        return df
    new = set(ev.positions) if ev.record is not None else set()
    rewritten = {r.position for r in ev.cache.rows if r.rewritten_at == ev.index and ev.record is not None}
    marks = {(p + position_base, col) for p, col in flagged}

    def style_row(r: pd.Series) -> list[str]:
        pos = r["position"] - position_base
        base = (f"background-color:{COLORS['pending']}55" if pos in new
                else f"background-color:{COLORS['processed']}33" if pos in rewritten else "")
        return [f"background-color:{COLORS['chosen']}44;font-weight:bold" if (r["position"], col) in marks
                else base for col in r.index]

    shown = df.rename(columns=table_headers(list(df.columns)))      # headers in the page's language
    st.dataframe(shown.style.apply(lambda r: style_row(pd.Series(r.values, index=df.columns)), axis=1),
                 hide_index=True, width="stretch")
    notes = [t("stepper.cache_new_rows")] if new else []
    if rewritten:
        notes.append(t("stepper.cache_rewritten_rows"))
    if marks:
        notes.append(t("stepper.cache_flagged_cells"))
    if notes:
        st.caption(" ".join(notes))
    return df


def attention_view(ev: Event, source: Event, layer: int = 0, head: int = 0, title: str | None = None,
                   head_titles: Sequence[str] | None = None, position_base: int = 0) -> None:
    """Heatmap of a pass's attention (queries × keys). ``source`` is ``ev`` itself on pass events and
    the pass before it on choose events (choosing runs no attention). With ``head_titles`` every head
    of ``layer`` is drawn side by side on one colour scale instead of the single ``head``."""
    att = source.record.attention[layer]                     # [H, N, T]
    keys = [f"{i + position_base}:{tok}" for i, tok in enumerate(source.sequence[: att.shape[-1]])]
    queries = [f"{p + position_base}:{source.sequence[p]}" for p in source.positions]
    title = title or t("stepper.attention_title", phase=source.phase)
    if head_titles:
        fig = attention_heads_figure(att, queries, keys, head_titles, title, words=figure_words())
    else:
        fig = attention_heatmap(att[head], queries, keys, title, words=figure_words())
    chart(fig, t("stepper.attention_alt"))
    if source is not ev:
        st.caption(t("stepper.no_attention", i=source.index))


def logits_view(ev: Event, logit_tokens: list[str], next_choice: Event | None) -> None:
    """Logits of the last processed position; the choice (this event's or the next one's) highlighted."""
    choice = ev.choice or (next_choice.choice if next_choice is not None else None)
    chosen = choice.index if choice is not None else None
    sampled = choice is not None and choice.rule.get("name") != "greedy"
    fig = logits_bar(ev.logits.tolist(), logit_tokens, chosen, t("stepper.logits_title"),
                     kept=choice.kept if sampled else None)        # sampling: removed tokens greyed
    chart(fig, t("stepper.logits_alt"))
    if sampled:   # the distribution the draw used, most likely first (at most 8 tokens named)
        ranked = sorted(choice.kept, key=lambda i: -choice.probs[i])
        probs = " · ".join(f"{logit_tokens[i]} {choice.probs[i]:.3f}" for i in ranked[:8])
        more = t("stepper.draw_more", n=len(ranked) - 8) if len(ranked) > 8 else ""
        st.caption(t("stepper.draw_probs", probs=probs + more))


def downloads(run: Run, ev: Event, logit_tokens: list[str], stem: str, table: pd.DataFrame) -> None:
    """Trace JSON and cache CSV. The files are built only when clicked (callables): building the
    whole run's JSON on every step click cost more than drawing a chart."""
    c = st.columns(2)
    # the trace is built only when clicked (deferred): for a GPT run it is large, and a step click
    # must not pay for serialising every event
    c[0].download_button(t("stepper.dl_trace"), functools.partial(_trace_json, run, logit_tokens),
                         file_name=f"{stem}_trace.json", mime="application/json",
                         icon=":material/download:", on_click="ignore")
    c[1].download_button(t("stepper.dl_cache"), lambda: table.to_csv(index=False),
                         file_name=f"{stem}_cache_step{ev.index}.csv", mime="text/csv",
                         icon=":material/table:", on_click="ignore")


def choice_sentence(ev: Event, logit_tokens: list[str], greedy_text: str) -> str:
    """'What just happened' on a choose event: ``greedy_text`` for greedy, the draw otherwise."""
    c = ev.choice
    if c.rule.get("name") == "greedy":
        return greedy_text
    return t("stepper.did_draw", tok=ev.chosen, p=f"{c.probs[c.index]:.3f}", seq=" ".join(ev.sequence),
             kept=", ".join(logit_tokens[i] for i in c.kept))


def _trace_json(run: Run, logit_tokens: list[str]) -> str:
    return json.dumps(run_dict(run, logit_tokens), indent=1)
