"""The tiny GPT page body: step through a real GPT's prefill and decode, verify that the cache changes
nothing, time it, and weigh its memory (the file in pages/ only sets up the frame and calls render)."""
from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from kvviz import cost
from kvviz.decoding.loops import Comparison, compare, max_cached_new_tokens
from kvviz.decoding.stepper import Run, run_generation
from kvviz.limits import GPT_MAX_SWEEP_TOKENS, LimitError
from kvviz.measure.timing import LoopTimes, Sweep, measure_sweep, sweep_sizes, time_loops
from kvviz.models.gpt import GPTModel
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.models import tiny as _tiny  # the server's one tiny GPT (read-only)
from kvviz.ui.app.turns import my_turn, server_lock
from kvviz.ui.components import downloads, sequences, step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.components.prompts import prompt_tokens
from kvviz.ui.components.rule_controls import RuleKey, default_rule, rule_cache_key, rule_controls, rule_from_key
from kvviz.ui.frames import gpt as frames_gpt
from kvviz.ui.frames import translator
from kvviz.ui.pages import gpt_long, gpt_whole_run, lecture
from kvviz.viz.cost import speedup_chart

TIMING = "gpt_timing"      # the server lock of the loop timings and the sweep (kvviz.ui.app.turns)

DEFAULT_PROMPT, DEFAULT_NEW = "Today the weather is so", 8




# ---- shared, read-only resources -----------------------------------------------------------------


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def _run(tokens: tuple[str, ...], new: int, rule_key: RuleKey, seed: int) -> Run:
    return run_generation(GPTModel(_tiny()), list(tokens), new, rule_from_key(rule_key), seed)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _compare(ids: tuple[int, ...], new: int, rule_key: RuleKey, seed: int) -> Comparison:
    return compare(_tiny().model, list(ids), new, rule_from_key(rule_key), seed)   # both loops warmed first


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _loop_times(ids: tuple[int, ...], new: int, rule_key: RuleKey, seed: int) -> LoopTimes:
    """Both loops warmed, then timed several times each, interleaved; one timing at a time per server."""
    with server_lock(TIMING):
        return time_loops(_tiny().model, list(ids), new, rule_from_key(rule_key), seed)


def warm() -> None:
    """The default visit's runs and frames, made by the server's warm-up (kvviz/ui/app/warmup.py)."""
    model = GPTModel(_tiny())
    tokens = tuple(prompt_tokens(model, DEFAULT_PROMPT))
    rule, seed = default_rule("gpt")
    rule_key = rule_cache_key(rule)
    run = _run(tokens, DEFAULT_NEW, rule_key, seed)
    _payload(tokens, DEFAULT_NEW, rule_key, seed, 0, 0, "en")      # layer 1, head 1
    gpt_whole_run.warm(run, model, (tokens, DEFAULT_NEW, rule_key, seed))
    ids = tuple(model.tokenizer.index[w] for w in tokens)
    _compare(ids, DEFAULT_NEW, rule_key, seed)
    _loop_times(ids, DEFAULT_NEW, rule_key, seed)
    gpt_long.warm(_tiny(), ids, seed)


# ---- inputs --------------------------------------------------------------------------------------

