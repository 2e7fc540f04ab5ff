"""The Paged cache page body: a seeded stream of requests served by the tiny GPT from one paged KV
cache (kvviz.serving), step by step; memory under paging vs contiguous reservation; continuous vs
static batching on the same stream; copy-on-write when two samples share a prompt.

``?pg_model=smollm2``: the real case beside it. Chat requests to SmolLM2-135M-Instruct, each inside
its chat template, so every prompt begins with the same system prompt: prefix caching shares its
full blocks, a fork of one prompt copies the partly filled block on write, every request is
checked against its solo greedy run. Behind a button (with a progress bar), one run at a time per
server (``RunStore``); the finished runs are kept for every visitor.

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
    SMOLLM2_SERVE_MAX_NEW_TOKENS,
    SMOLLM2_SERVE_MAX_REQUESTS,
    LimitError,
)
from kvviz.models.gpt import GPTModel
from kvviz.serving import (
    POLICIES,
    ForkRun,
    Request,
    Scheduler,
    ServeRun,
    SizePoint,
    block_size_sweep,
    chat_stream,
    common_prefix,
    fork_run,
    request_stream,
    serve,
    serve_run_dict,
)
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.links import deep_link
from kvviz.ui.app.models import tiny as _tiny  # the server's one tiny GPT (read-only)
from kvviz.ui.app.pages import script
from kvviz.ui.app.turns import RunStore
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import paged as frames_paged
from kvviz.ui.frames import translator
from kvviz.viz.paged import block_pool_figure, block_size_figure, latency_figure, memory_figure, timeline_figure

PAGE = script("paged")                   # kvviz/ui/app/pages.py
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
PG_MODELS = ("gpt", "smollm2")
# the real case: 4 chat requests of 4 tokens in blocks of 8 (the 24-token system prompt and its
# markers fill three blocks exactly, shared by requests 1-3); 32 blocks hold them all at once
LLM_NUMBERS = [("pg_llm_requests", 4, 1, SMOLLM2_SERVE_MAX_REQUESTS), ("pg_llm_block", 8, 1, MAX_SERVE_BLOCK_SIZE),
               ("pg_llm_blocks", 32, 1, MAX_SERVE_BLOCKS), ("pg_llm_new", 4, 1, SMOLLM2_SERVE_MAX_NEW_TOKENS)]
LLM_DEFAULTS = {k: d for k, d, _, _ in LLM_NUMBERS}
LLM_RUNS = 3                 # finished SmolLM2 runs kept per server (a few MB each)


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


def _downloads(run: ServeRun, extra: pd.DataFrame | None = None) -> None:
    """The run as the CLI's JSON and its requests as CSV (``extra``: that table instead)."""
    model = "" if run.model_name == "gpt" else f"{run.model_name}_"
    stem = f"paged_{model}{run.policy}_b{run.block_size}x{run.num_blocks}"
    table = _requests_table(run) if extra is None else extra
    c = st.columns(2)
    c[0].download_button(t("paged.dl_json"), lambda: json.dumps(serve_run_dict(run), indent=1),
                         file_name=f"{stem}.json", mime="application/json", icon=":material/download:",
                         on_click="ignore", help=t("paged.dl_json_help"))
    c[1].download_button(t("paged.dl_csv"), lambda: table.to_csv(index=False),
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
            st.caption(", ".join(t("paged.fork_table", r=r, blocks=str(list(tb))) for r, tb in step.block_tables))
    _fork_copied(fork, len(prompt), block)
    samples = " · ".join(t("paged.fork_sample", i=i, seed=seed, tokens=" ".join(toks))
                         for i, (seed, toks) in enumerate(zip(fork.seeds, fork.samples)))
    st.caption(samples)
    _fork_check(fork)


def _fork_copied(fork: ForkRun, prompt_len: int, block: int) -> None:
    """Which block the first write into the shared, partly filled block copied (or why none was)."""
    if fork.copies:
        _, src, dst = fork.copies[0]
        st.markdown(t("paged.fork_copied", src=src, dst=dst, n=len(fork.copies)))
    else:
        st.markdown(t("paged.fork_no_copy", n=prompt_len, bs=block))


def _fork_check(fork: ForkRun) -> None:
    """The fork's check: every sample equal to its contiguous run, at every step."""
    if all(fork.identical):
        st.success(t("paged.fork_equal", steps=len(fork.steps)), icon=":material/check_circle:")
    else:
        st.error(t("paged.fork_differ", diff=fmt.sci(max(x.max_abs_diff or 0.0 for x in fork.steps), 1)),
                 icon=":material/error:")


# ---- the page ------------------------------------------------------------------------------------------

def _model_picker() -> str:
    """Which model serves: the tiny GPT or SmolLM2 (``?pg_model=``)."""
    urlstate.choice_param("pg_model", PG_MODELS, "gpt")
    return st.segmented_control(t("paged.pg_model"), PG_MODELS, key="pg_model", required=True,
                                format_func=lambda m: t("paged.model_" + m), on_change=urlstate.sync,
                                args=("pg_model", "gpt"), help=t("paged.pg_model_help"))


def render() -> None:
    st.title(t("paged.title"))
    urlstate.choice_param("pg_model", PG_MODELS, "gpt")
    if st.session_state.get("pg_model") == "smollm2":
        render_llm()
        return
    presenter.intro(t("paged.intro"))
    with presenter.settings():
        _model_picker()
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



# ---- the real LLM: SmolLM2's chat requests ----------------------------------------------------------

LLMKey = tuple[int, int, int, int]          # requests, block size, blocks, new tokens


@dataclass(frozen=True)
class LLMRun:
    """A finished SmolLM2 run: the served stream (checked against every solo run) and the fork."""

    run: ServeRun
    fork: ForkRun | None
    fork_request: int
    fork_error: str | None
    system: int                             # tokens every prompt begins with (system prompt, markers)


@st.cache_resource(show_spinner=False)
def _llm_store() -> RunStore:
    return RunStore(LLM_RUNS)


def _llm_model():
    from kvviz.ui.app.models import loaded_model  # the server's one loaded SmolLM2
    return loaded_model()


def _fork_request(run: ServeRun) -> int:
    """The first request whose prompt ends inside a block (its fork copies that block on write)."""
    return next((r.id for r in run.requests if len(r.request.prompt) % run.block_size), 0)


def _serve_llm(model, key: LLMKey, requests: tuple[Request, ...], bar) -> LLMRun:
    n, block, blocks, new = key
    total = n + 1

    def progress(done: int, _total: int) -> None:
        bar.progress(done / total, text=t("paged.llm_progress", done=done, n=n))

    run = frames_paged.with_shown_keys(serve(model, requests, block, blocks, "continuous", MAX_SERVE_BATCH,
                                             prefix_caching=True, check=True, keep_kv=block * blocks <= KEEP_KV_SLOTS,
                                             progress=progress))
    bar.progress(n / total, text=t("paged.llm_progress_fork"))
    rid = _fork_request(run)
    fork, error = None, None
    try:
        # two tokens at least: the second is the first write into the shared block
        fork = fork_run(model, run.requests[rid].request.prompt, max(2, min(FORK_NEW_TOKENS, new)), block, blocks,
                        samples=2)
    except LimitError as e:
        error = str(e)
    bar.progress(1.0)
    return LLMRun(run, fork, rid, error, common_prefix([r.request for r in run.requests]))


def _llm_run(model, key: LLMKey, requests: tuple[Request, ...]) -> LLMRun | None:
    """The finished run of ``key`` (this server's), or a button that makes it: one at a time per
    server; a visitor who finds another's running is told so."""
    store = _llm_store()
    got = store.get(key)
    if got is not None:
        return got                                           # type: ignore[return-value]
    st.info(t("paged.llm_none", n=key[0], new=key[3]), icon=":material/play_circle:")
    if not st.button(t("paged.llm_run"), type="primary", icon=":material/play_arrow:", key="pg_llm_go",
                     help=t("paged.llm_run_help")):
        return None
    if not store.running.acquire(blocking=False):
        st.warning(t("paged.llm_busy"), icon=":material/hourglass_top:")
        return None
    try:
        got = store.get(key)                                 # another visitor may have made this one
        if got is None:
            bar = st.progress(0.0, text=t("paged.llm_progress", done=0, n=key[0]))
            got = _serve_llm(model, key, requests, bar)
            store.put(key, got)
            bar.empty()
        return got                                           # type: ignore[return-value]
    finally:
        store.running.release()


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def _llm_payload(key: LLMKey, _run: ServeRun, lang: str) -> str:
    """Every step's frame of a SmolLM2 run in one language (``_run`` is ``key``'s run, not hashed)."""
    return frames_paged.build(_run, translator(lang)).to_json()


def _llm_inputs(model) -> tuple[LLMKey, tuple[Request, ...]] | None:
    for k, default, low, high in LLM_NUMBERS:
        urlstate.int_param(k, default, low, high)
    c = st.columns(4)
    for i, (k, default, low, high) in enumerate(LLM_NUMBERS):
        c[i].number_input(t(f"paged.{k}"), low, high, step=1, key=k, on_change=urlstate.sync, args=(k, default),
                          help=t(f"paged.{k}_help", low=low, high=fmt.integer(high)))
    if model is None:
        return None
    ss = st.session_state
    key: LLMKey = tuple(int(ss[k]) for k, *_ in LLM_NUMBERS)     # type: ignore[assignment]
    n, block, blocks, new = key
    try:
        model.limits.check_serve_pool(n, block, blocks)          # the engine checks again when it serves
        requests = chat_stream(model, n, new, chat=True)
        Scheduler(model, requests, block, blocks, "continuous", MAX_SERVE_BATCH, prefix_caching=True)  # checks only
    except (LimitError, ValueError) as e:
        st.error(t("paged.bad_input", reason=str(e)), icon=":material/error:")
        return None
    return key, requests


def _llm_requests_table(model, got: LLMRun) -> pd.DataFrame:
    """One row per request, from its RequestResult (also the CSV download)."""
    run = got.run
    return pd.DataFrame([{
        "request": r.id, "message": model.decode(r.request.prompt[got.system:]),
        "prompt_tokens": len(r.request.prompt), "blocks_saved": r.blocks_saved, "prefill_saved": r.prefill_saved,
        "answer": model.decode(r.tokens), "same_as_solo": r.tokens == r.solo_tokens, "max_abs_diff": r.max_abs_diff,
        "arrival_step": r.request.arrival_step, "first_token_step": r.first_token_step,
        "finish_step": r.finish_step} for r in run.requests])


def _llm_sharing(model, got: LLMRun) -> None:
    """What prefix caching saved, per request and in all (the engine's counts)."""
    run = got.run
    st.header(t("paged.llm_share_h"))
    system = got.system
    st.markdown(t("paged.llm_share_intro", system=system, bs=run.block_size, full=system // run.block_size,
                  rest=system % run.block_size,
                  text=model.decode(run.requests[0].request.prompt[:system]).replace("\n", "↵")))
    worst = max((r.max_abs_diff for r in run.requests if r.max_abs_diff is not None), default=0.0)
    c = st.columns(4)
    c[0].metric(t("paged.llm_blocks_saved"), run.blocks_saved, help=t("paged.llm_blocks_saved_help"))
    c[1].metric(t("paged.llm_prefill_saved"), run.prefill_saved, help=t("paged.llm_prefill_saved_help"))
    c[2].metric(t("paged.llm_positions"), sum(len(r.request.prompt) for r in run.requests),
                help=t("paged.llm_positions_help"))
    c[3].metric(t("paged.llm_worst"), fmt.sci(worst, 1), help=t("paged.llm_worst_help", tol=fmt.sci(run.tolerance, 0)))
    df = _llm_requests_table(model, got)
    names = {col: t(f"paged.lq_{col}") for col in ("request", "message", "prompt_tokens", "blocks_saved",
                                                    "prefill_saved", "answer", "same_as_solo", "max_abs_diff")}
    shown = df[list(names)].copy()
    shown["same_as_solo"] = [t("paged.llm_yes") if v else t("paged.llm_no") for v in shown["same_as_solo"]]
    shown["max_abs_diff"] = [fmt.sci(v, 1) for v in shown["max_abs_diff"]]
    st.dataframe(shown.rename(columns=names), hide_index=True, width="stretch")


def _llm_fork(got: LLMRun) -> None:
    st.header(t("paged.llm_fork_h"))
    run = got.run
    prompt = run.requests[got.fork_request].request.prompt
    st.markdown(t("paged.llm_fork_intro", r=got.fork_request, n=len(prompt), bs=run.block_size,
                  filled=len(prompt) % run.block_size))
    fork = got.fork
    if fork is None:
        st.info(t("paged.fork_failed", reason=got.fork_error or ""))
        return
    _fork_copied(fork, len(prompt), run.block_size)
    _fork_check(fork)


def render_llm() -> None:
    """The Paged cache page on SmolLM2 (``?pg_model=smollm2``)."""
    from kvviz.models import smollm2
    from kvviz.models.smollm2 import ModelUnavailable
    presenter.intro(t("paged.llm_intro"))
    model, problem = None, None
    try:
        if smollm2.find_source() is None:
            problem = t("llm.missing", command=smollm2.INSTALL_COMMAND, pin=smollm2.PACKAGE_PIN)
        else:
            model = _llm_model()
    except ModelUnavailable as e:
        problem = t("llm.not_ready", reason=str(e))
    with presenter.settings():
        _model_picker()
        got = _llm_inputs(model)
    if problem is not None:
        st.warning(problem, icon=":material/download:")
        return
    if got is None:
        return
    key, requests = got
    done = _llm_run(model, key, requests)
    if done is None:
        return
    run = done.run
    step_view.url_step_notice(run.total_steps)
    nav.hidden_heading(t("stepper.section"))
    step_view.page_stepper("paged.step", lambda _layer, _head, lang: _llm_payload(key, run, lang), run.total_steps,
                           key="kvs_paged_llm", run_id=repr(("smollm2", key)))
    _check(run)
    table = _llm_requests_table(model, done)
    _downloads(run, table)
    if not step_view.whole_page():
        return
    _llm_sharing(model, done)
    _llm_fork(done)
    if not presenter.presenting():
        st.header(t("paged.memory_h"))
        chart(memory_figure(run, words=_figure_words(), title=t("paged.memory_title")), t("paged.memory_alt"),
              key="pg_llm_memory")
