"""The sampling page body: logits in, every stage of the rule drawn, seeded draws, three questions.

Numbers come from ``kvviz.decoding.sampling`` (stages, choices, draws) and ``kvviz.decoding.logit_sources``; the charts
from ``kvviz.viz.sampling``. This module only reads widgets and lays things out.
"""
from __future__ import annotations

import streamlit as st
import torch

from kvviz.decoding.logit_sources import LogitSource, TypedLogitsError, parse_logits, quiz_distribution
from kvviz.decoding.sampling import Sampler, Stage, draw_counts
from kvviz.decoding.stepper import run_generation
from kvviz.limits import MAX_DRAWS, MAX_NEW_TOKENS, MAX_SEED, MAX_TYPED_CHARS, LimitError
from kvviz.models.registry import get_model
from kvviz.ui.app import fmt, links, models, nav, pages, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, join, t
from kvviz.ui.app.perf import timed
from kvviz.ui.app.runs import cached_run
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.rule_controls import rule_controls
from kvviz.ui.pages import lecture, sampling_tail
from kvviz.viz.sampling import display_order, draws_histogram, removed_heights, stage_bars

PREFIX = "sampling"                 # key prefix of this page's rule controls
SOURCES = ("quiz", "model", "typed")
KINDS = ("logits", "probs")
MODEL_PROMPTS = {"abc": "A B"}      # models offered as a logits source, with a default prompt
TYPED_DEFAULTS = {"logits": "A 2.0, B 1.0, C 0.5, D -1.0", "probs": "A 0.5, B 0.3, C 0.15, D 0.05"}
QUIZ_P = 0.8                        # the lesson's quiz (docs/design.md §3): top-p 0.8 on its distribution
# presenter mode's stage charts, four a row: lower, two digits above the bars (three would run into each
# other in a quarter of the screen), the y axis's title on the first only (one scale for all)
PRESENT_STAGE = {"height": 260, "digits": 2}


def _listed(tokens: list[str], cap: int) -> str:
    """“A, B, C”; long lists shortened to the first ``cap`` names and a count."""
    return ", ".join(tokens) if len(tokens) <= cap else ", ".join(tokens[:cap]) + f", … (+{len(tokens) - cap})"


def _names(tokens: list[str], cap: int = 10) -> str:
    """Tokens named in a sentence: “A, B and C” the page's language's way (shortened past ``cap``)."""
    return join(tokens, current_lang()) if len(tokens) <= cap else _listed(tokens, cap)


def _set_list(tokens: list[str]) -> str:
    return "{" + _listed(tokens, 10) + "}"


# the glossary's entry for a filter stage (its first appearance on the page: the entropy counters)
STAGE_TERMS = {"temperature": "temperature", "top-k": "top_k_p", "top-p": "top_k_p", "greedy": "greedy"}


def _stage_help(stage: str) -> str:
    term = STAGE_TERMS.get(stage)
    return t("sampling.entropy_help") if term is None else nav.term_help(term, t("sampling.entropy_help"))


# ---------------------------------------------------------------- 1. where the logits come from

def _model_source() -> LogitSource | None:
    names = list(MODEL_PROMPTS)
    c = st.columns([1.2, 3, 1.4]) if len(names) > 1 else [None, *st.columns([3, 1.4])]
    name = names[0] if c[0] is None else c[0].selectbox(t("sampling.model"), names, key="sampling_model")
    text = c[1].text_input(t("sampling.prompt"), MODEL_PROMPTS[name], key="sampling_prompt",
                           bind="query-params", max_chars=200,
                           help=nav.term_help("tokenizer", t("sampling.prompt_help")))
    urlstate.int_param("sampling_after", 0, 0, MAX_NEW_TOKENS - 1)
    after = c[2].number_input(t("sampling.after"), 0, MAX_NEW_TOKENS - 1, key="sampling_after",
                              on_change=urlstate.sync, args=("sampling_after", 0), help=t("sampling.after_help"))
    model = get_model(name)
    try:
        tokens = model.tokenize(text or "")
        run = cached_run(name, tuple(tokens), int(after) + 1)          # earlier tokens chosen greedily
    except (LimitError, ValueError) as e:
        st.error(t("sampling.bad_prompt", reason=str(e)), icon=":material/error:")
        return None
    ev = [e for e in run.events if e.phase == "choose"][int(after)]
    st.caption(t("sampling.model_caption", text=" ".join(ev.sequence[:-1]), pos=len(ev.sequence) - 2,
                  event=ev.index))
    return LogitSource(list(model.logit_tokens), ev.logits)


