"""The speculative decoding page body: a draft model proposes γ tokens, the tiny GPT verifies them in
one pass, both caches roll back — stepped round by round, summed up against Leviathan et al.'s
expected speed-up, measured on this server, and checked against plain decoding (the file in pages/
only sets up the frame and calls render).

The settings' address names keep their short prefix ``sd_`` (``?sd_gamma=3``): they are the page's
deep links (the lecture script, the README), so they stay as they were. ``?sd_draft=prompt-lookup``
or ``early-exit`` shows the real LLM drafting without a second model instead
(kvviz/ui/pages/speculative_llm.py)."""
from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pandas as pd
import streamlit as st

from kvviz import cost
from kvviz.decoding.loops import Generation, generate_cached
from kvviz.decoding.sampling import Greedy, make_rule
from kvviz.limits import SPECULATIVE_MAX_GAMMA, SPECULATIVE_MAX_STEP_TOKENS, SPECULATIVE_MEASURE_MAX_RUNS, LimitError
from kvviz.models.gpt import GPTModel, cost_config
from kvviz.speculative import SpeedMeasurement, load_pair, measure_speedup, speculation_dict
from kvviz.speculative.decoding import speculative_generate
from kvviz.speculative.records import Speculation
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.components import sequences, step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.components.progress import outside_the_cache
from kvviz.ui.components.prompts import prompt_tokens
from kvviz.ui.components.rule_controls import RuleKey, default_rule, rule_cache_key, rule_controls
from kvviz.ui.frames import speculative as frames_speculative
from kvviz.ui.frames import translator
from kvviz.ui.pages import speculative_llm
from kvviz.viz.speculative import speedup_figure

DEFAULT_PROMPT = "It is rainy in London , so we"     # the draft has not learned what "we" do: rejections
DEFAULT_NEW = 12
DEFAULT_GAMMA = 4
MEASURE_GAMMAS = range(1, 7)
MEASURE_TOKENS = 48          # tokens per timed run (kvviz.speculative.measure_speedup's default)
DEFAULT_RUNS = 3
CHI_SQUARE_TEST = "tests/test_speculative.py::test_sampled_first_token_is_distributed_as_the_target_alone_chi_square"



# ---- shared, read-only resources -----------------------------------------------------------------

@st.cache_resource(show_spinner=False)
def _pair() -> tuple[GPTModel, GPTModel]:
    """The target (the tiny GPT) and its draft, loaded once per server and never modified."""
    return load_pair()


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _speculation(ids: tuple[int, ...], new: int, gamma: int, rule_key: RuleKey, seed: int) -> Speculation:
    target, draft = _pair()
    return speculative_generate(target, draft, list(ids), new, gamma, make_rule(*rule_key), seed,
                                keep_attention=True)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _greedy_pair(ids: tuple[int, ...], new: int, gamma: int) -> tuple[Speculation, Generation]:
    """Greedy speculation and the target's own greedy generate_cached: the exactness check."""
    target, draft = _pair()
    return (speculative_generate(target, draft, list(ids), new, gamma, Greedy()),
            generate_cached(target, list(ids), new, Greedy()))


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _plain(ids: tuple[int, ...], new: int, rule_key: RuleKey, seed: int) -> Generation:
    """The target alone with the same rule and seed (sampling: other draws, the same distribution)."""
    return generate_cached(_pair()[0], list(ids), new, make_rule(*rule_key), seed)


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _payload(ids: tuple[int, ...], new: int, gamma: int, rule_key: RuleKey, seed: int, layer: int, head: int,
             lang: str) -> str:
    """Every event's frame of one run, for one layer and head, in one language (read-only JSON)."""
    vocab = _pair()[0].tokenizer.vocab
    spec = _speculation(ids, new, gamma, rule_key, seed)
    return frames_speculative.build(spec, vocab, layer, head, translator(lang)).to_json()


@st.cache_resource(max_entries=16, show_spinner=False)       # no ttl: kept for the server's lifetime
def _measurement(ids: tuple[int, ...], rule_key: RuleKey, runs: int,
                 _progress: Callable[[float, str], None] | None = None) -> SpeedMeasurement:
    """γ = 1..6 timed on this server (one measurement at a time per process: kvviz.measure.clock's lock)."""
    target, draft = _pair()
    return measure_speedup(target, draft, list(ids), MEASURE_GAMMAS, MEASURE_TOKENS,
                           make_rule(*rule_key), runs, progress=_progress)


def warm() -> None:
    """The default visit's runs and frames, made before the first visitor (kvviz/ui/app/warmup.py)."""
    target, _ = _pair()
    ids = tuple(target.tokenizer.index[w] for w in prompt_tokens(target, DEFAULT_PROMPT))
    rule, seed = default_rule("sd")
    rule_key = rule_cache_key(rule)
    spec = _speculation(ids, DEFAULT_NEW, DEFAULT_GAMMA, rule_key, seed)
    _payload(ids, DEFAULT_NEW, DEFAULT_GAMMA, rule_key, seed, 0, 0, "en")     # layer 1, head 1
    _greedy_pair(ids, len(spec.tokens), DEFAULT_GAMMA)


