"""The "Cost and scale" page body: five tabs (memory, compute, batching, measured, serving).

Tabs run lazily (only the open one executes) and are kept in the address (``?tab=…``); every
input keeps its value for the session (``persist_state``), so switching tabs loses nothing.
"""
from __future__ import annotations

import functools

import pandas as pd
import streamlit as st

from kvviz import cost
from kvviz.cost.recorded import GPT_SPEEDUP
from kvviz.limits import (
    MAX_COST_BATCH,
    MAX_COST_GEN_TOKENS,
    MAX_COST_HEAD_DIM,
    MAX_COST_HEADS,
    MAX_COST_LAYERS,
    MAX_COST_TOKENS,
    MAX_NEW_TOKENS,
    MAX_PROMPT_TOKENS,
    LimitError,
)
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import LANGS, current_lang, join, strings, t
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import cost_notice, translator
from kvviz.ui.pages import lecture
from kvviz.viz.cost import disaggregated_diagram, flops_vs_n, kv_sharing_bars, memory_vs_context

TAB_KEYS = ["tab_memory", "tab_compute", "tab_batch", "tab_measure", "tab_serving"]
KEEP = "session"     # persist_state of every input on this page


def _preset_label(key: str) -> str:
    cfg = _configs()[key]
    return f"{cfg.name} ({cfg.attention_kind}, {cfg.n_layers} × {cfg.n_heads}/{cfg.n_kv_heads} × {cfg.head_dim})"


def _tab_labels() -> list[str]:
    labels = [t("cost." + k) for k in TAB_KEYS]
    # a tab chosen in another language (or a link with ?tab=Memoria) maps to the same tab here
    chosen = st.session_state.get("tab") or st.query_params.get("tab")
    if chosen and chosen not in labels:
        for lang in LANGS:
            other = [strings(lang).get("cost." + k) for k in TAB_KEYS]
            if chosen in other:
                st.session_state["tab"] = labels[other.index(chosen)]
                break
        else:
            if "tab" not in st.session_state:       # a link's unknown tab: say so once, open the first
                urlstate.notice(t("cost.bad_tab", raw=str(chosen)[:40], tabs=", ".join(labels), first=labels[0]))
                st.session_state["tab"] = labels[0]
    return labels


def render() -> None:
    lecture.title("cost", t("cost.title"))           # with its place in the lecture script
    presenter.intro(t("cost.intro"))
    labels = _tab_labels()
    tabs = st.tabs(labels, key="tab", bind="query-params")
    sections = [_memory, _compute, _batching, _measured, _serving]
    for tab, label, section in zip(tabs, labels, sections):
        with tab:
            if tab.open:
                nav.hidden_heading(label)     # h1, the tab's h2, then the tab's own h3 headings
                section()


# --- memory ---------------------------------------------------------------------------------------

MEM_FIELDS = {"mem_layers": "n_layers", "mem_heads": "n_heads", "mem_kv": "n_kv_heads", "mem_hd": "head_dim"}


MEM_CAPS = {"mem_layers": MAX_COST_LAYERS, "mem_heads": MAX_COST_HEADS, "mem_kv": MAX_COST_HEADS,
            "mem_hd": MAX_COST_HEAD_DIM}
MEM_DEFAULTS = {"mem_preset": "gpt2", "mem_dtype": "fp16", "mem_tokens": 1024, "mem_batch": 1}


def _preset_fields() -> dict[str, int]:
    """The shape fields of the chosen preset: what they are when the address does not say."""
    cfg = cost.PRESETS[st.session_state.mem_preset]
    return {key: getattr(cfg, attr) for key, attr in MEM_FIELDS.items()}


def _apply_preset() -> None:
    st.session_state.update(_preset_fields())
    urlstate.sync_all({**MEM_DEFAULTS, **_preset_fields()})


