"""Two views of the Paged cache page beside its served stream (``?pg_view=``), on whichever model the
page serves:

- ``prefix``: prefix caching two ways on one chat trace (kvviz.cache.radix.trace_prefix_caches):
  the stream's prompts (a shared system prompt) turned into conversations whose later turns repeat
  the earlier ones (kvviz.serving.conversation_trace), looked up and stored under block hashing
  (full blocks of the page's block size) and under a radix tree (to the token), both holding at
  most the page's pool of positions. Steppable: one frame per request, the tree as the stream
  arrives.
- ``disagg``: prefill on one process, decode on another, the cache's bytes shipped over a local
  socket between them (kvviz.serving.disagg), for the stream's first requests; the bytes against
  kvviz.cost's formula, the tokens against the single-process run; the measured transfer here and
  the same formula scaled to large models at a long context over the links serving systems use
  (each number says which it is). Behind a button: it starts two processes per request.
- ``stall``: one long prompt arriving among running decodes, served with whole prompts and under
  token budgets (kvviz.serving.stall), every pass timed here: each request's time to first token and
  the gaps between its tokens, in one figure. The tiny GPT's is measured once per server (a second or
  so); a real model's waits for a button (tens of seconds).

Every number comes from an engine record; this module reads settings, caches results, draws them."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from kvviz import cost
from kvviz.cache.radix import PrefixTrace, trace_prefix_caches
from kvviz.limits import LimitError
from kvviz.models.base import encode
from kvviz.serving import Request, ServeRun, conversation_trace
from kvviz.serving.disagg import Shipped, serve_disaggregated
from kvviz.serving.stall import StallRun, measure_stall, stall_stream
from kvviz.ui.app import fmt, models, nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.app.turns import RunStore, held
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import paged_notice, translator
from kvviz.ui.frames import paged_serving as frames_prefix
from kvviz.viz.paged_serving import STALL_WORDS, disagg_spec, stall_spec

VIEWS = ("stream", "prefix", "disagg", "stall")
DISAGG_REQUESTS = 2           # requests served by two processes each (every one starts two workers)
DISAGG_RUNS = 4               # finished disaggregated runs kept per server
SCALED_CONTEXT = 32_768       # the long context the measured transfer is scaled to
SCALED_MODELS = ("llama3-8b", "llama3.1-70b")
# links between a prefill and a decode machine, Gbit/s: a 100G Ethernet / RDMA NIC, 400G InfiniBand
# NDR, NVLink 4 within one node (900 GB/s both ways together, 450 GB/s each way)
LINKS = (("100G", 100.0), ("400G", 400.0), ("NVLink", 3_600.0))
# the stall: (long prompt's tokens, budgets, repeats) for the tiny GPT (its prompts stop at 64 tokens)
# and for a real model (docs/measured.md "Chunked prefill": 200 tokens, budgets 32 and 64)
STALL_TINY = (60, (8, 24), 5)
STALL_REAL = (200, (32, 64), 2)
STALL_RUNS = 4                # finished real-model stall measurements kept per server


def view_picker() -> str:
    """The page's view (``?pg_view=``): the served stream, prefix caching two ways, or prefill and
    decode on two processes."""
    urlstate.choice_param("pg_view", VIEWS, VIEWS[0])
    return st.segmented_control(t("serving.pg_view"), VIEWS, key="pg_view", required=True,
                                format_func=lambda v: t("stall.view" if v == "stall" else "serving.view_" + v),
                                on_change=urlstate.sync, args=("pg_view", VIEWS[0]),
                                help=t("serving.pg_view_help") + " " + t("stall.view_help"))


# ---- prefix caching two ways ---------------------------------------------------------------------

def _text_of(model):
    """Token ids → text: the model's tokenizer where it has one, the tiny GPT's words joined."""
    decode = getattr(model, "decode", None)

    def text(ids: Sequence[int]) -> str:
        tokens = [model.logit_tokens[i] for i in ids]
        return decode(tokens) if decode is not None else " ".join(tokens)
    return text


def prefix_trace(model, requests: Sequence[Request], seed: int, block: int, blocks: int) -> PrefixTrace:
    prompts = conversation_trace(requests, seed)
    return trace_prefix_caches([encode(model, p) for p in prompts], block, block * blocks)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _prefix_payload(key: tuple, _trace: PrefixTrace, _model, lang: str) -> str:
    """Every request's frame in one language (``key`` names the settings; the others are its)."""
    return frames_prefix.build(_trace, _text_of(_model), translator(lang)).to_json()