def _inputs(model: GPTModel, errors=st) -> tuple[list[str], int, RuleKey, int] | None:
    """Prompt words, new tokens, rule and seed; None after a message in ``errors`` (a slot outside the
    folded settings, so that a bad address's message stays in sight)."""
    c = st.columns([3, 1])
    text = c[0].text_input(t("gpt.prompt"), value=DEFAULT_PROMPT, key="gpt_prompt", bind="query-params",
                           max_chars=400, help=t("gpt.prompt_help"))
    cap = model.limits.max_new_tokens
    urlstate.int_param("gpt_new", DEFAULT_NEW, 1, cap)   # not bind: it raises on ?gpt_new=inf
    new = c[1].number_input(t("gpt.new_tokens"), 1, cap, key="gpt_new",
                            on_change=urlstate.sync, args=("gpt_new", DEFAULT_NEW),
                            help=t("gpt.new_tokens_help", cap=cap))
    rule, seed = rule_controls("gpt")            # the same selection-rule controls as every model page
    with st.expander(t("gpt.vocab_title", n=len(model.vocab))):
        st.markdown(" ".join(f"`{w}`" for w in model.vocab))
    try:
        return prompt_tokens(model, text), int(new), rule_cache_key(rule), seed
    except (LimitError, ValueError) as e:
        errors.error(t("gpt.bad_prompt", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return None


# ---- the stepper ---------------------------------------------------------------------------------

@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _payload(tokens: tuple[str, ...], new: int, rule_key: RuleKey, seed: int, layer: int, head: int,
             lang: str) -> str:
    """Every event's frame of one run, for one layer and head, in one language (read-only JSON)."""
    return frames_gpt.build(_run(tokens, new, rule_key, seed), GPTModel(_tiny()), layer, head,
                            translator(lang)).to_json()


def picker(model: GPTModel) -> LayerHeadPicker:
    """Layer and head of the heatmap and the cache table (?gpt_layer=4&gpt_head=2); the model view's
    tiles pick them too."""
    return LayerHeadPicker("gpt", model.n_layers, model.n_heads, ("gpt.layer", "gpt.layer_help", "gpt.head",
                                                                  "gpt.head_help"))


# ---- verification, memory, timing -----------------------------------------------------------------

def _ms(seconds: float) -> str:
    return fmt.num(seconds * 1e3, ",.3g") if seconds < 0.1 else fmt.fixed(seconds * 1e3, 0)


def _verification(cmp: Comparison, times: LoopTimes, run: Run, model: GPTModel) -> None:
    st.header(t("gpt.verify_title"))
    st.markdown(t("gpt.verify_intro"))
    tok = model.tokenizer
    c = st.columns(2)
    for col, gen, timing, key in ((c[0], cmp.uncached, times.uncached, "uncached"),
                                  (c[1], cmp.cached, times.cached, "cached")):
        with col:
            sequences.show(t("gpt.verify_" + key), tok.decode(gen.tokens))
            st.caption(t("gpt.verify_time", n=times.new_tokens, median=_ms(timing.median), low=_ms(timing.low),
                         high=_ms(timing.high), runs=len(timing.samples)))
    runs = len(times.cached.samples)
    if times.within_noise:
        st.info(t("gpt.verify_times_noise", n=times.new_tokens, runs=runs), icon=":material/info:")
    else:
        key = "gpt.verify_times_faster" if times.ratio > 1 else "gpt.verify_times_slower"
        st.caption(t(key, x=fmt.factor(max(times.ratio, 1 / times.ratio)), n=times.new_tokens, runs=runs))
    if cmp.identical:
        st.success(t("gpt.verify_same", n=len(cmp.cached.tokens), diff=fmt.sci(cmp.max_abs_logit_diff, 1)),
                   icon=":material/check_circle:")
    else:
        st.error(t("gpt.verify_differ", pos=cmp.first_difference, diff=fmt.sci(cmp.max_abs_logit_diff, 2)),
                 icon=":material/error:")
    stepped = [e.chosen for e in run.events if e.phase == "choose"]
    same_as_stepper = stepped == [model.vocab[i] for i in cmp.cached.tokens]
    st.caption(t("gpt.verify_stepper_same" if same_as_stepper else "gpt.verify_stepper_differ"))


def _memory(cmp: Comparison, model: GPTModel) -> None:
    cfg = model.config
    st.header(t("gpt.memory_title"))
    T = len(cmp.cached.prompt) + len(cmp.cached.tokens) - 1
    per_token = cost.cache_bytes_per_token(model.cost_config, "fp32")          # 2·L·d·4
    formula = per_token * T
    c = st.columns(3)
    c[0].metric(t("gpt.memory_positions"), T, help=t("gpt.memory_positions_help"))
    c[1].metric(t("gpt.memory_measured"), f"{fmt.integer(cmp.cached.cache_bytes)} B",
                help=nav.term_help("kv_cache", t("gpt.memory_measured_help")))
    c[2].metric(t("gpt.memory_formula"), f"{fmt.integer(formula)} B",
                help=t("gpt.memory_formula_help", L=cfg.n_layer, T=T, d=cfg.n_embd))
    g2 = cost.cache_bytes_per_token(cost.GPT2_SMALL, "fp16")
    g2_full = cost.cache_bytes(cost.GPT2_SMALL, 1024, 1, "fp16")
    st.markdown(t("gpt.memory_body", L=cfg.n_layer, d=cfg.n_embd, T=T, per_token=per_token,
                  formula=formula, g2=g2, g2_full=g2_full,
                  g2_mb=fmt.fixed(g2_full / 1e6, 1),
                  same=t("gpt.memory_equal") if cmp.cached.cache_bytes == formula else t("gpt.memory_not_equal")))


def _sweep_table(sweep: Sweep):
    """The sweep as a table: numbers stay numbers (sortable), shown in the page's language."""
    df = pd.DataFrame([{
        "N": p.n,
        t("gpt.col_uncached_ms"): p.seconds_uncached * 1e3,
        t("gpt.col_cached_ms"): p.seconds_cached * 1e3,
        t("gpt.col_uncached_tps"): p.n / p.seconds_uncached,
        t("gpt.col_cached_tps"): p.n / p.seconds_cached,
        t("gpt.col_speedup"): p.speedup,
        t("gpt.col_model"): sweep.predicted_speedup(p.n),
        t("gpt.col_flops"): p.flop_ratio,
        t("gpt.col_share"): p.speedup / p.flop_ratio,
        t("gpt.col_same"): "✓" if p.same_tokens else "✗",
    } for p in sweep.points])
    digits = {"gpt.col_uncached_ms": 1, "gpt.col_cached_ms": 1, "gpt.col_uncached_tps": 0, "gpt.col_cached_tps": 0,
              "gpt.col_speedup": 2, "gpt.col_model": 2, "gpt.col_flops": 1}
    shown = {t(k): (lambda v, d=d: fmt.fixed(v, d)) for k, d in digits.items()}
    return df.style.format({**shown, t("gpt.col_share"): fmt.percent})


def _timing(tokens: list[str], rule_key: RuleKey, seed: int, model: GPTModel) -> None:
    st.header(t("gpt.timing_title"))
    st.markdown(t("gpt.timing_intro"))
    ids = [model.tokenizer.index[w] for w in tokens]
    limit = min(GPT_MAX_SWEEP_TOKENS, max_cached_new_tokens(model, len(ids)))
    if limit < 1:
        st.warning(t("gpt.timing_no_room", n=len(ids), block=model.config.block_size))
        return
    options = sweep_sizes(model.network, len(ids), limit)
    c = st.columns([3, 1, 1.2], vertical_alignment="bottom")
    max_n = c[0].select_slider(t("gpt.timing_max_n"), options, value=options[-1] if options[-1] <= 128
                               else max(n for n in options if n <= 128), key="gpt_sweep_max",
                               help=t("gpt.timing_max_n_help", cap=limit))
    repeats = c[1].number_input(t("gpt.timing_repeats"), 3, 5, 3, key="gpt_sweep_repeats",
                                help=t("gpt.timing_repeats_help"))
    go = c[2].button(t("gpt.timing_run"), icon=":material/timer:", type="primary", width="stretch",
                     help=t("gpt.timing_run_help"))
    inputs = (tuple(ids), rule_key, seed)
    if go:
        with my_turn(TIMING, t("gpt.timing_busy")) as mine:
            if mine:
                try:
                    bar = st.progress(0.0, text=t("gpt.timing_progress", what="…"))
                    ns = [n for n in options if n <= max_n]
                    sweep = measure_sweep(model.network, ids, ns, rule_from_key(rule_key), seed, int(repeats),
                                          progress=lambda f, what: bar.progress(
                                              min(1.0, f), text=t("gpt.timing_progress", what=what)))
                    st.session_state["gpt_sweep"] = (inputs, sweep)
                    bar.empty()
                except LimitError as e:
                    st.error(str(e))
    stored = st.session_state.get("gpt_sweep")
    if stored is None:
        st.info(t("gpt.timing_none"), icon=":material/timer:")
        return
    stored_inputs, sweep = stored
    if stored_inputs != inputs:
        st.caption(t("gpt.timing_stale"))
    if sweep.noisy():
        st.warning(t("gpt.timing_noisy", spread=fmt.fixed(max(p.spread for p in sweep.points), 1)),
                   icon=":material/warning:")
    ns = [p.n for p in sweep.points]
    fig = speedup_chart(ns, {
        t("gpt.series_measured"): [p.speedup for p in sweep.points],
        t("gpt.series_model"): [sweep.predicted_speedup(n) for n in ns],
        t("gpt.series_flops"): [p.flop_ratio for p in sweep.points],
    }, t("gpt.chart_title"), t("gpt.chart_x"), t("gpt.chart_y"))
    chart(fig, t("gpt.chart_alt"), key="gpt_speedup_chart")
    st.dataframe(_sweep_table(sweep), hide_index=True, width="stretch")
    e = sweep.explanation()
    st.markdown(t("gpt.explain", n=e["n"], speedup=fmt.fixed(e["speedup"], 1), flops=fmt.fixed(e["flop_ratio"], 0),
                  share=fmt.percent(e["share"]), step_ms=fmt.fixed(e["step_ms"], 2),
                  step_gflops=fmt.fixed(e["step_gflops"], 2), full_tokens=e["full_tokens"],
                  full_ms=fmt.fixed(e["full_ms"], 2), full_gflops=fmt.fixed(e["full_gflops"], 1),
                  weights_mb=fmt.fixed(e["weights_mb"], 1), model=fmt.fixed(e["time_model"], 1)))


# ---- the page ------------------------------------------------------------------------------------

def render() -> None:
    tiny = _tiny()
    model = GPTModel(tiny)
    cfg = model.config
    lecture.title("gpt", t("gpt.title"))           # with its place in the lecture script
    presenter.intro(t("gpt.intro", layers=cfg.n_layer, heads=cfg.n_head, d=cfg.n_embd, vocab=cfg.vocab_size,
                      block=cfg.block_size, params=model.network.n_params()))
    if tiny.trained:
        tr = tiny.meta.get("training", {})
        steps, loss = tr.get("steps"), tr.get("val_loss")
        st.caption(t("gpt.weights_trained", steps=int(steps or 0),            # 0: the =0 form says "unknown"
                     loss="?" if loss is None else fmt.sig(loss)))
    else:
        st.warning(t("gpt.weights_random", seed=tiny.meta.get("fallback_seed", 0)), icon=":material/casino:")
    errors = st.container()
    with nav.folded_settings():                         # the step first: settings one click away
        got = _inputs(model, errors)
    if got is None:
        return
    tokens, new, rule_key, seed = got
    try:
        run = _run(tuple(tokens), new, rule_key, seed)
    except (LimitError, ValueError) as e:
        st.error(t("gpt.bad_prompt", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return
    if presenter.presenting():
        nav.hidden_heading(t("stepper.section"))       # the event heading (h3) follows an h2
    else:
        st.header(t("gpt.step_title"))
    step_view.url_step_notice(len(run.events))
    key = (tuple(tokens), new, rule_key, seed)
    step_view.page_stepper("gpt.step", functools.partial(_payload, *key), len(run.events), key="kvs_gpt",
                           run_id=repr(key), picker=picker(model), pickable=True)     # first: the browser draws it
    downloads.trace_button(run, model.logit_tokens, "tiny_gpt")                # while the loops below run
    if not step_view.whole_page():
        return
    try:
        cmp = _compare(tuple(model.tokenizer.index[w] for w in tokens), new, rule_key, seed)
    except (LimitError, ValueError) as e:
        st.error(t("gpt.bad_prompt", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return
    _verification(cmp, _loop_times(tuple(model.tokenizer.index[w] for w in tokens), new, rule_key, seed), run, model)
    _memory(cmp, model)
    _timing(tokens, rule_key, seed, model)
    ids = tuple(model.tokenizer.index[w] for w in tokens)
    gpt_long.loop_section(tiny, model, ids, seed)           # greedy's loop, and what sampling does to it
    gpt_long.crop_section(tiny, model, ids, rule_key, seed)  # past block_size: the crop and the stop
    gpt_whole_run.section(run, model, key)                   # the run's attention as one matrix, a row per pass
    if not presenter.presenting():
        with st.expander(t("gpt.more_title")):
            st.markdown(t("gpt.more_body"))
