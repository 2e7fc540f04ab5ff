"""The "Today weather is so" page body (DESIGN.md §1.2): four hand-made heads through prefill and
decode, and the append-only cache that goes stale. The file in pages/ only sets up the frame."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.figures import COLORS, causal_mask_figure
from kvviz.generation import Event, Run
from kvviz.limits import MAX_ABS_TOKEN_VALUE, MAX_NEW_TOKENS, MAX_PROMPT_CHARS, LimitError
from kvviz.models.weather import (D_K, DEFAULT_VALUES, HEADS, SEED_PROMPT, VOCAB, W_VOCAB, WeatherModel,
                                  check_values, values_from_text, values_to_text)
from kvviz.staleness import Diagnosis, comparison_table, diagnose
from kvviz.trace import kv_column
from kvviz.ui import fmt, nav, presenter, stepper, urlstate
from kvviz.ui.charts import chart, figure_words
from kvviz.ui.i18n import t
from kvviz.ui.perf import timed
from kvviz.ui.rule_controls import rule_controls
from kvviz.ui.runs import cached_run
from kvviz.weather_notes import plus_one_positions, prose_vs_tensor, reads

BASE = 1                       # the seed numbers positions 1..n; so does this page
EDITOR_VERSION = "weather_values_version"
VALUES_BASE = "weather_values_base"


# ---------------------------------------------------------------- labels

def _head_title(h: int) -> str:
    return t("weather.head_title", i=h + 1, name=t(f"weather.head{h + 1}"))


def _head_titles() -> list[str]:
    return [_head_title(h) for h in range(len(HEADS))]


def _short_heads() -> list[str]:
    return [t("weather.head_short", i=h + 1) for h in range(len(HEADS))]


def _num(x: float) -> str:
    """Numbers in sentences: 12.5, 10.33, 6.0 (the tables carry 4 decimals), in the page's language."""
    text = f"{x:.4g}"
    return fmt.num(x, ".4g") if any(c in text for c in ".e") else fmt.num(x, ".1f")


def _pos(p: int, tokens: list[str]) -> str:
    return f"{p + BASE} ({tokens[p]})"


def _reads_text(att_row, tokens: list[str]) -> str:
    """'2:weather 0.50 · 4:so 0.50' from one attention row [T] (labels as on the heatmaps)."""
    return " · ".join(f"{r.position + BASE}:{r.token} {fmt.fixed(r.weight, 2)}" for r in reads(att_row, tokens))


# ---------------------------------------------------------------- inputs

def _bump_editor() -> None:
    """Back to the seed's values: a fresh editor over the defaults, and none in the address."""
    st.session_state[EDITOR_VERSION] = st.session_state.get(EDITOR_VERSION, 0) + 1
    st.session_state[VALUES_BASE] = dict(DEFAULT_VALUES)
    st.query_params.pop("values", None)


def _base_values() -> dict[str, float]:
    """What the editor starts from: the defaults, or ``?values=so:4,nice:9`` on a new session."""
    if VALUES_BASE not in st.session_state:
        st.session_state[VALUES_BASE] = dict(DEFAULT_VALUES)
        raw = st.query_params.get("values")
        if raw:
            try:
                st.session_state[VALUES_BASE] = values_from_text(raw[:500])
            except LimitError as e:
                urlstate.notice(t("weather.bad_url_values", raw=raw[:60], reason=str(e)))
    return st.session_state[VALUES_BASE]


def _values_editor() -> tuple[dict[str, float] | None, str | None]:
    """The editable value table: (values, None), or (None, message) when an entry is not a usable number."""
    st.markdown(f"**{t('weather.values_heading')}**")
    start = _base_values()
    base = pd.DataFrame({"token": VOCAB, "value": [start[w] for w in VOCAB]})   # stable input
    edited = st.data_editor(
        base, key=f"weather_values_{st.session_state.get(EDITOR_VERSION, 0)}", hide_index=True,
        num_rows="fixed", disabled=["token"], width="stretch",
        column_config={
            "token": st.column_config.TextColumn(t("weather.col_token"), help=t("weather.col_token_help")),
            "value": st.column_config.NumberColumn(
                t("weather.col_value"), format="plain",
                help=t("weather.col_value_help", cap=fmt.sig(MAX_ABS_TOKEN_VALUE))),
        })
    st.button(t("weather.values_reset"), icon=":material/restart_alt:", on_click=_bump_editor,
              help=t("weather.values_reset_help"))
    st.caption(t("weather.values_caption"))
    try:
        values = check_values(dict(zip(edited["token"], edited["value"])))
    except LimitError as e:
        return None, t("weather.bad_value", reason=str(e))
    text = values_to_text(values)       # keep a shareable address: only what differs from the seed
    if text:
        st.query_params["values"] = text
    else:
        st.query_params.pop("values", None)
    return values, None


