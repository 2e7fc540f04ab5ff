"""The "A real LLM" page body: SmolLM2-135M-Instruct, token by token, through its own KV cache.

A chat message inside the model's chat template (or plain text), the tokens as its tokenizer splits
them, then the stepper over prefill and decode (any of the 30 × 9 heads, grouped-query attention, the
cache of every layer), grouped K/V heads and rotary positions explained on the run's own numbers,
and float32 against bfloat16 measured here. The file in pages/ only sets up the frame.

The weights are prepared when the server starts (kvviz/ui/app/warmup.py: converted once, or downloaded
on Streamlit Community Cloud); a visitor's request never converts or downloads. One generation
runs at a time per server: the others wait with a message (``_runs``, a ``RunStore``).
"""
from __future__ import annotations

import functools
import html

import pandas as pd
import streamlit as st

from kvviz import cost
from kvviz.decoding.stepper import Run, run_generation
from kvviz.limits import LimitError
from kvviz.measure.timing import DtypeComparison, measure_dtypes
from kvviz.models import smollm2
from kvviz.models.smollm2 import ModelUnavailable, SmolLM2
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.turns import RunStore, my_turn
from kvviz.ui.components import downloads, step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.components.rule_controls import RuleKey, default_rule, rule_cache_key, rule_controls, rule_from_key
from kvviz.ui.frames import llm as frames_llm
from kvviz.ui.frames import translator
from kvviz.ui.pages import llm_loop
from kvviz.viz.rope import rope_pairs

DEFAULT_MESSAGE, DEFAULT_NEW, DEFAULT_MODE, DEFAULT_DTYPE = "What is the capital of France?", 10, "chat", "float32"
MODES = ("chat", "plain")
DTYPES = smollm2.DTYPES
MAX_RUNS = 3              # finished runs kept per server (a 256 + 64-token run holds ≈ 300 MB of records)
MEASURE_STEPS = 12        # decode steps per dtype in the float32 / bfloat16 measurement

RunKey = tuple[tuple[str, ...], int, RuleKey, int, str]      # tokens, new tokens, rule, seed, dtype


# ---- shared, read-only resources -----------------------------------------------------------------

@st.cache_resource(show_spinner=False)
def _model(dtype: str) -> SmolLM2:
    """The weights in ``dtype``, loaded once per server from what the start-up prepared (never
    converted or downloaded here: ModelNotReady instead)."""
    return SmolLM2(dtype, prepare=False)


def loaded_model(dtype: str = "float32") -> SmolLM2:
    """The server's SmolLM2 in ``dtype`` (shared, read-only: never modify it), for every page that
    runs the real model; ModelUnavailable when the weights are not installed or not prepared."""
    if smollm2.find_source() is None:
        raise ModelUnavailable(smollm2.unavailable_message())
    return _model(dtype)


@st.cache_resource(show_spinner=False)
def _runs() -> RunStore:
    """This server's finished runs (read-only records, the last MAX_RUNS) and the lock that lets one
    generation run at a time: SmolLM2 takes both cores, and a 64-token run ≈ 10 s."""
    return RunStore(MAX_RUNS)


def _generate(key: RunKey) -> Run:
    tokens, new, rule_key, seed, dtype = key
    # one pass without the cache over the whole text at the end checks every pass (a causal model)
    return run_generation(_model(dtype), list(tokens), new, rule_from_key(rule_key), seed, recheck="final")


def get_run(key: RunKey) -> Run:
    """The finished run of ``key``; generated here if no one has, one generation at a time (a
    visitor who finds another's running sees a message and a spinner, not a frozen page)."""
    store = _runs()
    run = store.get(key)
    if run is not None:
        return run
    if not store.running.acquire(blocking=False):
        note = st.empty()
        note.info(t("llm.busy"), icon=":material/hourglass_top:")
        with st.spinner(t("llm.waiting")):
            store.running.acquire()
        note.empty()
    try:
        run = store.get(key)                   # the other generation may have been this one
        if run is None:
            with st.spinner(t("llm.generating", n=key[1])):
                run = _generate(key)
            store.put(key, run)
        return run
    finally:
        store.running.release()


