"""Cost page, batching tab: two or three A/B/C prompts decoded together, one pass per step."""
from __future__ import annotations

import streamlit as st
import torch

from kvviz.batching import BatchEvent, BatchRun, SoloComparison, padded_cache_table, top_logit_columns
from kvviz.cost_figures import grouped_logits, padded_cache_grid
from kvviz.figures import attention_heatmap
from kvviz.limits import MAX_NEW_TOKENS, MAX_PROMPT_CHARS, LimitError
from kvviz.models.base import allowed_keys
from kvviz.registry import get_model
from kvviz.ui import fmt, stepper, urlstate
from kvviz.ui.charts import chart, figure_words
from kvviz.ui.i18n import t
from kvviz.ui.perf import timed
from kvviz.ui.runs import cached_batch_run

KEEP = "session"
MODELS = ("abc", "gpt")
# defaults per model: two or three prompts of different lengths, so the padding shows
DEFAULT_PROMPTS = {"abc": ("A B", "C A B B", "A"),
                   "gpt": ("Today the weather is so", "It was", "Tomorrow the wind")}
DEFAULT_NEW = 4
TOP_LOGITS = 5        # GPT: bars for each sequence's top tokens (its vocabulary has 82 words)
K_DIMS = 4            # GPT: the first K components shown per cache cell (head size 32)


def _prompt_keys() -> list[str]:
    return [f"bt_p{i + 1}" for i in range(3)]


def _defaults() -> dict[str, object]:
    """What each URL-kept setting is when the address does not mention it."""
    model = st.session_state.get("bt_model", "abc")
    return {"bt_model": "abc", "bt_new": DEFAULT_NEW, **dict(zip(_prompt_keys(), DEFAULT_PROMPTS[model]))}


def _on_model() -> None:
    """Another model: its own example prompts (A/B/C prompts mean nothing to the GPT)."""
    for k, v in zip(_prompt_keys(), DEFAULT_PROMPTS[st.session_state.bt_model]):
        st.session_state[k] = v
    for k in ("bt_layer", "bt_head"):        # the GPT's view; meaningless for the other model
        st.session_state.pop(k, None)
        st.query_params.pop(k, None)
    urlstate.sync_all(_defaults())


def _tokens(model_name: str, text: str) -> tuple[str, ...]:
    return tuple(get_model(model_name).tokenize(text))


def _inputs() -> tuple[BatchRun, list, list[SoloComparison]] | None:
    urlstate.choice_param("bt_model", MODELS, "abc")
    model = st.session_state.bt_model
    for k, v in zip(_prompt_keys(), DEFAULT_PROMPTS[model]):
        urlstate.text_param(k, v, MAX_PROMPT_CHARS)
    urlstate.int_param("bt_new", DEFAULT_NEW, 1, MAX_NEW_TOKENS)
    st.segmented_control(t("cost.bt_model"), MODELS, key="bt_model", format_func=lambda m: t("cost.bt_model_" + m),
                         on_change=_on_model, required=True, help=t("cost.bt_model_help"), persist_state=KEEP)
    defaults = _defaults()
    c = st.columns([2, 2, 2, 1])
    for i, key in enumerate(_prompt_keys()):
        c[i].text_input(t("cost.bt_prompt", i=i + 1), key=key, max_chars=MAX_PROMPT_CHARS,
                        help=t(f"cost.bt_prompt_help_{model}" if i < 2 else "cost.bt_prompt3_help"),
                        on_change=urlstate.sync, args=(key, defaults[key]), persist_state=KEEP)
    c[3].number_input(t("cost.bt_new"), step=1, key="bt_new", help=t("cost.bt_new_help", cap=MAX_NEW_TOKENS),
                      on_change=urlstate.sync, args=("bt_new", DEFAULT_NEW), persist_state=KEEP)
    try:
        texts = [st.session_state[k] or "" for k in _prompt_keys()]
        prompts = [_tokens(model, x) for x in texts]
        if not prompts[0] or not prompts[1]:
            raise LimitError(t("cost.bt_need_two"))
        prompts = [p for p in prompts if p]
        return cached_batch_run(model, tuple(prompts), st.session_state.bt_new)
    except (LimitError, ValueError) as e:
        st.error(t("cost.bad_input", reason=str(e)), icon=":material/error:")
        return None


