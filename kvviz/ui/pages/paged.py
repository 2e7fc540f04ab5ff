"""The Paged cache page body: a seeded stream of requests served by the tiny GPT from one paged KV
cache (kvviz.serving), step by step; memory under paging vs contiguous reservation; continuous vs
static batching on the same stream; copy-on-write when two samples share a prompt.

Every number comes from the engine's records (ServeRun, StepRecord, SizePoint, ForkRun); the page
only reads settings, caches runs and draws them."""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace

import pandas as pd
import streamlit as st

from kvviz.limits import (
    MAX_SEED,
    MAX_SERVE_BATCH,
    MAX_SERVE_BLOCK_SIZE,
    MAX_SERVE_BLOCKS,
    MAX_SERVE_NEW_TOKENS,
    MAX_SERVE_REQUESTS,
    MAX_SERVE_SHARED_PREFIX,
    LimitError,
)
from kvviz.models.gpt import GPTModel, TinyGPT, load_tiny_gpt
from kvviz.serving import (
    POLICIES,
    ForkRun,
    Request,
    ServeRun,
    SizePoint,
    block_size_sweep,
    fork_run,
    request_stream,
    serve,
    serve_run_dict,
)
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.links import deep_link
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import paged as frames_paged
from kvviz.ui.frames import translator
from kvviz.viz.paged import block_pool_figure, block_size_figure, latency_figure, memory_figure, timeline_figure

PAGE = "pages/6_Paged_cache.py"
# (URL key, default, low, high): the defaults share an 8-word prefix (two full blocks of 4) from step 1
# and cross a block boundary at step 2; 16 blocks keep the tokens readable in the pool grid
NUMBERS = [("pg_requests", 6, 1, MAX_SERVE_REQUESTS), ("pg_block", 4, 1, MAX_SERVE_BLOCK_SIZE),
           ("pg_blocks", 16, 1, MAX_SERVE_BLOCKS), ("pg_prefix", 8, 0, MAX_SERVE_SHARED_PREFIX),
           ("pg_new", 12, 1, MAX_SERVE_NEW_TOKENS), ("pg_batch", 4, 1, MAX_SERVE_BATCH), ("pg_seed", 0, 0, MAX_SEED)]
DEFAULTS = {k: d for k, d, _, _ in NUMBERS} | {"pg_policy": "continuous"}
SMALL_POOL = 8               # with the defaults: two preemptions (steps 6 and 16)
KEEP_KV_SLOTS = 256          # pools up to this many positions keep layer 1's keys per step for the cache rows
SWEEP_SIZES = (1, 2, 4, 8, 16, 32)
FORK_NEW_TOKENS = 4



@dataclass(frozen=True)
class Settings:
    """The page's settings (each kept in the address as ``pg_<name>``): the stream (requests, shared
    prefix, new tokens, seed), the pool (block size, blocks) and the scheduler (batch, policy)."""

    requests: int
    block: int
    blocks: int
    prefix: int
    new: int
    batch: int
    seed: int
    policy: str

    @classmethod
    def of(cls, values: Mapping[str, object]) -> Settings:
        """From the session's state (or DEFAULTS): ``pg_requests`` … ``pg_policy``."""
        return cls(*(int(values[k]) for k, *_ in NUMBERS), str(values["pg_policy"]))    # type: ignore[arg-type]

    def without_pool(self) -> Settings:
        """Block size and pool size zeroed: the key of what does not depend on them."""
        return replace(self, block=0, blocks=0)


# ---- shared, read-only runs ------------------------------------------------------------------------

@st.cache_resource(show_spinner=False)
def _tiny() -> TinyGPT:
    return load_tiny_gpt()


def _model() -> GPTModel:
    return GPTModel(_tiny())


def _stream(s: Settings) -> tuple[Request, ...]:
    return request_stream(s.requests, s.seed, s.new, s.prefix)


