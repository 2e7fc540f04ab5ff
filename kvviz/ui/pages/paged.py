"""The Paged cache page body: a seeded stream of requests served by the tiny GPT from one paged KV
cache (kvviz.serving), step by step; memory under paging vs contiguous reservation; continuous vs
static batching on the same stream; copy-on-write when two samples share a prompt.

The model is a setting (``?pg_model=``: the tiny GPT or any real model this server loads,
kvviz/ui/app/models.py), and the page has one body for all of them. A real model serves short
messages (inside its chat template when it has one, so every prompt begins with the same system
prompt: prefix caching shares its full blocks); its run waits for a button (with a progress bar),
one run at a time per model (``RunStore``), and the finished runs are kept for every visitor. The
sections that serve the stream again (block sizes, the other policy) are the tiny GPT's only.
``?pg_budget=N``: chunked prefill, N tokens per step's pass (the timeline shows what filled it).

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
from kvviz.models.real import ModelUnavailable
from kvviz.models.registry import limits_before_loading
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
from kvviz.serving.scheduler import MAX_CHUNK_BUDGET
from kvviz.ui.app import fmt, models, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.links import deep_link
from kvviz.ui.app.pages import script
from kvviz.ui.app.turns import RunStore, held
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import paged as frames_paged
from kvviz.ui.frames import translator
from kvviz.ui.pages import paged_serving
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
TINY = "gpt"                 # the tiny GPT: served inline; every other model is a real one
# the real case: 4 chat requests of 4 tokens in blocks of 8 (the 24-token system prompt and its
# markers fill three blocks exactly, shared by requests 1-3); 32 blocks hold them all at once
LLM_NUMBERS = [("pg_llm_requests", 4, 1, SMOLLM2_SERVE_MAX_REQUESTS), ("pg_llm_block", 8, 1, MAX_SERVE_BLOCK_SIZE),
               ("pg_llm_blocks", 32, 1, MAX_SERVE_BLOCKS), ("pg_llm_new", 4, 1, SMOLLM2_SERVE_MAX_NEW_TOKENS)]
LLM_DEFAULTS = {k: d for k, d, _, _ in LLM_NUMBERS}
LLM_RUNS = 3                 # finished SmolLM2 runs kept per server (a few MB each)


@dataclass(frozen=True)
class Settings:
    """The page's settings: the model (``pg_model``), the stream (requests, shared prefix, new
    tokens, seed), the pool (block size, blocks), the scheduler (batch, policy) and chunked prefill's
    token budget (``pg_budget``, 0: whole prompts). The tiny GPT's numbers are kept in the address as
    ``pg_<name>``; a real model's as ``pg_llm_<name>`` (its stream is chat requests: no prefix, seed,
    batch or policy to set)."""

    requests: int
    block: int
    blocks: int
    prefix: int
    new: int
    batch: int
    seed: int
    policy: str
    model: str = TINY
    budget: int = 0

    @classmethod
    def of(cls, values: Mapping[str, object], model: str = TINY) -> Settings:
        """From the session's state (or DEFAULTS / LLM_DEFAULTS) for ``model``."""
        budget = int(values.get("pg_budget", 0))                                          # type: ignore[arg-type]
        if model == TINY:
            return cls(*(int(values[k]) for k, *_ in NUMBERS), str(values["pg_policy"]),   # type: ignore[arg-type]
                       budget=budget)
        n, block, blocks, new = (int(values[k]) for k, *_ in LLM_NUMBERS)                  # type: ignore[arg-type]
        return cls(n, block, blocks, 0, new, MAX_SERVE_BATCH, 0, "continuous", model, budget)

    @property
    def inline(self) -> bool:
        """Served as the page draws (the tiny GPT: milliseconds); a real model's run waits for a button."""
        return self.model == TINY

    def without_pool(self) -> Settings:
        """Block size and pool size zeroed: the key of what does not depend on them."""
        return replace(self, block=0, blocks=0)


@dataclass(frozen=True)
class Served:
    """A finished run of the page: the served stream (checked against every solo run), the fork of
    one prompt (copy-on-write) and the tokens every prompt begins with."""

    run: ServeRun
    fork: ForkRun | None
    fork_request: int
    fork_error: str | None
    system: int                             # tokens every prompt begins with (shared prefix, chat markers)


# ---- shared, read-only runs ------------------------------------------------------------------------


def _model(name: str):
    """The model ``name`` (the server's shared copy, kvviz/ui/app/models.py; never modified):
    ModelUnavailable for a real model this server cannot load."""
    return GPTModel(models.tiny()) if name == TINY else models.real_model(name)


