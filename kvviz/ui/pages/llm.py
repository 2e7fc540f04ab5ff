"""The "A real LLM" page body: a real model (SmolLM2-135M-Instruct, Gemma 3 270M or one the host
names; ``?llm_model=``), token by token, through its own KV cache.

A chat message inside the model's chat template (or plain text), the tokens as its tokenizer splits
them, then the stepper over prefill and decode (any of the 30 × 9 heads, grouped-query attention, the
cache of every layer), grouped K/V heads and rotary positions explained on the run's own numbers,
and float32 against bfloat16 measured here. The file in pages/ only sets up the frame.

The models come from the server's one service (kvviz/ui/app/models.py): which real models this server
loads is the host's setting; their weights are prepared by the server's warm-up (converted once, or
downloaded on Streamlit Community Cloud), which also makes each model's default run (``warm_model``);
a visitor's request never converts or downloads, and waits for the warm-up where it is not done yet.
One generation runs at a time per model: the others wait with a message (``_runs``, a ``RunStore``
per model). A model with sliding-window layers (Gemma 3) also gets the hybrid cache's section.
"""
from __future__ import annotations

import functools
import html

import pandas as pd
import streamlit as st

from kvviz import cost
from kvviz.cache.hybrid import far_reach
from kvviz.cost.hybrid import all_global_bytes, hybrid_cache_bytes
from kvviz.decoding.stepper import Run, run_bytes, run_generation
from kvviz.limits import MAX_RUN_RECORD_BYTES, LimitError
from kvviz.measure.timing import DtypeComparison, measure_dtypes
from kvviz.models import real, smollm2
from kvviz.models.base import Keep
from kvviz.models.real import ModelUnavailable, RealLM
from kvviz.ui.app import fmt, models, nav, presenter, urlstate, waiting
from kvviz.ui.app.i18n import t
from kvviz.ui.app.turns import RunStore, my_turn
from kvviz.ui.components import downloads, step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.components.rule_controls import RuleKey, default_rule, rule_cache_key, rule_controls, rule_from_key
from kvviz.ui.frames import llm as frames_llm
from kvviz.ui.frames import translator
from kvviz.ui.pages import llm_loop
from kvviz.viz.hybrid import cache_bytes, cache_lengths, far_weights
from kvviz.viz.rope import rope_pairs

DEFAULT_MESSAGE, DEFAULT_NEW, DEFAULT_MODE, DEFAULT_DTYPE = "What is the capital of France?", 10, "chat", "float32"
MODES = ("chat", "plain")
TEXTS = ("yours", "long")   # a hybrid model's text: the visitor's, or kvviz's long one (real.long_text)
KEEP = Keep()             # what a long pass keeps (kvviz/limits.py LONG_*): what the views draw
DTYPES = smollm2.DTYPES
MAX_RUNS = 3              # finished runs kept per server (a 256 + 64-token run holds ≈ 300 MB of records)
MEASURE_STEPS = 12        # decode steps per dtype in the float32 / bfloat16 measurement

RunKey = tuple[tuple[str, ...], int, RuleKey, int, str, str]  # tokens, new tokens, rule, seed, dtype, model


# ---- shared, read-only resources -----------------------------------------------------------------

def _model(name: str, dtype: str) -> RealLM:
    """The server's model ``name`` in ``dtype`` (kvviz/ui/app/models.py: loaded once from what the
    start-up prepared, shared and read-only; never converted or downloaded here)."""
    return models.real_model(name, dtype)


@st.cache_resource(show_spinner=False)
def _runs(name: str = models.DEFAULT_REAL) -> RunStore:
    """This server's finished runs of one model (read-only records, the last MAX_RUNS) and the lock
    that lets one generation of it run at a time: a real model takes both cores (the service's
    lock of the model, kvviz/ui/app/models.py, which any page that runs the model can take)."""
    store = RunStore(MAX_RUNS)
    store.running = models.generation_lock(name)
    return store