def _serve(s: Settings, keep_kv: bool = False) -> ServeRun:
    return serve(_model(), _stream(s), s.block, s.blocks, s.policy, s.batch, prefix_caching=s.prefix > 0, check=True,
                 keep_kv=keep_kv)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _run(s: Settings) -> ServeRun:
    """The served run with its check against every request's solo run: the one run behind the
    stepper, the check, the downloads and this policy's column of the comparison. Small pools keep
    layer 1's keys per step for the cache rows, cut to the components shown (a few KB)."""
    return frames_paged.with_shown_keys(_serve(s, keep_kv=s.block * s.blocks <= KEEP_KV_SLOTS))


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _payload(s: Settings, lang: str) -> str:
    """Every step's frame in one language (read-only JSON)."""
    return frames_paged.build(_run(s), translator(lang)).to_json()


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _unchecked(s: Settings) -> ServeRun:
    """The stream served under ``s``'s policy without the check (the solo runs it compares with do
    not depend on the policy: the page's own run has done them)."""
    return serve(_model(), _stream(s), s.block, s.blocks, s.policy, s.batch, prefix_caching=s.prefix > 0)


def _policies(s: Settings) -> dict[str, ServeRun]:
    """The same stream under every policy (as serving.compare_policies): the page's policy is its
    checked run, served once; the other one is served without the check."""
    return {p: _run(s) if p == s.policy else _unchecked(replace(s, policy=p)) for p in POLICIES}


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _sweep(s: Settings) -> tuple[SizePoint, ...]:
    """Peak bytes per block size (pass ``s.without_pool()``: the sweep sets its own pools, so
    changing the page's block size or pool reuses it)."""
    return block_size_sweep(_model(), _stream(s), SWEEP_SIZES, policy=s.policy, max_batch=s.batch,
                            prefix_caching=s.prefix > 0)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _fork(prompt: tuple[str, ...], block: int, blocks: int, seed: int) -> ForkRun:
    return fork_run(_model(), prompt, FORK_NEW_TOKENS, block, blocks, samples=2, seed=seed)


def warm() -> None:
    """The default visit's runs, frames and sections, made before the first visitor
    (kvviz/ui/app/warmup.py)."""
    s = Settings.of(DEFAULTS)
    run = _run(s)
    _payload(s, "en")
    _sweep(s.without_pool())
    _policies(s)
    _fork(run.requests[0].request.prompt, s.block, s.blocks, s.seed)


# ---- settings ----------------------------------------------------------------------------------------

def _inputs() -> tuple[Settings, ServeRun] | None:
    for key, default, low, high in NUMBERS:
        urlstate.int_param(key, default, low, high)
    urlstate.choice_param("pg_policy", POLICIES, "continuous")
    c = st.columns(4)
    for i, (key, default, low, high) in enumerate(NUMBERS):
        c[i % 4].number_input(t(f"paged.{key}"), low, high, step=1, key=key, on_change=urlstate.sync,
                              args=(key, default), help=t(f"paged.{key}_help", low=low, high=fmt.integer(high)))
    c[3].segmented_control(t("paged.pg_policy"), POLICIES, key="pg_policy", required=True,
                           format_func=lambda p: t("paged.policy_" + p), on_change=urlstate.sync,
                           args=("pg_policy", "continuous"), help=t("paged.pg_policy_help"))
    st.caption(t("paged.try", small=_link({"pg_blocks": SMALL_POOL}), alone=_link({"pg_prefix": 0}),
                 static=_link({"pg_policy": "static"}), big=_link({"pg_block": 16, "pg_blocks": 8})))
    ss = st.session_state
    try:
        s = Settings.of(ss)
        return s, _run(s)
    except (LimitError, ValueError, TypeError) as e:
        st.error(t("paged.bad_input", reason=str(e)), icon=":material/error:")
        return None


def _link(params: dict) -> str:
    return deep_link(PAGE, params)


# ---- sections ----------------------------------------------------------------------------------------

def _figure_words() -> dict[str, str]:
    return frames_paged.figure_words(t)


def _check(run: ServeRun) -> None:
    """The whole run against every request's solo run (the stepper shows it per step)."""
    same = all(r.tokens == r.solo_tokens for r in run.requests)
    worst = max((r.max_abs_diff for r in run.requests if r.max_abs_diff is not None), default=0.0)
    ok = same and worst <= run.tolerance
    text = t("paged.run_check_ok" if ok else "paged.run_check_bad", n=len(run.requests), diff=fmt.sci(worst, 1),
             tol=fmt.sci(run.tolerance, 0))
    (st.success if ok else st.error)(text, icon=":material/check_circle:" if ok else ":material/error:")


