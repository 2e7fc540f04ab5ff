"""The Real LLM page's loop views, on SmolLM2: why decode is a loop (two prompts that differ in one
word, their next-token distributions and the greedy decode after each: kvviz.decoding.one_word),
greedy's loop on a prompt where it really loops, with what sampling does to it (long_runs.loop_pair),
and the whole run's attention as one matrix, a row per pass (kvviz.decoding.whole_run); each view says
first what to notice in it (kvviz/ui/frames/loop_notice.py). Called by one line of kvviz/ui/pages/llm.py,
which hands it the page's model loader (kept out of this module's imports: llm.py imports it); every
setting is in the address (``loop_*``). The cached results are keyed by the model's name, the model
itself passed along unhashed."""
from __future__ import annotations

import html
from collections.abc import Callable

import pandas as pd
import streamlit as st

from kvviz.decoding.long_runs import SMOLLM2_LOOP_PROMPT, LoopPair, loop_pair
from kvviz.decoding.one_word import PROMPTS, OneWord, one_word
from kvviz.decoding.stepper import Run, run_generation
from kvviz.decoding.whole_run import WholeRun, whole_run
from kvviz.limits import LimitError
from kvviz.models.smollm2 import ModelUnavailable
from kvviz.ui.app import fmt, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.frames import translator
from kvviz.ui.frames.loop_notice import loop_notice, one_word_notice, whole_notice
from kvviz.viz.loop import next_token_bars, whole_run_figure

NEW, MAX_NEW = 12, 24             # greedy tokens after each prompt (and in the whole run)
SHOWN = 8                         # next tokens listed per prompt
LOOP_PROMPT = SMOLLM2_LOOP_PROMPT   # greedy writes ". I love you" 11 times after it
LOOP_NEW, LOOP_TAU, LOOP_SEED = 48, 1.0, 0
MAX_CHARS = 200


Loader = Callable[[], object]     # the page's loader of the server's model (shared, read-only)


def _shown(model, token_id: int) -> str:
    """A token as text, a leading space shown as ␣ (SmolLM2's tokens carry their space)."""
    text = model.decode([token_id])
    return text.replace(" ", "␣") if text.strip() else repr(text)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def _one_word(name: str, _model, a: str, b: str, new: int) -> OneWord:
    model = _model
    return one_word(model, (model.ids(model.prompt(a, False)), model.ids(model.prompt(b, False))), new)


@st.cache_resource(max_entries=8, ttl=3600, show_spinner=False)
def _loop(name: str, _model, text: str) -> LoopPair:
    model = _model
    return loop_pair(model, model.ids(model.prompt(text, False)), LOOP_NEW, LOOP_TAU, LOOP_SEED)


@st.cache_resource(max_entries=8, ttl=3600, show_spinner=False)
def _run(name: str, _model, text: str, new: int) -> Run:
    model = _model
    return run_generation(model, model.prompt(text, False), new, recheck=False)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _whole(name: str, _model, text: str, new: int, layer: int, head: int) -> WholeRun:
    return whole_run(_run(name, _model, text, new), layer, head, _model)


def offered(model) -> bool:
    """Whether the page shows these views for ``model``: a model with a chat template (an instruct
    model; of the real models kvviz ships, SmolLM2, whose loop prompt and words these views use)."""
    return bool(model.SPEC.chat_template)


def warm(load: Loader) -> None:
    """The default views (skipped when SmolLM2 is not installed or not prepared)."""
    try:
        model = load()
        _one_word(model.name, model, *PROMPTS, NEW)
        _loop(model.name, model, LOOP_PROMPT)
        _whole(model.name, model, PROMPTS[0], NEW, 0, 0)
    except (ModelUnavailable, LimitError):
        pass


def _inputs() -> tuple[str, str, int, str]:
    urlstate.text_param("loop_a", PROMPTS[0], MAX_CHARS)
    urlstate.text_param("loop_b", PROMPTS[1], MAX_CHARS)
    urlstate.text_param("loop_prompt", LOOP_PROMPT, MAX_CHARS)
    urlstate.int_param("loop_new", NEW, 1, MAX_NEW)
    with presenter.settings():
        c = st.columns([2, 2, 1])
        a = c[0].text_input(t("loop.a_input"), key="loop_a", max_chars=MAX_CHARS, on_change=urlstate.sync,
                            args=("loop_a", PROMPTS[0]))
        b = c[1].text_input(t("loop.b_input"), key="loop_b", max_chars=MAX_CHARS, on_change=urlstate.sync,
                            args=("loop_b", PROMPTS[1]))
        new = c[2].number_input(t("loop.new_input"), 1, MAX_NEW, key="loop_new", on_change=urlstate.sync,
                                args=("loop_new", NEW))
        lp = st.text_input(t("loop.loop_input"), key="loop_prompt", max_chars=MAX_CHARS, on_change=urlstate.sync,
                           args=("loop_prompt", LOOP_PROMPT))
    return a.strip() or PROMPTS[0], b.strip() or PROMPTS[1], int(new), lp.strip() or LOOP_PROMPT