def _generate(key: RunKey, progress=None) -> Run:
    tokens, new, rule_key, seed, dtype, name = key
    # one pass without the cache over the whole text at the end checks every pass (a causal model);
    # a long text's passes keep what the views draw (KEEP), the run's records capped
    return run_generation(_model(name, dtype), list(tokens), new, rule_from_key(rule_key), seed, recheck="final",
                          keep=KEEP, progress=progress)


def _progress_bar(key: RunKey):
    """A progress bar for a run of ``key`` (a long prefill takes seconds): the pass it is at."""
    bar = st.progress(0.0, text=t("hybrid.progress_prefill", n=len(key[0])))

    def update(done: int, total: int) -> None:
        text = (t("hybrid.progress_prefill", n=len(key[0])) if done == 0 else
                t("hybrid.progress_check", n=len(key[0]) + key[1] - 1) if done >= key[1] else
                t("hybrid.progress_decode", i=done, n=key[1] - 1))
        bar.progress(done / total, text=text)
    return bar, update


def get_run(key: RunKey) -> Run:
    """The finished run of ``key``; generated here if no one has, one generation at a time per model
    (a visitor who finds another's running sees a message and a spinner, not a frozen page)."""
    store = _runs(key[5])
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
            bar, update = _progress_bar(key)
            with st.spinner(t("llm.generating", n=key[1])):
                run = _generate(key, update)
            bar.empty()
            store.put(key, run)
        return run
    finally:
        store.running.release()


@st.cache_resource(max_entries=48, ttl=3600, show_spinner=False)
def _payload(key: RunKey, _run: Run, layer: int, head: int, lang: str) -> str:
    """Every event's frame of one run for one layer and head, in one language (read-only JSON);
    ``_run`` is ``key``'s run (not hashed: the key names it)."""
    return frames_llm.build(_run, _model(key[5], key[4]), layer, head, translator(lang)).to_json()


def _default_key(model: RealLM, long: bool = False) -> RunKey:
    """The page's default run of ``model``; ``long``: of kvviz's long text (a hybrid model's)."""
    rule, seed = default_rule("llm")
    chat = model.SPEC.chat_template and not long  # a base model (Gemma 3) continues the text instead
    text = real.long_text() if long else DEFAULT_MESSAGE
    return (tuple(model.prompt(text, chat=chat)), DEFAULT_NEW, rule_cache_key(rule), seed, DEFAULT_DTYPE,
            model.SPEC.name)


def is_long_default(model: RealLM, key: RunKey) -> bool:
    """``key`` is the default run of kvviz's long text (the one the warm-up makes last, ``warm_late``)."""
    return bool(_long_tokens(model)) and key == _default_key(model, long=True)


def hybrid(model: RealLM) -> bool:
    """The model has sliding-window layers (the long text and the hybrid cache's section are its)."""
    return any(w is not None for w in model.windows)


def _long_tokens(model: RealLM) -> int:
    """Tokens of kvviz's long text for a hybrid ``model`` whose caps take it (Gemma 3: 1,100), else 0
    (the text is not offered)."""
    if not hybrid(model):
        return 0
    try:
        return len(model.prompt(real.long_text(), chat=False))
    except LimitError:
        return 0


def warm_model(name: str) -> None:
    """Server start-up (kvviz/ui/app/warmup.py, once the warm-up has prepared and loaded the model
    ``name``): its default run and frames (layer 1, head 1, English) and, where offered, the loop
    views. The run is made under the model's generation lock, as a visitor's: one who asks for it
    meanwhile reads it from the store. The bfloat16 copy loads when first asked for; a hybrid model's
    long text follows at the end of the warm-up (``warm_late``)."""
    try:
        model = models.real_model(name, DEFAULT_DTYPE)
    except ModelUnavailable:
        return                                            # not installed or not prepared: the page says so
    key = _default_key(model)
    store = _runs(name)
    with store.running:
        run = store.get(key)
        if run is None:
            run = _generate(key)
            store.put(key, run)
    _payload(key, run, 0, 0, "en")
    if llm_loop.offered(model):                           # tea / water, greedy's loop, the whole run
        llm_loop.warm(functools.partial(models.real_model, name, DEFAULT_DTYPE))


