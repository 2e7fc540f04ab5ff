"""The "Today weather is so" page body (docs/design.md §2): four hand-made heads through prefill and
decode, and the append-only cache that goes stale. The file in pages/ only sets up the frame."""
from __future__ import annotations

import html
from contextlib import nullcontext
from dataclasses import dataclass

import streamlit as st

from kvviz.decoding.sampling import SelectionRule
from kvviz.decoding.stepper import Run
from kvviz.limits import MAX_ABS_TOKEN_VALUE, MAX_NEW_TOKENS, MAX_PROMPT_CHARS, LimitError
from kvviz.models.weather import (
    D_K,
    DEFAULT_VALUES,
    SEED_PROMPT,
    VOCAB,
    WeatherModel,
    check_values,
    values_from_text,
    values_to_text,
)
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.app.runs import cached_run
from kvviz.ui.components import downloads, step_view
from kvviz.ui.components.charts import chart, figure_words
from kvviz.ui.components.rule_controls import default_rule, rule_controls
from kvviz.ui.frames import translator
from kvviz.ui.frames import weather as frames_weather
from kvviz.viz.attention import causal_mask_figure

BASE = frames_weather.BASE     # docs/design.md §2 numbers positions 1..n; so does this page
DEFAULT_NEW = 3
VALUES_VERSION = "weather_values_version"
VALUES_BASE = "weather_values_base"


# ---------------------------------------------------------------- inputs

def _reset_values() -> None:
    """Back to the lesson's values (docs/design.md §2): fresh inputs over the defaults, and none in the address."""
    st.session_state[VALUES_VERSION] = st.session_state.get(VALUES_VERSION, 0) + 1
    st.session_state[VALUES_BASE] = dict(DEFAULT_VALUES)
    st.query_params.pop("values", None)


def _base_values() -> dict[str, float]:
    """What the inputs start from: the defaults, or ``?values=so:4,nice:9`` on a new session."""
    if VALUES_BASE not in st.session_state:
        st.session_state[VALUES_BASE] = dict(DEFAULT_VALUES)
        raw = st.query_params.get("values")
        if raw:
            try:
                st.session_state[VALUES_BASE] = values_from_text(raw[:500])
            except LimitError as e:
                urlstate.notice(t("weather.bad_url_values", raw=raw[:60], reason=str(e)))
    return st.session_state[VALUES_BASE]


def _values_inputs(columns: int) -> tuple[dict[str, float] | None, str | None]:
    """One number input per vocabulary word, in ``columns`` columns: (values, None), or (None,
    message) when a value is not usable (the engine's check_values says why). Plain number inputs,
    not a data editor: the editor's grid is 1.2 MB of Streamlit's JavaScript that a first visit
    waited for before the stepper appeared (README, *Measured*), and a canvas that screen readers
    cannot read."""
    st.markdown(f"**{t('weather.values_heading')}**")
    start = _base_values()
    version = st.session_state.get(VALUES_VERSION, 0)
    entered = {}
    for row in range(0, len(VOCAB), columns):        # row by row: the reading and Tab order is VOCAB's
        for cell, w in zip(st.columns(columns), VOCAB[row:row + columns]):
            entered[w] = cell.number_input(w, value=float(start[w]), step=1.0, format="%g",
                                           key=f"weather_value_{version}_{w}",
                                           help=t("weather.col_value_help", cap=fmt.sig(MAX_ABS_TOKEN_VALUE)))
    st.button(t("weather.values_reset"), icon=":material/restart_alt:", on_click=_reset_values,
              help=t("weather.values_reset_help"))
    st.caption(t("weather.values_caption"))
    try:
        values = check_values(entered)
    except LimitError as e:
        return None, t("weather.bad_value", reason=str(e))
    text = values_to_text(values)       # keep a shareable address: only what differs from the defaults
    if text:
        st.query_params["values"] = text
    else:
        st.query_params.pop("values", None)
    return values, None


def _prompt_inputs() -> tuple[list[str] | None, int, bool]:
    c = st.columns([3, 1, 1.6], vertical_alignment="bottom")
    text = c[0].text_input(t("weather.prompt"), value=" ".join(SEED_PROMPT), key="prompt",
                           bind="query-params", max_chars=MAX_PROMPT_CHARS,
                           help=t("weather.prompt_help", vocab=", ".join(VOCAB)))
    urlstate.int_param("new", DEFAULT_NEW, 1, MAX_NEW_TOKENS)    # not bind: a bound number_input raises on ?new=inf
    new = c[1].number_input(t("weather.new_tokens"), 1, MAX_NEW_TOKENS, key="new",
                            on_change=urlstate.sync, args=("new", DEFAULT_NEW),
                            help=t("weather.new_tokens_help", cap=MAX_NEW_TOKENS))
    repair = c[2].toggle(t("weather.repair"), key="repair", bind="query-params", help=t("weather.repair_help"))
    try:
        tokens: list[str] | None = WeatherModel().tokenize(text or "")
    except ValueError as e:                    # too long; unknown words and emptiness: the engine says
        st.error(t("weather.bad_prompt", reason=str(e), vocab=" ".join(VOCAB)), icon=":material/error:")
        tokens = None
    return tokens, int(new), bool(repair)