def _numbers(name: str) -> list[tuple[str, int, int, int]]:
    """The settings a model's stream takes (URL key, default, low, high); a real model's caps are
    its own (kvviz.models.registry, known before the weights load)."""
    if name == TINY:
        return NUMBERS
    lim = limits_before_loading(name)
    if lim is None:
        return LLM_NUMBERS
    caps = {"pg_llm_requests": min(MAX_SERVE_REQUESTS, lim.serve_requests),
            "pg_llm_new": min(MAX_SERVE_NEW_TOKENS, lim.serve_new_tokens, lim.max_new_tokens)}
    return [(k, min(d, caps.get(k, high)), low, caps.get(k, high)) for k, d, low, high in LLM_NUMBERS]


def _stream(model, s: Settings) -> tuple[Request, ...]:
    """The tiny GPT's seeded weather stream, or short messages to a real model (inside its chat
    template when it has one: every prompt then begins with the same system prompt)."""
    if s.inline:
        return request_stream(s.requests, s.seed, s.new, s.prefix)
    return chat_stream(model, s.requests, s.new, chat=bool(model.SPEC.chat_template))


def _sharing(s: Settings) -> bool:
    return s.prefix > 0 if s.inline else True


def _serve(s: Settings, keep_kv: bool = False, check: bool = True, progress=None) -> ServeRun:
    model = _model(s.model)
    return serve(model, _stream(model, s), s.block, s.blocks, s.policy, s.batch, prefix_caching=_sharing(s),
                 check=check, keep_kv=keep_kv, progress=progress, chunk_budget=s.budget or None)


def _fork_request(run: ServeRun) -> int:
    """The first request whose prompt ends inside a block (its fork copies that block on write)."""
    return next((r.id for r in run.requests if len(r.request.prompt) % run.block_size), 0)


def _make(s: Settings, progress=None) -> Served:
    """The served run (layer 1's keys kept for the cache rows when the pool is small) and the fork of
    the first prompt that ends inside a block; ``progress(done, total)`` after every step."""
    run = frames_paged.with_shown_keys(_serve(s, keep_kv=s.block * s.blocks <= KEEP_KV_SLOTS, progress=progress))
    rid = _fork_request(run)
    fork, error = None, None
    try:
        # two tokens at least: the second is the first write into the shared block
        fork = fork_run(_model(s.model), run.requests[rid].request.prompt, max(2, min(FORK_NEW_TOKENS, s.new)),
                        s.block, s.blocks, samples=2, seed=s.seed)
    except LimitError as e:
        error = str(e)
    return Served(run, fork, rid, error, common_prefix([r.request for r in run.requests]))


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _served(s: Settings) -> Served:
    """The tiny GPT's run of ``s``: the one run behind the stepper, the check, the downloads and this
    policy's column of the comparison."""
    return _make(s)


@st.cache_resource(show_spinner=False)
def _store(name: str) -> RunStore:
    """A real model's finished runs on this server (the newest LLM_RUNS) and the model's generation
    lock (kvviz/ui/app/models.py): one run of it at a time, whichever page runs it."""
    store = RunStore(LLM_RUNS)
    store.running = models.generation_lock(name)
    return store


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _payload(s: Settings, _run: ServeRun, lang: str) -> str:
    """Every step's frame in one language (read-only JSON; ``_run`` is ``s``'s run, not hashed)."""
    return frames_paged.build(_run, translator(lang)).to_json()


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _unchecked(s: Settings) -> ServeRun:
    """The stream served under ``s``'s policy without the check (the solo runs it compares with do
    not depend on the policy: the page's own run has done them)."""
    return _serve(s, check=False)


def _policies(s: Settings) -> dict[str, ServeRun]:
    """The same stream under every policy (as serving.compare_policies): the page's policy is its
    checked run, served once; the other one is served without the check."""
    return {p: _served(s).run if p == s.policy else _unchecked(replace(s, policy=p)) for p in POLICIES}


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _sweep(s: Settings) -> tuple[SizePoint, ...]:
    """Peak bytes per block size (pass ``s.without_pool()``: the sweep sets its own pools, so
    changing the page's block size or pool reuses it)."""
    model = _model(s.model)
    return block_size_sweep(model, _stream(model, s), SWEEP_SIZES, policy=s.policy, max_batch=s.batch,
                            prefix_caching=_sharing(s))