def warm_late() -> None:
    """The warm-up's last step (kvviz/ui/app/warmup.py): a hybrid model's long text, its default run and
    frames (≈ 25 s for Gemma 3 here). A visitor who asks for the long text meanwhile waits for this
    step with a progress message (``render``) and then reads the run from the store."""
    for name in models.enabled():
        try:
            model = models.real_model(name, DEFAULT_DTYPE)
        except ModelUnavailable:
            continue
        if not _long_tokens(model):
            continue
        key = _default_key(model, long=True)
        store = _runs(name)
        with store.running:
            if store.get(key) is None:
                run = _generate(key)
                store.put(key, run)
                _payload(key, run, 0, 0, "en")


# ---- inputs --------------------------------------------------------------------------------------

def _inputs(model: RealLM) -> tuple[RunKey, tuple[int, int] | None, bool] | None:
    """The settings (all in the address); the run's key, the message's token span, chat or not. A
    model without a chat template (a base model) takes plain text: the chat control is off."""
    has_chat = model.SPEC.chat_template
    urlstate.choice_param("llm_mode", MODES, DEFAULT_MODE)
    urlstate.choice_param("llm_dtype", DTYPES, DEFAULT_DTYPE)
    cap = model.limits.max_new_tokens
    urlstate.int_param("llm_new", DEFAULT_NEW, 1, cap)
    c = st.columns([1.7, 2.7, 1, 1.6], vertical_alignment="bottom")
    if has_chat:
        mode = c[0].segmented_control(t("llm.mode"), MODES, required=True, format_func=lambda m: t(f"llm.mode_{m}"),
                                      key="llm_mode", on_change=urlstate.sync, args=("llm_mode", DEFAULT_MODE),
                                      help=t("llm.mode_help"), width="stretch")
    else:                       # a base model: plain text, shown as chosen (the address's llm_mode is kept)
        mode = c[0].segmented_control(t("llm.mode"), MODES, default="plain", format_func=lambda m: t(f"llm.mode_{m}"),
                                      key="llm_mode_base", help=t("hybrid.no_chat"), width="stretch", disabled=True)
        mode = "plain"
    n_long = _long_tokens(model)
    if n_long:                      # kvviz's long text, past the window (?llm_text=long): the box then rests
        urlstate.choice_param("llm_text", TEXTS, "yours")
    text = c[1].text_input(t("llm.prompt_" + mode), value=DEFAULT_MESSAGE, key="llm_prompt", bind="query-params",
                           max_chars=model.limits.max_prompt_chars, disabled=bool(n_long) and
                           st.session_state.get("llm_text") == "long",
                           help=t("llm.prompt_help", cap=model.limits.max_prompt_tokens))
    new = c[2].number_input(t("llm.new_tokens"), 1, cap, key="llm_new", on_change=urlstate.sync,
                            args=("llm_new", DEFAULT_NEW), help=t("llm.new_tokens_help", cap=cap))
    dtype = c[3].segmented_control(t("llm.dtype"), DTYPES, required=True, key="llm_dtype",
                                   on_change=urlstate.sync, args=("llm_dtype", DEFAULT_DTYPE),
                                   help=t("llm.dtype_help"), width="stretch")
    if n_long:
        which = st.segmented_control(t("hybrid.text"), TEXTS, required=True, key="llm_text",
                                     format_func=lambda x: t("hybrid.text_" + x, n=n_long), on_change=urlstate.sync,
                                     args=("llm_text", "yours"), help=t("hybrid.text_help", n=n_long))
        if which == "long":
            mode, text = "plain", real.long_text()
            with st.expander(t("hybrid.long_shown", n=n_long)):
                st.text(text)
    rule, seed = rule_controls("llm")
    chat = mode == "chat"
    try:
        tokens = _prompt(model, text or "", chat)
    except LimitError as e:
        st.error(t("llm.bad_prompt", reason=str(e), example=DEFAULT_MESSAGE), icon=":material/error:")
        return None
    span = model.chat(text)[1] if chat else None
    return (tuple(tokens), int(new), rule_cache_key(rule), seed, dtype, model.SPEC.name), span, chat


