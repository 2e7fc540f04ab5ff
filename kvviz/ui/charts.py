"""Draw every plotly figure the same way, with a download button in the chart's toolbar.

The format of that download (PNG for slides, SVG for print) is one sidebar setting for the whole
app; plotly's own export does the work in the browser, so the server renders no images.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import streamlit as st

from kvviz.ui.i18n import t

if TYPE_CHECKING:
    import plotly.graph_objects as go

FORMATS = {"png": "PNG", "svg": "SVG"}
KEY = "chart_format"


def figure_words() -> dict[str, str]:
    """The words figure builders draw (kvviz.figures.WORDS), in the current language."""
    from kvviz.figures import WORDS     # here, not at the top: the home page must not import torch
    return {k: t(f"charts.{k}") for k in WORDS}


def table_headers(columns: list[str]) -> dict[str, str]:
    """Display names for engine table columns (position, token, event, phase, value, k …, v …)."""
    out = {}
    for c in columns:
        base = str(c).split(" ", 1)[0]
        if base in ("position", "token", "event", "phase", "value"):
            out[c] = t(f"charts.col_{base}") + str(c)[len(base):]
    return out


def format_picker() -> None:
    """Sidebar control: the format of every chart's download button."""
    st.segmented_control(t("charts.format"), list(FORMATS), format_func=FORMATS.get, key=KEY,
                         default="png", required=True, help=t("charts.format_help"))


def chart(fig: "go.Figure", alt: str, key: str | None = None) -> None:
    """``st.plotly_chart`` at full width with an accessible label and the chosen export format."""
    fmt = st.session_state.get(KEY) or "png"
    name = re.sub(r"[^a-z0-9]+", "_", alt.lower()).strip("_")[:60] or "kvviz_chart"
    st.plotly_chart(fig, width="stretch", alt=alt, key=key, config={
        "displaylogo": False,
        "toImageButtonOptions": {"format": fmt, "filename": f"kvviz_{name}", "scale": 2},
    })
