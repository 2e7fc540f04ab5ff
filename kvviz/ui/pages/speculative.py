"""The speculative decoding page body, on the tiny GPT or on SmolLM2 (the file in pages/ only sets up
the frame and calls render). The model and its draft are one setting, ``?sd_draft=``:

- ``model`` (default): the tiny GPT with a draft model — a draft proposes γ tokens, the target
  verifies them in one pass, both caches roll back; summed up against Leviathan et al.'s expected
  speed-up, measured on this server, and checked against plain decoding;
- ``prompt-lookup`` or ``early-exit``: SmolLM2-135M-Instruct drafting without a second model — the
  continuation of an earlier occurrence of the text's last n-gram, or its own first k layers with
  the final norm and lm_head; its tokens against plain greedy decoding, the acceptance rates on a
  prompt that repeats a text and on an open question, the speed-up measured behind a button.

Either run is stepped by the one stepper (kvviz/ui/components/step_view.py) over the one set of
frames (kvviz/ui/frames/speculative.py): the tiny GPT's events inside each round, SmolLM2's rounds.
The settings' address names keep their short prefix ``sd_`` (``?sd_gamma=3``): they are the page's
deep links (the lecture script, the README). SmolLM2's: sd_case (repeat | open), sd_text (the
message, when not the case's own), sd_llm_new, sd_k / sd_ngram (prompt lookup), sd_ee_k / sd_exit
(early exit), sd_llm_runs; its round is the step (``?step=1``: round 2; the old ``?sd_round=2``
opens the same).
"""
from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pandas as pd
import plotly.graph_objects as go
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from kvviz.decoding.loops import Generation, generate_cached
from kvviz.decoding.sampling import Greedy, make_rule
from kvviz.limits import (
    EARLY_EXIT_MAX_TOKENS,
    PROMPT_LOOKUP_MAX_NGRAM,
    PROMPT_LOOKUP_MAX_TOKENS,
    SMOLLM2_MAX_NEW_TOKENS,
    SPECULATIVE_MAX_GAMMA,
    SPECULATIVE_MAX_STEP_TOKENS,
    LimitError,
)
from kvviz.models.gpt import GPTModel
from kvviz.models.real import ModelUnavailable, RealLM
from kvviz.speculative import (
    early_exit_generate,
    load_pair,
    prompt_lookup_dict,
    prompt_lookup_generate,
    speculation_dict,
)
from kvviz.speculative.decoding import speculative_generate
from kvviz.speculative.records import Speculation
from kvviz.ui.app import fmt, models, nav, presenter, urlstate
from kvviz.ui.app.i18n import t
from kvviz.ui.app.turns import server_lock
from kvviz.ui.components import sequences, step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.components.picker import LayerHeadPicker
from kvviz.ui.components.prompts import prompt_tokens
from kvviz.ui.components.rule_controls import RuleKey, default_rule, rule_cache_key, rule_controls
from kvviz.ui.frames import speculative as frames_speculative
from kvviz.ui.frames import translator
from kvviz.ui.pages import lecture, speculative_real, speculative_speed
from kvviz.viz.speculative import acceptance_spec

DRAFTS = ("model", "prompt-lookup", "early-exit")     # the tiny GPT's draft model, or SmolLM2 drafting itself

# the tiny GPT with its draft model
DEFAULT_PROMPT = "It is rainy in London , so we"     # the draft has not learned what "we" do: rejections
DEFAULT_NEW = 12
DEFAULT_GAMMA = 4
CHI_SQUARE_TEST = "tests/test_speculative.py::test_sampled_first_token_is_distributed_as_the_target_alone_chi_square"

# SmolLM2 drafting for itself
CASES = ("repeat", "open")
PRESETS = {   # a text to copy (prompt lookup finds it in the prompt) and a question whose answer is new text
    "repeat": "Repeat this text exactly:\n\nThe cache keeps the keys and values of every earlier token, so each "
              "new token needs only one pass over the model instead of a pass over the whole text.",
    "open": "Why is the sky blue?",
}
DEFAULT_CASE = "repeat"
LLM_DEFAULT_NEW = 24
DEFAULT_K, DEFAULT_NGRAM = 10, 2          # transformers' prompt-lookup defaults
DEFAULT_EE_K, DEFAULT_EXIT = 4, speculative_real.DEFAULT_EXIT