def _prompt(model: RealLM, text: str, chat: bool) -> list[str]:
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

def _part(i: int, tok: str, span: tuple[int, int] | None, model: RealLM) -> str:
    """Which part of the chat template a prompt token is: marker, system, user, assistant or text."""
    if span is None:
        return "text"
    if tok in model.tokenizer.all_special_tokens:
        return "marker"
    a, b = span
    return "user" if a <= i < b else ("system" if i < a else "assistant")


def _token_view(tokens: tuple[str, ...], span: tuple[int, int] | None, model: RealLM) -> None:
    """The prompt as the tokenizer split it: each token as its string (Ġ a leading space, Ċ a line
    break) with its id, coloured by its part of the chat template, and where the answer starts."""
    st.header(t("llm.tokens_title"))
    st.markdown(t("llm.tokens_intro_chat" if span else "llm.tokens_intro_plain", n=len(tokens)))
    ids = model.ids(tokens)
    parts = [_part(i, tok, span, model) for i, tok in enumerate(tokens)]
    chips = "".join(
        f"<span role='listitem' class='kv-tok kv-tok-{part}' "
        f"title='{html.escape(t('llm.tok_title', i=i, id=j), quote=True)}'>"
        f"{html.escape(frames_llm.visible(tok))}<small>{j}</small></span>"
        for i, (tok, j, part) in enumerate(zip(tokens, ids, parts)))
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

def picker(model: RealLM) -> LayerHeadPicker:
    """Layer and head of the attention maps and the cache table (?llm_layer=4&llm_head=2); the
    model view's cells pick them too."""
    return LayerHeadPicker("llm", model.n_layers, model.n_heads, ("llm.layer", "llm.layer_help", "llm.head",
                                                                  "llm.head_help"))


# ---- grouped K/V heads, rotary positions, float32 / bfloat16 -----------------------------------------

def _gqa(run: Run, model: RealLM) -> None:
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


def _rope(run: Run, model: RealLM, layer: int, head: int) -> None:
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
    angles = model.rope_angles(pos, layer)
    st.markdown(t("llm.rope_body", pos=pos, tok=html.escape(run.prompt[pos]), layer=layer + 1, kv=g + 1,
                  pairs=model.head_dim // 2, hs=model.head_dim,
                  theta=fmt.integer(int(model.layout[layer].rope_theta))))
    chart(rope_pairs(before.tolist(), after.tolist(), angles.tolist(),
                          t("llm.rope_chart_title", pos=pos, layer=layer + 1, kv=g + 1),
                          {"before": t("llm.rope_before"), "after": t("llm.rope_after"), "pair": t("llm.rope_pair"),
                           "angle": t("llm.rope_angle"), "x": t("llm.rope_x"), "y": t("llm.rope_y")}),
          t("llm.rope_alt"), key="llm_rope_chart")
    newest = run.events[-1] if run.events[-1].record is not None else run.events[-2]
    q_pos = newest.positions[-1]
    q = newest.record.q_unrotated[layer, head, -1]
    scores = model.relative_scores(q, before, q_pos, pos, (0, 100, 1000), layer=layer)
    st.markdown(t("llm.rope_why", q_pos=q_pos, pos=pos, d=q_pos - pos,
                  s0=fmt.fixed(scores[0], 4), s1=fmt.fixed(scores[1], 4), s2=fmt.fixed(scores[2], 4),
                  diff=fmt.sci(max(abs(s - scores[0]) for s in scores), 1)))