def render_prefix(model, key: tuple, requests: Sequence[Request], seed: int, block: int, blocks: int) -> None:
    st.markdown(t("serving.px_intro", bs=block, cap=block * blocks))
    try:
        trace = prefix_trace(model, requests, seed, block, blocks)
    except (LimitError, ValueError) as e:
        st.error(t("paged.bad_input", reason=str(e)), icon=":material/error:")
        return
    n = len(trace.prompts)
    step_view.url_step_notice(n)
    nav.hidden_heading(t("stepper.section"))
    step_view.page_stepper("paged.prefix", lambda _l, _h, lang: _prefix_payload(key, trace, model, lang), n,
                           key="kvs_paged_prefix", run_id=repr(("prefix", key)))
    hashed, radix = trace.result("hash"), trace.result("radix")
    c = st.columns(4)
    c[0].metric(t("serving.px_total_hash"), hashed.total, help=t("serving.px_total_hash_help"))
    c[1].metric(t("serving.px_total_radix"), radix.total, help=t("serving.px_total_radix_help"))
    c[2].metric(t("serving.px_m_blocks"), hashed.held, help=t("serving.px_m_blocks_help"))
    c[3].metric(t("serving.px_m_tokens"), radix.held, help=t("serving.px_m_tokens_help"))
    st.caption(t("serving.px_evicted", blocks=hashed.evicted, leaves=radix.evicted))
    table = pd.DataFrame([{"request": i, "prompt_tokens": len(p), "hash_hit": s.hash_hit, "radix_hit": s.radix_hit,
                           "hash_blocks_held": s.hash_blocks, "radix_tokens_held": s.radix_tokens,
                           "radix_nodes": len(s.tree), "hash_evicted": s.hash_evicted,
                           "radix_evicted": s.radix_evicted}
                          for i, (p, s) in enumerate(zip(trace.prompts, trace.steps))])
    st.download_button(t("serving.px_dl_csv"), lambda: table.to_csv(index=False),
                       file_name=f"prefix_caches_b{block}x{blocks}.csv", mime="text/csv",
                       icon=":material/download:", on_click="ignore", help=t("serving.px_dl_csv_help"))


# ---- disaggregated prefill and decode --------------------------------------------------------------

@dataclass(frozen=True)
class Disaggregated:
    """The stream's first requests, each prefilled in one process and decoded in another."""

    rows: tuple[tuple[Request, Shipped, int, bool], ...]    # request, what came back, formula bytes, same tokens


@st.cache_resource(show_spinner=False)
def _disagg_store() -> RunStore:
    return RunStore(DISAGG_RUNS)


def _ship(model_name: str, model, run: ServeRun) -> Disaggregated:
    rows = []
    for r in run.requests[:DISAGG_REQUESTS]:
        ids = encode(model, r.request.prompt)
        shipped = serve_disaggregated(model_name, ids, len(r.tokens))
        formula = cost.cache_bytes(model.cost_config, len(ids), 1, "fp32")
        same = [model.logit_tokens[i] for i in shipped.tokens] == list(r.tokens)
        rows.append((r.request, shipped, formula, same))
    return Disaggregated(tuple(rows))


def _scaled_rows(rate: float | None) -> list[tuple[str, str, float]]:
    """(model, link, seconds) to ship a SCALED_CONTEXT cache (fp16): the formula over each link, and
    at ``rate`` (bytes/s measured here) when there is one."""
    rows = []
    for name in SCALED_MODELS:
        cfg = cost.PRESETS[name]
        if rate:
            rows.append((cfg.name, t("stall.dg_here"), cost.cache_bytes(cfg, SCALED_CONTEXT, 1, "fp16") / rate))
        for label, gbit in LINKS:
            rows.append((cfg.name, label, cost.cache_transfer(cfg, SCALED_CONTEXT, 1, "fp16", gbit).seconds))
    return rows


def _ship_chart(rate: float | None) -> None:
    """The scaled transfer as a chart (formula over the links; this socket's measured rate once run)."""
    fig = go.Figure(disagg_spec(_scaled_rows(rate), title=t("stall.dg_title", context=SCALED_CONTEXT),
                                words={k: t(f"stall.fw_{k}") for k in STALL_WORDS}))
    chart(fig, t("stall.dg_alt"), key="pg_dg_chart")
    st.caption(t("stall.dg_chart_note" if rate else "stall.dg_chart_before"))


# presenter mode: the notice beside a view's chart (at 1 : 3 the stall notice ended 50-130 px below 720)
NOTICE_COLUMNS = [1.5, 3]


def _noticed(where: st.delta_generator.DeltaGenerator, text: str) -> st.delta_generator.DeltaGenerator:
    """A view's "what to notice" line in ``where``, before the view's chart, which goes into the
    container returned: above it normally; beside it in presenter mode, where the two come first
    (before the introduction) and the chart stays on one 1280×720 screen."""
    if presenter.presenting():
        side, main = where.columns(NOTICE_COLUMNS)
        with side:
            step_view.notice(text)
        return main
    with where:
        step_view.notice(text)
    return where.container()


