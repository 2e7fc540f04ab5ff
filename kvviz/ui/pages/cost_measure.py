"""Cost page, measured tab: decode and prefill timed on this server (behind a button), and the
arithmetic intensity of prefill vs decode from the formulas."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz import cost
from kvviz.limits import (
    MAX_COST_TOKENS,
    MAX_MEASURE_BATCH,
    MAX_MEASURE_CACHE_BYTES,
    MAX_MEASURE_CONTEXT,
    MAX_MEASURE_GFLOP,
    LimitError,
    check_int,
)
from kvviz.measure.scaling import SHAPES, Measurements, measure_all
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import cost_notice, translator
from kvviz.viz.cost import line_chart, step_time_vs_batch

KEEP = "session"
BATCH_OPTIONS = [b for b in (1, 2, 4, 8, 16, 32) if b <= MAX_MEASURE_BATCH]
LEN_OPTIONS = [n for n in (8, 16, 32, 64, 128, 256, 512, 1024) if n <= MAX_MEASURE_CONTEXT]
PROMPT_OPTIONS = [n for n in LEN_OPTIONS if n < MAX_MEASURE_CONTEXT]     # the first decode needs one more
DEFAULTS = {"tiny": dict(ms_batches=[1, 2, 4, 8, 16, 32], ms_context=128, ms_prompts=[8, 32, 128, 512]),
            "gpt2": dict(ms_batches=[1, 2, 4, 8], ms_context=128, ms_prompts=[8, 32, 128])}


CONTEXTS_DEFAULT = [16, 64, 256, 1024]


def _defaults() -> dict[str, object]:
    """What each setting is when the address does not say (the sweeps depend on the shape)."""
    return {"ms_shape": "tiny", "ms_contexts": CONTEXTS_DEFAULT, **DEFAULTS[st.session_state.ms_shape]}


def _on_shape() -> None:
    st.session_state.update(DEFAULTS[st.session_state.ms_shape])
    urlstate.sync_all(_defaults())


def _init() -> None:
    """The settings from the address once per session (?ms_shape=gpt2&ms_batches=1,2,4)."""
    urlstate.choice_param("ms_shape", list(SHAPES), "tiny")
    d = DEFAULTS[st.session_state.ms_shape]
    urlstate.ints_param("ms_batches", BATCH_OPTIONS, d["ms_batches"])
    urlstate.choice_param("ms_context", LEN_OPTIONS, d["ms_context"], parse=int)
    urlstate.ints_param("ms_contexts", LEN_OPTIONS, CONTEXTS_DEFAULT)
    urlstate.ints_param("ms_prompts", PROMPT_OPTIONS, d["ms_prompts"])


def render() -> None:
    """The measurement behind its button (inputs and caps folded away in presenter mode, the button
    and then the results first)."""
    presenter.section_intro(t("cost.ms_intro"))
    ss = st.session_state
    _init()
    defaults = _defaults()

    def kept(key: str) -> dict:
        return dict(persist_state=KEEP, on_change=urlstate.sync, args=(key, defaults[key]))
    with presenter.settings():
        c, d, caps = st.columns([2, 3, 2]), st.columns(2), st.container()
    c[0].selectbox(t("cost.ms_shape"), list(SHAPES), key="ms_shape", on_change=_on_shape, persist_state=KEEP,
                   format_func=lambda k: t("cost.ms_shape_" + k), help=t("cost.ms_shape_help"))
    c[1].multiselect(t("cost.ms_batches"), BATCH_OPTIONS, key="ms_batches", help=t("cost.ms_batches_help"),
                     format_func=fmt.integer, **kept("ms_batches"))
    c[2].select_slider(t("cost.ms_context"), LEN_OPTIONS, key="ms_context", help=t("cost.ms_context_help"),
                       format_func=fmt.integer, **kept("ms_context"))
    d[0].multiselect(t("cost.ms_contexts"), LEN_OPTIONS, key="ms_contexts", help=t("cost.ms_contexts_help"),
                     format_func=fmt.integer, **kept("ms_contexts"))
    d[1].multiselect(t("cost.ms_prompts"), PROMPT_OPTIONS, key="ms_prompts",
                     help=nav.term_help("ttft", t("cost.ms_prompts_help")), format_func=fmt.integer,
                     **kept("ms_prompts"))
    caps.caption(t("cost.ms_caps", batch=fmt.integer(MAX_MEASURE_BATCH), ctx=fmt.integer(MAX_MEASURE_CONTEXT),
                 mib=fmt.integer(MAX_MEASURE_CACHE_BYTES // 2**20), gflop=fmt.sig(MAX_MEASURE_GFLOP)))
    if st.button(t("cost.ms_run"), type="primary", icon=":material/timer:", help=t("cost.ms_run_help")):
        bar = st.progress(0.0, text=t("cost.ms_progress", what="…"))
        try:
            def show(f: float, label: str) -> None:
                bar.progress(min(f, 1.0), text=t("cost.ms_progress", what=label))
            res = measure_all(ss.ms_shape, ss.ms_batches, ss.ms_context, ss.ms_contexts, ss.ms_prompts,
                              progress=show)
            ss.setdefault("ms_results", {})[ss.ms_shape] = res
        except LimitError as e:
            st.error(t("cost.bad_input", reason=str(e)), icon=":material/error:")
        finally:
            bar.empty()
    res: Measurements | None = ss.get("ms_results", {}).get(ss.ms_shape)
    if res is None:
        st.info(t("cost.ms_none"), icon=":material/timer:")
    else:
        _results(res)
    _intensity()


def _results(res: Measurements) -> None:
    cfg = SHAPES[res.shape]
    st.caption(t("cost.ms_done", s=fmt.fixed(res.seconds, 1), name=cfg.name, threads=res.threads))
    pts = res.batch
    first, last = pts[0], pts[-1]
    step_view.notice(cost_notice.measured(res, translator(current_lang())))
    m = st.columns(3)
    m[0].metric(t("cost.ms_tok_s_1", b=first.batch), fmt.fixed(first.tokens_per_s, 0))
    m[1].metric(t("cost.ms_tok_s_n", b=last.batch), fmt.fixed(last.tokens_per_s, 0),
                delta=fmt.factor(last.tokens_per_s / first.tokens_per_s, 1), delta_color="off")
    m[2].metric(t("cost.ms_step_rise", a=first.batch, b=last.batch),
                fmt.factor(last.ms_per_step / first.ms_per_step, 2),
                help=t("cost.ms_step_rise_help"))
    fig = step_time_vs_batch([p.batch for p in pts], [p.ms_per_step for p in pts], [p.tokens_per_s for p in pts],
                             {"ms": t("cost.ms_ms"), "tok_s": t("cost.ms_tok_s"), "x": t("cost.ms_batch_x"),
                              "title": t("cost.ms_batch_title", name=cfg.name, ctx=pts[0].context)})
    chart(fig, t("cost.ms_batch_alt"), key="cost_ms_batch_chart")
    st.markdown(t("cost.ms_batch_text"))
    table = pd.DataFrame([{t("cost.ms_batch_x"): p.batch, t("cost.ms_ms"): p.ms_per_step,
                           t("cost.ms_tok_s"): p.tokens_per_s, "GFLOP/s": p.gflops, "GB/s": p.gbytes_per_s}
                          for p in pts])
    digits = {t("cost.ms_ms"): 3, t("cost.ms_tok_s"): 0, "GFLOP/s": 2, "GB/s": 2}   # numbers stay numbers
    st.dataframe(table.style.format({c: (lambda v, d=d: fmt.fixed(v, d)) for c, d in digits.items()}),
                 hide_index=True, width="stretch")
    left, right = st.columns(2)
    with left:
        cx = res.context
        fig = line_chart([p.context for p in cx], {t("cost.ms_ms"): [p.ms_per_step for p in cx]},
                         {"x": t("cost.ms_ctx_x"), "y": t("cost.ms_ms"), "title": t("cost.ms_ctx_title")})
        chart(fig, t("cost.ms_ctx_alt"), key="cost_ms_ctx_chart")
    with right:
        pf = res.prefill
        fig = line_chart([p.prompt_len for p in pf],
                         {t("cost.ms_ttft"): [p.ttft_ms for p in pf], t("cost.ms_tpot"): [p.tpot_ms for p in pf]},
                         {"x": t("cost.ms_prompt_x"), "y": t("cost.ms_time"), "title": t("cost.ms_ttft_title")})
        chart(fig, t("cost.ms_ttft_alt"), key="cost_ms_ttft_chart")
    st.markdown(t("cost.ms_ttft_text", p=pf[-1].prompt_len, ttft=fmt.fixed(pf[-1].ttft_ms, 1),
                  tpot=fmt.fixed(pf[-1].tpot_ms, 2), x=fmt.fixed(pf[-1].ttft_ms / pf[-1].tpot_ms, 1)))


AI_DEFAULTS = {"ai_model": "llama3-8b", "ai_ridge": 300.0, "ai_context": 4096}


def _intensity() -> None:
    st.subheader(t("cost.ai_title"))
    st.markdown(t("cost.ai_intro"))
    ss = st.session_state
    urlstate.choice_param("ai_model", list(cost.PRESETS), AI_DEFAULTS["ai_model"])
    urlstate.float_param("ai_ridge", AI_DEFAULTS["ai_ridge"], 0.001, 999_999)
    urlstate.int_param("ai_context", AI_DEFAULTS["ai_context"], 1, MAX_COST_TOKENS)

    def kept(key: str) -> dict:
        return dict(persist_state=KEEP, on_change=urlstate.sync, args=(key, AI_DEFAULTS[key]))
    c = st.columns([3, 1, 1])
    c[0].selectbox(t("cost.preset"), list(cost.PRESETS), key="ai_model", format_func=lambda k: cost.PRESETS[k].name,
                   **kept("ai_model"))
    c[1].number_input(t("cost.ai_context"), step=1, key="ai_context", help=t("cost.ai_context_help"),
                      **kept("ai_context"))
    c[2].number_input(t("cost.ai_ridge"), step=10.0, key="ai_ridge", format="%.4g", help=t("cost.ai_ridge_help"),
                      **kept("ai_ridge"))
    cfg = cost.PRESETS[ss.ai_model]
    try:
        ctx = check_int(t("cost.ai_context"), ss.ai_context, 1, MAX_COST_TOKENS)
        ridge = float(ss.ai_ridge)
        if not (ridge > 0 and ridge < 1e6):
            raise LimitError(t("cost.ai_bad_ridge"))
        xs = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
        pre = [cost.prefill_intensity(cfg, x, 1).flops_per_byte for x in xs]
        dec = [cost.decode_intensity(cfg, ctx, x).flops_per_byte for x in xs]
    except (LimitError, ValueError, TypeError, OverflowError) as e:
        st.error(t("cost.bad_input", reason=str(e)), icon=":material/error:")
        return
    step_view.notice(cost_notice.intensity(xs, pre, dec, ridge, ctx, cost.decode_intensity_limit(cfg, ctx),
                                           translator(current_lang())))
    fig = line_chart(xs, {t("cost.ai_prefill"): pre, t("cost.ai_decode", ctx=fmt.integer(ctx)): dec},
                     {"x": t("cost.ai_x"), "y": t("cost.ai_y"), "title": t("cost.ai_fig_title", name=cfg.name)},
                     log_x=True, log_y=True, hlines={t("cost.ai_ridge_line", r=fmt.sig(ridge)): ridge})
    chart(fig, t("cost.ai_alt"), key="cost_intensity_chart")
    st.markdown(t("cost.ai_text", d1=fmt.fixed(dec[0], 2), d64=fmt.fixed(dec[6], 1), p512=fmt.fixed(pre[9], 0),
                  ridge=fmt.sig(ridge), ctx=ctx, limit=fmt.fixed(cost.decode_intensity_limit(cfg, ctx), 1)))