def _one_word_view(model, a: str, b: str, new: int) -> None:
    st.header(t("loop.title"))
    presenter.intro(t("loop.intro"))
    got = _one_word(model.name, model, a, b, new)
    step_view.notice(one_word_notice(got, SHOWN, lambda i: _shown(model, i), translator(current_lang())))
    names = {"a": t("lesson.quoted", text=a), "b": t("lesson.quoted", text=b)}
    fig = next_token_bars({t(f"loop.{k}_panel"): [(_shown(model, i), p, fmt.percent(p, 1)) for i, p in br.top(SHOWN)]
                           for k, br in (("a", got.a), ("b", got.b))},
                          {"title": t("loop.bars_title", n=SHOWN), "x": t("loop.bars_x"),
                           "hover": t("loop.bars_hover")})
    chart(fig, t("loop.bars_alt", a=a, b=b), key="loop_bars")
    st.markdown(t("loop.tv", tv=fmt.percent(got.total_variation(), 1), shared=len(got.shared_top(SHOWN)), n=SHOWN))
    cols = st.columns(2)
    for col, (k, br) in zip(cols, (("a", got.a), ("b", got.b))):
        with col:
            st.markdown(f"**{names[k]}** → " + t("lesson.quoted", text=model.decode(br.generation.tokens)))
            st.dataframe(pd.DataFrame({t("loop.col_step"): range(1, len(br.generation.tokens) + 1),
                                       t("loop.col_token"): [_shown(model, i) for i in br.generation.tokens],
                                       t("loop.col_p"): [fmt.percent(p, 1) for p in br.chosen_p()]}),
                         hide_index=True, width="stretch", height=min(460, 38 + 35 * len(br.generation.tokens)))
    split = got.first_differing_token
    if split is None:
        st.markdown(t("loop.same", n=len(got.a.generation.tokens)))
    else:
        st.markdown(t("loop.why", step=split + 1))
    rows = [{"prompt": text, "step": s + 1, "token_id": tok, "token": model.decode([tok]), "p": p}
            for text, br in ((a, got.a), (b, got.b))
            for s, (tok, p) in enumerate(zip(br.generation.tokens, br.chosen_p()))]
    rows += [{"prompt": text, "step": 0, "token_id": i, "token": model.decode([i]), "p": p}
             for text, br in ((a, got.a), (b, got.b)) for i, p in br.top(50)]
    st.download_button(t("loop.csv"), pd.DataFrame(rows).to_csv(index=False), file_name="smollm2_one_word.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")


def _marked(model, tokens: list[int], rep) -> str:
    """The text with the tokens of the repeated span's occurrences in bold, as Markdown with HTML
    (shown with ``unsafe_allow_html``; the model's text escaped): ``<strong>``, not ``**``, because an
    occurrence that starts with punctuation right after a word (". I love you" after "me") opens no
    bold in Markdown, which then shows the asterisks."""
    inside = rep.positions() if rep else set()
    parts = []
    for i, tok in enumerate(tokens):
        text = html.escape(model.decode([tok]).replace("\n", " "), quote=False).replace("*", "\\*")
        lead = text[:len(text) - len(text.lstrip())]           # a token's leading space stays outside the bold
        parts.append(f"{lead}<strong>{text.strip()}</strong>" if i in inside and text.strip() else text)
    # one bold run per occurrence
    return "".join(parts).replace("</strong><strong>", "").replace("</strong> <strong>", " ")