def warm() -> None:
    """The default visit's runs, frames and sections, made by the server's warm-up
    (kvviz/ui/app/warmup.py)."""
    s = Settings.of(DEFAULTS)
    got = _served(s)
    _payload(s, got.run, "en")
    _sweep(s.without_pool())
    _policies(s)


# ---- settings ----------------------------------------------------------------------------------------

def _model_names() -> list[str]:
    """The tiny GPT and every real model this server loads (kvviz/ui/app/models.py)."""
    return [TINY, *models.enabled()]


def _model_label(name: str) -> str:
    return t("paged.model_gpt") if name == TINY else models.spec(name).title


def _model_picker() -> str:
    """Which model serves (``?pg_model=``): the tiny GPT or a real model."""
    names = _model_names()
    urlstate.choice_param("pg_model", names, TINY)
    return st.segmented_control(t("paged.pg_model"), names, key="pg_model", required=True,
                                format_func=_model_label, on_change=urlstate.sync, args=("pg_model", TINY),
                                help=t("paged.pg_model_help"))


def _inputs(name: str, model, errors=st) -> Settings | None:
    """The settings of ``name``'s stream from the address and the widgets; None (with a message in
    ``errors``, a place outside folded settings) when the engine refuses them (``model``: None while a
    real model cannot load; its caps are still known)."""
    numbers = _numbers(name)
    for key, default, low, high in numbers:
        urlstate.int_param(key, default, low, high)
    urlstate.int_param("pg_budget", 0, 0, MAX_CHUNK_BUDGET)
    if name == TINY:
        urlstate.choice_param("pg_policy", POLICIES, "continuous")
    c = st.columns(4)
    for i, (key, default, low, high) in enumerate(numbers):
        c[i % 4].number_input(t(f"paged.{key}"), low, high, step=1, key=key, on_change=urlstate.sync,
                              args=(key, default), help=t(f"paged.{key}_help", low=low, high=fmt.integer(high),
                                                          title=_model_label(name)))
    if name == TINY:
        c[3].segmented_control(t("paged.pg_policy"), POLICIES, key="pg_policy", required=True,
                               format_func=lambda p: t("paged.policy_" + p), on_change=urlstate.sync,
                               args=("pg_policy", "continuous"), help=t("paged.pg_policy_help"))
    c[len(numbers) % 4 if name != TINY else 3].number_input(
        t("serving.pg_budget"), 0, MAX_CHUNK_BUDGET, step=1, key="pg_budget", on_change=urlstate.sync,
        args=("pg_budget", 0), help=t("serving.pg_budget_help", high=fmt.integer(MAX_CHUNK_BUDGET)))
    if name == TINY:
        st.caption(t("paged.try", small=_link({"pg_blocks": SMALL_POOL}), alone=_link({"pg_prefix": 0}),
                     static=_link({"pg_policy": "static"}), big=_link({"pg_block": 16, "pg_blocks": 8})))
    try:
        s = Settings.of(st.session_state, name)
        if s.inline:
            _served(s)
        else:                                       # checked before the weights load or any run
            lim = limits_before_loading(name)
            if lim is not None:
                lim.check_serve_pool(s.requests, s.block, s.blocks)
            if model is not None:                   # the scheduler checks every request; nothing runs
                Scheduler(model, _stream(model, s), s.block, s.blocks, s.policy, s.batch, _sharing(s),
                          chunk_budget=s.budget or None)
        return s
    except (LimitError, ValueError, TypeError) as e:
        errors.error(t("paged.bad_input", reason=str(e)), icon=":material/error:")
        return None


def _link(params: dict) -> str:
    return deep_link(PAGE, params)


def _text(model, tokens) -> str:
    """Tokens as text: the model's tokenizer where it has one, the tiny GPT's words joined."""
    decode = getattr(model, "decode", None)
    return decode(list(tokens)) if decode is not None else " ".join(tokens)


# ---- a real model's run: behind a button, one at a time per model ----------------------------------

def _real_run(s: Settings) -> Served | None:
    """The finished run of ``s`` (this server's), or a button that makes it: one at a time per
    model; a visitor who finds another's running is told so."""
    store = _store(s.model)
    got = store.get(s)
    if got is not None:
        return got                                           # type: ignore[return-value]
    st.info(t("paged.llm_none", n=s.requests, new=s.new), icon=":material/play_circle:")
    if not st.button(t("paged.llm_run"), type="primary", icon=":material/play_arrow:", key="pg_llm_go",
                     help=t("paged.llm_run_help", title=_model_label(s.model))):
        return None
    with held(store.running, t("paged.llm_busy", title=_model_label(s.model))) as mine:
        if not mine:
            return None
        got = store.get(s)                                   # another visitor may have made this one
        if got is None:
            bar = st.progress(0.0, text=t("paged.llm_progress", done=0, n=s.requests))
            total = s.requests + 1

            def progress(done: int, _total: int) -> None:
                bar.progress(done / total, text=t("paged.llm_progress", done=done, n=s.requests))

            got = _make(s, progress)
            store.put(s, got)
            bar.empty()
        return got                                           # type: ignore[return-value]


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