def _dtypes(tokens: tuple[str, ...], model: RealLM) -> None:
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
                    got = measure_dtypes([(d, _model(model.SPEC.name, d)) for d in DTYPES], model.ids(tokens),
                                         MEASURE_STEPS)
                st.session_state["llm_dtypes"] = (tokens, got)
    stored = st.session_state.get("llm_dtypes")
    if stored is None:
        st.info(t("llm.measure_none"), icon=":material/timer:")
        return
    for_tokens, got = stored
    if for_tokens != tokens:
        st.caption(t("llm.measure_stale"))
    _dtype_result(got, model)


def _dtype_result(got: DtypeComparison, model: RealLM) -> None:
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


# ---- the hybrid cache (sliding-window and global layers) ----------------------------------------------

def cache_table(run: Run, model: RealLM) -> pd.DataFrame:
    """Each layer's cache after the run, from the run's last snapshot: its kind, window, rows held
    and bytes (K + V, measured on the tensors), beside the rows an all-global layer would hold."""
    last = run.events[-1].cache
    T = last.seq_length
    rows = []
    for i, (lay, k, v) in enumerate(zip(model.layout, last.keys, last.values)):
        held = 0 if k is None else int(k.shape[-2])
        nbytes = sum(0 if x is None else x.numel() * x.element_size() for x in (k, v))
        rows.append({"layer": i + 1, "kind": "sliding" if lay.window else "global", "window": lay.window,
                     "positions": T, "rows held": held, "bytes (K + V)": nbytes})
    table = pd.DataFrame(rows)
    table["window"] = table["window"].astype("Int64")          # a global layer has none (empty in the CSV)
    return table


def _hybrid(run: Run, model: RealLM) -> None:
    """Per layer its kind, window and rows held as the text grows; the bytes measured against the
    formula and against an all-global cache; K/V heads read by the query heads."""
    st.header(t("hybrid.section"))
    windows = model.windows
    lay = model.layout[0]
    b = frames_llm.BYTES[model.dtype_name]
    n_global = sum(w is None for w in windows)
    window = max(w for w in windows if w is not None)
    events = [ev for ev in run.events if ev.phase != "choose"]
    T = [ev.cache.seq_length for ev in events]
    lengths = [[0 if k is None else int(k.shape[-2]) for k in ev.cache.keys] for ev in events]
    measured = [ev.cache.nbytes() for ev in events]
    formula = [hybrid_cache_bytes(windows, lay.n_kv_heads, lay.head_dim, b, n) for n in T]
    every = [all_global_bytes(len(windows), lay.n_kv_heads, lay.head_dim, b, n) for n in T]
    st.markdown(t("hybrid.body", layers=len(windows), n_global=n_global, n_sliding=len(windows) - n_global,
                  window=window, held=window - 1,
                  globals=", ".join(str(i + 1) for i, w in enumerate(windows) if w is None)))
    words = {"x": t("hybrid.x"), "y": t("hybrid.y"), "global": t("hybrid.global"), "sliding": t("hybrid.sliding"),
             "layer": t("llm.col_layer"), "measured": t("hybrid.measured"), "formula": t("hybrid.formula"),
             "all_global": t("hybrid.all_global"), "bytes": t("hybrid.bytes")}
    if T[-1] <= window - 1:                 # nothing evicted yet: every layer holds every position
        st.info(t("hybrid.short", T=T[-1], held=window - 1), icon=":material/straighten:")
    chart(cache_lengths(T, lengths, windows, t("hybrid.lengths_title"), words), t("hybrid.lengths_alt"),
          key="llm_hybrid_lengths")
    ok = all(m == f for m, f in zip(measured, formula))
    st.markdown(t("hybrid.bytes_line", T=T[-1], kv=lay.n_kv_heads, hs=lay.head_dim, b=b, n_global=n_global,
                  n_sliding=len(windows) - n_global, held=window - 1, measured=measured[-1],
                  formula=fmt.integer(formula[-1]), every=every[-1], ok="✓" if ok else "✗",
                  saving=fmt.factor(every[-1] / max(1, measured[-1]))))
    chart(cache_bytes(T, measured, formula, every, t("hybrid.bytes_title"), words), t("hybrid.bytes_alt"),
          key="llm_hybrid_bytes")
    table = cache_table(run, model)
    shown = table.rename(columns={"layer": t("llm.col_layer"), "kind": t("hybrid.col_kind"),
                                  "window": t("hybrid.col_window"), "positions": t("hybrid.col_positions"),
                                  "rows held": t("hybrid.col_held"), "bytes (K + V)": t("llm.col_bytes")})
    shown[t("hybrid.col_kind")] = [t("hybrid.kind_" + k) for k in table["kind"]]
    shown[t("hybrid.col_window")] = ["—" if pd.isna(w) else fmt.integer(int(w)) for w in table["window"]]
    st.dataframe(shown, hide_index=True, width="stretch")
    st.download_button(t("hybrid.csv"), table.to_csv(index=False).encode(), f"kvviz-{model.SPEC.name}-cache.csv",
                       "text/csv", icon=":material/download:", key="llm_hybrid_csv")
    _far(run, model)
    st.caption(t("hybrid.record_line", mb=fmt.nbytes(run_bytes(run)), cap=fmt.nbytes(MAX_RUN_RECORD_BYTES),
                 rows=KEEP.rows, side=KEEP.map_side, logits=KEEP.logits))
    emb = model.model.get_input_embeddings().weight
    emb_bytes = emb.numel() * emb.element_size()
    st.markdown(t("hybrid.vocab", vocab=emb.shape[0], d=emb.shape[1], emb=fmt.nbytes(emb_bytes),
                  rest=fmt.nbytes(model.weight_bytes() - emb_bytes), layers=len(windows)))