@st.cache_resource(max_entries=48, ttl=3600, show_spinner=False)
def _payload(key: RunKey, _run: Run, layer: int, head: int, lang: str) -> str:
    """Every event's frame of one run for one layer and head, in one language (read-only JSON);
    ``_run`` is ``key``'s run (not hashed: the key names it)."""
    return frames_llm.build(_run, _model(key[4]), layer, head, translator(lang)).to_json()


def _default_key(model: SmolLM2) -> RunKey:
    rule, seed = default_rule("llm")
    return tuple(model.prompt(DEFAULT_MESSAGE, chat=True)), DEFAULT_NEW, rule_cache_key(rule), seed, DEFAULT_DTYPE


def warm() -> None:
    """Server start-up (kvviz/ui/app/warmup.py): convert or download the weights once, load the
    float32 ones, make the default run and its frames (layer 1, head 1, English). The bfloat16
    copy loads from the same files when first asked for (≈ 1 s, 269 MB more)."""
    if smollm2.find_source() is None:
        return                                  # not installed: the page says how to get it
    SmolLM2(DEFAULT_DTYPE, prepare=True)        # the one place that converts or downloads
    _model(DEFAULT_DTYPE)
    key = _default_key(_model(DEFAULT_DTYPE))
    run = _generate(key)
    _runs().put(key, run)
    _payload(key, run, 0, 0, "en")


# ---- inputs --------------------------------------------------------------------------------------

def _inputs(model: SmolLM2) -> tuple[RunKey, tuple[int, int] | None, bool] | None:
    """The settings (all in the address); the run's key, the message's token span, chat or not."""
    urlstate.choice_param("llm_mode", MODES, DEFAULT_MODE)
    urlstate.choice_param("llm_dtype", DTYPES, DEFAULT_DTYPE)
    cap = model.limits.max_new_tokens
    urlstate.int_param("llm_new", DEFAULT_NEW, 1, cap)
    c = st.columns([1.8, 3, 1, 1.4], vertical_alignment="bottom")
    mode = c[0].segmented_control(t("llm.mode"), MODES, required=True, format_func=lambda m: t(f"llm.mode_{m}"),
                                  key="llm_mode", on_change=urlstate.sync, args=("llm_mode", DEFAULT_MODE),
                                  help=t("llm.mode_help"), width="stretch")
    text = c[1].text_input(t("llm.prompt_" + mode), value=DEFAULT_MESSAGE, key="llm_prompt", bind="query-params",
                           max_chars=model.limits.max_prompt_chars,
                           help=t("llm.prompt_help", cap=model.limits.max_prompt_tokens))
    new = c[2].number_input(t("llm.new_tokens"), 1, cap, key="llm_new", on_change=urlstate.sync,
                            args=("llm_new", DEFAULT_NEW), help=t("llm.new_tokens_help", cap=cap))
    dtype = c[3].segmented_control(t("llm.dtype"), DTYPES, required=True, key="llm_dtype",
                                   on_change=urlstate.sync, args=("llm_dtype", DEFAULT_DTYPE),
                                   help=t("llm.dtype_help"), width="stretch")
    rule, seed = rule_controls("llm")
    chat = mode == "chat"
    try:
        tokens = _prompt(model, text or "", chat)
    except LimitError as e:
        st.error(t("llm.bad_prompt", reason=str(e), example=DEFAULT_MESSAGE), icon=":material/error:")
        return None
    span = model.chat(text)[1] if chat else None
    return (tuple(tokens), int(new), rule_cache_key(rule), seed, dtype), span, chat


def _prompt(model: SmolLM2, text: str, chat: bool) -> list[str]:
    """The prompt's tokens, or a LimitError in the page's language: empty, too many characters, too
    many tokens (the engine's caps; ``model.prompt`` checks them again)."""
    if not text.strip():
        raise LimitError(t("llm.empty"))
    if len(text) > model.limits.max_prompt_chars:
        raise LimitError(t("llm.too_long", cap=model.limits.max_prompt_chars))
    n = len(model.chat(text)[0] if chat else model.tokenize(text))
    if n > model.limits.max_prompt_tokens:
        raise LimitError(t("llm.too_many", n=n, cap=model.limits.max_prompt_tokens))
    return model.prompt(text, chat)


