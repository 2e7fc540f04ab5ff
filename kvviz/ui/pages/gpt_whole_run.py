"""The Tiny GPT page's whole-run view (kvviz.decoding.whole_run): the page's own run, its attention as
one matrix that gains a row per decode pass, for the layer and head of the page's picker
(?gpt_layer=&gpt_head=), the passes shown in ?gpt_passes=. Called by one line of kvviz/ui/pages/gpt.py."""
from __future__ import annotations

import streamlit as st

from kvviz.decoding.stepper import Run
from kvviz.decoding.whole_run import WholeRun, whole_run
from kvviz.models.gpt import GPTModel
from kvviz.ui.app import presenter
from kvviz.ui.app.i18n import t
from kvviz.ui.pages.llm_loop import whole_run_view


@st.cache_resource(max_entries=32, ttl=3600, show_spinner=False)
def _whole(key: tuple, _run: Run, _model: GPTModel, layer: int, head: int) -> WholeRun:
    """``key`` names the run (not hashed)."""
    return whole_run(_run, layer, head, _model)


def warm(run: Run, model: GPTModel, key: tuple) -> None:
    """The default view (layer 1, head 1), made by the server's warm-up."""
    _whole(key, run, model, 0, 0)


def section(run: Run, model: GPTModel, key: tuple) -> None:
    st.header(t("loop.whole_title"))
    presenter.intro(t("loop.whole_intro_gpt", n=sum(1 for e in run.events if e.record is not None)),
                    "present.intro_section")
    layer = st.session_state.get("gpt_layer", 1) - 1
    head = st.session_state.get("gpt_head", 1) - 1
    st.caption(t("loop.whole_picker", layer=layer + 1, head=head + 1))
    w = _whole(key, run, model, layer, head)
    whole_run_view(w, "gpt", list(w.tokens), "tiny_gpt_whole_run.csv")