def _requests_table(model, got: Served) -> pd.DataFrame:
    """One row per request, from its RequestResult (also the CSV download, with the engine's names)."""
    return pd.DataFrame([{
        "request": r.id, "prompt": " ".join(r.request.prompt), "message": _text(model, r.request.prompt[got.system:]),
        "prompt_tokens": len(r.request.prompt), "arrival_step": r.request.arrival_step,
        "admitted_step": r.admitted_step, "first_token_step": r.first_token_step, "finish_step": r.finish_step,
        "ttft_steps": r.ttft, "tpot_steps": r.tpot, "preemptions": r.preemptions,
        "prefill_saved": r.prefill_saved, "blocks_saved": r.blocks_saved, "max_abs_diff": r.max_abs_diff,
        "tokens": " ".join(r.tokens), "answer": _text(model, r.tokens), "same_as_solo": r.tokens == r.solo_tokens,
    } for r in got.run.requests])


def _downloads(run: ServeRun, table: pd.DataFrame) -> None:
    """The run as the CLI's JSON and its requests as CSV."""
    model = "" if run.model_name == TINY else f"{run.model_name}_"
    stem = f"paged_{model}{run.policy}_b{run.block_size}x{run.num_blocks}"
    c = st.columns(2)
    c[0].download_button(t("paged.dl_json"), lambda: json.dumps(serve_run_dict(run), indent=1),
                         file_name=f"{stem}.json", mime="application/json", icon=":material/download:",
                         on_click="ignore", help=t("paged.dl_json_help"))
    c[1].download_button(t("paged.dl_csv"), lambda: table.to_csv(index=False),
                         file_name=f"{stem}_requests.csv", mime="text/csv", icon=":material/download:",
                         on_click="ignore", help=t("paged.dl_csv_help"))


def _shown_requests(table: pd.DataFrame) -> pd.DataFrame:
    names = {c: t(f"paged.rq_{c}") for c in ("request", "prompt", "arrival_step", "first_token_step", "finish_step",
                                              "ttft_steps", "tpot_steps", "preemptions", "prefill_saved", "tokens")}
    df = table[list(names)].rename(columns=names)
    col = names["tpot_steps"]
    df[col] = [("—" if v is None or v != v else fmt.fixed(v, 2)) for v in df[col]]
    return df


def _sharing_section(model, got: Served, table: pd.DataFrame) -> None:
    """What prefix caching saved, per request and in all (the engine's counts)."""
    run = got.run
    st.header(t("paged.llm_share_h"))
    system = got.system
    st.markdown(t("paged.llm_share_intro", system=system, bs=run.block_size, full=system // run.block_size,
                  rest=system % run.block_size, text=_text(model, run.requests[0].request.prompt[:system])
                  .replace("\n", "↵")))
    worst = max((r.max_abs_diff for r in run.requests if r.max_abs_diff is not None), default=0.0)
    c = st.columns(4)
    c[0].metric(t("paged.llm_blocks_saved"), run.blocks_saved, help=t("paged.llm_blocks_saved_help"))
    c[1].metric(t("paged.llm_prefill_saved"), run.prefill_saved, help=t("paged.llm_prefill_saved_help"))
    c[2].metric(t("paged.llm_positions"), sum(len(r.request.prompt) for r in run.requests),
                help=t("paged.llm_positions_help"))
    c[3].metric(t("paged.llm_worst"), fmt.sci(worst, 1), help=t("paged.llm_worst_help", tol=fmt.sci(run.tolerance, 0)))
    names = {col: t(f"paged.lq_{col}") for col in ("request", "message", "prompt_tokens", "blocks_saved",
                                                    "prefill_saved", "answer", "same_as_solo", "max_abs_diff")}
    shown = table[list(names)].copy()
    shown["same_as_solo"] = [t("paged.llm_yes") if v else t("paged.llm_no") for v in shown["same_as_solo"]]
    shown["max_abs_diff"] = [fmt.sci(v, 1) for v in shown["max_abs_diff"]]
    st.dataframe(shown.rename(columns=names), hide_index=True, width="stretch")