def render() -> None:
    st.markdown(t("cost.bt_intro"))
    got = _inputs()
    if got is None:
        return
    run, solo, comparisons = got
    stepper.url_step_notice(len(run.events))
    _stepper(run, comparisons)


def _what_happened(ev: BatchEvent, run: BatchRun) -> str:
    if ev.phase == "prefill":
        width = ev.n_columns
        return t("cost.bt_did_prefill", B=ev.batch, W=width, real=ev.kv_computed, pad=ev.kv_padding)
    if ev.phase == "decode":
        toks = ", ".join(f"**{tok[0]}**" for tok in ev.tokens)
        return t("cost.bt_did_decode", B=ev.batch, toks=toks, col=ev.n_columns - 1)
    toks = ", ".join(f"**{p}**" for p in ev.pending)
    return t("cost.bt_did_choose", toks=toks)


@st.fragment
@timed("cost.batch_step")
def _stepper(run: BatchRun, comparisons: list[SoloComparison]) -> None:
    step = stepper.step_controls(len(run.events))
    ev = run.events[step]
    src = ev if ev.record is not None else run.events[step - 1]        # the pass behind this event
    nxt = run.events[step + 1] if ev.record is not None and step + 1 < len(run.events) else None
    labels = [t("cost.bt_seq", b=b + 1) for b in range(ev.batch)]
    st.subheader(t("cost.bt_heading", i=ev.index, last=len(run.events) - 1, phase=t("abc.phase_" + ev.phase),
                   B=ev.batch))
    st.markdown(_what_happened(ev, run))

    m = st.columns(4)
    m[0].metric(t("cost.bt_passes"), ev.passes, help=t("cost.bt_passes_help"))
    m[1].metric(t("cost.bt_passes_alone"), ev.passes * ev.batch, help=t("cost.bt_passes_alone_help"))
    m[2].metric(t("cost.bt_kv_real"), ev.kv_computed, help=t("cost.bt_kv_real_help"))
    m[3].metric(t("cost.bt_kv_pad"), ev.kv_padding, help=t("cost.bt_kv_pad_help"))

    n_new = src.record.positions.shape[1]
    new_cols = list(range(src.n_columns - n_new, src.n_columns)) if ev.record is not None else []
    fig = padded_cache_grid(ev.slots, ev.key_mask, [run.pad[b] + len(run.prompts[b]) for b in range(ev.batch)],
                            new_cols, ev.pending, labels, {
                                "pad": t("cost.bt_pad"), "next": t("cost.bt_next_col"), "x": t("cost.bt_column"),
                                "hover_pad": t("cost.bt_hover_pad"), "hover_prompt": t("cost.bt_hover_prompt"),
                                "hover_processed": t("cost.bt_hover_processed"),
                                "hover_pending": t("cost.bt_hover_pending"),
                                "title": t("cost.bt_grid_title", T=ev.n_columns, B=ev.batch)})
    chart(fig, t("cost.bt_grid_alt"))
    st.caption(t("cost.bt_grid_caption"))

    cols = st.columns(ev.batch)
    for b, col in enumerate(cols):
        with col:
            _sequence(ev, run, b, labels[b], comparisons[b])
    model = get_model(run.model_name)
    layer, head = _layer_head(model)
    # the GPT's maps have more columns and longer labels: one above the other, full width
    left, right = st.columns(2) if len(model.logit_tokens) <= 8 else (st.container(), st.container())
    with left:
        _attention(src, labels, layer, head, model.n_layers * model.n_heads > 1)
    with right:
        choices = ev.choices or (nxt.choices if nxt is not None else None)
        chosen = [c.index for c in choices] if choices else [None] * ev.batch
        if len(model.logit_tokens) > 8:      # the GPT: each sequence's own top tokens
            shown = top_logit_columns(ev.logits, TOP_LOGITS, chosen)
            fig = grouped_logits([ev.logits[b, cols].tolist() for b, cols in enumerate(shown)],
                                 [[model.logit_tokens[i] for i in cols] for cols in shown],
                                 [cols.index(c) if c is not None else None for cols, c in zip(shown, chosen)],
                                 labels, t("cost.bt_logits_top_title", n=TOP_LOGITS), t("cost.bt_logit"))
        else:
            fig = grouped_logits(ev.logits.tolist(), model.logit_tokens, chosen, labels,
                                 t("cost.bt_logits_title"), t("cost.bt_logit"))
        chart(fig, t("stepper.logits_alt"))

    dims = K_DIMS if model.n_layers * model.n_heads > 1 else None
    st.markdown(f"**{t('cost.bt_table_title', T=ev.n_columns)}**"
                + (f" · {t('cost.bt_table_which', layer=layer + 1, head=head + 1, d=K_DIMS)}" if dims else ""))
    table = padded_cache_table(ev, layer=layer, head=head, labels=labels, pad_label=t("cost.bt_pad"),
                               names={k: t("cost.bt_col_" + k) for k in ("column", "token", "mask", "k")},
                               dims=dims)
    st.dataframe(table, hide_index=True, width="stretch")
    st.caption(t("cost.bt_table_caption"))
    with st.expander(t("cost.bt_more_title")):
        st.markdown(t("cost.bt_more_body"))