def _prompt_inputs() -> tuple[list[str] | None, int, bool]:
    c = st.columns([3, 1, 1.6], vertical_alignment="bottom")
    text = c[0].text_input(t("weather.prompt"), value=" ".join(SEED_PROMPT), key="prompt",
                           bind="query-params", max_chars=MAX_PROMPT_CHARS,
                           help=t("weather.prompt_help", vocab=", ".join(VOCAB)))
    urlstate.int_param("new", 3, 1, MAX_NEW_TOKENS)    # not bind: a bound number_input raises on ?new=inf
    new = c[1].number_input(t("weather.new_tokens"), 1, MAX_NEW_TOKENS, key="new",
                            on_change=urlstate.sync, args=("new", 3),
                            help=t("weather.new_tokens_help", cap=MAX_NEW_TOKENS))
    repair = c[2].toggle(t("weather.repair"), key="repair", bind="query-params", help=t("weather.repair_help"))
    try:
        tokens: list[str] | None = WeatherModel().tokenize(text or "")
    except ValueError as e:                    # too long; unknown words and emptiness: the engine says
        st.error(t("weather.bad_prompt", reason=str(e), vocab=" ".join(VOCAB)), icon=":material/error:")
        tokens = None
    return tokens, int(new), bool(repair)


def _prompt_view(tokens: list[str], values: dict[str, float]) -> None:
    """The prompt as positions, tokens and values, and its causal mask."""
    st.markdown(f"**{t('weather.prompt_table')}**")
    table = pd.DataFrame([[w for w in tokens], [fmt.sig(values[w]) for w in tokens]],
                         index=[t("weather.col_token"), t("weather.col_value")],
                         columns=[str(p + BASE) for p in range(len(tokens))])
    table.index.name = t("charts.col_position")      # the corner cell: a table header is never empty
    st.dataframe(table, width="stretch")
    labels = [f"{p + BASE}:{w}" for p, w in enumerate(tokens)]
    chart(causal_mask_figure(labels, t("weather.mask_title"), words=figure_words()), t("weather.mask_alt"))
    st.caption(t("weather.mask_caption"))


def render() -> None:
    st.title(t("weather.title"))
    presenter.intro(t("weather.intro", d_k=D_K))
    with presenter.settings():
        tokens, new, repair = _prompt_inputs()
        rule, seed = rule_controls("weather")
        st.caption(t("stepper.rule_caption"))
        # the values table beside the prompt view; in presenter mode it folds away on its own
        left, right = (st.container(), None) if presenter.presenting() else st.columns([1, 2], gap="large")
        with left:
            values, problem = _values_editor()
    right = right or st.container()
    if problem:                                # beside the table, where the prompt view would be
        right.error(problem, icon=":material/error:")
    if tokens is None or values is None:
        return
    try:   # the engine checks the words and the caps (a URL can bypass the widgets)
        # everything the run depends on
        key = (tuple(tokens), new, tuple(values.items()), repair, tuple(rule.settings().items()), seed)
        run = _run(key)
    except (LimitError, ValueError) as e:
        st.error(t("weather.bad_prompt", reason=str(e), vocab=" ".join(VOCAB)), icon=":material/error:")
        return
    with right:
        _prompt_view(run.prompt, values)
    stepper.url_step_notice(len(run.events))
    nav.hidden_heading(t("stepper.section"))
    _stepper(run, WeatherModel(values), key)


# ---------------------------------------------------------------- one event

@st.cache_resource(max_entries=512, ttl=3600, show_spinner=False)
def _diagnosis(key: tuple, index: int) -> Diagnosis | None:
    """diagnose() of one event of the run ``key`` = (prompt, new, values, repair, rule, seed),
    computed once: it reruns the whole prefix, and every step click needs it. Read-only records."""
    return diagnose(WeatherModel(dict(key[2])), _run(key).events[index])


def _run(key: tuple) -> Run:
    prompt, new, values, repair, rule, seed = key
    return cached_run("weather", prompt, new, model_options=(("values", values),), repair=repair,
                      **dict(rule), seed=seed)