# ---- inputs --------------------------------------------------------------------------------------

def _inputs(model: GPTModel) -> tuple[tuple[int, ...], int, int, RuleKey, int] | None:
    """Prompt ids, new tokens, γ, rule and seed; None after a message (unknown words, empty prompt …)."""
    c = st.columns([3, 1, 1])
    text = c[0].text_input(t("speculative.prompt"), value=DEFAULT_PROMPT, key="sd_prompt", bind="query-params",
                           max_chars=400, help=t("speculative.prompt_help"))
    urlstate.int_param("sd_new", DEFAULT_NEW, 1, SPECULATIVE_MAX_STEP_TOKENS)   # not bind: it raises on ?sd_new=inf
    urlstate.int_param("sd_gamma", DEFAULT_GAMMA, 1, SPECULATIVE_MAX_GAMMA)
    new = c[1].number_input(t("speculative.new_tokens"), 1, SPECULATIVE_MAX_STEP_TOKENS, key="sd_new",
                            on_change=urlstate.sync, args=("sd_new", DEFAULT_NEW),
                            help=t("speculative.new_tokens_help", cap=SPECULATIVE_MAX_STEP_TOKENS))
    gamma = c[2].number_input(t("speculative.gamma"), 1, SPECULATIVE_MAX_GAMMA, key="sd_gamma",
                              on_change=urlstate.sync, args=("sd_gamma", DEFAULT_GAMMA),
                              help=t("speculative.gamma_help", cap=SPECULATIVE_MAX_GAMMA))
    rule, seed = rule_controls("sd")
    with st.expander(t("speculative.vocab_title", n=len(model.vocab))):
        st.markdown(" ".join(f"`{w}`" for w in model.vocab))
    try:
        tokens = prompt_tokens(model, text)
        if not (1 <= int(gamma) <= SPECULATIVE_MAX_GAMMA):
            raise LimitError(t("speculative.bad_gamma", g=gamma, cap=SPECULATIVE_MAX_GAMMA))
        ids = tuple(model.tokenizer.index[w] for w in tokens)
        return ids, int(new), int(gamma), rule_cache_key(rule), seed
    except (LimitError, ValueError) as e:
        st.error(t("speculative.bad_prompt", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return None


def _picker(model: GPTModel) -> LayerHeadPicker:
    """Layer and head of the verification pass's attention map (?sd_layer=4&sd_head=2)."""
    return LayerHeadPicker("sd", model.n_layers, model.n_heads, ("speculative.layer", "speculative.layer_help",
                                                                 "speculative.head", "speculative.head_help"))


def _download(spec: Speculation, vocab: list[str]) -> None:
    """The run as JSON: the ``speculate`` command's fields and every proposal's p, q, u and verdict."""
    st.download_button(t("speculative.dl_json"), functools.partial(
        lambda: json.dumps(speculation_dict(spec, vocab, detail=True), indent=1)),
        file_name="speculative_run.json", mime="application/json", icon=":material/download:", on_click="ignore")


# ---- summary: acceptance, tokens per pass, expected and measured speed-up ------------------------------

def _flop_ratio(spec: Speculation) -> float:
    """c in FLOPs: one draft decode pass over one target decode pass, mid-run (kvviz.cost)."""
    target, draft = _pair()
    ctx = len(spec.prompt) + len(spec.tokens) // 2
    f = [cost.pass_flops(cost_config(m.model.config), 1, ctx, last_only=True).total for m in (draft, target)]
    return f[0] / f[1]


def _summary(spec: Speculation, ids: tuple[int, ...], rule_key: RuleKey) -> None:
    st.header(t("speculative.summary_title"))
    n = len(spec.tokens)
    alpha = spec.acceptance_rate
    m = st.columns(4)
    m[0].metric(t("speculative.s_alpha"), "—" if alpha is None else fmt.percent(alpha, 1),
                help=t("speculative.s_alpha_help", acc=spec.accepted, tested=spec.tested))
    m[1].metric(t("speculative.s_per_pass"), fmt.fixed(spec.tokens_per_target_pass, 2),
                help=t("speculative.s_per_pass_help", n=n, rounds=len(spec.rounds)))
    m[2].metric(t("speculative.s_target_passes"), spec.target_passes, help=t("speculative.s_target_passes_help"),
                delta=t("speculative.s_plain_passes", n=n + (spec.prefill_len > 0)), delta_color="off",
                delta_arrow="off")           # a comparison, not a change: no arrow (fewer passes is better)
    m[3].metric(t("speculative.s_draft_passes"), spec.draft_passes, help=t("speculative.s_draft_passes_help"))

    st.subheader(t("speculative.expected_title"))
    c_flops = _flop_ratio(spec)
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
    _measure(ids, rule_key, measured)


def _measure(ids: tuple[int, ...], rule_key: RuleKey, measured: SpeedMeasurement | None) -> None:
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
            measured = _measurement(ids, rule_key, int(runs), _progress=show)
            st.session_state["speculative_measured"] = ((ids, rule_key), measured)
            st.rerun(scope="app")      # the chart above shows it too
        except LimitError as e:
            st.error(t("speculative.bad_input", reason=str(e)), icon=":material/error:")
        finally:
            bar.empty()
    if measured is None:
        st.info(t("speculative.measure_none"), icon=":material/timer:")
        return
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


# ---- exactness ------------------------------------------------------------------------------------

def _exactness(spec: Speculation, ids: tuple[int, ...], rule_key: RuleKey, seed: int, vocab: list[str]) -> None:
    st.header(t("speculative.exact_title"))
    g_spec, g_plain = _greedy_pair(ids, len(spec.tokens), spec.gamma)
    c = st.columns(2)
    for col, tokens, key in ((c[0], g_spec.tokens, "exact_spec"), (c[1], g_plain.tokens, "exact_plain")):
        with col:
            sequences.show(t("speculative." + key, g=spec.gamma), " ".join(vocab[i] for i in tokens))
    if g_spec.tokens == g_plain.tokens:
        st.success(t("speculative.exact_same", n=len(g_plain.tokens), passes=g_spec.target_passes,
                     plain=len(g_plain.tokens) + (g_spec.prefill_len > 0)), icon=":material/check_circle:")
    else:
        first = next(i for i, (a, b) in enumerate(zip(g_spec.tokens, g_plain.tokens)) if a != b)
        st.error(t("speculative.exact_differ", i=first), icon=":material/error:")
    if spec.rule.get("name") == "greedy":
        st.caption(t("speculative.exact_greedy_note"))
        return
    plain = _plain(ids, len(spec.tokens), rule_key, seed)
    st.markdown(t("speculative.exact_sampled", seed=seed))
    c = st.columns(2)
    for col, tokens, key in ((c[0], spec.tokens, "exact_spec_sampled"), (c[1], plain.tokens, "exact_plain_sampled")):
        with col:
            sequences.show(t("speculative." + key), " ".join(vocab[i] for i in tokens))
    st.info(t("speculative.exact_distribution", test=CHI_SQUARE_TEST), icon=":material/science:")


# ---- the page ------------------------------------------------------------------------------------

DRAFTS = ("model", "prompt-lookup", "early-exit")     # the tiny GPT's draft model, or SmolLM2 drafting itself


def _draft_choice() -> str:
    """?sd_draft=: the tiny GPT with its draft model (default) or the real LLM without one (drawn
    with the settings: folded away in presenter mode)."""
    return st.segmented_control(t("speculative.draft_kind"), DRAFTS, required=True,
                                format_func=lambda d: t("speculative.draft_" + d.replace("-", "_")), key="sd_draft",
                                on_change=urlstate.sync, args=("sd_draft", DRAFTS[0]),
                                help=t("speculative.draft_kind_help"))


def render() -> None:
    st.title(t("speculative.title"))
    urlstate.choice_param("sd_draft", DRAFTS, DRAFTS[0])
    if st.session_state["sd_draft"] != "model":
        speculative_llm.render(st.session_state["sd_draft"], _draft_choice)
        return
    target, draft = _pair()
    model = target
    tc, dc = target.model.config, draft.model.config
    presenter.intro(t("speculative.intro", tl=tc.n_layer, th=tc.n_head, td=tc.n_embd, tp=target.model.n_params(),
                      dl=dc.n_layer, dh=dc.n_head, dd=dc.n_embd, dp=draft.model.n_params()))
    if not draft.tiny.trained:
        st.warning(t("speculative.draft_random", seed=draft.tiny.meta.get("fallback_seed", 0)),
                   icon=":material/casino:")
    if not target.tiny.trained:
        st.warning(t("speculative.target_random", seed=target.tiny.meta.get("fallback_seed", 0)),
                   icon=":material/casino:")
    with presenter.settings():
        _draft_choice()
        got = _inputs(model)
    if got is None:
        return
    ids, new, gamma, rule_key, seed = got
    try:
        spec = _speculation(ids, new, gamma, rule_key, seed)
    except (LimitError, ValueError) as e:
        st.error(t("speculative.bad_prompt", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return
    n_events = len(frames_speculative.plan(spec))
    nav.hidden_heading(t("stepper.section"))
    step_view.url_step_notice(n_events)
    key = (ids, new, gamma, rule_key, seed)
    step_view.page_stepper("speculative.step", functools.partial(_payload, *key), n_events, key="kvs_speculative",
                           run_id=repr(key), picker=_picker(model))
    vocab = list(target.tokenizer.vocab)
    _download(spec, vocab)
    if not step_view.whole_page():
        return
    _summary(spec, ids, rule_key)
    _exactness(spec, ids, rule_key, seed, vocab)
    with st.expander(t("speculative.more_title")):
        st.markdown(t("speculative.more_body"))