def prompt_table_html(tokens: list[str], values: dict[str, float]) -> str:
    """Positions, tokens and values as an HTML table that scrolls sideways in its column (up to
    64 positions). Not st.dataframe: that loads Streamlit's 1.2 MB grid before the stepper draws."""
    def row(head: str, cells: list[str], tag: str = "td") -> str:
        return (f"<tr><th scope='row'>{html.escape(head)}</th>"
                + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>")
    # focusable, so that a keyboard can scroll it (axe: scrollable-region-focusable)
    label = html.escape(t("weather.prompt_table"), quote=True)
    return (f"<div class='kv-prompt-table' tabindex='0' role='region' aria-label='{label}'><table>"
            f"<thead>{row(t('charts.col_position'), [str(p + BASE) for p in range(len(tokens))], 'th')}</thead>"
            f"<tbody>{row(t('weather.col_token'), list(tokens))}"
            f"{row(t('weather.col_value'), [fmt.sig(values[w]) for w in tokens])}</tbody></table></div>")


def _prompt_view(tokens: list[str], values: dict[str, float]) -> None:
    """The prompt as positions, tokens and values, and its causal mask."""
    st.markdown(f"**{t('weather.prompt_table')}**")
    st.html(prompt_table_html(tokens, values))
    labels = [f"{p + BASE}:{w}" for p, w in enumerate(tokens)]
    chart(causal_mask_figure(labels, t("weather.mask_title"), words=figure_words()), t("weather.mask_alt"),
          key="weather_mask_chart", stepper_below=True)
    st.caption(t("weather.mask_caption"))


def render() -> None:
    st.title(t("weather.title"))
    presenting = presenter.presenting()
    # positions count from 1 here only (as in the source texts): said where the count starts
    presenter.intro(t("weather.intro", d_k=D_K) + ("\n\n" + t("look.weather_positions") if presenting else ""))
    if not presenting:
        st.caption(t("look.weather_positions"))
    with presenter.settings():
        tokens, new, repair = _prompt_inputs()
        rule, seed = rule_controls("weather")
        st.caption(t("stepper.rule_caption"))
        # the step first: normally the stepper takes this place, the token values (rows of four) and the
        # prompt view come below it, so the first event is in view without scrolling; presenter mode
        # folds the values away with the other settings and the prompt view below the stepper
        step_slot = nullcontext() if presenting else st.container()
        values, problem = _values_inputs(4)
    if problem:
        st.error(problem, icon=":material/error:")
    if tokens is None or values is None:
        return
    try:   # the engine checks the words and the caps (a URL can bypass the widgets)
        key = RunSettings.of(tokens, new, values, repair, rule, seed)
        run = _run(key)
    except (LimitError, ValueError) as e:
        st.error(t("weather.bad_prompt", reason=str(e), vocab=" ".join(VOCAB)), icon=":material/error:")
        return
    with step_slot:
        step_view.url_step_notice(len(run.events))
        nav.hidden_heading(t("stepper.section"))
        step_view.page_stepper("weather.step", _payload(key, current_lang()), len(run.events), key="kvs_weather",
                               run_id=repr(key))
        downloads.trace_button(run, WeatherModel.logit_tokens, "weather")
    if presenting:
        with st.expander(t("weather.prompt_table"), icon=":material/table:"):
            _prompt_view(run.prompt, values)
    else:
        _prompt_view(run.prompt, values)


# ---------------------------------------------------------------- the stepper

def warm() -> None:
    """The default visit's run and frames, made by the server's warm-up (kvviz/ui/app/warmup.py)."""
    key = RunSettings.of(SEED_PROMPT, DEFAULT_NEW, check_values({w: DEFAULT_VALUES[w] for w in VOCAB}), False,
                         *default_rule("weather"))
    _run(key)
    _payload(key, "en")


@dataclass(frozen=True)
class RunSettings:
    """Everything the run depends on, hashable: the prompt, the new tokens, the words' values, the
    repair switch, the selection rule's settings and its seed."""

    prompt: tuple[str, ...]
    new: int
    values: tuple[tuple[str, float], ...]
    repair: bool
    rule: tuple[tuple[str, object], ...]
    seed: int

    @classmethod
    def of(cls, tokens: list[str], new: int, values: dict[str, float], repair: bool, rule: SelectionRule,
           seed: int) -> RunSettings:
        return cls(tuple(tokens), new, tuple(values.items()), repair, tuple(rule.settings().items()), seed)


def _run(key: RunSettings) -> Run:
    return cached_run("weather", key.prompt, key.new, model_options=(("values", key.values),), repair=key.repair,
                      **dict(key.rule), seed=key.seed)


@st.cache_resource(max_entries=128, ttl=3600, show_spinner=False)
def _payload(key: RunSettings, lang: str) -> str:
    """Every event's frame of the run ``key`` in one language, built once (it diagnoses every pass:
    reruns the prefix). Read-only JSON text."""
    return frames_weather.build(_run(key), dict(key.values), translator(lang)).to_json()

