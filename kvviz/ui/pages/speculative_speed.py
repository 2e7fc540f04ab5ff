"""The Speculative decoding page's speed-up, measured on this server behind a button, for either
model: the tiny GPT's draft model at γ = 1..6, SmolLM2's prompt lookup and early exit on both kinds
of prompt (a part of kvviz/ui/pages/speculative.py's body, which passes it the models and the runs'
settings)."""
from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from kvviz import cost
from kvviz.decoding.sampling import make_rule
from kvviz.limits import (
    SELF_SPEC_MEASURE_MAX_RUNS,
    SELF_SPEC_MEASURE_MAX_TOKENS,
    SPECULATIVE_MAX_GAMMA,
    SPECULATIVE_MEASURE_MAX_RUNS,
    LimitError,
)
from kvviz.models.gpt import GPTModel, cost_config
from kvviz.models.real import RealLM
from kvviz.speculative import SpeedMeasurement, measure_speedup
from kvviz.speculative.measure import SelfSpeedMeasurement, measure_self_speedup
from kvviz.speculative.records import Speculation
from kvviz.ui.app import fmt, nav, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.app.turns import my_turn
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.progress import outside_the_cache
from kvviz.ui.components.rule_controls import RuleKey
from kvviz.ui.frames import measure_notice, translator
from kvviz.ui.frames import speculative as frames_speculative
from kvviz.viz.speculative import self_speedup_spec, speedup_figure

MEASURE_GAMMAS = range(1, 7)
MEASURE_TOKENS = 48          # tokens per timed run (kvviz.speculative.measure_speedup's default)
DEFAULT_RUNS = 3
MEASURE_DEFAULT_TOKENS = 32  # SmolLM2's tokens per timed run


@st.cache_resource(max_entries=16, show_spinner=False)       # no ttl: kept for the server's lifetime
def _measurement(ids: tuple[int, ...], rule_key: RuleKey, runs: int, _pair: tuple[GPTModel, GPTModel],
                 _progress: Callable[[float, str], None] | None = None) -> SpeedMeasurement:
    """γ = 1..6 timed on this server (one measurement at a time per process: kvviz.measure.clock's lock);
    ``_pair``: the server's one target and draft (not part of the cache's key)."""
    target, draft = _pair
    return measure_speedup(target, draft, list(ids), MEASURE_GAMMAS, MEASURE_TOKENS,
                           make_rule(*rule_key), runs, progress=_progress)


@st.cache_resource(max_entries=8, show_spinner=False)       # kept for the server's lifetime
def _self_measurement(ids: tuple[tuple[str, tuple[int, ...]], ...], new: int, k: int, n: int, ee_k: int,
                      exit_layer: int, runs: int, name: str, _model: RealLM, _progress=None) -> SelfSpeedMeasurement:
    """Prompt lookup and early exit against plain decoding on both prompts; ``_model``: the server's
    one real model called ``name`` (the key names it)."""
    return measure_self_speedup(_model, ids, new_tokens=new, lookup_tokens=k, max_ngram=n,
                                exit_layer=exit_layer, draft_tokens=ee_k, runs=runs, progress=_progress)


def short_name(model: RealLM) -> str:
    """The model's name in a sentence: SmolLM2 for SmolLM2-135M-Instruct, else its title."""
    return "SmolLM2" if model.SPEC.name == "smollm2" else model.SPEC.title


