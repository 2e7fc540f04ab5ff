"""Draw every plotly figure the same way, with a download button in the chart's toolbar.

A chart outside the stepper is a small component (``chart_view.js``) that draws with the stepper's
plotly.js and theme (``plotly_js``, ``plotly_view.js``): one library for every chart of the app.

The format of that download (PNG for slides, SVG for print) is one sidebar setting for the whole
app; plotly's own export does the work in the browser, so the server renders no images.

Numbers follow the page's language here too (``kvviz.ui.app.fmt``): plotly's ``separators`` for what
plotly formats itself (hover templates, ticks), and ``kvviz.ui.frames.localize_spec`` for labels the pure
figure builders already wrote as English text ("0.670", "1,000", "12.5×").
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import streamlit as st

from kvviz.ui import frames
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.components import plotly_js

if TYPE_CHECKING:
    import plotly.graph_objects as go

FORMATS = {"png": "PNG", "svg": "SVG"}
KEY = "chart_format"
CSS = ".kvc-chart { width: 100%; }"      # the component's own style (the static export uses it too)


def figure_words() -> dict[str, str]:
    """The words figure builders draw (kvviz.viz.theme.WORDS), in the current language."""
    return frames.figure_words(t)


def format_picker() -> None:
    """Sidebar control: the format of every chart's download button."""
    st.segmented_control(t("charts.format"), list(FORMATS), format_func=FORMATS.get, key=KEY,
                         default="png", required=True, help=t("charts.format_help"))


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
    spec = frames.localize_spec(frames.figure_spec(fig, digits=None), current_lang())
    _component(key=key, data={"fig": spec, "alt": alt, "stepper": stepper_below,
                              "fmt": st.session_state.get(KEY) or "png", "plotly": plotly_js.PLOTLY})
