"""The stepping pages' trace download (the per-step cache CSV is built in the browser by the stepper)."""
from __future__ import annotations

import functools
import json

import streamlit as st

from kvviz.decoding.stepper import Run
from kvviz.decoding.trace import run_dict
from kvviz.ui.app.i18n import t


def _trace_json(run: Run, logit_tokens: list[str]) -> str:
    return json.dumps(run_dict(run, logit_tokens), indent=1)


def trace_button(run: Run, logit_tokens: list[str], stem: str) -> None:
    """The whole run as JSON (the same data as ``python -m kvviz trace``), built only when clicked."""
    st.download_button(t("stepper.dl_trace"), functools.partial(_trace_json, run, list(logit_tokens)),
                       file_name=f"{stem}_trace.json", mime="application/json",
                       icon=":material/download:", on_click="ignore")