def _typed_source() -> LogitSource | None:
    urlstate.choice_param("sampling_kind", KINDS, "logits")
    kind = st.radio(t("sampling.typed_kind"), KINDS, horizontal=True, key="sampling_kind",
                    format_func=lambda k: t(f"sampling.kind_{k}"), help=t("sampling.typed_kind_help"),
                    on_change=urlstate.sync, args=("sampling_kind", "logits"))
    text = st.text_area(t(f"sampling.typed_{kind}"), TYPED_DEFAULTS[kind], key=f"sampling_typed_{kind}",
                        height=90, max_chars=MAX_TYPED_CHARS, help=t("sampling.typed_help"))
    try:
        src = parse_logits(text or "", kind)
    except TypedLogitsError as e:
        st.error(t(f"sampling.err_{e.code}", **e.params), icon=":material/error:")
        return None
    if src.prob_sum is not None and abs(src.prob_sum - 1) > 1e-9:
        st.info(t("sampling.normalised", total=fmt.sig(src.prob_sum, 6)), icon=":material/balance:")
    return src


def _source() -> LogitSource | None:
    urlstate.choice_param("sampling_source", SOURCES, "quiz")
    src = st.segmented_control(t("sampling.source"), SOURCES, required=True, key="sampling_source",
                               format_func=lambda s: t(f"sampling.source_{s}"), help=t("sampling.source_help"),
                               on_change=urlstate.sync, args=("sampling_source", "quiz"))
    if src == "quiz":
        q = quiz_distribution()
        st.caption(t("sampling.quiz_caption", rest=", ".join(q.tokens[3:])))
        return q
    return _model_source() if src == "model" else _typed_source()


# ---------------------------------------------------------------- 3. the stages

def _stage_caption(i: int, s: Stage, stages: list[Stage], tokens: list[str]) -> str:
    names = lambda idx: _names([tokens[j] for j in idx])                           # noqa: E731
    if s.name == "input":
        gone = len(tokens) - len(s.kept)
        return t("sampling.cap_input", n=len(s.kept), v=len(tokens)) + \
            (" " + t("sampling.cap_input_inf", n=gone) if gone else "")
    if s.name == "greedy":
        return t("sampling.cap_greedy", tok=tokens[s.kept[0]])
    prev = stages[i - 1]
    if s.name == "temperature":
        trend = "same" if s.setting == 1 else ("sharper" if s.setting < 1 else "flatter")
        return t(f"sampling.cap_temperature_{trend}", tau=fmt.sig(s.setting), h0=fmt.fixed(prev.entropy_bits, 3),
                 h1=fmt.fixed(s.entropy_bits, 3))
    if s.setting is None:
        return t(f"sampling.cap_{s.name.replace('-', '_')}_off")
    if s.name == "top-k":
        if not s.removed:
            return t("sampling.cap_top_k_none", k=s.setting, n=len(prev.kept))
        return t("sampling.cap_top_k", k=s.setting, removed=names(s.removed), n=len(s.kept))
    # top-p: name the first removed token and the mass before it, or the largest mass that stayed below p
    if not s.removed:
        last = max(s.kept, key=lambda j: s.mass_before[j])
        return t("sampling.cap_top_p_none", p=fmt.sig(s.setting), tok=tokens[last],
                 mass=fmt.fixed(s.mass_before[last], 3))
    first = min(s.removed, key=lambda j: s.mass_before[j])
    return t("sampling.cap_top_p", p=fmt.sig(s.setting), kept=_set_list([tokens[j] for j in s.kept]),
             tok=tokens[first], mass=fmt.fixed(s.mass_before[first], 3))


def _notice(stages: list[Stage], tokens: list[str]) -> None:
    """What to notice in the stages: the stage that removes tokens and why; greedy's one token; or,
    where nothing is removed, the lesson's quiz one click away (the lecture script's screen)."""
    names = lambda idx: _names([tokens[j] for j in idx])                           # noqa: E731
    last = stages[-1]
    cutting = [i for i, s in enumerate(stages) if s.removed and s.name in ("top-k", "top-p")]
    if last.name == "greedy":
        text = t("notice.sampling_greedy", tok=tokens[last.kept[0]])
    elif cutting and stages[cutting[-1]].name == "top-p":
        i = cutting[-1]
        s = stages[i]
        first = min(s.removed, key=lambda j: s.mass_before[j])
        text = t("notice.sampling_top_p", n=i + 1, tok=tokens[first], mass=fmt.fixed(s.mass_before[first], 3),
                 p=fmt.sig(s.setting), kept=_set_list([tokens[j] for j in s.kept]))
    elif cutting:
        i = cutting[-1]
        text = t("notice.sampling_top_k", n=i + 1, k=stages[i].setting, removed=names(stages[i].removed))
    else:
        temp = next((s for s in stages if s.name == "temperature"), None)
        tau = temp.setting if temp is not None and temp.setting is not None else 1
        quiz = links.deep_link(pages.script("sampling"), {"sampling_top_p": QUIZ_P})
        text = (t("notice.sampling_none", tau=fmt.sig(tau), h0=fmt.fixed(stages[0].entropy_bits, 3),
                  h1=fmt.fixed(last.entropy_bits, 3)) + f" [{t('notice.sampling_quiz_link')} →]({quiz})")
    step_view.notice(text)