# ---- what the model reads ------------------------------------------------------------------------

def _part(i: int, tok: str, span: tuple[int, int] | None, model: SmolLM2) -> str:
    """Which part of the chat template a prompt token is: marker, system, user, assistant or text."""
    if span is None:
        return "text"
    if tok in model.tokenizer.all_special_tokens:
        return "marker"
    a, b = span
    return "user" if a <= i < b else ("system" if i < a else "assistant")


def _token_view(tokens: tuple[str, ...], span: tuple[int, int] | None, model: SmolLM2) -> None:
    """The prompt as the tokenizer split it: each token as its string (Ġ a leading space, Ċ a line
    break) with its id, coloured by its part of the chat template, and where the answer starts."""
    st.header(t("llm.tokens_title"))
    st.markdown(t("llm.tokens_intro_chat" if span else "llm.tokens_intro_plain", n=len(tokens)))
    ids = model.ids(tokens)
    parts = [_part(i, tok, span, model) for i, tok in enumerate(tokens)]
    chips = "".join(
        f"<span role='listitem' class='kv-tok kv-tok-{part}' "
        f"title='{html.escape(t('llm.tok_title', i=i, id=j), quote=True)}'>"
        f"{html.escape(tok)}<small>{j}</small></span>" for i, (tok, j, part) in enumerate(zip(tokens, ids, parts)))
    legend = "".join(f"<span class='kv-tok kv-tok-{p}'>{html.escape(t('llm.part_' + p))}</span>"
                     for p in (("marker", "system", "user", "assistant") if span else ("text",)))
    answer = f"<span role='listitem' class='kv-tok kv-tok-answer'>{html.escape(t('llm.answer_starts'))}</span>"
    st.html(f"<div class='kv-toks' role='list' aria-label='{html.escape(t('llm.tokens_title'), quote=True)}'>"
            f"{chips}{answer}</div><div class='kv-toks kv-toks-legend'>{legend}</div>")
    with st.expander(t("llm.tokens_table", n=len(tokens))):
        st.dataframe(pd.DataFrame({t("llm.col_position"): range(len(tokens)), t("llm.col_token"): list(tokens),
                                   t("llm.col_id"): ids, t("llm.col_text"): [model.token_text(x) for x in tokens],
                                   t("llm.col_part"): [t("llm.part_" + p) for p in parts]}),
                     hide_index=True, width="stretch")
    if span:
        st.caption(t("llm.template_note", system=parts.count("system")))


# ---- the stepper ---------------------------------------------------------------------------------

def picker(model: SmolLM2) -> LayerHeadPicker:
    """Layer and head of the attention maps and the cache table (?llm_layer=4&llm_head=2); the
    model view's cells pick them too."""
    return LayerHeadPicker("llm", model.n_layers, model.n_heads, ("llm.layer", "llm.layer_help", "llm.head",
                                                                  "llm.head_help"))


# ---- grouped K/V heads, rotary positions, float32 / bfloat16 -----------------------------------------

def _gqa(run: Run, model: SmolLM2) -> None:
    st.header(t("llm.gqa_section"))
    cfg, dtype = model.cost_config, frames_llm.COST_DTYPE[model.dtype_name]
    last = run.events[-1].cache
    T = last.seq_length
    shape = "[" + ", ".join(str(n) for n in last.keys[0].shape) + "]"
    per = {d: cost.cache_bytes_per_token(cfg, d) for d in ("fp32", "bf16")}
    mha = cost.memory_report(cfg, T, 1, dtype)
    st.markdown(t("llm.gqa_body", heads=cfg.n_heads, kv=cfg.n_kv_heads, per=cfg.n_heads // cfg.n_kv_heads,
                  layers=cfg.n_layers, hs=cfg.head_dim, shape=shape, T=T, fp32=per["fp32"],
                  bf16=fmt.integer(per["bf16"]), mha_fp32=cost.memory_report(cfg, 1, 1, "fp32").mha_total,
                  total=last.nbytes(), mha_total=mha.mha_total,
                  saving=fmt.factor(mha.saving_vs_mha), dtype=model.dtype_name))
    groups = pd.DataFrame({t("llm.col_kv_head"): [f"K/V {g + 1}" for g in range(cfg.n_kv_heads)],
                           t("llm.col_queries"): [", ".join(str(h + 1) for h in range(cfg.n_heads)
                                                            if model.kv_group(h) == g) for g in range(cfg.n_kv_heads)]})
    st.dataframe(groups, hide_index=True)