def _view_intro(*texts: str) -> st.delta_generator.DeltaGenerator:
    """A view's introduction: above what follows normally, below it in presenter mode (the chart
    first on a projector's screen). Returns where what follows goes."""
    body = st.container()
    (st.container() if presenter.presenting() else body.container()).markdown("\n\n".join(texts))
    return body if presenter.presenting() else st.container()


def _disagg_notice(model, run: ServeRun, got: Disaggregated | None) -> str:
    """What to notice: the first request's cache by the formula; once run, the bytes shipped and the
    tokens against it (kvviz/ui/frames/paged_notice.py)."""
    if got is None:
        rows = [paged_notice.ShipRow(r.request.id, len(r.request.prompt),       # one id per token (encode)
                                     cost.cache_bytes(model.cost_config, len(r.request.prompt), 1, "fp32"))
                for r in run.requests[:DISAGG_REQUESTS]]
    else:
        rows = [paged_notice.ShipRow(r.id, len(r.prompt), f, s.bytes_sent, same) for r, s, f, same in got.rows]
    return paged_notice.disagg_notice(rows, model.cost_config, cost.DTYPE_BITS["fp32"] // 8,
                                      translator(current_lang()))


def render_disagg(model_name: str, model, key: tuple, run: ServeRun) -> None:
    holder = _view_intro(t("serving.dg_intro", n=min(DISAGG_REQUESTS, len(run.requests))))
    store = _disagg_store()
    got = store.get(key)                 # the chart (in ``holder``) above the button: the formula, then the rate
    if got is None:
        if not st.button(t("serving.dg_run"), type="primary", icon=":material/play_arrow:", key="pg_dg_go",
                         help=t("serving.dg_run_help")):
            with _noticed(holder, _disagg_notice(model, run, None)):
                _ship_chart(None)
            return
        with held(store.running, t("serving.dg_busy")) as mine:
            if not mine:
                return
            try:
                with st.spinner(t("serving.dg_running")):
                    got = _ship(model_name, model, run)
            except LimitError as e:
                st.error(t("serving.dg_failed", reason=str(e)), icon=":material/error:")
                return
            store.put(key, got)
    assert isinstance(got, Disaggregated)
    rate = sum(s.bytes_sent for _, s, _, _ in got.rows) / max(sum(s.transfer_s for _, s, _, _ in got.rows), 1e-9)
    with _noticed(holder, _disagg_notice(model, run, got)):
        _ship_chart(rate)
    text = _text_of(model)
    table = pd.DataFrame([{
        "request": r.id, "prompt_tokens": len(r.prompt), "bytes_shipped": s.bytes_sent, "cache_formula_bytes": f,
        "transfer_s_measured": s.transfer_s, "tokens": text(s.tokens), "same_as_one_process": same}
        for r, s, f, same in got.rows])
    ok = all(s.bytes_sent == f and same for _, s, f, same in got.rows)
    (st.success if ok else st.error)(t("serving.dg_check_ok" if ok else "serving.dg_check_bad", n=len(got.rows)),
                                     icon=":material/check_circle:" if ok else ":material/error:")
    names = {c: t(f"serving.dg_col_{c}") for c in table.columns}
    shown = table.copy()
    shown["bytes_shipped"] = [fmt.nbytes(v) for v in shown["bytes_shipped"]]
    shown["cache_formula_bytes"] = [fmt.nbytes(v) for v in shown["cache_formula_bytes"]]
    shown["transfer_s_measured"] = [fmt.duration(v) for v in shown["transfer_s_measured"]]
    shown["same_as_one_process"] = [t("paged.llm_yes" if v else "paged.llm_no") for v in shown["same_as_one_process"]]
    st.dataframe(shown.rename(columns=names), hide_index=True, width="stretch")
    st.subheader(t("serving.dg_scaled_h"))
    st.markdown(t("serving.dg_scaled_intro", rate=fmt.nbytes(int(rate)), context=SCALED_CONTEXT))
    rows = []
    for name in SCALED_MODELS:
        cfg = cost.PRESETS[name]
        moved = cost.cache_bytes(cfg, SCALED_CONTEXT, 1, "fp16")
        row = {t("serving.dg_sc_model"): cfg.name, t("serving.dg_sc_bytes"): fmt.nbytes(moved),
               t("serving.dg_sc_here"): fmt.duration(moved / rate)}
        for label, gbit in LINKS:
            row[t("serving.dg_sc_link", link=label)] = fmt.duration(
                cost.cache_transfer(cfg, SCALED_CONTEXT, 1, "fp16", gbit).seconds)
        rows.append(row)
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(t("serving.dg_scaled_note"))
    st.download_button(t("serving.dg_dl_csv"), lambda: table.to_csv(index=False),
                       file_name=f"disaggregated_{model_name}.csv", mime="text/csv", icon=":material/download:",
                       on_click="ignore", help=t("serving.dg_dl_csv_help"))