def _sequence(ev: BatchEvent, run: BatchRun, b: int, label: str, comparison: SoloComparison) -> None:
    st.markdown(f"**{label}** · {t('cost.bt_prompt_was', p=' '.join(run.prompts[b]), pad=run.pad[b])}")
    stepper.token_chips(ev.sequences[b], len(run.prompts[b]), ev.cached(b), legend=False)
    if comparison.same_tokens and comparison.max_abs_diff <= run.tolerance:
        st.success(t("cost.bt_same", diff=fmt.sci(comparison.max_abs_diff, 1)), icon=":material/check_circle:")
    else:
        st.error(t("cost.bt_differs", diff=fmt.num(comparison.max_abs_diff, ".3g")), icon=":material/error:")


def _layer_head(model) -> tuple[int, int]:
    """Layer and head (0-based) of the attention map and the K column; chosen only for the GPT."""
    if model.n_layers * model.n_heads == 1:
        return 0, 0
    urlstate.int_param("bt_layer", 1, 1, model.n_layers)
    urlstate.int_param("bt_head", 1, 1, model.n_heads)
    c = st.columns(2)
    layer = c[0].selectbox(t("cost.bt_layer"), range(1, model.n_layers + 1), key="bt_layer", persist_state=KEEP,
                           on_change=urlstate.sync, args=("bt_layer", 1), help=t("cost.bt_layer_help"))
    head = c[1].selectbox(t("cost.bt_head"), range(1, model.n_heads + 1), key="bt_head", persist_state=KEEP,
                          on_change=urlstate.sync, args=("bt_head", 1), help=t("cost.bt_head_help"))
    return int(layer) - 1, int(head) - 1


def _attention(src: BatchEvent, labels: list[str], layer: int, head: int, name_head: bool) -> None:
    """One heatmap for the whole pass: the real query rows of every sequence against the shared
    cache columns; padding and future columns are blank (masked)."""
    rec = src.record
    allowed = allowed_keys(src.key_mask, rec.positions.shape[1])             # [B, N, T]
    weights, masks, queries = [], [], []
    for b in range(src.batch):
        rows = rec.positions[b] >= 0
        weights.append(rec.attention[b, layer, head][rows])                   # [n_b, T]
        masks.append(allowed[b][rows])
        queries += [f"{labels[b]} · {p}:{src.sequences[b][p]}" for p in rec.positions[b][rows].tolist()]
    keys = [f"c{c}" for c in range(src.n_columns)]
    fig = attention_heatmap(torch.cat(weights), queries, keys,
                            t("cost.bt_att_title", phase=t("abc.phase_" + src.phase)) + "<br><sup>"
                            + t("cost.bt_att_sub")
                            + (f" · {t('cost.bt_att_which', layer=layer + 1, head=head + 1)}" if name_head else "")
                            + "</sup>",
                            show_scale=False, allowed=torch.cat(masks), words=figure_words())
    fig.update_xaxes(title=t("cost.bt_att_x"))
    fig.update_yaxes(title=t("cost.bt_att_y"))
    fig.update_layout(height=max(340, 170 + 42 * len(queries)))
    chart(fig, t("stepper.attention_alt"))
