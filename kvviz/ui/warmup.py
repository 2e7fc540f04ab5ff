"""Server start-up: load the engine while the first visitor's browser loads Streamlit's frontend.

Streamlit runs no app code before the first session's script, so on a fresh server that script
paid for importing torch, pandas, plotly and the page modules (≈ 2–3 s on 2 cores) after the
browser had already spent ≈ 1 s starting the frontend. ``app.py`` serves the app as an ``st.App``
whose lifespan starts ``warm()`` in a background thread: the server answers at once, and the
imports run while the browser is busy. A script that needs a module still being imported waits for
it (Python's import lock), so nothing is imported twice and no visitor sees a half-loaded module.
"""
from __future__ import annotations

import asyncio
import importlib
import logging
import threading
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator

# the engine and every page's module (each imports what its page draws with), in visiting order
MODULES = ("torch", "pandas", "plotly.graph_objects", "kvviz.ui.abc_page", "kvviz.ui.weather_page",
           "kvviz.ui.gpt_page", "kvviz.ui.sampling_page", "kvviz.ui.cost_page", "kvviz.ui.paged_page",
           "kvviz.ui.compress_page", "kvviz.ui.spec_page", "kvviz.ui.lecture_page")

log = logging.getLogger("kvviz.warmup")
done = threading.Event()            # set when warm() has finished (tests and benches wait on it)


def _first_calls() -> None:
    """What the first figure and the first tensor operation load lazily: plotly's validators of the
    trace kinds and axes the pages draw, torch's first kernels."""
    import plotly.graph_objects as go
    import torch

    go.Figure([go.Heatmap(z=[[0.0]]), go.Bar(y=[0.0]), go.Scatter(y=[0.0])],
              layout={"xaxis": {"title": "x"}, "yaxis": {"title": "y"}, "legend": {"orientation": "h"}})
    torch.softmax(torch.ones(2, 2) @ torch.ones(2, 2), dim=-1)


def warm() -> float:
    """Import every module a page needs and make the first calls; returns the seconds it took."""
    t0 = time.perf_counter()
    try:
        for name in MODULES:
            importlib.import_module(name)
        _first_calls()
    except Exception:                   # noqa: BLE001 - a page that fails to import says so itself
        log.exception("warm-up import failed")
    finally:
        done.set()
    return time.perf_counter() - t0


@asynccontextmanager
async def lifespan(app) -> AsyncIterator[None]:
    """``st.App`` lifespan: ``warm()`` before the server accepts its first request."""
    log.info("engine loaded in %.2f s", await asyncio.to_thread(warm))
    yield