def _rope(run: Run, model: SmolLM2, layer: int, head: int) -> None:
    """A cached key before and after its rotation, each pair's angle, and why it never changes."""
    st.header(t("llm.rope_section"))
    prefill = run.events[0].record
    positions = list(range(len(run.prompt)))
    urlstate.int_param("llm_rope_pos", min(5, positions[-1]), 0, positions[-1])
    pos = st.select_slider(t("llm.rope_pos"), positions, key="llm_rope_pos", on_change=urlstate.sync,
                           args=("llm_rope_pos", min(5, positions[-1])),
                           format_func=lambda p: f"{p}: {run.prompt[p]}", help=t("llm.rope_pos_help"))
    g = model.kv_group(head)
    before, after = prefill.k_unrotated[layer, g, pos], prefill.k[layer, g, pos]          # [d]
    angles = model.rope_angles(pos)
    st.markdown(t("llm.rope_body", pos=pos, tok=html.escape(run.prompt[pos]), layer=layer + 1, kv=g + 1,
                  pairs=model.head_dim // 2, hs=model.head_dim,
                  theta=fmt.integer(int(model.config.rope_parameters["rope_theta"]))))
    chart(rope_pairs(before.tolist(), after.tolist(), angles.tolist(),
                          t("llm.rope_chart_title", pos=pos, layer=layer + 1, kv=g + 1),
                          {"before": t("llm.rope_before"), "after": t("llm.rope_after"), "pair": t("llm.rope_pair"),
                           "angle": t("llm.rope_angle"), "x": t("llm.rope_x"), "y": t("llm.rope_y")}),
          t("llm.rope_alt"), key="llm_rope_chart")
    newest = run.events[-1] if run.events[-1].record is not None else run.events[-2]
    q_pos = newest.positions[-1]
    q = newest.record.q_unrotated[layer, head, -1]
    scores = model.relative_scores(q, before, q_pos, pos, (0, 100, 1000))
    st.markdown(t("llm.rope_why", q_pos=q_pos, pos=pos, d=q_pos - pos,
                  s0=fmt.fixed(scores[0], 4), s1=fmt.fixed(scores[1], 4), s2=fmt.fixed(scores[2], 4),
                  diff=fmt.sci(max(abs(s - scores[0]) for s in scores), 1)))


def _dtypes(tokens: tuple[str, ...], model: SmolLM2) -> None:
    st.header(t("llm.dtype_section"))
    cfg = model.cost_config
    st.markdown(t("llm.dtype_intro", fp32=fmt.nbytes(cost.weight_bytes(cfg, "fp32")),
                  bf16=fmt.nbytes(cost.weight_bytes(cfg, "bf16")),
                  c32=fmt.integer(cost.cache_bytes_per_token(cfg, "fp32")),
                  c16=cost.cache_bytes_per_token(cfg, "bf16"), steps=MEASURE_STEPS))
    go = st.button(t("llm.measure"), icon=":material/timer:", type="primary", help=t("llm.measure_help"))
    if go:
        with my_turn("llm_dtypes", t("llm.measure_busy")) as mine:       # float32 against bfloat16
            if mine:
                with st.spinner(t("llm.measuring")):
                    got = measure_dtypes([(d, _model(d)) for d in DTYPES], model.ids(tokens), MEASURE_STEPS)
                st.session_state["llm_dtypes"] = (tokens, got)
    stored = st.session_state.get("llm_dtypes")
    if stored is None:
        st.info(t("llm.measure_none"), icon=":material/timer:")
        return
    for_tokens, got = stored
    if for_tokens != tokens:
        st.caption(t("llm.measure_stale"))
    _dtype_result(got, model)


