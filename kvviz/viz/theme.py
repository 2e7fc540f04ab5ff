"""The one visual language of every figure kvviz draws (no streamlit, no torch, no plotly import).

Colours are roles, written down in docs/colours.md: prompt blue, generated green, the chosen token
orange (only once a choose step has picked it: its bar, then its dashed chip until a pass writes it),
vermillion for what a page points to (``focus``: an outlined row, a stale key, a rejection), grey for
masked, removed and free only, a neutral sky blue for bars without a role; a colour-blind-safe
sequential scale for attention with no grey in it (``ATTENTION_SCALE``, ColorBrewer YlGnBu: pale
yellow-green for small weights, dark blue for large ones) and the Okabe-Ito palette for series. One
font size; one layout (title, height, margins, tick fonts) as plain plotly JSON (``layout``) or
applied to a ``go.Figure`` (``style``); the default words drawn inside figures, which pages replace
with their translation (``words``).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:                 # plain data only: the home page imports WORDS without plotly or torch
    import plotly.graph_objects as go

# ColorBrewer YlGnBu from its second class on (its first, #FFFFD9, is nearly the blank of a masked
# cell): every stop and every blend between two of them is clearly tinted, so no weight reads as
# the grey of "masked" or "free"; lightness falls monotonically, so it reads in grey-scale and for
# every colour-vision deficiency (cividis, before, had a grey middle: 0.4-0.5 looked masked).
ATTENTION_SCALE = [[0.0, "#EDF8B1"], [0.143, "#C7E9B4"], [0.286, "#7FCDBB"], [0.429, "#41B6C4"],
                   [0.571, "#1D91C0"], [0.714, "#225EA8"], [0.857, "#253494"], [1.0, "#081D58"]]
# Okabe-Ito roles (docs/colours.md). "choice" is the chosen token's role: the same orange as its
# pending chip, and drawn only on a choose event (a prefill or decode pass has chosen nothing yet).
# "focus" is vermillion, what a page points to (outlines, rejections, highlighted lines).
COLORS = {
    "prompt": "#0072B2",      # blue: prompt tokens, prefill passes, prompt slots
    "processed": "#009E73",   # green: generated tokens already in the cache, decode passes
    "generated": "#009E73",
    "pending": "#E69F00",     # orange: the chosen token, not in the cache yet (dashed chip)
    "choice": "#E69F00",      # orange: the chosen token's bar, on its choose event only
    "prefill": "#0072B2",
    "decode": "#009E73",
    "waiting": "#CC79A7",     # reddish purple: a request queued, nothing of it computed yet
    "removed": "#BBBBBB",     # grey: masked, removed, free; nothing else
    "bar": "#56B4E9",         # sky blue: bars without a role
    "focus": "#D55E00",       # vermillion: what the page points to
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


def plain(text: str) -> str:
    """A visitor's text as plotly shows it literally: plotly reads a little HTML in every label
    (``<b>``, ``<br>``, ``<a href>``) and its entities, so ``&``, ``<`` and ``>`` become entities."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def words(defaults: Mapping[str, str], given: Mapping[str, str] | None) -> dict[str, str]:
    """A figure's words: its ``defaults`` (English), with the page's translations ``given`` on top."""
    return {**defaults, **(given or {})}


# plotly shrinks a bar's value that is wider than its bar (to 11.5 px in presenter mode's narrow charts,
# in German's longer numbers): shown at 12 px at least, the smallest chart label kvviz draws
UNIFORM_TEXT = {"minsize": 12, "mode": "show"}


def layout(title: str, height: int, *, ticks: bool = True, top: int = MARGIN["t"], **extra) -> dict:
    """The shared layout as plain JSON (building a figure in one go is several times faster than
    ``update_layout`` calls). ``ticks``: the x and y axes get the shared tick font, with ``xaxis`` /
    ``yaxis`` of ``extra`` on top of it; without, every key of ``extra`` is taken as given (axes left
    to plotly unless given). ``top``: the top margin. ``extra``: further layout keys, in order."""
    out: dict = {"title": {"text": title, "font": dict(TITLE_FONT)}, "height": height,
                 "margin": {**MARGIN, "t": top}, "font": dict(FONT), "uniformtext": dict(UNIFORM_TEXT)}
    if ticks:
        out["xaxis"] = {"tickfont": dict(FONT), **(extra.pop("xaxis", None) or {})}
        out["yaxis"] = {"tickfont": dict(FONT), **(extra.pop("yaxis", None) or {})}
    out.update(extra)
    return out


def style(fig: go.Figure, title: str, height: int) -> go.Figure:
    """``layout``'s look applied to a figure built with ``go``; returns it."""
    fig.update_layout(title=dict(text=title, font=dict(TITLE_FONT)), height=height, margin=dict(MARGIN), font=FONT,
                      uniformtext=UNIFORM_TEXT)
    fig.update_xaxes(tickfont=FONT)
    fig.update_yaxes(tickfont=FONT)
    return fig