def _far(run: Run, model: RealLM) -> None:
    """What the prompt's last query (the one that chooses the first new token: at the end of a question,
    the answer) reads beyond every sliding window (kvviz.cache.hybrid.far_reach): the weight each head
    puts there, zero on sliding layers, and where the global heads look most."""
    prefill = run.events[0]
    reach = far_reach(prefill.record.attention[:, :, -1], prefill.positions[-1], model.windows)
    st.subheader(t("hybrid.far_section"))
    if reach.edge < 0:
        st.info(t("hybrid.far_none", q=reach.query, window=min(w for w in model.windows if w is not None)),
                icon=":material/straighten:")
        return
    seq = run.events[-1].sequence
    first_new = run.events[1].chosen if len(run.events) > 1 else None
    st.markdown(t("hybrid.far_body", q=reach.query, tok=html.escape(frames_llm.visible(seq[reach.query])),
                  edge=reach.edge, first=frames_llm.shown_text(model.decode(seq[1:min(reach.edge + 1, 24)])),
                  chosen=html.escape(frames_llm.visible(first_new or "")), start=html.escape(seq[0])))
    words = {"layer": t("llm.col_layer"), "head": t("hybrid.head"), "far": t("hybrid.far_y"),
             "global": t("hybrid.global"), "sliding": t("hybrid.sliding")}
    chart(far_weights(reach.weights.tolist(), model.windows, t("hybrid.far_title", q=reach.query, edge=reach.edge),
                      words), t("hybrid.far_alt"), key="llm_hybrid_far")
    rows = []
    for layer, window in enumerate(model.windows):
        if window is None:
            for h in range(model.n_heads):
                top = ", ".join(f"{int(p)}: {frames_llm.visible(seq[int(p)])} ({fmt.fixed(float(w), 3)})"
                                for p, w in zip(reach.top[layer, h], reach.top_weight[layer, h]))
                rows.append({t("llm.col_layer"): layer + 1, t("hybrid.head"): h + 1,
                             t("hybrid.far_y"): fmt.fixed(float(reach.weights[layer, h]), 3),
                             t("hybrid.col_first", start=seq[0]): fmt.fixed(float(reach.first[layer, h]), 3),
                             t("hybrid.col_top"): top})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")


