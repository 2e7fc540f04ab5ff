"""Draw every plotly figure the same way, with a download button in the chart's toolbar.

A chart outside the stepper is a small component (``chart_view.js``) that draws with the stepper's
plotly.js and theme (``plotly_js``, ``plotly_view.js``): one library for every chart of the app.

The format of that download (PNG for slides, SVG for print) is one sidebar setting for the whole
app; plotly's own export does the work in the browser, so the server renders no images.

Numbers follow the page's language here too (``kvviz.ui.app.fmt``): plotly's ``separators`` for what
plotly formats itself (hover templates, ticks), and :func:`localize_numbers` for labels the pure
figure builders already wrote as English text ("0.670", "1,000", "12.5×").
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from kvviz.ui.app import fmt
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.components import plotly_js
from kvviz.ui.frames import figure_spec
from kvviz.viz.theme import WORDS  # plain data: the home page imports neither plotly nor torch

if TYPE_CHECKING:
    import plotly.graph_objects as go

FORMATS = {"png": "PNG", "svg": "SVG"}
KEY = "chart_format"
CSS = ".kvc-chart { width: 100%; }"      # the component's own style (the static export uses it too)


def figure_words() -> dict[str, str]:
    """The words figure builders draw (kvviz.viz.theme.WORDS), in the current language."""
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


def _relocalized(value, lang: str):
    """``value`` (a label, or a list / nested list of labels) with English number labels rewritten."""
    if isinstance(value, str):
        return fmt.relocalize(value, lang)
    if isinstance(value, (list, tuple)):
        return [_relocalized(v, lang) for v in value]
    return value                        # numbers, arrays, None: plotly formats those itself


def localize_numbers(fig: go.Figure, lang: str) -> go.Figure:
    """Write the figure's numbers the way ``lang`` does, in place: ``layout.separators`` (decimal and
    thousands marks of every number plotly formats) and the text labels, hover data and tick texts that
    are one English-formatted number. Other text (tokens, titles) is left alone."""
    fig.layout.separators = fmt.plotly_separators(lang)
    if lang == fmt.REFERENCE:
        return fig
    for trace in fig.data:
        for prop in ("text", "customdata"):
            value = getattr(trace, prop, None)
            if isinstance(value, (str, list, tuple)):
                setattr(trace, prop, _relocalized(value, lang))
    for name in fig.layout.to_plotly_json():
        axis = fig.layout[name] if name.startswith(("xaxis", "yaxis")) else None
        if axis is not None and axis.ticktext:
            axis.ticktext = _relocalized(axis.ticktext, lang)
    return fig


_component = st.components.v2.component(
    "kvviz_chart", js=plotly_js.module_js(Path(__file__).with_name("chart_view.js")),
    css=CSS, isolate_styles=False)     # in the page's DOM, as the stepper


def chart(fig: go.Figure, alt: str, key: str, stepper_below: bool = False) -> None:
    """One figure at full width with an accessible label, the chosen export format, and its numbers
    in the page's language; drawn by the stepper's plotly.js (``plotly_js``), not ``st.plotly_chart``
    (Streamlit's full plotly.js would be a second, three times larger library to load). ``key``
    (unique on the page) keeps the element when its figure changes, so the chart is redrawn in
    place; without one Streamlit would build a new element for every new figure. ``stepper_below``:
    the page's stepper comes after this chart, which waits for its first drawing even when the stepper
    is not in the page yet (with plotly already in the browser the chart would otherwise draw first)."""
    localize_numbers(fig, current_lang())
    _component(key=key, data={"fig": figure_spec(fig, digits=None), "alt": alt, "stepper": stepper_below,
                              "fmt": st.session_state.get(KEY) or "png", "plotly": plotly_js.PLOTLY})
