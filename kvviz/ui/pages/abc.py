"""The A/B/C miniature page body (the file in pages/ only sets up the frame and calls render)."""
from __future__ import annotations

import streamlit as st

from kvviz.decoding.sampling import SelectionRule
from kvviz.decoding.stepper import Run
from kvviz.limits import MAX_NEW_TOKENS, LimitError, check_int
from kvviz.models.abc import ABCModel
from kvviz.ui.app import nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.app.runs import cached_run
from kvviz.ui.components import downloads, step_view
from kvviz.ui.components.rule_controls import default_rule, rule_controls
from kvviz.ui.frames import abc as frames_abc
from kvviz.ui.frames import translator

MODEL = ABCModel()
DEFAULT_PROMPT, DEFAULT_NEW = "A B", 6


@st.cache_resource(max_entries=128, ttl=3600, show_spinner=False)
def _payload(tokens: tuple[str, ...], new: int, rule: tuple, seed: int, lang: str) -> str:
    """Every event's frame of one run in one language, built once (read-only JSON text)."""
    run = cached_run("abc", tokens, new, **dict(rule), seed=seed)
    return frames_abc.build(run, translator(lang), MODEL.logit_tokens).to_json()


def _run(text: str | None, new: int, rule: SelectionRule, seed: int) -> tuple[Run, tuple]:
    """The run of these settings and its key (what the payload is built from)."""
    tokens = tuple(MODEL.tokenize(text or ""))
    key = (tokens, new, tuple(rule.settings().items()), seed)
    return cached_run("abc", tokens, new, **rule.settings(), seed=seed), key


def warm() -> None:
    """The default visit's run and frames, made by the server's warm-up (kvviz/ui/app/warmup.py)."""
    _, key = _run(DEFAULT_PROMPT, DEFAULT_NEW, *default_rule("abc"))
    _payload(*key, "en")


def _inputs() -> tuple[Run, tuple] | None:
    c = st.columns([3, 1])
    text = c[0].text_input(t("abc.prompt"), value=DEFAULT_PROMPT, key="prompt", bind="query-params",
                           max_chars=200, help=t("abc.prompt_help"))
    urlstate.int_param("new", DEFAULT_NEW, 1, MAX_NEW_TOKENS)
    new = c[1].number_input(t("abc.new_tokens"), 1, MAX_NEW_TOKENS, key="new",
                            on_change=urlstate.sync, args=("new", DEFAULT_NEW),
                            help=t("abc.new_tokens_help", cap=MAX_NEW_TOKENS))
    rule, seed = rule_controls("abc")
    st.caption(t("stepper.rule_caption"))
    try:
        return _run(text, check_int(t("abc.new_tokens"), new, 1, MAX_NEW_TOKENS), rule, seed)
    except (LimitError, ValueError) as e:
        st.error(t("abc.bad_prompt", reason=str(e)), icon=":material/error:")
        return None


def render() -> None:
    st.title(t("abc.title"))
    presenter.intro(t("abc.intro"))
    with presenter.settings():
        got = _inputs()
    if got is None:
        return
    run, key = got
    step_view.url_step_notice(len(run.events))
    nav.hidden_heading(t("stepper.section"))
    step_view.page_stepper("abc.step", _payload(*key, current_lang()), len(run.events), key="kvs_abc", run_id=repr(key))
    downloads.trace_button(run, MODEL.logit_tokens, "abc")
    if not presenter.presenting():
        with st.expander(t("abc.more_title")):
            st.markdown(t("abc.more_body"))