def _stages(stages: list[Stage], tokens: list[str]) -> None:
    """A chart per stage, two a row; in presenter mode all in one row, lower (one projector screen)."""
    order, ghosts = display_order(stages), removed_heights(stages)
    labels = {"kept": t("sampling.lbl_kept"), "removed": t("sampling.lbl_removed"),
              "kept_set": t("sampling.lbl_kept_set"), "mass_before": t("sampling.lbl_mass_before"),
              "axis": t("sampling.lbl_axis")}
    present = presenter.presenting()
    per_row = max(2, len(stages)) if present else 2
    for row in range(0, len(stages), per_row):
        cols = st.columns(per_row)
        for col, i in zip(cols, range(row, min(row + per_row, len(stages)))):
            s = stages[i]
            threshold = s.setting if s.name == "top-p" and s.setting is not None else None
            labels["threshold"] = t("sampling.lbl_threshold", p=fmt.sig(threshold)) if threshold else ""
            title = t("sampling.stage_title", n=i + 1, name=t(f"sampling.stage_{s.name.replace('-', '_')}"),
                      h=fmt.fixed(s.entropy_bits, 3))
            with col:
                fig = stage_bars(s, ghosts[max(i - 1, 0)], tokens, order, title, labels, threshold,
                                 **({**PRESENT_STAGE, "axis_title": i == 0} if present else {}))
                chart(fig, t("sampling.stage_alt", name=s.name), key=f"stage_{i}")
                st.caption(_stage_caption(i, s, stages, tokens))
    st.markdown(f"**{t('sampling.entropy_heading')}**")
    cols = st.columns(len(stages))
    for i, (col, s) in enumerate(zip(cols, stages)):
        change = 0.0 if i == 0 else s.entropy_bits - stages[i - 1].entropy_bits
        delta = fmt.signed(change, 3) if abs(change) >= 5e-4 else None        # no arrow for "unchanged"
        col.metric(t(f"sampling.stage_{s.name.replace('-', '_')}"), t("sampling.bits", h=fmt.fixed(s.entropy_bits, 3)),
                   delta=delta, delta_color="off", help=_stage_help(s.name))


# ---------------------------------------------------------------- 4. draws

def _new_seed() -> None:
    key = f"{PREFIX}_seed"
    st.session_state[key] = (int(st.session_state.get(key, 0)) + 1) % (MAX_SEED + 1)
    urlstate.sync(key, 0)


def _draws(rule, seed: int, stages: list[Stage], src: LogitSource) -> None:
    greedy = rule.describe()["name"] == "greedy"
    one = rule.choose(src.logits, torch.Generator().manual_seed(seed))
    c = st.columns([1.2, 1.1, 3], vertical_alignment="bottom")
    urlstate.int_param("sampling_n", 1_000, 1, MAX_DRAWS)
    n = c[0].number_input(t("sampling.n_draws"), 1, MAX_DRAWS, step=100, key="sampling_n",
                          on_change=urlstate.sync, args=("sampling_n", 1_000),
                          help=t("sampling.n_draws_help", cap=fmt.integer(MAX_DRAWS)))
    c[1].button(t("sampling.new_seed"), icon=":material/casino:", on_click=_new_seed, disabled=greedy,
                help=t("sampling.new_seed_help"), width="stretch")
    key = "one_draw_greedy" if greedy else "one_draw"
    c[2].markdown(t(f"sampling.{key}", seed=seed, tok=src.tokens[one.index], p=fmt.fixed(one.probs[one.index], 3)))
    final = stages[-1]
    counts = draw_counts(final.probs, int(n), seed)
    order = display_order(stages)
    fig = draws_histogram(counts, final.probs, src.tokens, order,
                          t("sampling.hist_title", n=n, seed=seed),
                          {"observed": t("sampling.observed"), "expected": t("sampling.expected"),
                           "axis": t("sampling.lbl_freq_axis"), "draws": t("sampling.lbl_draws")})
    chart(fig, t("sampling.hist_alt"), key="hist")
    gap = max(abs(counts[i] / int(n) - final.probs[i]) for i in range(len(counts)))
    st.caption(t("sampling.hist_caption", gap=fmt.fixed(gap, 4), n=n))


# ---------------------------------------------------------------- 5. check your understanding

