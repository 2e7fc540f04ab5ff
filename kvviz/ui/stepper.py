"""Shared stepping controls and views for every page that steps through a run.

Prev / Next / Reset buttons (Left / Right / Home shortcuts) and a step slider bound to the URL
(``?step=3``). Buttons change the bound slider only from callbacks, as Streamlit requires.
"""
from __future__ import annotations

import functools
import html
import json

import pandas as pd
import streamlit as st

from kvviz.figures import COLORS, attention_heatmap, logits_bar
from kvviz.generation import Event, Run
from kvviz.trace import cache_table, run_dict
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
        st.warning(t("stepper.bad_step", raw=raw[:40], last=n_events - 1), icon=":material/link_off:")


def step_controls(n_events: int) -> int:
    """Draw the controls; return the current event index in [0, n_events)."""
    last = n_events - 1
    if st.session_state.get(STEP_KEY, 0) > last:   # the run got shorter (new prompt)
        st.session_state[STEP_KEY] = last
    cols = st.columns([1.3, 1.3, 1.3, 5], vertical_alignment="bottom")
    cols[0].button(t("stepper.prev"), icon=":material/chevron_left:", shortcut="Left",
                   on_click=_shift, args=(-1, last), help=t("stepper.prev_help"), width="stretch")
    cols[1].button(t("stepper.next"), icon=":material/chevron_right:", shortcut="Right", type="primary",
                   on_click=_shift, args=(1, last), help=t("stepper.next_help"), width="stretch")
    cols[2].button(t("stepper.reset"), icon=":material/restart_alt:", shortcut="Home",
                   on_click=_reset, help=t("stepper.reset_help"), width="stretch")
    step = cols[3].slider(t("stepper.step"), 0, last, key=STEP_KEY, bind="query-params",
                          help=t("stepper.step_help"))
    return int(step)


def token_strip(ev: Event, prompt_len: int) -> None:
    """Prompt, processed and pending tokens as coloured chips, with a legend."""
    cached = len(ev.cache)
    chips = []
    for i, tok in enumerate(ev.sequence):
        if i < prompt_len:
            kind = "prompt"
        elif i < cached:
            kind = "processed"
        else:
            kind = "pending"
        style = (f"border:3px {'dashed' if kind == 'pending' else 'solid'} {COLORS[kind]};"
                 f"background:{COLORS[kind]}{'22' if kind == 'pending' else '33'};")
        chips.append(
            f"<span class='kv-chip' title='{html.escape(t('stepper.chip_' + kind))}' style='{style}'>"
            f"<small>{i}</small> {html.escape(tok)}</span>")
    legend = " ".join(
        f"<span class='kv-legend' style='border-bottom:3px {'dashed' if k == 'pending' else 'solid'} "
        f"{COLORS[k]}'>{html.escape(t('stepper.legend_' + k))}</span>" for k in ("prompt", "processed", "pending"))
    st.markdown(
        "<style>.kv-chip{display:inline-block;padding:.25em .6em;margin:.15em;border-radius:.5em;"
        "font-size:1.35rem;font-family:monospace}.kv-chip small{opacity:.6;font-size:.7em}"
        ".kv-legend{margin-right:1.2em;padding-bottom:2px}</style>"
        f"<div role='list' aria-label='{html.escape(t('stepper.strip_label'))}'>{''.join(chips)}</div>"
        f"<div style='margin-top:.3em'>{legend}</div>", unsafe_allow_html=True)


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


def cache_view(ev: Event, head_labels: list[str] | None = None, layer: int = 0) -> pd.DataFrame:
    """The K/V cache table of one layer, rows written by this event highlighted."""
    df = cache_table(ev.cache, head_labels, layer)
    st.markdown(f"**{t('stepper.cache_title', n=ev.cache_len)}**")
    if df.empty:
        st.caption(t("stepper.cache_empty"))
        return df
    new = set(ev.positions) if ev.record is not None else set()
    styled = df.style.apply(
        lambda r: [f"background-color:{COLORS['pending']}55" if r["position"] in new else ""] * len(r), axis=1)
    st.dataframe(styled, hide_index=True, width="stretch")
    if new:
        st.caption(t("stepper.cache_new_rows"))
    return df


def attention_view(ev: Event, source: Event, layer: int = 0, head: int = 0, title: str | None = None) -> None:
    """Heatmap of a pass's attention (queries × keys). ``source`` is ``ev`` itself on pass events and
    the pass before it on choose events (choosing runs no attention)."""
    att = source.record.attention[layer, head]              # [N, T]
    keys = [f"{i}:{tok}" for i, tok in enumerate(source.sequence[: att.shape[1]])]
    queries = [f"{p}:{source.sequence[p]}" for p in source.positions]
    fig = attention_heatmap(att, queries, keys, title or t("stepper.attention_title", phase=source.phase))
    st.plotly_chart(fig, width="stretch", alt=t("stepper.attention_alt"))
    if source is not ev:
        st.caption(t("stepper.no_attention", i=source.index))


def logits_view(ev: Event, logit_tokens: list[str], next_choice: Event | None) -> None:
    """Logits of the last processed position; the choice (this event's or the next one's) highlighted."""
    choice = ev.choice or (next_choice.choice if next_choice is not None else None)
    chosen = choice.index if choice is not None else None
    fig = logits_bar(ev.logits.tolist(), logit_tokens, chosen, t("stepper.logits_title"))
    st.plotly_chart(fig, width="stretch", alt=t("stepper.logits_alt"))


def downloads(run: Run, ev: Event, logit_tokens: list[str], stem: str, table: pd.DataFrame) -> None:
    c = st.columns(2)
    # the trace is built only when clicked (deferred): for a GPT run it is large, and a step click
    # must not pay for serialising every event
    c[0].download_button(t("stepper.dl_trace"), functools.partial(_trace_json, run, logit_tokens),
                         file_name=f"{stem}_trace.json", mime="application/json",
                         icon=":material/download:", on_click="ignore")
    c[1].download_button(t("stepper.dl_cache"), table.to_csv(index=False),
                         file_name=f"{stem}_cache_step{ev.index}.csv", mime="text/csv",
                         icon=":material/table:", on_click="ignore")


def _trace_json(run: Run, logit_tokens: list[str]) -> str:
    return json.dumps(run_dict(run, logit_tokens), indent=1)