# prompt ids, method, new tokens, k, n or exit layer[, the real model's name when it is not SmolLM2 (?sd_model=)]
RunKey = speculative_real.RunKey


# ---- shared, read-only runs: the tiny GPT -----------------------------------------------------------------

@st.cache_resource(show_spinner=False)
def _pair() -> tuple[GPTModel, GPTModel]:
    """The target (the tiny GPT) and its draft, loaded once per server and never modified."""
    return load_pair()


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _speculation(ids: tuple[int, ...], new: int, gamma: int, rule_key: RuleKey, seed: int) -> Speculation:
    target, draft = _pair()
    return speculative_generate(target, draft, list(ids), new, gamma, make_rule(*rule_key), seed,
                                keep_attention=True)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _greedy_pair(ids: tuple[int, ...], new: int, gamma: int) -> tuple[Speculation, Generation]:
    """Greedy speculation and the target's own greedy generate_cached: the exactness check."""
    target, draft = _pair()
    return (speculative_generate(target, draft, list(ids), new, gamma, Greedy()),
            generate_cached(target, list(ids), new, Greedy()))


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _plain(ids: tuple[int, ...], new: int, rule_key: RuleKey, seed: int) -> Generation:
    """The target alone with the same rule and seed (sampling: other draws, the same distribution)."""
    return generate_cached(_pair()[0], list(ids), new, make_rule(*rule_key), seed)


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _payload(ids: tuple[int, ...], new: int, gamma: int, rule_key: RuleKey, seed: int, layer: int, head: int,
             lang: str) -> str:
    """Every event's frame of one run, for one layer and head, in one language (read-only JSON)."""
    vocab = _pair()[0].tokenizer.vocab
    spec = _speculation(ids, new, gamma, rule_key, seed)
    return frames_speculative.build(spec, vocab, layer, head, translator(lang)).to_json()


def warm() -> None:
    """The default visit's runs and frames, made by the server's warm-up (kvviz/ui/app/warmup.py)."""
    target, _ = _pair()
    ids = tuple(target.tokenizer.index[w] for w in prompt_tokens(target, DEFAULT_PROMPT))
    rule, seed = default_rule("sd")
    rule_key = rule_cache_key(rule)
    spec = _speculation(ids, DEFAULT_NEW, DEFAULT_GAMMA, rule_key, seed)
    _payload(ids, DEFAULT_NEW, DEFAULT_GAMMA, rule_key, seed, 0, 0, "en")     # layer 1, head 1
    _greedy_pair(ids, len(spec.tokens), DEFAULT_GAMMA)


# ---- shared, read-only runs: SmolLM2 drafting for itself ---------------------------------------

def _generate(model: RealLM, key: RunKey) -> Speculation:
    ids, method, new, k, extra = key[:5]
    if method == "early-exit":
        return early_exit_generate(model, list(ids), new, extra, k)
    return prompt_lookup_generate(model, list(ids), new, k, extra)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def self_drafted_run(key: RunKey) -> Speculation:
    """One self-drafted run (read-only record); one run of the real model at a time per server."""
    with server_lock("speculative_self_run"):
        return _generate(models.real_model(speculative_real.model_name(key)), key)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def self_drafted_greedy(ids: tuple[int, ...], new: int, name: str = models.DEFAULT_REAL) -> tuple[int, ...]:
    """Plain cached greedy decoding of the same prompt: the exactness check."""
    with server_lock("speculative_self_run"):
        return tuple(generate_cached(models.real_model(name), list(ids), new, keep_logits=False).tokens)


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _self_payload(key: RunKey, lang: str) -> str:
    """Every round's frame of one self-drafted run, in one language (read-only JSON)."""
    model = models.real_model(speculative_real.model_name(key))
    run = self_drafted_run(key)
    return frames_speculative.build(run, _Shown(model.vocab, _pretty(model)), 0, 0, translator(lang),
                                    n_layers=model.n_layers).to_json()