def _memory(s: Settings, run: ServeRun) -> None:
    st.header(t("paged.memory_h"))
    st.markdown(t("paged.memory_intro"))
    words = _figure_words()
    chart(memory_figure(run, words=words, title=t("paged.memory_title")), t("paged.memory_alt"), key="pg_memory")
    c = st.columns(3)
    for col, what in zip(c, ("used", "paged", "contiguous")):
        col.metric(t(f"paged.peak_{what}"), fmt.nbytes(run.peak(what)), help=t(f"paged.peak_{what}_help"))
    if not s.inline:
        return                                  # the sweep serves the stream six more times
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


def _fork_section(model, got: Served) -> None:
    st.header(t("paged.fork_h"))
    run = got.run
    block = run.block_size
    prompt = run.requests[got.fork_request].request.prompt
    st.markdown(t("paged.fork_intro", r=got.fork_request, prompt=_text(model, prompt).replace("\n", "↵"),
                  n=len(prompt), bs=block))
    fork = got.fork
    if fork is None:
        st.info(t("paged.fork_failed", reason=got.fork_error or ""))
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
    if fork.copies:
        _, src, dst = fork.copies[0]
        st.markdown(t("paged.fork_copied", src=src, dst=dst, n=len(fork.copies)))
    else:
        st.markdown(t("paged.fork_no_copy", n=len(prompt), bs=block))
    samples = " · ".join(t("paged.fork_sample", i=i, seed=seed, tokens=_text(model, toks))
                         for i, (seed, toks) in enumerate(zip(fork.seeds, fork.samples)))
    st.caption(samples)
    if all(fork.identical):
        st.success(t("paged.fork_equal", steps=len(fork.steps)), icon=":material/check_circle:")
    else:
        st.error(t("paged.fork_differ", diff=fmt.sci(max(x.max_abs_diff or 0.0 for x in fork.steps), 1)),
                 icon=":material/error:")


# ---- the page ------------------------------------------------------------------------------------------

def _intro(name: str, model) -> str:
    if name == TINY:
        return t("paged.intro")
    cfg = model.cost_config
    return t("paged.llm_intro", title=_model_label(name), layers=cfg.n_layers, kv=cfg.n_kv_heads) + " " + t(
        "paged.llm_intro_chat" if model.SPEC.chat_template else "paged.llm_intro_plain")


def render() -> None:
    st.title(t("paged.title"))
    with presenter.settings("paged.pg_model"):     # "Model": the settings come folded further down
        name = _model_picker()
    model = None
    try:
        model = _model(name)
    except ModelUnavailable as e:
        presenter.intro(t("paged.llm_intro_short", title=_model_label(name)))
        with presenter.settings():
            _inputs(name, None)
        models.missing(name, e)
        return
    presenter.intro(_intro(name, model))
    errors = st.container()
    with nav.folded_settings():                     # the step first: settings one click away
        s = _inputs(name, model, errors)
        if presenter.presenting():                  # one folded block on a projector
            view = paged_serving.view_picker()
    if not presenter.presenting():
        view = paged_serving.view_picker()          # the view in sight beside the stepper
    if s is None:
        return
    if view == "prefix":                      # needs no served run: the trace is the stream's prompts
        paged_serving.render_prefix(model, repr(s), _stream(model, s), s.seed, s.block, s.blocks)
        return
    if view == "stall":                       # its own stream: a long prompt among running decodes
        paged_serving.render_stall(s.model, model, s.inline, s.budget)
        return
    got = _served(s) if s.inline else _real_run(s)
    if got is None:
        return
    run = got.run
    if view == "disagg":
        paged_serving.render_disagg(s.model, model, repr(s), run)
        return
    step_view.url_step_notice(run.total_steps)
    nav.hidden_heading(t("stepper.section"))
    step_view.page_stepper("paged.step", lambda _layer, _head, lang: _payload(s, run, lang), run.total_steps,
                           key="kvs_paged", run_id=repr(s))
    _check(run)
    table = _requests_table(model, got)
    _downloads(run, table)
    if not step_view.whole_page():
        return
    if run.prefix_caching and got.system:
        _sharing_section(model, got, table)
    if not presenter.presenting():
        with st.expander(t("paged.requests_h")):
            st.dataframe(_shown_requests(table), hide_index=True, width="stretch")
    _memory(s, run)
    if s.inline:                                # serves the stream once more under the other policy
        _policy_section(s)
    _fork_section(model, got)
    if not presenter.presenting():
        with st.expander(t("paged.more_title")):
            st.markdown(t("paged.more_body"))