def _sentences(ev: Event, run: Run) -> tuple[str, str]:
    """What just happened, and what has not happened yet, in plain words."""
    if ev.phase == "prefill":
        return (t("weather.did_prefill", prompt=" ".join(run.prompt), n=len(run.prompt)),
                t("weather.not_yet_prefill"))
    if ev.phase == "choose":
        return (stepper.choice_sentence(ev, WeatherModel.logit_tokens, t(
                    "weather.did_choose", tok=ev.chosen, logit=f"{ev.logits[ev.choice.index]:.3f}",
                    seq=" ".join(ev.sequence))),
                t("weather.not_yet_choose", tok=ev.chosen, n=ev.cache_len, pos=ev.positions[0] + BASE))
    return (t("weather.did_decode", tok=ev.tokens[0], pos=ev.positions[0] + BASE, n=ev.cache_len),
            t("weather.not_yet_decode"))


def _reads_lines(src: Event) -> None:
    """For each head: where its keys are +1 and what the pass's last query reads."""
    keys = src.cache.keys[0][0]                                 # [H, T, d_k]
    plus = plus_one_positions(keys)
    q = src.positions[-1]
    tokens = src.sequence
    lines = []
    for h in range(len(HEADS)):
        att = src.record.attention[0, h, -1]                   # [T] the last query's row
        read = _reads_text(att, tokens)
        where = ", ".join(str(p + BASE) for p in plus[h]) or t("weather.nowhere")
        lines.append(t("weather.reads_line", head=_head_title(h), where=where, pos=_pos(q, tokens),
                       reads=read, ctx=_num(float(src.record.output[-1, h]))))
    st.markdown(f"**{t('weather.reads_heading', pos=_pos(q, tokens))}**")
    st.markdown("\n".join(f"- {line}" for line in lines))


def _prefill_contexts(src: Event, values: dict[str, float]) -> None:
    """Contexts heads × positions; the cells where the seed's prose disagrees marked, with notes."""
    out = src.record.output                                     # [N, H]
    cols = [f"{p + BASE}:{w}" for p, w in enumerate(src.sequence[:out.shape[0]])]
    df = pd.DataFrame(out.T.tolist(), index=_head_titles(), columns=cols).round(4)
    df.index.name = t("weather.col_head")            # the corner cell: a table header is never empty
    notes = prose_vs_tensor(src.sequence[:out.shape[0]], out, values)
    marks = {(n.head, n.position) for n in notes}
    styled = df.style.format(lambda v: fmt.fixed(v, 4)).apply(
        lambda col: [f"background-color:{COLORS['pending']}55;font-weight:bold"
                     if (i, cols.index(col.name)) in marks else "" for i in range(len(col))], axis=0)
    st.markdown(f"**{t('weather.contexts_heading')}**")
    st.dataframe(styled, width="stretch")
    items = []
    for n in notes:
        where = _pos(n.position, src.sequence)
        if n.prose_token is None:
            items.append(t("weather.prose_head1", pos=where, tensor=fmt.fixed(n.tensor_value, 4)))
        else:
            items.append(t("weather.prose_head2", pos=where, prose=_num(n.prose_value), tok=n.prose_token,
                           tensor=fmt.fixed(n.tensor_value, 4), last=len(src.sequence[:out.shape[0]])))
    st.warning(t("weather.prose_heading") + "\n\n" + "\n".join(f"- {i}" for i in items),
               icon=":material/menu_book:")


def _logits_formula(src: Event) -> None:
    """logits = context × W_vocab, with the numbers of this pass (the sums come from the record)."""
    ctx = src.record.output[-1].tolist()                        # [H]
    parts = []
    for j, word in enumerate(WeatherModel.logit_tokens):
        terms = " + ".join(f"{fmt.sig(W_VOCAB[h, j].item())}·{_num(ctx[h])}" for h in range(len(HEADS)))
        parts.append(f"{word} = {terms} = **{fmt.fixed(src.record.logits[-1, j].item(), 3)}**")
    st.markdown(t("weather.logits_formula", pos=src.positions[-1] + BASE) + "  \n" + "  \n".join(parts))


