"""The Sampling page's long tail (kvviz.decoding.tail): SmolLM2's next-token distribution after a
context where the model is sure and after an open one, seen through a fixed top-k and top-p, with
seeded draws that show how often the tail comes up. Called by kvviz/ui/pages/sampling.py."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from kvviz.decoding.tail import JUNK, Tail, next_token_logits, tail_draws, tail_of
from kvviz.limits import TAIL_DRAWS, TAIL_MAX_K, LimitError
from kvviz.models.smollm2 import ModelUnavailable
from kvviz.ui.app import fmt, presenter, urlstate
from kvviz.ui.app.i18n import t

# the one import of the UI's model loader here (being moved to kvviz/ui/app/models.py: switch it here)
from kvviz.ui.app.models import loaded_model
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.viz.tail import cumulative_chart

CONTEXTS = {"sure": "The capital of France is", "open": "Once upon a time, there was a"}
DEFAULT_K, DEFAULT_P = 50, 0.9      # transformers' default top-k; a common top-p
SHOWN = 8                           # tokens listed per context
CSV_ROWS = 1_000                    # tokens per context in the download


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _logits(text: str):
    """SmolLM2's next-token logits after ``text`` (no chat template): one pass, cached per text."""
    model = loaded_model()
    return next_token_logits(model, model.prompt(text, False))


def warm() -> None:
    """The default contexts' distributions (skipped when SmolLM2 is not installed or not prepared)."""
    try:
        for text in CONTEXTS.values():
            _logits(text)
    except (ModelUnavailable, LimitError):
        pass


def _shown(model, token_id: int) -> str:
    """A token as text, a leading space shown as ␣ (SmolLM2's tokens carry their space)."""
    text = model.decode([token_id])
    return text.replace(" ", "␣") if text.strip() else repr(text)


def _context_block(model, kind: str, text: str, tail: Tail, seed: int) -> None:
    st.markdown(f"**{t(f'lesson.tail_{kind}')}** " + t("lesson.quoted", text=text))
    rows = [{t("lesson.col_rank"): r + 1, t("lesson.col_token"): _shown(model, int(i)),
             t("lesson.col_p"): fmt.percent(float(tail.probs[i]), 1),
             t("lesson.col_cum"): fmt.percent(tail.mass(r + 1), 1)}
            for r, i in enumerate(tail.order[:SHOWN].tolist())]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    lines = [t("lesson.tail_k", k=tail.k, kept=tail.top_k_size, cut=fmt.percent(tail.mass_beyond_k, 1))]
    if tail.junk_in_k:
        lines.append(t("lesson.tail_junk", n=tail.junk_in_k, under=fmt.percent(JUNK)))
    lines.append(t("lesson.tail_p", p=fmt.sig(tail.p), n=tail.top_p_size))
    lines.append(t("lesson.tail_rest", n=tail.tail_size, vocab=tail.vocab, mass=fmt.percent(tail.mass_beyond_p, 1)))
    d = tail_draws(tail, TAIL_DRAWS, seed)
    lines.append(t("lesson.tail_draws", n=d.n, seed=seed, out=d.outside_p, share=fmt.percent(d.outside_p / d.n, 1),
                   out_k=d.outside_k))
    if d.first_tail is not None:
        i, tok = d.first_tail
        prob = float(tail.probs[tok])
        lines.append(t("lesson.tail_first", i=i + 1, text=text + model.decode([tok]), rank=tail.rank(tok),
                       p=fmt.sci(prob, 1) if prob < 1e-3 else fmt.percent(prob, 2)))
    st.markdown("\n".join(f"- {line}" for line in lines))


def section(seed: int) -> None:
    """The section: two contexts (editable, in the address), k and p, the distributions, the chart, a CSV."""
    st.header(t("lesson.tail_title"))
    presenter.intro(t("lesson.tail_intro"), "present.intro_section")      # folded in presenter mode, as the inputs
    urlstate.int_param("sampling_tail_k", DEFAULT_K, 1, TAIL_MAX_K)
    urlstate.float_param("sampling_tail_p", DEFAULT_P, 0.01, 1.0)
    with presenter.settings():
        c = st.columns([2, 2, 1, 1])
        texts = {kind: c[i].text_input(t(f"lesson.tail_{kind}_input"), default, key=f"sampling_tail_{kind}",
                                       bind="query-params", max_chars=200)
                 for i, (kind, default) in enumerate(CONTEXTS.items())}
        k = c[2].number_input(t("lesson.tail_k_input"), 1, TAIL_MAX_K, key="sampling_tail_k",
                              on_change=urlstate.sync, args=("sampling_tail_k", DEFAULT_K))
        p = c[3].number_input(t("lesson.tail_p_input"), 0.01, 1.0, step=0.05, key="sampling_tail_p",
                              on_change=urlstate.sync, args=("sampling_tail_p", DEFAULT_P))
    try:
        model = loaded_model()
        tails = {kind: tail_of(_logits(text or CONTEXTS[kind]), int(k), float(p)) for kind, text in texts.items()}
    except ModelUnavailable as e:
        st.info(t("lesson.tail_unavailable", reason=str(e)), icon=":material/info:")
        return
    except LimitError as e:
        st.error(str(e), icon=":material/error:")
        return
    sure, open_ = tails["sure"], tails["open"]
    step_view.notice(t("first.sampling_tail", p=fmt.sig(float(p)), k=int(k), sure=sure.top_p_size,
                       open=open_.top_p_size, ks=sure.top_k_size, ko=open_.top_k_size))
    cols = st.columns(2)
    for col, (kind, tail) in zip(cols, tails.items()):
        with col:
            _context_block(model, kind, texts[kind] or CONTEXTS[kind], tail, seed)
    fig = cumulative_chart({t(f"lesson.tail_{kind}"): tail for kind, tail in tails.items()}, {
        "title": t("lesson.tail_chart_title"), "x": t("lesson.tail_chart_x"), "y": t("lesson.tail_chart_y"),
        "hover": t("lesson.tail_chart_hover"), "top_p": t("lesson.tail_chart_top_p", p=fmt.sig(float(p))),
        "k": t("lesson.tail_chart_k", k=int(k))})
    chart(fig, t("lesson.tail_chart_alt"), key="sampling_tail_chart")
    st.markdown(t("lesson.tail_why"))
    rows = [{t("lesson.col_context"): texts[kind] or CONTEXTS[kind], t("lesson.col_rank"): r + 1,
             "token_id": int(i), t("lesson.col_token"): model.decode([int(i)]), "p": float(tail.probs[i]),
             t("lesson.col_cum"): tail.mass(r + 1)}
            for kind, tail in tails.items() for r, i in enumerate(tail.order[:CSV_ROWS].tolist())]
    st.download_button(t("lesson.tail_csv"), pd.DataFrame(rows).to_csv(index=False),
                       file_name="smollm2_next_token_tail.csv", mime="text/csv", icon=":material/download:",
                       on_click="ignore")
