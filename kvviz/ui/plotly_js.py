"""Plotly.js in the browser: which file, how a page starts loading it, and the JavaScript that the
stepper (``step_view``) and the single charts (``charts.chart``) share to draw with it.

Every chart of kvviz is drawn by plotly.js's cartesian bundle (heatmaps, bars, scatter lines: all
the figures use), vendored as ``static/plotly-cartesian-<version>.min.js`` from the npm package
``plotly.js-cartesian-dist-min`` of the plotly.js version the ``plotly`` package builds figures for
(tests/test_plotly_js.py checks). Streamlit's file serving of the app's ``static/`` folder
(``server.enableStaticServing`` in .streamlit/config.toml) serves it at ``app/static/``. A fresh
browser evaluates its 1.5 MB in ≈ 0.25 s; ``st.plotly_chart`` would load Streamlit's own 4.7 MB
chunk of the full library, ≈ 1 s of a first visit's main thread on this 2-core machine (Chrome's
profiler: the largest single item). If the bundle does not load (static serving switched off), the
components import that chunk instead (``static/static/js/PlotlyChart.<hash>.js``, which sets
``window.Plotly`` too).
"""
from __future__ import annotations

import functools
import glob
import gzip
import json
import os
from pathlib import Path

import streamlit as st

_HERE = Path(__file__).parent
STATIC = _HERE.parents[1] / "static"             # the app's static folder (served at app/static/)
PLOTLY_BUNDLE = "plotly-cartesian-4.1.1.min.js"   # in STATIC


def plotly_chunk() -> str | None:
    """File name of the plotly.js chunk in the installed Streamlit frontend (``PlotlyChart.<hash>.js``),
    the fallback; None if this Streamlit has none (then the bundle is the only source)."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(st.__file__), "static", "static", "js",
                                          "PlotlyChart.*.js")))
    return os.path.basename(found[0]) if found else None


# where the browser finds plotly.js, relative to Streamlit's own static/js/index.*.js (which sits
# under the server's base path, so a deployment below a path prefix finds the files too)
PLOTLY = {"bundle": "../../app/static/" + PLOTLY_BUNDLE, "chunk": plotly_chunk()}


def module_js(own: Path) -> str:
    """A component's JavaScript module: plotly_view.js (loading and theming, shared), then its own."""
    return (_HERE / "plotly_view.js").read_text(encoding="utf-8") + "\n" + own.read_text(encoding="utf-8")


# Starts loading plotly.js as soon as the page's first element is drawn, while the server builds
# the rest of the page, so that the browser evaluates it while it would otherwise wait. A plain
# script in st.html runs when that element mounts (a component would first load its own frontend
# code); it is plotly_view.js's own loadPlotly, so the components later await the same promise.
_PRELOAD_HTML = ("<script data-kvs-preload>\n(() => {\n" + (_HERE / "plotly_view.js").read_text(encoding="utf-8")
                 + "\nloadPlotly(%s).catch(() => {});\n})();\n</script>" % json.dumps(PLOTLY))


def preload() -> None:
    """Start loading plotly.js (``nav.page_setup`` does, first thing on pages with charts); the
    element takes no room (style.css)."""
    st.html(_PRELOAD_HTML, unsafe_allow_javascript=True)


# ---- serving the bundle --------------------------------------------------------------------------
# Streamlit's static serving gzips app/static/ files again on every request (its own frontend files
# it sends uncompressed), ≈ 0.08 s of the server's CPU for this bundle per new browser, and sends no
# caching header. Under app.py's st.App this middleware answers for the bundle instead: compressed
# once (at start-up, kvviz/ui/warmup.py), and cached by browsers for a year (its name carries the
# plotly.js version). Without st.App, Streamlit's static serving still sends the file.
CACHE_FOREVER = b"public, max-age=31536000, immutable"


@functools.cache
def bundle_bytes(gzipped: bool) -> bytes:
    """The bundle as sent: plain, or gzip-compressed (computed once per process)."""
    raw = (STATIC / PLOTLY_BUNDLE).read_bytes()
    return gzip.compress(raw, compresslevel=9, mtime=0) if gzipped else raw


class ServeBundle:
    """ASGI middleware for ``st.App``: GET/HEAD of ``…/app/static/<PLOTLY_BUNDLE>`` answered from
    memory; every other request passes through."""

    def __init__(self, app) -> None:
        self.app = app
        self.suffix = "/app/static/" + PLOTLY_BUNDLE

    async def __call__(self, scope, receive, send) -> None:
        if (scope["type"] != "http" or scope.get("method") not in ("GET", "HEAD")
                or not scope.get("path", "").endswith(self.suffix)):
            await self.app(scope, receive, send)
            return
        accept = b",".join(v for k, v in scope.get("headers", []) if k.lower() == b"accept-encoding")
        gzipped = b"gzip" in accept
        body = bundle_bytes(gzipped)
        headers = [(b"content-type", b"text/javascript; charset=utf-8"),
                   (b"content-length", str(len(body)).encode()),
                   (b"cache-control", CACHE_FOREVER), (b"vary", b"Accept-Encoding"),
                   (b"x-content-type-options", b"nosniff")]
        if gzipped:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