# ---- the page ------------------------------------------------------------------------------------

def _model_choice() -> str | None:
    """The model of the page (``?llm_model=``, one this server loads; SmolLM2 by default)."""
    names = models.enabled()
    if not names:
        return None
    return models.choose("llm_model", names, t("hybrid.model"), t("hybrid.model_help"))


def render() -> None:
    with presenter.settings():
        name = _model_choice()
    if name is None:
        st.title(t("llm.title"))
        st.warning(t("hybrid.none_loaded"), icon=":material/block:")
        return
    spec = models.spec(name)
    smol = name == models.DEFAULT_REAL
    st.title(t("llm.title") if smol else t("hybrid.title", title=spec.title))
    waiting.wait_for(f"runs:{name}")          # a fresh server's warm-up may still be making the default run
    try:
        model = _model(name, DEFAULT_DTYPE)
    except ModelUnavailable as e:
        presenter.intro(t("llm.intro_short") if smol else t("hybrid.intro_short", title=spec.title))
        models.missing(name, e)
        return
    cfg = model.cost_config
    if smol:
        presenter.intro(t("llm.intro", layers=cfg.n_layers, heads=cfg.n_heads, kv=cfg.n_kv_heads, hs=cfg.head_dim,
                          d=cfg.d_model, vocab=cfg.vocab, params=model.model.num_parameters(),
                          theta=fmt.integer(int(model.layout[0].rope_theta))))
        weights = t("llm.weights_" + model.source.kind, bytes=model.weight_bytes(),
                    mb=fmt.nbytes(model.weight_bytes()), hub=smollm2.HUB_ID, pin=smollm2.PACKAGE_PIN)
    else:
        windows = model.windows
        presenter.intro(t("hybrid.intro", title=spec.title, layers=cfg.n_layers, heads=cfg.n_heads,
                          kv=cfg.n_kv_heads, hs=cfg.head_dim, d=cfg.d_model, vocab=cfg.vocab,
                          params=model.model.num_parameters(), n_sliding=sum(w is not None for w in windows)))
        weights = t("hybrid.weights", weights=spec.weights, terms=spec.terms or "—", bytes=model.weight_bytes(),
                    mb=fmt.nbytes(model.weight_bytes()))
    if presenter.presenting():
        st.caption(weights)                 # normally under the stepper: the first event shows without scrolling
    with presenter.settings():
        got = _inputs(model)
    if got is None:
        return
    key, span, chat = got
    if not waiting.done("late") and is_long_default(model, key):    # the warm-up's last step makes it
        waiting.wait_for("late")
    try:
        with st.spinner(t("llm.loading", dtype=key[4])):
            run_model = _model(name, key[4])
    except ModelUnavailable as e:
        st.error(t("llm.not_ready", reason=str(e)), icon=":material/error:")
        return
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
    downloads.trace_button(run, run_model.logit_tokens, name)
    if not step_view.whole_page() or presenter.presenting():
        return
    st.caption(weights)                     # which weights (under the stepper: the first event comes first)
    _token_view(key[0], span, model)       # under the stepper: the first event shows without scrolling
    layer, head = st.session_state.get("llm_layer", 1) - 1, st.session_state.get("llm_head", 1) - 1
    if any(w is not None for w in run_model.windows):
        _hybrid(run, run_model)
    _gqa(run, run_model)
    if run_model.layout[layer].positions == "rotary":
        _rope(run, run_model, layer, head)
    _dtypes(key[0], run_model)
    if llm_loop.offered(run_model):     # tea / water, greedy's loop, the whole run (llm_loop.py)
        llm_loop.section(functools.partial(models.real_model, name, DEFAULT_DTYPE))