def _dtype_result(got: DtypeComparison, model: SmolLM2) -> None:
    c = st.columns(len(got.runs) + 1)
    for col, r in zip(c, got.runs):
        col.metric(t("llm.step_ms", dtype=r.dtype), f"{fmt.fixed(r.step_ms, 1)} ms",
                   help=t("llm.step_ms_help", n=len(r.step_seconds), weights=fmt.nbytes(r.weight_bytes)))
    c[-1].metric(t("llm.step_ratio"), fmt.factor(got.ratio, 2), help=t("llm.step_ratio_help"))
    first = got.first_difference()
    texts = {r.dtype: model.decode(r.tokens) for r in got.runs}
    if first is None:
        st.success(t("llm.dtype_same", n=len(got.runs[0].tokens)), icon=":material/check_circle:")
    else:
        st.warning(t("llm.dtype_differ", i=first + 1, a=html.escape(model.tokens([got.runs[0].tokens[first]])[0]),
                     b=html.escape(model.tokens([got.runs[1].tokens[first]])[0])), icon=":material/call_split:")
    for r in got.runs:
        st.caption(f"{r.dtype}: ")
        st.text(texts[r.dtype])


# ---- the page ------------------------------------------------------------------------------------

def render() -> None:
    st.title(t("llm.title"))
    try:
        if smollm2.find_source() is None:
            raise ModelUnavailable("")
        model = _model(DEFAULT_DTYPE)
    except ModelUnavailable as e:
        presenter.intro(t("llm.intro_short"))
        st.warning(t("llm.missing", command=smollm2.INSTALL_COMMAND, pin=smollm2.PACKAGE_PIN) if not str(e)
                or smollm2.find_source() is None else t("llm.not_ready", reason=str(e)), icon=":material/download:")
        return
    cfg = model.cost_config
    presenter.intro(t("llm.intro", layers=cfg.n_layers, heads=cfg.n_heads, kv=cfg.n_kv_heads, hs=cfg.head_dim,
                      d=cfg.d_model, vocab=cfg.vocab, params=model.model.num_parameters(),
                      theta=fmt.integer(int(model.config.rope_parameters["rope_theta"]))))
    src = model.source
    st.caption(t("llm.weights_" + src.kind, bytes=model.weight_bytes(), mb=fmt.nbytes(model.weight_bytes()),
                 hub=smollm2.HUB_ID, pin=smollm2.PACKAGE_PIN))
    with presenter.settings():
        got = _inputs(model)
    if got is None:
        return
    key, span, chat = got
    try:
        with st.spinner(t("llm.loading", dtype=key[4])):
            run_model = _model(key[4])
    except ModelUnavailable as e:
        st.error(t("llm.not_ready", reason=str(e)), icon=":material/error:")
        return
    if not presenter.presenting():
        _token_view(key[0], span, model)
    try:
        run = get_run(key)
    except (LimitError, ValueError) as e:
        st.error(t("llm.bad_prompt", reason=str(e), example=DEFAULT_MESSAGE), icon=":material/error:")
        return
    if presenter.presenting():
        nav.hidden_heading(t("stepper.section"))
    else:
        st.header(t("llm.step_title"))
    step_view.url_step_notice(len(run.events))
    step_view.page_stepper("llm.step", functools.partial(_payload, key, run), len(run.events), key="kvs_llm",
                           run_id=repr(key), picker=picker(run_model), pickable=True)
    downloads.trace_button(run, run_model.logit_tokens, "smollm2")
    if not step_view.whole_page() or presenter.presenting():
        return
    layer, head = st.session_state.get("llm_layer", 1) - 1, st.session_state.get("llm_head", 1) - 1
    _gqa(run, run_model)
    _rope(run, run_model, layer, head)
    _dtypes(key[0], run_model)
    llm_loop.section(loaded_model)   # the loop on SmolLM2: tea / water, greedy's loop, the whole run (llm_loop.py)