def _init_memory() -> None:
    """Every setting from the address once per session (?mem_preset=llama3-8b&mem_tokens=8192),
    the shape fields defaulting to the preset's."""
    urlstate.choice_param("mem_preset", list(cost.PRESETS), "gpt2")
    for key, value in _preset_fields().items():
        urlstate.int_param(key, value, 1, MEM_CAPS[key])
    urlstate.choice_param("mem_dtype", list(cost.DTYPE_BITS), "fp16")
    urlstate.int_param("mem_tokens", 1024, 1, MAX_COST_TOKENS)
    urlstate.int_param("mem_batch", 1, 1, MAX_COST_BATCH)


MEM_PRESENT_HEIGHT = 320      # px: presenter mode's memory chart, beside the numbers (one projector screen)


def _memory() -> None:
    """The cache's size: the shape's inputs, its numbers, the chart against the context; then what fits
    on an accelerator and what sharing K/V heads saves. Presenter mode folds the tab's introduction
    and inputs away and puts the numbers beside a lower chart, so that they fit one screen."""
    present = presenter.presenting()
    presenter.section_intro(t("cost.mem_intro"))
    with presenter.settings():
        got = _memory_inputs()
        if got is not None:
            cfg, rep = got
            preset = cost.PRESETS[st.session_state.mem_preset]
            same = all(getattr(preset, a) == getattr(cfg, a) for a in MEM_FIELDS.values())
            _memory_source(preset, same)
    if got is None:
        return
    weights = cost.weight_bytes(preset, rep.dtype) if same and preset.vocab else None
    notice = cost_notice.memory(rep, translator(current_lang()))
    if present:
        numbers, plot = st.columns([1, 3])
        with numbers:                          # presenter mode: beside the chart, not above it (one screen)
            step_view.notice(notice)           # first: it says the total, which the numbers below break down
            _memory_numbers(cfg, rep, stacked=True)
        with plot:
            _memory_chart(rep, preset, same, weights, height=MEM_PRESENT_HEIGHT)
    else:
        step_view.notice(notice)
        _memory_numbers(cfg, rep)
        _memory_chart(rep, preset, same, weights)
    left, right = st.columns([3, 2])
    with left:
        _fit_table(cfg, rep, weights, preset.max_context if same else 0)
    with right:
        _sharing_chart(cfg, rep)
    if rep.kind == "MHA":
        st.markdown(t("cost.gqa_text_mha", h=cfg.n_heads, x1=fmt.sig(rep.mha_total / rep.mqa_total)))
    else:
        st.markdown(t("cost.gqa_text", kind=rep.kind, h=cfg.n_heads, kv=cfg.n_kv_heads,
                      x=fmt.sig(rep.saving_vs_mha), group=cfg.n_heads // cfg.n_kv_heads))
    with st.expander(t("cost.presets_title")):
        st.dataframe(_presets_table(), hide_index=True, width="stretch",
                     column_config={t("cost.col_source"): st.column_config.LinkColumn()})


def _memory_inputs() -> tuple[cost.ModelConfig, cost.MemoryReport] | None:
    """The preset, dtype, tokens, batch and the four shape fields; the shape and its memory report,
    or None after a message (a value the engine refuses)."""
    _init_memory()
    top = st.columns([3, 1, 1, 1])
    top[0].selectbox(t("cost.preset"), list(cost.PRESETS), format_func=_preset_label, key="mem_preset",
                     on_change=_apply_preset, help=t("cost.preset_help"), persist_state=KEEP)
    top[1].selectbox(t("cost.dtype"), list(cost.DTYPE_BITS), key="mem_dtype", help=t("cost.dtype_help"),
                     format_func=lambda d: f"{d} ({fmt.sig(cost.DTYPE_BITS[d] / 8)} B)", persist_state=KEEP,
                     on_change=urlstate.sync, args=("mem_dtype", "fp16"))
    top[2].number_input(t("cost.tokens"), step=1, key="mem_tokens", help=t("cost.tokens_help"),
                        persist_state=KEEP, on_change=urlstate.sync, args=("mem_tokens", 1024))
    top[3].number_input(t("cost.batch"), step=1, key="mem_batch", help=t("cost.batch_help"), persist_state=KEEP,
                        on_change=urlstate.sync, args=("mem_batch", 1))
    row = st.columns(4)
    for col, (key, preset_value) in zip(row, _preset_fields().items()):
        col.number_input(t("cost." + key), step=1, key=key, help=t(f"cost.{key}_help"), persist_state=KEEP,
                         on_change=urlstate.sync, args=(key, preset_value))
    ss = st.session_state
    try:
        cfg = cost.cache_config(ss.mem_layers, ss.mem_heads, ss.mem_kv, ss.mem_hd)
        return cfg, cost.memory_report(cfg, ss.mem_tokens, ss.mem_batch, ss.mem_dtype)
    except LimitError as e:
        st.error(t("cost.bad_input", reason=str(e)), icon=":material/error:")
        return None


def _memory_source(preset: cost.ModelConfig, same: bool) -> None:
    """Where the shape comes from (the preset's config.json), or that it was edited."""
    src = f"[config.json]({preset.source})" if preset.source.startswith("http") else preset.source
    st.caption(t("cost.mem_from_preset", name=preset.name, src=src) if same
               else t("cost.mem_edited", name=preset.name))


def _memory_numbers(cfg: cost.ModelConfig, rep: cost.MemoryReport, stacked: bool = False) -> None:
    """The three metrics (in a row, or ``stacked`` in a column) and the formula with the numbers filled in."""
    m = [st.container() for _ in range(3)] if stacked else st.columns(3)
    m[0].metric(t("cost.per_token"), f"{fmt.integer(rep.bytes_per_token)} B", help=t("cost.per_token_help"))
    m[1].metric(t("cost.total"), fmt.nbytes(rep.total), help=_total_help(rep.total))
    m[2].metric(t("cost.kind"), rep.kind, help=nav.term_help("gqa", t("cost.kind_help")),
                delta=None if rep.kind == "MHA" else t("cost.saving_delta", x=fmt.sig(rep.saving_vs_mha)),
                delta_color="off", delta_arrow="off")
    st.markdown(t("cost.mem_formula", L=cfg.n_layers, kv=cfg.n_kv_heads, hd=cfg.head_dim,
                  b=cost.DTYPE_BITS[rep.dtype] / 8, per=rep.bytes_per_token,
                  T=rep.tokens, B=fmt.integer(rep.batch), total=rep.total,
                  human=fmt.nbytes(rep.total)))


def _memory_chart(rep: cost.MemoryReport, preset: cost.ModelConfig, same: bool, weights: int | None,
                  height: int | None = None) -> None:
    """Cache bytes against context for a few batch sizes, with the accelerators' memory and the weights;
    ``height`` in px (None: the figure's own)."""
    top_x = min(MAX_COST_TOKENS, max(4 * rep.tokens, 4096))
    grid = cost.context_grid(top_x)
    batches = sorted({1, 8, 64, rep.batch})
    series = {b: [rep.bytes_per_token * x * b for x in grid] for b in batches}
    fig = memory_vs_context(grid, series, cost.ACCELERATOR_GB, weights, (rep.tokens, rep.total), {
        "batch": t("cost.fig_batch"), "hover": t("cost.fig_mem_hover"), "accel": t("cost.fig_accel"),
        "weights": t("cost.fig_weights", dtype=rep.dtype, size=fmt.nbytes(weights or 0)),
        "you": t("cost.fig_you"),
        # filled in here, in the page's language (the builder's own .format(size=…) then has nothing left to do)
        "hover_you": t("cost.fig_you_hover", size=fmt.nbytes(rep.total)),
        "x": t("cost.fig_context"), "y": t("cost.fig_cache_bytes"),
        "accels": t("cost.fig_accels", gbs=join([fmt.integer(gb) for gb in cost.ACCELERATOR_GB], current_lang())),
        "title": t("cost.fig_mem_title", name=preset.name if same else t("cost.custom"), dtype=rep.dtype)},
        compact=bool(height))
    if height:
        fig.update_layout(height=height)
    chart(fig, t("cost.fig_mem_alt"), key="cost_memory_chart")


def _fit_table(cfg: cost.ModelConfig, rep: cost.MemoryReport, weights: int | None, context: int = 0) -> None:
    """How many tokens' cache fit on each accelerator (beside the weights, when known), and, for a
    preset's shape, how many of them its context length (``context`` positions) lets the model use."""
    fits = []
    for gb in cost.ACCELERATOR_GB:
        free = cost.accelerator_bytes(gb) - (weights or 0)
        n = cost.tokens_that_fit(cfg, max(free, 0), rep.batch, rep.dtype)
        row = {t("cost.fit_accel"): f"{fmt.integer(gb)} GiB",
               t("cost.fit_tokens", B=fmt.integer(rep.batch)): fmt.integer(n) if free > 0 else t("cost.fit_no_room")}
        if context:          # what the model can use: memory and its context length both limit it
            row[t("look.fit_usable", ctx=fmt.integer(context))] = (
                fmt.integer(min(n, context)) if free > 0 else t("cost.fit_no_room"))
        fits.append(row)
    st.markdown(t("cost.fit_title_weights", size=fmt.nbytes(weights)) if weights else t("cost.fit_title"))
    st.dataframe(pd.DataFrame(fits), hide_index=True, width="stretch")
    if context:
        st.caption(t("look.fit_context", n=context))


def _sharing_chart(cfg: cost.ModelConfig, rep: cost.MemoryReport) -> None:
    """The cache with every KV-head count from MHA to MQA, this shape's highlighted."""
    bars = cost.kv_sharing(cfg, rep.tokens, rep.batch, rep.dtype)
    names = [f"{kind} {kv}" for kv, kind, _ in bars]
    chosen = [kv for kv, _, _ in bars].index(cfg.n_kv_heads)
    fig = kv_sharing_bars(names, [b for _, _, b in bars], chosen,
                          {"y": t("cost.fig_bytes"), "x": t("cost.fig_share_x"),
                           "title": t("cost.fig_share_title", h=cfg.n_heads)})
    chart(fig, t("cost.fig_share_alt"), key="cost_share_chart")


def _presets_table() -> pd.DataFrame:
    rows = []
    for cfg in cost.PRESETS.values():
        rows.append({t("cost.col_model"): cfg.name, t("cost.col_kind"): cfg.attention_kind,
                     t("cost.col_layers"): cfg.n_layers, t("cost.col_heads"): f"{cfg.n_heads} / {cfg.n_kv_heads}",
                     t("cost.col_hd"): cfg.head_dim, t("cost.col_params"): fmt.integer(cost.param_count(cfg)),
                     t("cost.col_per_token"): fmt.integer(cost.cache_bytes_per_token(cfg, "fp16")),
                     t("cost.col_context"): fmt.integer(cfg.max_context),
                     t("cost.col_source"): cfg.source if cfg.source.startswith("http") else None})
    return pd.DataFrame(rows)


# --- compute --------------------------------------------------------------------------------------

@functools.cache
def _stepper_configs() -> dict[str, cost.ModelConfig]:
    """Stepper model name -> its cost shape, for every model the stepper can run and count.

    Built once per process: the shapes never change, and the preset labels ask for them once per
    option on every rerun. The dict is shared: read it, never change it."""
    from kvviz.models.registry import MODELS, cost_shape

    out = {}
    for name in MODELS:
        try:
            out[name] = cost_shape(name)
        except ValueError:          # no cost shape (the hand-made weather heads)
            continue
    return out


def _runnable() -> dict[str, str]:
    """Option key -> stepper model name: a preset with the same shape, else ``run:<name>``."""
    return {next((k for k, p in cost.PRESETS.items() if p == cfg), f"run:{name}"): name
            for name, cfg in _stepper_configs().items()}


def _configs() -> dict[str, cost.ModelConfig]:
    """Presets plus the runnable models that are not presets (by option key)."""
    shapes = _stepper_configs()
    extra = {k: shapes[n] for k, n in _runnable().items() if k not in cost.PRESETS}
    return {**cost.PRESETS, **extra}


def _prompt_for(model_name: str, n: int) -> tuple[str, ...]:
    """A prompt of n tokens cycling through the vocabulary (FLOPs depend only on its length)."""
    from kvviz.models.registry import get_model

    vocab = get_model(model_name).vocab
    return tuple(vocab[i % len(vocab)] for i in range(n))


def _counted_curve(model_name: str, cfg: cost.ModelConfig, prompt_len: int, n_max: int) -> dict[str, list[int]]:
    """FLOPs counted over the passes of one stepper run, for every N up to n_max."""
    from kvviz.ui.app.runs import cached_run

    run = cached_run(model_name, _prompt_for(model_name, prompt_len), n_max)
    out: dict[str, list[int]] = {"n": [], "cached": [], "uncached": []}
    for n in range(1, n_max + 1):
        c = cost.count_flops(run.events[: 2 * n], cfg)      # prefill/decode + choose per token
        out["n"].append(n)
        out["cached"].append(c.cached.total)
        out["uncached"].append(c.uncached.total)
    return out


def _compute() -> None:
    """FLOPs with and without the cache over N. Presenter mode folds the introduction and the inputs
    away and puts the notice beside a lower chart, as the Memory tab does (one screen)."""
    present = presenter.presenting()
    presenter.section_intro(t("cost.flops_intro"))
    runnable = _runnable()
    options = _configs()
    first = next(iter(runnable), "gpt2")
    urlstate.choice_param("fl_model", list(options), first)
    urlstate.int_param("fl_prompt", 2, 1, MAX_COST_TOKENS)
    urlstate.int_param("fl_n", 32, 1, MAX_COST_GEN_TOKENS)
    with presenter.settings():
        c = st.columns([3, 1, 1])
    c[0].selectbox(t("cost.fl_model"), list(options), format_func=_preset_label, key="fl_model",
                   help=t("cost.fl_model_help"), persist_state=KEEP, on_change=urlstate.sync, args=("fl_model", first))
    c[1].number_input(t("cost.fl_prompt"), step=1, key="fl_prompt",
                      help=nav.term_help("prefill", t("cost.fl_prompt_help")), persist_state=KEEP,
                      on_change=urlstate.sync, args=("fl_prompt", 2))
    c[2].number_input(t("cost.fl_n"), step=1, key="fl_n",
                      help=nav.term_help("decode", t("cost.fl_n_help", cap=fmt.integer(MAX_COST_GEN_TOKENS))),
                      persist_state=KEEP, on_change=urlstate.sync, args=("fl_n", 32))
    ss = st.session_state
    cfg = options[ss.fl_model]
    try:
        with_c = cost.generation_flops(cfg, ss.fl_prompt, ss.fl_n, True)
        without = cost.generation_flops(cfg, ss.fl_prompt, ss.fl_n, False)
        step_c = cost.step_flops(cfg, int(ss.fl_prompt) + int(ss.fl_n) - 1, True)
        step_u = cost.step_flops(cfg, int(ss.fl_prompt) + int(ss.fl_n) - 1, False)
    except LimitError as e:
        st.error(t("cost.bad_input", reason=str(e)), icon=":material/error:")
        return
    p, n = int(ss.fl_prompt), int(ss.fl_n)
    ns = cost.context_grid(max(n, 2), points=60)
    curve = cost.flops_curve(cfg, p, ns)
    counted = None
    model_name = runnable.get(ss.fl_model)
    if model_name and p <= MAX_PROMPT_TOKENS:
        counted = _counted_curve(model_name, cfg, p, min(n, MAX_NEW_TOKENS))
    fig = flops_vs_n(curve, counted, {
        "uncached_total": t("cost.fig_uncached_total"), "cached_total": t("cost.fig_cached_total"),
        "uncached_linear": t("cost.fig_uncached_linear"), "cached_linear": t("cost.fig_cached_linear"),
        "uncached_attention": t("cost.fig_uncached_att"), "cached_attention": t("cost.fig_cached_att"),
        "uncached_counted": t("cost.fig_uncached_counted"), "cached_counted": t("cost.fig_cached_counted"),
        "x": t("cost.fig_n"), "y": t("cost.fig_flops"), "title": t("cost.fig_flops_title", name=cfg.name, p=p)})
    notice = cost_notice.compute(n, with_c, without, step_c, step_u, translator(current_lang()))
    side, main = st.columns([1, 3]) if present else (st.container(), st.container())
    with side:
        step_view.notice(notice)
    if present:                         # lower (whole decades only), its eight lines' legend beside the plot
        fig.update_layout(height=MEM_PRESENT_HEIGHT, yaxis=dict(dtick=1),
                          legend=dict(orientation="v", x=1.02, xanchor="left", y=1, yanchor="top"))
    with main:
        chart(fig, t("cost.fig_flops_alt"), key="cost_flops_chart")
    if counted:
        last = len(counted["n"]) - 1
        agree = all(counted["cached"][i] == curve_value(cfg, p, counted["n"][i], True)
                    and counted["uncached"][i] == curve_value(cfg, p, counted["n"][i], False)
                    for i in range(last + 1))
        msg = t("cost.counted_ok" if agree else "cost.counted_bad", model=cfg.name, n=counted["n"][last],
                cached=fmt.integer(counted["cached"][last]), uncached=fmt.integer(counted["uncached"][last]))
        (st.success if agree else st.error)(msg, icon=":material/check_circle:" if agree else ":material/error:")
    else:
        st.info(t("cost.counted_none", cap=MAX_NEW_TOKENS), icon=":material/info:")

    st.subheader(t("cost.table_title", n=fmt.integer(n), p=fmt.integer(p), name=cfg.name))
    st.dataframe(_complexity_table(with_c, without), hide_index=True, width="stretch")
    st.markdown(t("cost.per_token_text", n=fmt.integer(n), t=fmt.integer(p + n - 1), cached=fmt.flops(step_c.total),
                  uncached=fmt.flops(step_u.total), x=cost_notice.ratio(step_u.total, step_c.total, current_lang()),
                  lin=fmt.integer(cost.linear_flops_per_token(cfg)),
                  att=fmt.integer(cost.attention_flops_per_pair(cfg)),
                  params=cost.param_count(cfg)))
    with st.expander(t("cost.flops_more_title")):
        rec = GPT_SPEEDUP               # docs/measured.md's latest run; the engine counts its FLOPs
        st.markdown(t("cost.flops_more_body", n=rec.new_tokens, p=rec.prompt_len, speedup=fmt.factor(rec.speedup),
                      ratio=fmt.factor(rec.flop_ratio, 0), share=fmt.percent(rec.share)))


def curve_value(cfg: cost.ModelConfig, p: int, n: int, cached: bool) -> int:
    return cost.generation_flops(cfg, p, n, cached).total


def _total_help(nbytes: int) -> str:
    """The exact bytes, and the units: sizes in GB = 10⁹ bytes, the cards' "GB" a GiB."""
    return t("cost.total_help", exact=nbytes, extra=fmt.percent(cost.GIB / 10**9 - 1, 1))


def _complexity_table(with_c: cost.Flops, without: cost.Flops) -> pd.DataFrame:
    rows = [
        (t("cost.row_linear"), "O(N² d²)", without.linear, "O(N d²)", with_c.linear),
        (t("cost.row_attention"), "O(N³ d)", without.attention, "O(N² d)", with_c.attention),
        (t("cost.row_total"), "", without.total, "", with_c.total),
    ]
    lang = current_lang()
    return pd.DataFrame([{t("cost.col_part"): name, t("cost.col_no_cache_order"): o1,
                          t("cost.col_no_cache"): fmt.integer(u), t("cost.col_cache_order"): o2,
                          t("cost.col_cache"): fmt.integer(c), t("cost.col_saved"): cost_notice.ratio(u, c, lang)}
                         for name, o1, u, o2, c in rows])


# --- batching, measured (their own modules) ---------------------------------------------------------

def _batching() -> None:
    from kvviz.ui.pages import cost_batching
    cost_batching.render()


def _measured() -> None:
    from kvviz.ui.pages import cost_measure
    cost_measure.render()


# --- disaggregated serving ------------------------------------------------------------------------

SV_DEFAULTS = {"sv_model": "llama3-8b", "sv_prompt": 4096, "sv_batch": 1, "sv_dtype": "bf16",
               "sv_link": 100.0, "sv_bw": 3.35}


def _serving() -> None:
    """Shipping a prompt's cache between machines against a decode pass (inputs folded away in
    presenter mode, the notice and the counters first)."""
    presenter.section_intro(t("cost.serve_intro"))
    ss = st.session_state
    urlstate.choice_param("sv_model", list(cost.PRESETS), SV_DEFAULTS["sv_model"])
    urlstate.int_param("sv_prompt", SV_DEFAULTS["sv_prompt"], 1, MAX_COST_TOKENS)
    urlstate.int_param("sv_batch", SV_DEFAULTS["sv_batch"], 1, MAX_COST_BATCH)
    urlstate.choice_param("sv_dtype", list(cost.DTYPE_BITS), SV_DEFAULTS["sv_dtype"])
    urlstate.float_param("sv_link", SV_DEFAULTS["sv_link"], 0.001, 1_000_000)
    urlstate.float_param("sv_bw", SV_DEFAULTS["sv_bw"], 0.001, 1_000)

    def kept(key: str) -> dict:
        return dict(persist_state=KEEP, on_change=urlstate.sync, args=(key, SV_DEFAULTS[key]))
    with presenter.settings():
        c, d = st.columns([3, 1, 1, 1]), st.columns(2)
    c[0].selectbox(t("cost.preset"), list(cost.PRESETS), format_func=_preset_label, key="sv_model",
                   **kept("sv_model"))
    c[1].number_input(t("cost.sv_prompt"), step=1, key="sv_prompt", help=t("cost.sv_prompt_help"),
                      **kept("sv_prompt"))
    c[2].number_input(t("cost.batch"), step=1, key="sv_batch", help=t("cost.sv_batch_help"), **kept("sv_batch"))
    c[3].selectbox(t("cost.dtype"), list(cost.DTYPE_BITS), key="sv_dtype", **kept("sv_dtype"))
    d[0].number_input(t("cost.sv_link"), step=10.0, key="sv_link", help=t("cost.sv_link_help"),
                      format="%.3g", **kept("sv_link"))
    d[1].number_input(t("cost.sv_bw"), step=0.1, key="sv_bw", help=t("cost.sv_bw_help"), format="%.3g",
                      **kept("sv_bw"))
    cfg = cost.PRESETS[ss.sv_model]
    try:
        tr = cost.cache_transfer(cfg, ss.sv_prompt, ss.sv_batch, ss.sv_dtype, ss.sv_link)
        floor = cost.decode_step_floor(cfg, ss.sv_prompt, ss.sv_batch, ss.sv_dtype, ss.sv_bw)
    except LimitError as e:
        st.error(t("cost.bad_input", reason=str(e)), icon=":material/error:")
        return
    step_view.notice(cost_notice.serving(tr, floor, translator(current_lang())))
    m = st.columns(4)
    m[0].metric(t("cost.sv_size"), fmt.nbytes(tr.bytes), help=_total_help(tr.bytes))
    m[1].metric(t("cost.sv_time"), fmt.duration(tr.seconds), help=t("cost.sv_time_help"))
    m[2].metric(t("cost.sv_layer"), fmt.nbytes(tr.per_layer_bytes), help=t("cost.sv_layer_help", L=cfg.n_layers))
    m[3].metric(t("cost.sv_steps"), fmt.num(tr.seconds / floor, ",.1f"),
                help=t("cost.sv_steps_help", step=fmt.duration(floor)))
    fig = disaggregated_diagram({
        "requests": t("cost.dg_requests"), "prefill": t("cost.dg_prefill"), "decode": t("cost.dg_decode"),
        "transfer": t("cost.dg_transfer", size=fmt.nbytes(tr.bytes), time=fmt.duration(tr.seconds),
                      link=fmt.sig(float(ss.sv_link))),
        "tokens": t("cost.dg_tokens"), "title": t("cost.dg_title", name=cfg.name)})
    chart(fig, t("cost.dg_alt"), key="cost_disagg_chart")
    st.markdown(t("cost.serve_body", p=int(ss.sv_prompt), B=int(ss.sv_batch),
                  name=cfg.name, size=fmt.nbytes(tr.bytes), time=fmt.duration(tr.seconds),
                  step=fmt.duration(floor)))