def _pretty(model: RealLM) -> Callable[[str], str]:
    """A token as a reader sees it in a figure (a leading space as ␣, a line break as ⏎)."""
    return lambda tok: model.token_text(tok).replace(" ", "␣").replace("\n", "⏎") or tok


class _Shown:
    """``vocab[i]`` as ``pretty`` shows it, looked up only for the ids a figure draws."""

    def __init__(self, vocab, pretty) -> None:
        self.vocab, self.pretty = vocab, pretty

    def __getitem__(self, i: int) -> str:
        return self.pretty(self.vocab[i])


# ---- inputs: the tiny GPT --------------------------------------------------------------------------------------

def _inputs(model: GPTModel, errors=st) -> tuple[tuple[int, ...], int, int, RuleKey, int] | None:
    """Prompt ids, new tokens, γ, rule and seed; None after a message in ``errors`` (unknown words, empty
    prompt …; a slot outside the folded settings)."""
    c = st.columns([3, 1, 1])
    text = c[0].text_input(t("speculative.prompt"), value=DEFAULT_PROMPT, key="sd_prompt", bind="query-params",
                           max_chars=400, help=t("speculative.prompt_help"))
    urlstate.int_param("sd_new", DEFAULT_NEW, 1, SPECULATIVE_MAX_STEP_TOKENS)   # not bind: it raises on ?sd_new=inf
    urlstate.int_param("sd_gamma", DEFAULT_GAMMA, 1, SPECULATIVE_MAX_GAMMA)
    new = c[1].number_input(t("speculative.new_tokens"), 1, SPECULATIVE_MAX_STEP_TOKENS, key="sd_new",
                            on_change=urlstate.sync, args=("sd_new", DEFAULT_NEW),
                            help=t("speculative.new_tokens_help", cap=SPECULATIVE_MAX_STEP_TOKENS))
    gamma = c[2].number_input(t("speculative.gamma"), 1, SPECULATIVE_MAX_GAMMA, key="sd_gamma",
                              on_change=urlstate.sync, args=("sd_gamma", DEFAULT_GAMMA),
                              help=t("speculative.gamma_help", cap=SPECULATIVE_MAX_GAMMA))
    rule, seed = rule_controls("sd")
    with st.expander(t("speculative.vocab_title", n=len(model.vocab))):
        st.markdown(" ".join(f"`{w}`" for w in model.vocab))
    try:
        tokens = prompt_tokens(model, text)
        if not (1 <= int(gamma) <= SPECULATIVE_MAX_GAMMA):
            raise LimitError(t("speculative.bad_gamma", g=gamma, cap=SPECULATIVE_MAX_GAMMA))
        ids = tuple(model.tokenizer.index[w] for w in tokens)
        return ids, int(new), int(gamma), rule_cache_key(rule), seed
    except (LimitError, ValueError) as e:
        errors.error(t("speculative.bad_prompt", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return None


def _picker(model: GPTModel) -> LayerHeadPicker:
    """Layer and head of the verification pass's attention map (?sd_layer=4&sd_head=2)."""
    return LayerHeadPicker("sd", model.n_layers, model.n_heads, ("speculative.layer", "speculative.layer_help",
                                                                 "speculative.head", "speculative.head_help"))


def _download(spec: Speculation, vocab: list[str]) -> None:
    """The run as JSON: the ``speculate`` command's fields and every proposal's p, q, u and verdict."""
    st.download_button(t("speculative.dl_json"), functools.partial(
        lambda: json.dumps(speculation_dict(spec, vocab, detail=True), indent=1)),
        file_name="speculative_run.json", mime="application/json", icon=":material/download:", on_click="ignore")


# ---- exactness ------------------------------------------------------------------------------------

def _exactness(spec: Speculation, ids: tuple[int, ...], rule_key: RuleKey, seed: int, vocab: list[str]) -> None:
    st.header(t("speculative.exact_title"))
    g_spec, g_plain = _greedy_pair(ids, len(spec.tokens), spec.gamma)
    c = st.columns(2)
    for col, tokens, key in ((c[0], g_spec.tokens, "exact_spec"), (c[1], g_plain.tokens, "exact_plain")):
        with col:
            sequences.show(t("speculative." + key, g=spec.gamma), " ".join(vocab[i] for i in tokens))
    if g_spec.tokens == g_plain.tokens:
        st.success(t("speculative.exact_same", n=len(g_plain.tokens), passes=g_spec.target_passes,
                     plain=len(g_plain.tokens) + (g_spec.prefill_len > 0)), icon=":material/check_circle:")
    else:
        first = next(i for i, (a, b) in enumerate(zip(g_spec.tokens, g_plain.tokens)) if a != b)
        st.error(t("speculative.exact_differ", i=first), icon=":material/error:")
    if spec.rule.get("name") == "greedy":
        st.caption(t("speculative.exact_greedy_note"))
        return
    plain = _plain(ids, len(spec.tokens), rule_key, seed)
    st.markdown(t("speculative.exact_sampled", seed=seed))
    c = st.columns(2)
    for col, tokens, key in ((c[0], spec.tokens, "exact_spec_sampled"), (c[1], plain.tokens, "exact_plain_sampled")):
        with col:
            sequences.show(t("speculative." + key), " ".join(vocab[i] for i in tokens))
    st.info(t("speculative.exact_distribution", test=CHI_SQUARE_TEST), icon=":material/science:")


# ---- inputs: SmolLM2 ----------------------------------------------------------------------------

def _case_changed() -> None:
    """A new case brings its own text (the address drops the text: it is the case's again)."""
    st.session_state["sd_text"] = PRESETS[st.session_state.get("sd_case", DEFAULT_CASE)]
    st.query_params.pop("sd_text", None)
    urlstate.sync("sd_case", DEFAULT_CASE)


def _self_inputs(model: RealLM, method: str, errors=st) -> RunKey | None:
    urlstate.choice_param("sd_case", CASES, DEFAULT_CASE)
    case = st.session_state["sd_case"]
    urlstate.text_param("sd_text", PRESETS[case], model.limits.max_prompt_chars)
    cap = min(SMOLLM2_MAX_NEW_TOKENS, model.limits.max_new_tokens)
    urlstate.int_param("sd_llm_new", LLM_DEFAULT_NEW, 1, cap)
    c = st.columns([1.7, 1, 1, 1], vertical_alignment="bottom")
    c[0].segmented_control(t("specllm.case"), CASES, required=True, format_func=lambda x: t(f"specllm.case_{x}"),
                           key="sd_case", on_change=_case_changed, help=t("specllm.case_help"), width="stretch")
    new = c[1].number_input(t("specllm.new_tokens"), 1, cap, key="sd_llm_new", on_change=urlstate.sync,
                            args=("sd_llm_new", LLM_DEFAULT_NEW), help=t("specllm.new_tokens_help", cap=cap))
    if method == "prompt-lookup":
        urlstate.int_param("sd_k", DEFAULT_K, 1, PROMPT_LOOKUP_MAX_TOKENS)
        urlstate.int_param("sd_ngram", DEFAULT_NGRAM, 1, PROMPT_LOOKUP_MAX_NGRAM)
        k = c[2].number_input(t("specllm.k"), 1, PROMPT_LOOKUP_MAX_TOKENS, key="sd_k", on_change=urlstate.sync,
                              args=("sd_k", DEFAULT_K), help=t("specllm.k_help", cap=PROMPT_LOOKUP_MAX_TOKENS))
        extra = c[3].number_input(t("specllm.ngram"), 1, PROMPT_LOOKUP_MAX_NGRAM, key="sd_ngram",
                                  on_change=urlstate.sync, args=("sd_ngram", DEFAULT_NGRAM),
                                  help=t("specllm.ngram_help", cap=PROMPT_LOOKUP_MAX_NGRAM))
    else:
        top, exit_default = model.n_layers - 1, speculative_real.default_exit(model)
        urlstate.int_param("sd_ee_k", DEFAULT_EE_K, 1, EARLY_EXIT_MAX_TOKENS)
        urlstate.int_param("sd_exit", exit_default, 1, top)
        if st.session_state["sd_exit"] > top:        # another model's exit layer, past this one's layers
            st.session_state["sd_exit"] = exit_default
        k = c[2].number_input(t("specllm.ee_k"), 1, EARLY_EXIT_MAX_TOKENS, key="sd_ee_k", on_change=urlstate.sync,
                              args=("sd_ee_k", DEFAULT_EE_K), help=t("specllm.ee_k_help", cap=EARLY_EXIT_MAX_TOKENS))
        extra = c[3].number_input(t("specllm.exit"), 1, top, key="sd_exit", on_change=urlstate.sync,
                                  args=("sd_exit", exit_default), help=t("specllm.exit_help", top=top,
                                                                         layers=model.n_layers))
    label = t("specllm.text") if speculative_real.chat(model) else t("specllm.text_plain", title=model.SPEC.title)
    text = st.text_area(label, key="sd_text", height=110, max_chars=model.limits.max_prompt_chars,
                        on_change=urlstate.sync, args=("sd_text", PRESETS[case]),
                        help=nav.term_help("tokenizer", t("specllm.text_help", cap=model.limits.max_prompt_tokens)))
    try:
        tokens = _prompt(model, text or "")
    except LimitError as e:
        errors.error(t("specllm.bad_text", reason=str(e)), icon=":material/error:")
        return None
    return (tuple(model.ids(tokens)), method, int(new), int(k), int(extra)) + speculative_real.named(model.SPEC.name)


def _prompt(model: RealLM, text: str) -> list[str]:
    """The message inside the chat template (a base model: the plain text), or a LimitError in the
    page's language."""
    if not text.strip():
        raise LimitError(t("llm.empty"))
    if len(text) > model.limits.max_prompt_chars:
        raise LimitError(t("llm.too_long", cap=model.limits.max_prompt_chars))
    chat = speculative_real.chat(model)
    n = len(model.chat(text)[0] if chat else model.prompt(text, chat=False))
    if n > model.limits.max_prompt_tokens:
        raise LimitError(t("llm.too_many", n=n, cap=model.limits.max_prompt_tokens))
    return model.prompt(text, chat=chat)


# ---- SmolLM2's whole run: exactness, both kinds of prompt, the speed-up ----------------------------

def _self_summary(run: Speculation) -> None:
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


def _self_exactness(run: Speculation, model: RealLM) -> None:
    st.header(t("specllm.exact_title"))
    greedy = list(self_drafted_greedy(tuple(run.prompt), run.max_new_tokens, model.SPEC.name))
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


def _both_cases(run: Speculation, key: RunKey, model: RealLM) -> None:
    """The acceptance rate of this method on both cases' own texts (same settings)."""
    st.header(t("specllm.cases_title"))
    _, method, new, k, extra = key[:5]
    rows, table = [], []
    for case in CASES:
        ids = tuple(model.ids(model.prompt(PRESETS[case], chat=speculative_real.chat(model))))
        tail = speculative_real.named(model.SPEC.name)
        other = run if ids == key[0] else self_drafted_run((ids, method, new, k, extra) + tail)
        rows.append((t(f"specllm.case_{case}"), method, other.accepted_fraction))
        table.append({t("specllm.col_case"): t(f"specllm.case_{case}"), t("specllm.col_proposed"): other.proposed,
                      t("specllm.col_accepted"): other.accepted,
                      t("specllm.col_rate"): other.accepted_fraction,
                      t("specllm.col_per_pass"): other.tokens_per_target_pass,
                      t("specllm.col_passes"): other.target_passes, t("specllm.col_tokens"): len(other.tokens)})
    title = t("specllm.cases_chart", method=t("specllm.w_" + method.replace("-", "_")))
    chart(go.Figure(acceptance_spec(rows, title, frames_speculative.fig_labels(t, method))), t("specllm.cases_alt"),
          key="specllm_cases")
    df = pd.DataFrame(table)
    st.dataframe(df.style.format({t("specllm.col_rate"): lambda v: "—" if v is None or v != v else fmt.percent(v, 1),
                                  t("specllm.col_per_pass"): lambda v: fmt.fixed(v, 2)}),
                 hide_index=True, width="stretch")
    st.download_button(t("specllm.dl_cases"), df.to_csv(index=False), file_name=f"acceptance_{method}.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")
    st.markdown(t("specllm.cases_body_" + method.replace("-", "_"), model=speculative_speed.short_name(model)))


def _self_download(run: Speculation, model: RealLM, same: bool | None) -> None:
    body = functools.partial(lambda: json.dumps({"model": model.name, "draft": run.source,
                                                 **prompt_lookup_dict(run, model.vocab),
                                                 "text": model.decode(run.tokens), "same_as_greedy": same},
                                                indent=1))
    stem = speculative_speed.file_stem(model)
    st.download_button(t("specllm.dl_json"), body, file_name=f"speculative_{stem}_{run.source}.json",
                       mime="application/json", icon=":material/download:", on_click="ignore")




# ---- the page ------------------------------------------------------------------------------------

def _draft_changed() -> None:
    """Another model or draft: another run, from its first step."""
    st.session_state[step_view.STEP_KEY] = 0
    st.query_params.pop(step_view.STEP_KEY, None)
    urlstate.sync("sd_draft", DRAFTS[0])


def _draft_choice() -> str:
    """?sd_draft=: the tiny GPT with its draft model (default) or SmolLM2 without one (drawn with the
    settings: folded away in presenter mode)."""
    return st.segmented_control(t("speculative.draft_kind"), DRAFTS, required=True,
                                format_func=lambda d: t("speculative.draft_" + d.replace("-", "_")), key="sd_draft",
                                on_change=_draft_changed, help=t("speculative.draft_kind_help"))


@contextmanager
def _settings() -> Iterator[DeltaGenerator]:
    """The step first: the draft's choice in sight and the run's settings folded; in
    presenter mode both folded together. Yields the slot for the settings' messages, outside the fold."""
    if presenter.presenting():
        errors = st.container()
        with presenter.settings():
            _draft_choice()
            yield errors
        return
    _draft_choice()
    errors = st.container()
    with nav.folded_settings():
        yield errors


def _round_as_step(n_rounds: int) -> None:
    """The old address of a SmolLM2 round, ``?sd_round=3``, opens its step (``?step=2``) on a new
    session; the address then says ``step`` (the stepper keeps it)."""
    raw = st.query_params.get("sd_round")
    if raw is None:
        return
    st.query_params.pop("sd_round", None)
    if step_view.STEP_KEY in st.query_params or step_view.STEP_KEY in st.session_state:
        return
    try:
        r = int(raw)
    except ValueError:
        urlstate.notice(t("url.bad_value", name="sd_round", raw=raw[:40], low=fmt.integer(1),
                          high=fmt.integer(n_rounds), default=fmt.integer(1)))
        return
    r = min(max(r, 1), n_rounds)               # a shorter run than the address's: its last round
    if r > 1:
        st.query_params[step_view.STEP_KEY] = str(r - 1)


def _stepper(key: tuple, frames: step_view.Frames, n_events: int, picker: LayerHeadPicker | None) -> None:
    nav.hidden_heading(t("stepper.section"))
    step_view.url_step_notice(n_events)
    step_view.page_stepper("speculative.step", frames, n_events, key="kvs_speculative", run_id=repr(key),
                           picker=picker)


def _tiny_gpt() -> None:
    """The tiny GPT with its draft model: every round's events, the summary, the exactness check."""
    target, draft = _pair()
    model = target
    tc, dc = target.model.config, draft.model.config
    presenter.intro(t("speculative.intro", tl=tc.n_layer, th=tc.n_head, td=tc.n_embd, tp=target.model.n_params(),
                      dl=dc.n_layer, dh=dc.n_head, dd=dc.n_embd, dp=draft.model.n_params()))
    if not draft.tiny.trained:
        st.warning(t("speculative.draft_random", seed=draft.tiny.meta.get("fallback_seed", 0)),
                   icon=":material/casino:")
    if not target.tiny.trained:
        st.warning(t("speculative.target_random", seed=target.tiny.meta.get("fallback_seed", 0)),
                   icon=":material/casino:")
    with _settings() as errors:
        got = _inputs(model, errors)
    if got is None:
        return
    ids, new, gamma, rule_key, seed = got
    try:
        spec = _speculation(ids, new, gamma, rule_key, seed)
    except (LimitError, ValueError) as e:
        st.error(t("speculative.bad_prompt", reason=str(e), example=DEFAULT_PROMPT), icon=":material/error:")
        return
    key = (ids, new, gamma, rule_key, seed)
    _stepper(key, functools.partial(_payload, *key), len(frames_speculative.plan(spec)), _picker(model))
    vocab = list(target.tokenizer.vocab)
    _download(spec, vocab)
    if not step_view.whole_page():
        return
    speculative_speed.summary(spec, ids, rule_key, _pair())
    _exactness(spec, ids, rule_key, seed, vocab)
    with st.expander(t("speculative.more_title")):
        st.markdown(t("speculative.more_body"))


def _self_drafted(method: str) -> None:
    """A real model drafting for itself (``method`` "prompt-lookup" or "early-exit"): its rounds, the
    whole run, both kinds of prompt, the speed-up. SmolLM2 by default, any real model the server
    loads (``?sd_model=gemma3``) through the same calls."""
    with presenter.settings():
        name = speculative_real.model_choice()
    title = models.spec(name).title
    try:
        model = models.real_model(name)
    except ModelUnavailable as e:
        presenter.intro(t("specllm.intro_short", title=title))
        _draft_choice()
        models.missing(name, e, "specllm.missing")
        return
    presenter.intro(t("specllm.intro_" + method.replace("-", "_"), layers=model.n_layers, title=title,
                      model=speculative_speed.short_name(model)))
    with _settings() as errors:
        key = _self_inputs(model, method, errors)
    if key is None:
        return
    try:
        with st.spinner(t("specllm.running", n=key[2], model=speculative_speed.short_name(model))):
            run = self_drafted_run(key)
    except (LimitError, ValueError) as e:
        st.error(t("specllm.bad_text", reason=str(e)), icon=":material/error:")
        return
    if not presenter.presenting():
        st.header(t("specllm.round_title"))
    _round_as_step(len(run.rounds))
    _stepper(key, functools.partial(lambda k, _layer, _head, lang: _self_payload(k, lang), key),
             len(frames_speculative.plan(run)), None)
    if presenter.presenting() or not step_view.whole_page():
        return
    st.header(t("specllm.summary_title"))
    _self_summary(run)
    _self_exactness(run, model)
    _self_download(run, model, run.tokens == list(self_drafted_greedy(tuple(run.prompt), run.max_new_tokens,
                                                                      model.SPEC.name)))
    _both_cases(run, key, model)
    _, method, _, k, extra = key[:5]  # the other method's settings: the session's, or their defaults
    speculative_speed.self_drafted(
        model, method, tuple((case, tuple(model.ids(model.prompt(PRESETS[case], chat=speculative_real.chat(model)))))
                             for case in CASES),
        k if method == "prompt-lookup" else st.session_state.get("sd_k", DEFAULT_K),
        extra if method == "prompt-lookup" else st.session_state.get("sd_ngram", DEFAULT_NGRAM),
        k if method == "early-exit" else st.session_state.get("sd_ee_k", DEFAULT_EE_K),
        extra if method == "early-exit" else min(st.session_state.get("sd_exit", speculative_real.default_exit(model)),
                                                  model.n_layers - 1))
    if method == "early-exit":
        st.info(t("specllm.ee_slower"), icon=":material/speed:")


def render() -> None:
    lecture.title("speculative", t("speculative.title"))    # with its place where the script shows no step
    urlstate.choice_param("sd_draft", DRAFTS, DRAFTS[0])
    if st.session_state["sd_draft"] == "model":
        _tiny_gpt()
    else:
        _self_drafted(st.session_state["sd_draft"])