# ---- the stall a long prompt causes, with and without chunked prefill ------------------------------

def stall_setup(tiny: bool, budget: int) -> tuple[int, tuple[int, ...], int]:
    """(long prompt's tokens, budgets, repeats); the page's own budget (``pg_budget``) joins the two."""
    long, budgets, repeats = STALL_TINY if tiny else STALL_REAL
    return long, tuple(sorted({*budgets, budget} - {0})), repeats


def _measure_stall(model, tiny: bool, budget: int, progress=None) -> StallRun:
    long, budgets, repeats = stall_setup(tiny, budget)
    return measure_stall(model, stall_stream(model, long), budgets, repeats, progress=progress)


@st.cache_resource(max_entries=8, ttl=3600, show_spinner=False)
def _tiny_stall(budget: int, _model) -> StallRun:
    """The tiny GPT's measurement, once per server and budget (about a second)."""
    return _measure_stall(_model, True, budget)


@st.cache_resource(show_spinner=False)
def _stall_store(name: str) -> RunStore:
    store = RunStore(STALL_RUNS)
    store.running = models.generation_lock(name)       # one run of a model at a time, whichever page runs it
    return store


def _real_stall(model_name: str, model, budget: int) -> StallRun | None:
    store = _stall_store(model_name)
    got = store.get(budget)
    if got is not None:
        return got                                                 # type: ignore[return-value]
    if not st.button(t("stall.run"), type="primary", icon=":material/play_arrow:", key="pg_stall_go",
                     help=t("stall.run_help")):
        return None
    with held(store.running, t("stall.busy")) as mine:
        if not mine:
            return None
        bar = st.progress(0.0, text=t("stall.progress", done=0, n=1))

        def progress(done: int, total: int) -> None:
            bar.progress(done / total, text=t("stall.progress", done=done, n=total))

        try:
            got = _measure_stall(model, False, budget, progress)
        except LimitError as e:
            st.error(t("stall.failed", reason=str(e)), icon=":material/error:")
            return None
        store.put(budget, got)
        bar.empty()
        return got


def _stall_words() -> dict[str, str]:
    return {k: t(f"stall.fw_{k}") for k in (*STALL_WORDS, "budget", "request")}


def render_stall(model_name: str, model, tiny: bool, budget: int) -> None:
    long, budgets, repeats = stall_setup(tiny, budget)
    top = _view_intro(t("stall.intro", long=long, budgets=", ".join(map(str, budgets)), repeats=repeats))
    try:
        run = _tiny_stall(budget, model) if tiny else _real_stall(model_name, model, budget)
    except LimitError as e:
        st.error(t("stall.failed", reason=str(e)), icon=":material/error:")
        return
    if run is None:
        return
    with _noticed(top, paged_notice.stall_notice(run, translator(current_lang()))):
        chart(go.Figure(stall_spec(run, words=_stall_words(), decimal=fmt.fixed)), t("stall.alt"),
              key="pg_stall_chart")
    whole, best = run.settings[0], paged_notice.smoothest(run)
    shown = paged_notice.stall_time(run, current_lang())
    st.markdown(t("stall.trade", gap=shown(whole.short_max_gap_s), budget=best.chunk_budget,
                  chunk_gap=shown(best.short_max_gap_s), ttft=shown(whole.long.ttft_s),
                  chunk_ttft=shown(best.long.ttft_s), steps=whole.steps, chunk_steps=best.steps))
    ok = run.all_same_as_solo
    (st.success if ok else st.error)(t("stall.check_ok" if ok else "stall.check_bad", n=len(run.settings)),
                                     icon=":material/check_circle:" if ok else ":material/error:")
    st.dataframe(pd.DataFrame([{
        t("stall.col_setting"): t("stall.fw_whole") if x.chunk_budget is None else x.chunk_budget,
        t("stall.col_steps"): x.steps, t("stall.col_max_gap"): shown(x.short_max_gap_s),
        t("stall.col_ttft"): shown(x.long.ttft_s), t("stall.col_ttft_steps"): x.long.ttft_steps}
        for x in run.settings]), hide_index=True, width="stretch")
    st.caption(t("stall.note"))
    table = pd.DataFrame(run.rows())
    st.download_button(t("stall.dl_csv"), lambda: table.to_csv(index=False),
                       file_name=f"stall_{model_name}_{run.long_tokens}.csv", mime="text/csv",
                       icon=":material/download:", on_click="ignore", help=t("stall.dl_csv_help"))
