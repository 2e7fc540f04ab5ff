"""The Tiny GPT page's long runs (kvviz.decoding.long_runs): greedy's loop pointed out where it happens,
with what sampling does to it, and a run past ``block_size`` that shows the uncached loop's crop and
the cached loop's stop. Called by kvviz/ui/pages/gpt.py below its timing."""
from __future__ import annotations

import streamlit as st

from kvviz.decoding.long_runs import CROP_PAST, LOOP_TOKENS, CropRun, Repeat, crop_run, repeated_span
from kvviz.decoding.loops import Generation, generate_cached, max_cached_new_tokens
from kvviz.decoding.sampling import Greedy, Sampler
from kvviz.limits import LimitError
from kvviz.models.gpt import GPTModel, TinyGPT
from kvviz.ui.app import fmt
from kvviz.ui.app.i18n import t
from kvviz.ui.app.turns import my_turn
from kvviz.ui.components import step_view
from kvviz.ui.components.rule_controls import RuleKey, rule_from_key
from kvviz.ui.frames.long_runs import crop_table, loop_table, marked_text

SAMPLE_TAU = 1.0           # the loop's counterpart: plain sampling from the model's distribution
CROP = "gpt_crop"          # the server lock of the run past block_size (tens of seconds on a busy CPU)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def _loop_runs(_tiny: TinyGPT, ids: tuple[int, ...], seed: int) -> tuple[Generation, Generation]:
    """Greedy and sampling (τ = 1, ``seed``), LOOP_TOKENS each, with the cache (the same tokens as without)."""
    lm = GPTModel(_tiny)
    n = min(LOOP_TOKENS, max_cached_new_tokens(lm, len(ids)))
    return (generate_cached(lm, list(ids), n, Greedy(), seed, keep_logits=False),
            generate_cached(lm, list(ids), n, Sampler(SAMPLE_TAU), seed, keep_logits=False))


@st.cache_resource(max_entries=8, ttl=3600, show_spinner=False)
def _crop(_tiny: TinyGPT, ids: tuple[int, ...], rule_key: RuleKey, seed: int) -> CropRun:
    return crop_run(_tiny.model, list(ids), rule_from_key(rule_key), seed)


def warm(tiny: TinyGPT, ids: tuple[int, ...], seed: int) -> None:
    """What the default visit computes here (the crop waits for its button)."""
    _loop_runs(tiny, ids, seed)


def loop_section(tiny: TinyGPT, model: GPTModel, ids: tuple[int, ...], seed: int) -> None:
    st.header(t("lesson.loop_title"))
    if max_cached_new_tokens(GPTModel(tiny), len(ids)) < LOOP_TOKENS:
        st.info(t("lesson.loop_no_room", n=LOOP_TOKENS, block=model.config.block_size), icon=":material/info:")
        return
    greedy, sampled = _loop_runs(tiny, ids, seed)
    words = {k: [model.vocab[i] for i in g.tokens] for k, g in (("greedy", greedy), ("sampled", sampled))}
    found: dict[str, Repeat | None] = {k: repeated_span(w) for k, w in words.items()}
    st.markdown(t("lesson.loop_intro", n=len(greedy.tokens)))
    split = next((i for i, (a, b) in enumerate(zip(words["greedy"], words["sampled"])) if a != b), None)
    rep = found["greedy"]
    if rep is not None:
        step_view.notice(t("notice.gpt_loop", span=" ".join(map(str, rep.span)), count=rep.count,
                           share=fmt.percent(rep.covered / len(words["greedy"]))))
    labels = {"greedy": t("lesson.loop_greedy"),
              "sampled": t("lesson.loop_sampled", tau=fmt.sig(SAMPLE_TAU), seed=seed)}
    for k in ("greedy", "sampled"):
        st.markdown(f"**{labels[k]}:** " + t("lesson.quoted", text=marked_text(words[k], found[k])))
        who = t(f"lesson.loop_who_{k}")
        rep = found[k]
        if rep is None:
            st.caption(t("lesson.loop_none", who=who))
        else:
            st.caption(t("lesson.loop_found", who=who, span=" ".join(map(str, rep.span)), count=rep.count,
                         covered=rep.covered, n=len(words[k]), share=fmt.percent(rep.covered / len(words[k]))))
    if split is not None:
        st.markdown(t("lesson.loop_why", step=split + 1, word=words["sampled"][split],
                      greedy_word=words["greedy"][split]))
    table = loop_table({labels[k]: (words[k], found[k]) for k in words}, t)
    st.download_button(t("lesson.loop_csv"), table.to_csv(index=False), file_name="tiny_gpt_greedy_loop.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore")


def crop_section(tiny: TinyGPT, model: GPTModel, ids: tuple[int, ...], rule_key: RuleKey, seed: int) -> None:
    st.header(t("lesson.crop_title"))
    block = model.config.block_size
    limit = max_cached_new_tokens(GPTModel(tiny), len(ids))
    if limit < 1:
        st.info(t("lesson.crop_no_room", block=block), icon=":material/info:")
        return
    total = limit + CROP_PAST
    st.markdown(t("lesson.crop_intro", block=block, total=total, past=CROP_PAST))
    key = (ids, rule_key, seed)
    if st.button(t("lesson.crop_run"), icon=":material/skip_next:", help=t("lesson.crop_run_help", total=total)):
        with my_turn(CROP, t("lesson.crop_busy")) as mine:
            if mine:
                with st.spinner(t("lesson.crop_running", total=total)):
                    try:
                        st.session_state["gpt_crop"] = (key, _crop(tiny, ids, rule_key, seed))
                    except LimitError as e:
                        st.error(str(e))
    stored = st.session_state.get("gpt_crop")
    if stored is None or stored[0] != key:
        st.info(t("lesson.crop_none"), icon=":material/skip_next:")
        return
    run: CropRun = stored[1]
    words = [model.vocab[i] for i in run.prompt + run.uncached.tokens]
    p, n = len(run.prompt), len(run.cached.tokens)
    if run.first_cropped is not None:
        step_view.notice(t("notice.gpt_crop", first=run.first_cropped + 1, block=block, n=n))
    st.markdown(t("lesson.crop_cached", n=n, block=block, p=p, total=total))
    st.caption(f"`LimitError: {run.stop_reason}`")
    first = run.first_cropped
    last = run.windows[-1]
    st.markdown(t("lesson.crop_uncached", total=total, first=(first or 0) + 1, block=block, dropped=last.dropped,
                  tokens=" ".join(words[:last.dropped])))
    st.markdown(t("lesson.crop_same" if run.same_tokens else "lesson.crop_differ", n=n))
    st.markdown(f"**{t('lesson.crop_table_title')}**")
    st.dataframe(crop_table(run, words, t, last=CROP_PAST + 3), hide_index=True, width="stretch")
    st.download_button(t("lesson.crop_csv"), crop_table(run, words, t).to_csv(index=False),
                       file_name="tiny_gpt_crop.csv", mime="text/csv", icon=":material/download:", on_click="ignore")