def _question(n: int, options: list, fmt, correct, reveal) -> None:
    """A question the reader answers (a radio) before the explanation appears."""
    with st.container(border=True):
        st.markdown(f"**{t('sampling.q_label', n=n)}** {t(f'sampling.q{n}')}")
        answer = st.radio(t("sampling.your_answer"), options, index=None, format_func=fmt, key=f"sampling_q{n}",
                          label_visibility="collapsed")
        if answer is None:
            st.caption(t("sampling.answer_first"))
            return
        if answer == correct:
            st.success(t("sampling.right"), icon=":material/check_circle:")
        else:
            st.error(t("sampling.wrong", answer=fmt(correct)), icon=":material/cancel:")
        reveal()


def _show_quiz_on_charts() -> None:
    st.session_state.update({"sampling_source": "quiz", f"{PREFIX}_rule": "sample", f"{PREFIX}_tau": 1.0,
                             f"{PREFIX}_top_k": None, f"{PREFIX}_top_p": QUIZ_P})


def _questions() -> None:
    st.header(t("sampling.quiz_heading"))
    # 1: greedy twice from the same prompt, checked now by running the A/B/C model twice
    def reveal1() -> None:
        model = get_model("abc")
        a, b = (run_generation(model, ["A", "B"], 8) for _ in range(2))
        text = lambda r: " ".join(e.chosen for e in r.events if e.phase == "choose")   # noqa: E731
        s1, s2 = (run_generation(model, ["A", "B"], 8, rule=Sampler(1.0), seed=s) for s in (1, 2))
        same = t("sampling.yes" if text(a) == text(b) else "sampling.no")
        st.markdown(t("sampling.q1_reveal", a=text(a), b=text(b), same=same, s1=text(s1), s2=text(s2)))
    _question(1, ["same", "random", "cache"], lambda o: t(f"sampling.q1_{o}"), "same", reveal1)

    # 2: top-p 0.8 on the quiz distribution; the correct answer is whatever the engine keeps, live
    q = quiz_distribution()
    st2 = Sampler(1.0, None, QUIZ_P).stages(q.logits)[-1]
    engine = tuple(q.tokens[i] for i in st2.kept)
    options = [("A",), ("A", "B"), ("A", "B", "C"), tuple(q.tokens)]

    def reveal2() -> None:
        mb = dict(zip(q.tokens, st2.mass_before))
        st.markdown(t("sampling.q2_reveal", p=fmt.sig(QUIZ_P), kept=_set_list(list(engine)), b=fmt.fixed(mb["B"], 2),
                      c=fmt.fixed(mb["C"], 2), pa=fmt.fixed(st2.probs[0], 3), pb=fmt.fixed(st2.probs[1], 3)))
        st.button(t("sampling.q2_show"), on_click=_show_quiz_on_charts, icon=":material/bar_chart:")
    _question(2, options, lambda o: _set_list(list(o)), engine, reveal2)

    # 3: why a cache works for a causal model and not for BERT
    _question(3, ["causal", "no_kv", "vocab", "sampling"], lambda o: t(f"sampling.q3_{o}"), "causal",
              lambda: st.markdown(t("sampling.q3_reveal")))


# ---------------------------------------------------------------- the page

def warm_model(name: str) -> None:
    """The default visit's cached results once the warm-up has loaded the real model ``name``
    (kvviz/ui/app/warmup.py): SmolLM2's long tail, its two distributions."""
    if name == models.DEFAULT_REAL:
        sampling_tail.warm()


@timed("sampling.render")
def render() -> None:
    lecture.title("sampling", t("sampling.title"))           # with its place in the lecture script
    present = presenter.presenting()
    pipeline = f"**{t('sampling.pipeline_title')}**\n\n{t('sampling.pipeline_body')}"
    # presenter mode: the formulas fold into the introduction, the charts' key into the heading's help
    presenter.intro(t("sampling.intro") + ("\n\n" + pipeline if present else ""))
    with presenter.settings():
        st.header(t("sampling.h_source"))
        src = _source()
        st.header(t("sampling.h_rule"))
        rule, seed = rule_controls(PREFIX)
    if not present:
        with st.expander(t("sampling.pipeline_title")):
            st.markdown(t("sampling.pipeline_body"))
    if src is None:
        st.info(t("sampling.fix_source"), icon=":material/arrow_upward:")
        _questions()
        return
    stages = rule.stages(src.logits)
    if present:
        st.header(t("sampling.h_stages"), help=t("sampling.stages_caption"))
    else:
        st.header(t("sampling.h_stages"))
        st.caption(t("sampling.stages_caption"))
    _notice(stages, src.tokens)
    _stages(stages, src.tokens)
    st.header(t("sampling.h_draws"))
    _draws(rule, seed, stages, src)
    sampling_tail.section(seed)             # why top-k and top-p exist, on a real model's vocabulary
    _questions()
