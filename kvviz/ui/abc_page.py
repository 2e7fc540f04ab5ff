"""The A/B/C miniature page body (the file in pages/ only sets up the frame and calls render)."""
from __future__ import annotations

import streamlit as st

from kvviz.generation import Event, Run
from kvviz.limits import MAX_NEW_TOKENS, LimitError, check_int
from kvviz.models.abc import ABCModel
from kvviz.ui import nav, presenter, stepper, urlstate
from kvviz.ui.i18n import t
from kvviz.ui.perf import timed
from kvviz.ui.rule_controls import rule_controls
from kvviz.ui.runs import cached_run

MODEL = ABCModel()


def _sentences(ev: Event, run: Run) -> tuple[str, str]:
    """What just happened, and what has not happened yet, in plain words."""
    seq = " ".join(ev.sequence)
    if ev.phase == "prefill":
        h = ev.record.output[-1].tolist()
        return (t("abc.did_prefill", prompt=" ".join(run.prompt), n=len(run.prompt), last=len(run.prompt) - 1,
                  h0=f"{h[0]:.3f}", h1=f"{h[1]:.3f}"),
                t("abc.not_yet_prefill"))
    if ev.phase == "choose":
        did = stepper.choice_sentence(
            ev, MODEL.logit_tokens, t("abc.did_choose", tok=ev.chosen, logit=f"{ev.logits[ev.choice.index]:.3f}", seq=seq))
        return did, t("abc.not_yet_choose", tok=ev.chosen, n=ev.cache_len, pos=ev.positions[0])
    return (t("abc.did_decode", tok=ev.tokens[0], pos=ev.positions[0], n=ev.cache_len),
            t("abc.not_yet_decode"))


def _inputs() -> Run | None:
    c = st.columns([3, 1])
    text = c[0].text_input(t("abc.prompt"), value="A B", key="prompt", bind="query-params",
                           max_chars=200, help=t("abc.prompt_help"))
    urlstate.int_param("new", 6, 1, MAX_NEW_TOKENS)
    new = c[1].number_input(t("abc.new_tokens"), 1, MAX_NEW_TOKENS, key="new",
                            on_change=urlstate.sync, args=("new", 6),
                            help=t("abc.new_tokens_help", cap=MAX_NEW_TOKENS))
    rule, seed = rule_controls("abc")
    st.caption(t("stepper.rule_caption"))
    try:
        tokens = MODEL.tokenize(text or "")
        n = check_int(t("abc.new_tokens"), new, 1, MAX_NEW_TOKENS)
        return cached_run("abc", tuple(tokens), n, **rule.settings(), seed=seed)
    except (LimitError, ValueError) as e:
        st.error(t("abc.bad_prompt", reason=str(e)), icon=":material/error:")
        return None


def render() -> None:
    st.title(t("abc.title"))
    presenter.intro(t("abc.intro"))
    with presenter.settings():
        run = _inputs()
    if run is None:
        return
    stepper.url_step_notice(len(run.events))
    nav.hidden_heading(t("stepper.section"))
    _stepper(run)


@st.fragment
@timed("abc.step")
def _stepper(run: Run) -> None:
    step = stepper.step_controls(len(run.events))
    ev = run.events[step]
    nxt = run.events[step + 1] if step + 1 < len(run.events) and ev.phase != "choose" else None
    st.subheader(t("abc.event_heading", i=ev.index, last=len(run.events) - 1, phase=t("abc.phase_" + ev.phase)))
    stepper.token_strip(ev, len(run.prompt))
    did, not_yet = _sentences(ev, run)
    st.markdown(f":material/check: {did}  \n:material/hourglass_empty: {not_yet}")
    src = ev if ev.record is not None else run.events[step - 1]   # the pass behind this event
    left, right = st.columns(2)
    with left:
        stepper.attention_view(ev, src)
    with right:
        stepper.logits_view(ev, MODEL.logit_tokens, nxt)
        h = src.record.output[-1].tolist()
        st.markdown(t("abc.h_line", h0=f"{h[0]:.3f}", h1=f"{h[1]:.3f}", pos=src.positions[-1]))
    stepper.counters(ev)
    table = stepper.cache_view(ev)
    stepper.downloads(run, ev, MODEL.logit_tokens, "abc", table)
    if not presenter.presenting():
        with st.expander(t("abc.more_title")):
            st.markdown(t("abc.more_body"))