def _requests_table(run: ServeRun) -> pd.DataFrame:
    """One row per request, from its RequestResult (also the CSV download, with the engine's names)."""
    return pd.DataFrame([{
        "request": r.id, "prompt": " ".join(r.request.prompt), "arrival_step": r.request.arrival_step,
        "admitted_step": r.admitted_step, "first_token_step": r.first_token_step, "finish_step": r.finish_step,
        "ttft_steps": r.ttft, "tpot_steps": r.tpot, "preemptions": r.preemptions,
        "prefill_saved": r.prefill_saved, "blocks_saved": r.blocks_saved, "max_abs_diff": r.max_abs_diff,
        "tokens": " ".join(r.tokens), "same_as_solo": r.tokens == r.solo_tokens,
    } for r in run.requests])


def _downloads(run: ServeRun) -> None:
    stem = f"paged_{run.policy}_b{run.block_size}x{run.num_blocks}"
    c = st.columns(2)
    c[0].download_button(t("paged.dl_json"), lambda: json.dumps(serve_run_dict(run), indent=1),
                         file_name=f"{stem}.json", mime="application/json", icon=":material/download:",
                         on_click="ignore", help=t("paged.dl_json_help"))
    c[1].download_button(t("paged.dl_csv"), lambda: _requests_table(run).to_csv(index=False),
                         file_name=f"{stem}_requests.csv", mime="text/csv", icon=":material/download:",
                         on_click="ignore", help=t("paged.dl_csv_help"))


def _shown_requests(run: ServeRun) -> pd.DataFrame:
    df = _requests_table(run)
    names = {c: t(f"paged.rq_{c}") for c in ("request", "prompt", "arrival_step", "first_token_step", "finish_step",
                                              "ttft_steps", "tpot_steps", "preemptions", "prefill_saved", "tokens")}
    df = df[list(names)].rename(columns=names)
    col = names["tpot_steps"]
    df[col] = [("—" if v is None or v != v else fmt.fixed(v, 2)) for v in df[col]]
    return df


def _memory(s: Settings, run: ServeRun) -> None:
    st.header(t("paged.memory_h"))
    st.markdown(t("paged.memory_intro"))
    words = _figure_words()
    chart(memory_figure(run, words=words, title=t("paged.memory_title")), t("paged.memory_alt"), key="pg_memory")
    c = st.columns(3)
    for col, what in zip(c, ("used", "paged", "contiguous")):
        col.metric(t(f"paged.peak_{what}"), fmt.nbytes(run.peak(what)), help=t(f"paged.peak_{what}_help"))
    st.subheader(t("paged.sizes_h"))
    st.markdown(t("paged.sizes_intro"))
    try:
        points = _sweep(s.without_pool())
    except LimitError as e:
        st.warning(t("paged.sizes_failed", reason=str(e)))
        return
    chart(block_size_figure(points, words=words, title=t("paged.sizes_title")), t("paged.sizes_alt"), key="pg_sizes")
    st.dataframe(pd.DataFrame([{
        t("paged.sz_block"): p.block_size, t("paged.sz_blocks"): p.num_blocks,
        t("paged.sz_used"): fmt.nbytes(p.used), t("paged.sz_paged"): fmt.nbytes(p.paged),
        t("paged.sz_contiguous"): fmt.nbytes(p.contiguous), t("paged.sz_waste_paged"): fmt.percent(p.waste_paged, 1),
        t("paged.sz_waste_contiguous"): fmt.percent(p.waste_contiguous, 1), t("paged.sz_steps"): p.total_steps,
        t("paged.sz_preemptions"): p.preemptions} for p in points]), hide_index=True, width="stretch")