def _comparison_markdown(table: pd.DataFrame, bad: set[int]) -> str:
    """Cached vs recomputed as a markdown table, differing rows in red (cheaper than a styled frame,
    which matters on every step click)."""
    head = [t("weather.col_head"), t("weather.col_cached"), t("weather.col_recomputed"), t("weather.col_diff")]
    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in head) + " |", "|---|---:|---:|---:|"]
    for i, row in enumerate(table.itertuples(index=False)):
        cells = [fmt.fixed(x, 4) for x in row[1:]]
        if i in bad:
            cells = [f":red-background[**{c}**]" for c in cells]
        lines.append(f"| {row[0]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _decode_comparison(src: Event, diag: Diagnosis) -> None:
    """Cached vs recomputed contexts, which heads differ and why, the repair, the BERT question."""
    heads = _head_titles()
    table = comparison_table(diag, heads)
    bad = {d.component for d in diag.differing()}
    st.markdown(f"**{t('weather.compare_heading', pos=_pos(diag.position, src.sequence))}**")
    st.markdown(_comparison_markdown(table, bad))
    tokens = src.sequence
    if bad:
        for d in diag.differing():
            st.error(t("weather.head_differs", head=heads[d.component], diff=_num(d.abs_diff),
                       cached=_num(d.cached), recomputed=_num(d.recomputed)), icon=":material/error:")
        why = []
        for row in (r for r in diag.stale if r.kind == "key"):
            why.append(t("weather.stale_key", head=heads[row.head], pos=_pos(row.position, tokens),
                         cached=fmt.num(row.cached[0].item(), "+g"), recomputed=fmt.num(row.recomputed[0].item(), "+g"),
                         event=row.computed_at, d_k=D_K))
        st.markdown(f"**{t('weather.why_heading')}**\n\n" + "\n".join(f"- {w}" for w in why)
                    + "\n\n" + t("weather.why_body"))
        for d in diag.differing():
            h = d.component
            cached = _reads_text(src.record.attention[0, h, -1], tokens)
            fresh = _reads_text(diag.recomputed_attention[0, h], tokens)
            st.markdown(t("weather.reads_compare", head=heads[h], cached=cached, recomputed=fresh,
                          c=_num(d.cached), r=_num(d.recomputed)))
        st.info(t("weather.repair_hint"), icon=":material/build:")
    elif src.repaired:
        rows = [r for r in src.cache.rows if r.rewritten_at == src.index]
        st.success(t("weather.repaired", rows=", ".join(_pos(r.position, tokens) for r in rows)),
                   icon=":material/build_circle:")
    else:
        st.success(t("weather.agree"), icon=":material/check_circle:")
    st.markdown(f"**{t('weather.assumption_heading')}**\n\n{t('weather.assumption_body')}")
    st.markdown(f"**{t('weather.bert_question')}**")
    with st.expander(t("weather.bert_reveal"), icon=":material/lightbulb:"):
        st.markdown(t("weather.bert_answer"))


@st.fragment
@timed("weather.step")
def _stepper(run: Run, model: WeatherModel, key: tuple) -> None:
    step = stepper.step_controls(len(run.events))
    ev = run.events[step]
    nxt = run.events[step + 1] if step + 1 < len(run.events) and ev.phase != "choose" else None
    st.subheader(t("weather.event_heading", i=ev.index, last=len(run.events) - 1,
                   phase=t("weather.phase_" + ev.phase)))
    stepper.token_strip(ev, len(run.prompt), position_base=BASE)
    did, not_yet = _sentences(ev, run)
    st.markdown(f":material/check: {did}  \n:material/hourglass_empty: {not_yet}")
    src = ev if ev.record is not None else run.events[step - 1]    # the pass behind this event
    stepper.attention_view(ev, src, head_titles=_head_titles(), position_base=BASE,
                           title=t("weather.attention_title", phase=t("weather.phase_" + src.phase)))
    diag = _diagnosis(key, src.index)
    left, right = st.columns([3, 2], gap="large")
    with left:
        _reads_lines(src)
        if src.phase == "prefill":
            _prefill_contexts(src, model.values)
        else:
            _decode_comparison(src, diag)
    with right:
        stepper.logits_view(ev, model.logit_tokens, nxt)
        _logits_formula(src)
        if src.phase == "decode" and src.check.logits_max_abs_diff > 1e-6:
            fresh = src.check.logits[-1]
            st.caption(t("weather.recomputed_logits", logits=", ".join(
                f"{w} {fresh[j].item():.3f}" for j, w in enumerate(model.logit_tokens))))
    stepper.counters(ev)
    flagged = [(r.position, kv_column("k" if r.kind == "key" else "v", r.head,
                                      len(HEADS) if r.kind == "key" else 1, _short_heads()))
               for r in diag.stale]
    table = stepper.cache_view(ev, _short_heads(), position_base=BASE, flagged=flagged)
    stepper.downloads(run, ev, model.logit_tokens, "weather", table)
    first_decode = next((e.index for e in run.events if e.phase == "decode"), None)
    if src.phase == "prefill" and first_decode is not None:
        st.caption(t("weather.decode_hint", i=first_decode))