def file_stem(model: RealLM) -> str:
    """The model's name in a file name (a host's model may be named by a folder)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model.SPEC.name).strip("_.") or "model"


# ---- the tiny GPT's draft model ------------------------------------------------------------------

def draft_model(pair: tuple[GPTModel, GPTModel], ids: tuple[int, ...], rule_key: RuleKey,
                measured: SpeedMeasurement | None) -> None:
    """The tiny GPT's draft model: γ = 1..6 timed behind a button, the table and why it differs from
    the formula (``measured``: this session's measurement of this prompt and rule, if any)."""
    st.subheader(t("speculative.measure_title"))
    st.markdown(t("speculative.measure_intro", n=MEASURE_TOKENS, lo=MEASURE_GAMMAS[0], hi=MEASURE_GAMMAS[-1]))
    urlstate.int_param("sd_runs", DEFAULT_RUNS, 1, SPECULATIVE_MEASURE_MAX_RUNS)
    c = st.columns([1, 1, 2], vertical_alignment="bottom")
    runs = c[0].number_input(t("speculative.runs"), 1, SPECULATIVE_MEASURE_MAX_RUNS, key="sd_runs",
                             on_change=urlstate.sync, args=("sd_runs", DEFAULT_RUNS),
                             help=t("speculative.runs_help", cap=SPECULATIVE_MEASURE_MAX_RUNS))
    if c[1].button(t("speculative.measure_run"), icon=":material/timer:", type="primary",
                   help=t("speculative.measure_run_help")):
        bar = st.progress(0.0, text=t("speculative.measure_progress", what="…"))
        show = outside_the_cache(
            lambda f, what: bar.progress(min(1.0, f), text=t("speculative.measure_progress", what=what)))
        try:
            measured = _measurement(ids, rule_key, int(runs), pair, _progress=show)
            st.session_state["speculative_measured"] = ((ids, rule_key), measured)
            st.rerun(scope="app")      # the chart above shows it too
        except LimitError as e:
            st.error(t("speculative.bad_input", reason=str(e)), icon=":material/error:")
        finally:
            bar.empty()
    if measured is None:
        st.info(t("speculative.measure_none"), icon=":material/timer:")
        return
    step_view.notice(measure_notice.draft_notice(measured, translator(current_lang())))   # the best γ's row below
    st.caption(t("speculative.measure_done", s=fmt.fixed(measured.seconds, 1), runs=measured.runs,
                 n=measured.new_tokens, threads=measured.threads))
    df = pd.DataFrame([{
        "γ": p.gamma,
        t("speculative.col_alpha"): p.acceptance_rate,
        t("speculative.col_tpp"): p.tokens_per_target_pass,
        t("speculative.col_expected"): p.expected,
        t("speculative.col_expected_v"): p.expected_with_verify,
        t("speculative.col_measured"): p.measured,
        t("speculative.col_spec_tps"): p.speculative_tps,
        t("speculative.col_plain_tps"): p.plain_tps,
    } for p in measured.points])
    digits = {"speculative.col_alpha": 3, "speculative.col_tpp": 2, "speculative.col_expected": 2,
              "speculative.col_expected_v": 2,
              "speculative.col_measured": 2, "speculative.col_spec_tps": 0, "speculative.col_plain_tps": 0}
    st.dataframe(df.style.format({t(k): (lambda v, d=d: fmt.fixed(v, d)) for k, d in digits.items()}),
                 hide_index=True, width="stretch")
    best = max(measured.points, key=lambda p: p.measured)
    v = best.verify_ms / measured.target_ms
    st.markdown(t("speculative.measure_explain", c=fmt.fixed(measured.c, 2), c_flops=fmt.fixed(measured.c_flops, 3),
                  target=fmt.fixed(measured.target_ms, 3), draft=fmt.fixed(measured.draft_ms, 3),
                  g=best.gamma, verify=fmt.fixed(best.verify_ms, 3), v=fmt.fixed(v, 2),
                  expected=fmt.fixed(best.expected, 2), expected_v=fmt.fixed(best.expected_with_verify, 2),
                  measured=fmt.fixed(best.measured, 2), other=fmt.fixed(best.run_other_ms, 3)))


# ---- SmolLM2 drafting for itself -----------------------------------------------------------------

def self_drafted(model: RealLM, method: str, prompts: tuple[tuple[str, tuple[int, ...]], ...], pl_k: int,
                 ngram: int, ee_k: int, exit_layer: int) -> None:
    """A real model drafting for itself: prompt lookup (``pl_k``, ``ngram``) and early exit (``ee_k``,
    ``exit_layer``) against plain decoding on both ``prompts`` (case, ids), timed behind a button;
    ``method``: the one the page shows."""
    st.header(t("specllm.measure_title"))
    st.markdown(t("specllm.measure_intro", n=MEASURE_DEFAULT_TOKENS, k=pl_k, ngram=ngram, ee_k=ee_k,
                  exit=exit_layer))
    urlstate.int_param("sd_llm_runs", 1, 1, SELF_SPEC_MEASURE_MAX_RUNS)
    c = st.columns([1, 1, 2], vertical_alignment="bottom")
    runs = c[0].number_input(t("specllm.runs"), 1, SELF_SPEC_MEASURE_MAX_RUNS, key="sd_llm_runs",
                             on_change=urlstate.sync, args=("sd_llm_runs", 1),
                             help=t("specllm.runs_help", cap=SELF_SPEC_MEASURE_MAX_RUNS,
                                    n=SELF_SPEC_MEASURE_MAX_TOKENS))
    mkey = (prompts, MEASURE_DEFAULT_TOKENS, int(pl_k), int(ngram), int(ee_k), int(exit_layer), int(runs),
            model.SPEC.name)
    if c[1].button(t("specllm.measure_run"), icon=":material/timer:", type="primary",
                   help=t("specllm.measure_run_help")):
        with my_turn("speculative_self_measure", t("specllm.measure_busy")) as mine:
            if mine:
                bar = st.progress(0.0, text=t("specllm.measure_progress", what="…"))
                show = outside_the_cache(lambda f, what: bar.progress(min(1.0, f), text=t("specllm.measure_progress",
                                                                                   what=what)))
                try:
                    st.session_state["specllm_measured"] = (mkey, _self_measurement(*mkey, model, _progress=show))
                except LimitError as e:
                    st.error(t("specllm.bad_measure", reason=str(e)), icon=":material/error:")
                finally:
                    bar.empty()
    stored = st.session_state.get("specllm_measured")
    if stored is None:
        st.info(t("specllm.measure_none"), icon=":material/timer:")
        return
    for_key, got = stored
    cases = {case: t(f"specllm.case_{case}") for case, _ in prompts}
    step_view.notice(measure_notice.self_notice(got, method, cases, translator(current_lang())))   # the bars below
    if for_key != mkey:
        st.caption(t("specllm.measure_stale"))
    short, stem = short_name(model), file_stem(model)
    chart(go.Figure(self_speedup_spec(got, cases, t("specllm.speedup_title"),
                                      frames_speculative.fig_labels(t, method))),
          t("specllm.speedup_alt"), key="specllm_speedup")
    df = pd.DataFrame([{
        t("specllm.col_case"): cases[p.prompt], t("specllm.col_method"): t("specllm.w_" + p.method.replace("-", "_")),
        t("specllm.col_tokens"): p.new_tokens, t("specllm.col_rate"): p.acceptance_rate,
        t("specllm.col_per_pass"): p.tokens_per_pass, t("specllm.col_spec_s"): p.speculative_s,
        t("specllm.col_plain_s"): p.plain_s, t("specllm.col_speedup"): p.measured,
        t("specllm.col_same"): "✓" if p.same_tokens else "✗"} for p in got.points])
    st.dataframe(df.style.format({t("specllm.col_rate"): lambda v: "—" if v is None or v != v else fmt.percent(v, 1),
                                  t("specllm.col_per_pass"): lambda v: fmt.fixed(v, 2),
                                  t("specllm.col_spec_s"): lambda v: fmt.fixed(v, 2),
                                  t("specllm.col_plain_s"): lambda v: fmt.fixed(v, 2),
                                  t("specllm.col_speedup"): lambda v: fmt.factor(v, 2)}),
                 hide_index=True, width="stretch")
    st.download_button(t("specllm.dl_measure"), df.to_csv(index=False), file_name=f"speculative_{stem}_speedup.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")
    st.caption(t("specllm.measure_done", s=fmt.fixed(got.seconds, 1), runs=got.runs, threads=got.threads))
    st.markdown(t("specllm.measure_reading", model=short, layers=model.n_layers))


# ---- summary: acceptance, tokens per pass, expected and measured speed-up ------------------------------

def _flop_ratio(spec: Speculation, pair: tuple[GPTModel, GPTModel]) -> float:
    """c in FLOPs: one draft decode pass over one target decode pass, mid-run (kvviz.cost)."""
    target, draft = pair
    ctx = len(spec.prompt) + len(spec.tokens) // 2
    f = [cost.pass_flops(cost_config(m.model.config), 1, ctx, last_only=True).total for m in (draft, target)]
    return f[0] / f[1]


def summary(spec: Speculation, ids: tuple[int, ...], rule_key: RuleKey, pair: tuple[GPTModel, GPTModel]) -> None:
    """The tiny GPT's run in numbers: acceptance, tokens per pass, the expected speed-up (c from the
    FLOPs of ``pair``, the target and its draft) and the measurement behind the button."""
    st.header(t("speculative.summary_title"))
    n = len(spec.tokens)
    alpha = spec.acceptance_rate
    m = st.columns(4)
    m[0].metric(t("speculative.s_alpha"), "—" if alpha is None else fmt.percent(alpha, 1),
                help=nav.term_help("accept_rule", t("speculative.s_alpha_help", acc=spec.accepted, tested=spec.tested)))
    m[1].metric(t("speculative.s_per_pass"), fmt.fixed(spec.tokens_per_target_pass, 2),
                help=t("speculative.s_per_pass_help", n=n, rounds=len(spec.rounds)))
    m[2].metric(t("speculative.s_target_passes"), spec.target_passes, help=t("speculative.s_target_passes_help"),
                delta=t("speculative.s_plain_passes", n=n + (spec.prefill_len > 0)), delta_color="off",
                delta_arrow="off")           # a comparison, not a change: no arrow (fewer passes is better)
    m[3].metric(t("speculative.s_draft_passes"), spec.draft_passes, help=t("speculative.s_draft_passes_help"))

    st.subheader(t("speculative.expected_title"))
    c_flops = _flop_ratio(spec, pair)
    default_c = round(c_flops, 3)
    urlstate.float_param("sd_c", default_c, 0.0, 1.0)
    cols = st.columns([1, 1, 1])
    c = cols[0].number_input(t("speculative.c"), 0.0, 1.0, step=0.01, format="%.3f", key="sd_c",
                             on_change=urlstate.sync, args=("sd_c", default_c),
                             help=t("speculative.c_help", flops=fmt.fixed(c_flops, 3)))
    measured: SpeedMeasurement | None = None
    stored = st.session_state.get("speculative_measured")
    if stored is not None and stored[0] == (ids, rule_key):
        measured = stored[1]
    if alpha is None:
        st.info(t("speculative.no_alpha"), icon=":material/info:")
    else:
        gamma = spec.gamma
        cols[1].metric(t("speculative.s_expected", g=gamma), fmt.factor(cost.speculative_speedup(alpha, gamma, c), 2),
                       help=t("speculative.s_expected_help"))
        cols[2].metric(t("speculative.s_best_gamma"), cost.best_gamma(alpha, c, SPECULATIVE_MAX_GAMMA),
                       help=t("speculative.s_best_gamma_help", cap=SPECULATIVE_MAX_GAMMA))
        st.markdown(t("speculative.expected_body", a=fmt.fixed(alpha, 3), c=fmt.fixed(c, 3), g=gamma,
                      tpp=fmt.fixed(cost.speculative_tokens_per_pass(alpha, gamma), 2),
                      got=fmt.fixed(spec.tokens_per_target_pass, 2),
                      s=fmt.fixed(cost.speculative_speedup(alpha, gamma, c), 2)))
        expected = t("speculative.fig_expected_line", a=fmt.fixed(alpha, 2), c=fmt.fixed(c, 2))
        words = frames_speculative.fig_labels(t, expected=expected)
        fig = speedup_figure(range(1, SPECULATIVE_MAX_GAMMA + 1), t("speculative.speedup_title"), alpha, c, measured,
                             labels=words)
        chart(fig, t("speculative.speedup_alt"), key="speculative_speedup_chart")
    draft_model(pair, ids, rule_key, measured)