def _policy_section(s: Settings) -> None:
    st.header(t("paged.policies_h"))
    st.markdown(t("paged.policies_intro"))
    runs = _policies(s)
    words = _figure_words()
    c = st.columns(len(runs))
    for col, (name, run) in zip(c, runs.items()):
        with col:
            label = t("paged.policy_" + name)
            st.metric(t("paged.total_steps", policy=label), run.total_steps)
            st.metric(t("paged.mean_ttft", policy=label), fmt.fixed(run.mean_ttft, 2))
            st.metric(t("paged.mean_tpot", policy=label), "—" if run.mean_tpot is None else fmt.fixed(run.mean_tpot, 2))
            chart(timeline_figure(run, words=words, title=t("paged.timeline_title", policy=label), show_tokens=False),
                  t("paged.timeline_alt"), key=f"pg_timeline_{name}")
    named = {t("paged.policy_" + k): v for k, v in runs.items()}
    chart(latency_figure(named, words=words, title=t("paged.latency_title")), t("paged.latency_alt"), key="pg_latency")
    rows = []
    for a, b in zip(*(r.requests for r in runs.values())):
        rows.append({t("paged.rq_request"): a.id, t("paged.rq_arrival_step"): a.request.arrival_step,
                     **{t("paged.ttft_of", policy=t("paged.policy_" + k)): r.ttft for k, r in zip(runs, (a, b))},
                     **{t("paged.tpot_of", policy=t("paged.policy_" + k)):
                        "—" if r.tpot is None else fmt.fixed(r.tpot, 2) for k, r in zip(runs, (a, b))}})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption(t("paged.policies_note"))


def _fork_section(s: Settings, run: ServeRun) -> None:
    st.header(t("paged.fork_h"))
    prompt = run.requests[0].request.prompt
    block = s.block
    st.markdown(t("paged.fork_intro", prompt=" ".join(prompt), n=len(prompt), bs=block))
    try:
        fork = _fork(prompt, block, s.blocks, s.seed)
    except LimitError as e:
        st.info(t("paged.fork_failed", reason=str(e)))
        return
    words = _figure_words()
    shown = [0, 1] if len(fork.steps) > 1 else [0]
    c = st.columns(len(shown))
    for col, i in zip(c, shown):
        with col:
            step = fork.steps[i]
            fig = block_pool_figure(step, block, columns=frames_paged.POOL_COLUMNS, words=words, block_ids=True,
                                    show_tokens=False, title=t("paged.fork_pool_title", i=i))
            chart(fig, t("paged.fork_pool_alt", i=i), key=f"pg_fork_{i}")
            st.caption(", ".join(t("paged.fork_table", r=r, blocks=list(tb)) for r, tb in step.block_tables))
    if fork.copies:
        _, src, dst = fork.copies[0]
        st.markdown(t("paged.fork_copied", src=src, dst=dst, n=len(fork.copies)))
    else:
        st.markdown(t("paged.fork_no_copy", n=len(prompt), bs=block))
    samples = " · ".join(t("paged.fork_sample", i=i, seed=seed, tokens=" ".join(toks))
                         for i, (seed, toks) in enumerate(zip(fork.seeds, fork.samples)))
    st.caption(samples)
    if all(fork.identical):
        st.success(t("paged.fork_equal", steps=len(fork.steps)), icon=":material/check_circle:")
    else:
        st.error(t("paged.fork_differ", diff=fmt.sci(max(x.max_abs_diff or 0.0 for x in fork.steps), 1)),
                 icon=":material/error:")


# ---- the page ------------------------------------------------------------------------------------------

def render() -> None:
    st.title(t("paged.title"))
    presenter.intro(t("paged.intro"))
    with presenter.settings():
        got = _inputs()
    if got is None:
        return
    s, run = got
    step_view.url_step_notice(run.total_steps)
    nav.hidden_heading(t("stepper.section"))
    step_view.page_stepper("paged.step", lambda _layer, _head, lang: _payload(s, lang), run.total_steps,
                           key="kvs_paged", run_id=repr(s))
    _check(run)
    _downloads(run)
    if not step_view.whole_page():
        return
    if not presenter.presenting():
        with st.expander(t("paged.requests_h")):
            st.dataframe(_shown_requests(run), hide_index=True, width="stretch")
    _memory(s, run)
    _policy_section(s)
    _fork_section(s, run)
    if not presenter.presenting():
        with st.expander(t("paged.more_title")):
            st.markdown(t("paged.more_body"))

