"""The one visual language of every figure kvviz draws (no streamlit, no torch, no plotly import).

A colour-blind-safe sequential scale for attention (cividis), fixed colours for prompt / processed /
pending tokens and for prefill / decode rows, and the Okabe-Ito palette for series; one font size;
one layout (title, height, margins, tick fonts) as plain plotly JSON (``layout``) or applied to a
``go.Figure`` (``style``); the default words drawn inside figures, which pages replace with their
translation (``words``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:                 # plain data only: the home page imports WORDS without plotly or torch
    import plotly.graph_objects as go

ATTENTION_SCALE = "Cividis"
COLORS = {
    "prompt": "#0072B2",      # blue
    "processed": "#009E73",   # green
    "pending": "#E69F00",     # orange
    "prefill": "#0072B2",
    "decode": "#009E73",
    "removed": "#BBBBBB",
    "bar": "#56B4E9",
    "chosen": "#D55E00",      # vermillion
}
# Okabe-Ito without black (yellow last: it is faint on white), for series that are neither
# prompt/processed/pending: requests in the block pool, lines of the cost charts
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442")
FONT = dict(size=16)
TITLE_FONT = {"size": 18}
MARGIN = {"l": 10, "r": 10, "t": 50, "b": 10}
# a legend in one row above the plot, flush right (below the title)
LEGEND_ABOVE = dict(orientation="h", y=1.02, yanchor="bottom", x=1, xanchor="right", font=FONT)

# Words drawn inside the stepper's figures; pages pass their translation (kvviz.ui.components.charts.figure_words).
WORDS = {"query": "query", "key": "key", "weight": "weight", "logit": "logit",
         "query_axis": "query (new position)", "key_axis": "key (cached position)"}


def words(defaults: Mapping[str, str], given: Mapping[str, str] | None) -> dict[str, str]:
    """A figure's words: its ``defaults`` (English), with the page's translations ``given`` on top."""
    return {**defaults, **(given or {})}


def layout(title: str, height: int, *, ticks: bool = True, top: int = MARGIN["t"], **extra) -> dict:
    """The shared layout as plain JSON (building a figure in one go is several times faster than
    ``update_layout`` calls). ``ticks``: the x and y axes get the shared tick font, with ``xaxis`` /
    ``yaxis`` of ``extra`` on top of it; without, every key of ``extra`` is taken as given (axes left
    to plotly unless given). ``top``: the top margin. ``extra``: further layout keys, in order."""
    out: dict = {"title": {"text": title, "font": dict(TITLE_FONT)}, "height": height,
                 "margin": {**MARGIN, "t": top}, "font": dict(FONT)}
    if ticks:
        out["xaxis"] = {"tickfont": dict(FONT), **(extra.pop("xaxis", None) or {})}
        out["yaxis"] = {"tickfont": dict(FONT), **(extra.pop("yaxis", None) or {})}
    out.update(extra)
    return out


def style(fig: go.Figure, title: str, height: int) -> go.Figure:
    """``layout``'s look applied to a figure built with ``go``; returns it."""
    fig.update_layout(title=dict(text=title, font=dict(TITLE_FONT)), height=height, margin=dict(MARGIN), font=FONT)
    fig.update_xaxes(tickfont=FONT)
    fig.update_yaxes(tickfont=FONT)
    return fig