def _loop_view(model, text: str) -> None:
    st.header(t("loop.loop_title"))
    pair = _loop(model.name, model, text)
    step_view.notice(loop_notice(pair, model.decode, translator(current_lang()),
                                 try_prompt=LOOP_PROMPT if text != LOOP_PROMPT else None))
    st.markdown(t("loop.loop_intro", n=LOOP_NEW, text=text))
    for k, gen, rep in (("greedy", pair.greedy, pair.greedy_repeat), ("sampled", pair.sampled, pair.sampled_repeat)):
        label = t("lesson.loop_greedy") if k == "greedy" else t("lesson.loop_sampled", tau=fmt.sig(pair.tau),
                                                                   seed=pair.seed)
        st.markdown(f"**{label}:** " + t("lesson.quoted", text=_marked(model, gen.tokens, rep)), unsafe_allow_html=True)
        who = t(f"lesson.loop_who_{k}")
        if rep is None:
            st.caption(t("lesson.loop_none", who=who))
        else:
            span = model.decode(list(rep.span)).strip()
            st.caption(t("lesson.loop_found", who=who, span=span, count=rep.count, covered=rep.covered,
                         n=len(gen.tokens), share=fmt.percent(rep.covered / len(gen.tokens))))
    st.markdown(t("loop.loop_why"))
    rows = [{"rule": k, "step": i + 1, "token_id": tok, "token": model.decode([tok]),
             "in_repeated_span": i in (rep.positions() if rep else set())}
            for k, gen, rep in (("greedy", pair.greedy, pair.greedy_repeat),
                                ("sampled", pair.sampled, pair.sampled_repeat))
            for i, tok in enumerate(gen.tokens)]
    st.download_button(t("loop.loop_csv"), pd.DataFrame(rows).to_csv(index=False),
                       file_name="smollm2_greedy_loop.csv", mime="text/csv", icon=":material/download:",
                       on_click="ignore")


def whole_run_view(w: WholeRun, prefix: str, names: list[str], file_name: str) -> None:
    """The whole-run matrix of ``w`` with what to notice in it, a slider of passes (``?{prefix}_passes=``),
    its account and a CSV; shared by the Tiny GPT page (kvviz/ui/pages/gpt_whole_run.py)."""
    step_view.notice(whole_notice(w, translator(current_lang())))
    key = f"{prefix}_passes"
    passes = 1                  # a run of one pass (the prefill only) has nothing to slide through
    if w.passes > 1:
        urlstate.int_param(key, w.passes, 1, w.passes)
        if st.session_state[key] > w.passes:          # kept from a longer run of this session
            st.session_state[key] = w.passes
        passes = st.slider(t("loop.passes_input"), 1, w.passes, key=key, on_change=urlstate.sync,
                           args=(key, w.passes), help=t("loop.passes_help"))
    rows = w.rows_after(passes)
    fig = whole_run_figure(w, rows, {
        "title": t("loop.whole_fig_title", layer=w.layer + 1, head=w.head + 1, passes=passes, rows=rows),
        "x": t("loop.whole_x"), "y": t("loop.whole_y"), "weight": t("loop.whole_weight"),
        "hover": t("loop.whole_hover"), "cached": t("loop.whole_cached", n=rows)})
    chart(fig, t("loop.whole_alt", rows=rows, n=len(w.tokens)), key=f"{prefix}_whole_chart")
    st.markdown(t("loop.whole_account", prompt=w.prompt_len, passes=passes, rows=rows,
                  last=names[rows - 1] if rows else "", read=rows))
    if w.recompute_max_abs_diff is not None:
        st.markdown(t("loop.whole_exact", n=len(w.tokens), diff=fmt.sci(w.recompute_max_abs_diff, 1)))
    table = pd.DataFrame([{"query_position": p, "query_token": names[p], "pass": w.pass_of_row[p],
                           "key_position": j, "key_token": names[j], "weight": float(w.weights[p, j])}
                          for p in range(len(names)) for j in range(p + 1)])
    st.download_button(t("loop.whole_csv"), table.to_csv(index=False), file_name=file_name, mime="text/csv",
                       icon=":material/download:", on_click="ignore", key=f"{prefix}_whole_csv")


def _whole_view(model, text: str, new: int) -> None:
    st.header(t("loop.whole_title"))
    presenter.intro(t("loop.whole_intro", text=text, n=new))
    cfg = model.cost_config
    layer, head = LayerHeadPicker("loop", cfg.n_layers, cfg.n_heads,
                                  ("gpt.layer", "gpt.layer_help", "gpt.head", "gpt.head_help")).show()
    w = _whole(model.name, model, text, new, layer, head)
    whole_run_view(w, "loop", [model.decode([model.vocab.index(tok)]) for tok in w.tokens], "smollm2_whole_run.csv")


def section(load: Loader) -> None:
    """The three views at the foot of the Real LLM page (its whole page, outside presenter mode, as its
    other sections)."""
    try:
        model = load()
        a, b, new, lp = _inputs()
        with st.spinner(t("loop.running")):
            _one_word_view(model, a, b, new)
            _loop_view(model, lp)
            _whole_view(model, a, new)
    except ModelUnavailable as e:
        st.info(t("loop.unavailable", reason=str(e)), icon=":material/info:")
    except (LimitError, ValueError) as e:
        st.error(t("loop.bad", reason=str(e)), icon=":material/error:")
