"""Plotly.js in the browser: which file, how a page starts loading it, and the JavaScript that the
stepper (``step_view``) and the single charts (``charts.chart``) share to draw with it.

Every chart of kvviz is drawn by one plotly.js bundle with only the trace kinds the figures use
(scatter, bar, heatmap; ``static/plotly-kvviz-<version>.min.js``, 1.2 MB), built from the npm package
``plotly.js`` of the version the ``plotly`` package writes figures for by ``tools/plotly_bundle``
(esbuild, the way plotly.js builds its own bundles; tests/test_plotly_js.py checks version and trace
kinds), served at ``app/static/``: sent from memory by app.py's middleware
(kvviz/ui/app/serve_files.py), else by Streamlit's file serving of the app's ``static/`` folder
(``server.enableStaticServing`` in .streamlit/config.toml). A fresh browser evaluates it in
≈ 0.2–0.3 s on this 2-core machine; the distributed cartesian bundle (1.5 MB) took ≈ 0.9 s, its
UMD wrapper making V8 compile the whole library before running it (``python bench/plotly_eval.py``);
``st.plotly_chart`` would load Streamlit's own 4.7 MB chunk of the full library, ≈ 1 s of a first
visit's main thread. If the bundle does not load (static serving switched off), the
components import that chunk instead (``static/static/js/PlotlyChart.<hash>.js``, which sets
``window.Plotly`` too).
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
from pathlib import Path

import streamlit as st

_HERE = Path(__file__).parent
STATIC = _HERE.parents[2] / "static"             # the app's static folder (served at app/static/)
PLOTLY_BUNDLE = "plotly-kvviz-4.1.1.min.js"       # in STATIC, built by tools/plotly_bundle


def plotly_chunk() -> str | None:
    """File name of the plotly.js chunk in the installed Streamlit frontend (``PlotlyChart.<hash>.js``),
    the fallback; None if this Streamlit has none (then the bundle is the only source)."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(st.__file__), "static", "static", "js",
                                          "PlotlyChart.*.js")))
    return os.path.basename(found[0]) if found else None


# where the browser finds plotly.js, relative to Streamlit's own static/js/index.*.js (which sits
# under the server's base path, so a deployment below a path prefix finds the files too)
# (the bundle's address carries its content's hash: the server lets browsers keep it for a year,
# and a rebuild with other trace kinds keeps the file name, which only carries plotly.js's version)
BUNDLE_HASH = hashlib.sha256((STATIC / PLOTLY_BUNDLE).read_bytes()).hexdigest()[:12]
PLOTLY = {"bundle": f"../../app/static/{PLOTLY_BUNDLE}?v={BUNDLE_HASH}", "chunk": plotly_chunk()}


def module_js(own: Path) -> str:
    """A component's JavaScript module: plotly_view.js (loading and theming, shared), then its own."""
    return (_HERE / "plotly_view.js").read_text(encoding="utf-8") + "\n" + own.read_text(encoding="utf-8")


# Starts loading plotly.js as soon as the page's first element is drawn, while the server builds
# the rest of the page, so that the browser evaluates it while it would otherwise wait. A plain
# script in st.html runs when that element mounts (a component would first load its own frontend
# code); it is plotly_view.js's own loadPlotly, so the components later await the same promise.
_PRELOAD_HTML = ("<script data-kvs-preload>\n(() => {\n" + (_HERE / "plotly_view.js").read_text(encoding="utf-8")
                 + "\nloadPlotly(" + json.dumps(PLOTLY) + ").catch(() => {});\n})();\n</script>")


def preload() -> None:
    """Start loading plotly.js (``nav.page_setup`` does, first thing on pages with charts); the
    element takes no room (style.css). Streamlit passes st.html through DOMPurify, which drops an
    element whose text holds "<" before a letter, "/" or "!" (its guard against markup hidden in
    text): plotly_view.js must not, or the script is silently gone (tests/test_plotly_js.py)."""
    st.html(_PRELOAD_HTML, unsafe_allow_javascript=True)
