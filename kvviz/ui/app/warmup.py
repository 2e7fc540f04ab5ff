"""Server start-up: load the engine before the first visitor arrives.

Streamlit runs no app code before the first session's script, so on a fresh server that script
paid for importing torch, pandas, plotly and the page modules (2.8–3.6 s on 2 cores) after the
browser had already spent ≈ 1 s starting the frontend. ``app.py`` serves the app as an ``st.App``
whose lifespan runs ``warm()`` before the server accepts its first request: the server answers
its health check 2–3 s later, and the first visitor's page runs at once. (A background thread that
let the server answer at once was slower: the import held the GIL while the server sent the
frontend's files.) Then each page module's ``warm()`` makes that page's default run, frames and
sections (its cached results): the Real LLM page's ``warm`` prepares (assembles, converts or downloads)
and loads every real model this server loads (kvviz/ui/app/models.py, the host's ``KVVIZ_REAL_MODELS``)
and makes each one's default run (a hybrid model's long text follows in a background thread once
the server answers: ``warm_late``). So a default first visit computes nothing (1.8 s more here;
tests/test_warmup.py checks that nothing is left). A module that fails to import, or a ``warm()``
that fails, is logged and skipped; its page does the work again and shows the error.
``KVVIZ_WARM=imports`` stops after the imports (a server that starts in half the time and computes
each page's run on its first visit: for tests of routing, not for a lecture).
"""
from __future__ import annotations

import asyncio
import importlib
import os
import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from streamlit.logger import get_logger

from kvviz.ui.app.pages import PAGES

# the engine and every page's body (each imports what its page draws with), in teaching order
MODULES = ("torch", "pandas", "plotly.graph_objects", *(page.body for page in PAGES if page.body))

log = get_logger(__name__)


def _first_calls() -> None:
    """What the first figure, table and tensor operation load lazily: plotly's validators of the
    trace kinds and axes the pages draw, pandas' arrow-backed strings (≈ 0.2 s of imports in the
    first cache table), and torch's first kernels."""
    import pandas as pd
    import plotly.graph_objects as go
    import torch

    go.Figure([go.Heatmap(z=[[0.0]]), go.Bar(y=[0.0]), go.Scatter(y=[0.0])],
              layout={"xaxis": {"title": "x"}, "yaxis": {"title": "y"}, "legend": {"orientation": "h"}})
    torch.softmax(torch.ones(2, 2) @ torch.ones(2, 2), dim=-1)
    pd.DataFrame([{"token": "A", "score": 1.0}]).to_csv()
    # Streamlit's first element of the process checks once whether it runs in a REPL, through
    # inspect.stack() over every loaded module (≈ 0.1 s with torch loaded): made here, before any
    # visitor (a private function: skipped if a later Streamlit has none)
    from streamlit import delta_generator
    getattr(delta_generator, "_maybe_print_use_warning", lambda: None)()


def warm() -> list[str]:
    """Import every module a page needs and make the first calls; returns what failed (logged)."""
    t0 = time.perf_counter()
    failed = []
    for name in MODULES:
        try:
            importlib.import_module(name)
        except Exception:                   # noqa: BLE001 - its page imports it again and shows the error
            log.exception("warm-up: importing %s failed", name)
            failed.append(name)
    try:
        _first_calls()
    except Exception:                       # noqa: BLE001 - the first page makes these calls itself
        log.exception("warm-up: the first figure and tensor calls failed")
        failed.append("first calls")
    try:                                # the middleware's files, read (and the bundle compressed) once
        from kvviz.ui.app import serve_files
        serve_files.plotly_bundle()
        serve_files.frontend_files()
        serve_files.page_html()
        serve_files.page_names()
    except Exception:                       # noqa: BLE001 - the first request reads them instead
        log.exception("warm-up: reading the static files failed")
        failed.append("static files")
    t1 = time.perf_counter()
    if os.environ.get("KVVIZ_WARM") == "imports":
        log.info("warm-up: engine loaded in %.2f s; the pages' default runs left to their first visits", t1 - t0)
        return failed
    for name in MODULES:
        module = sys.modules.get(name)
        if hasattr(module, "warm"):
            try:
                module.warm()
            except Exception:               # noqa: BLE001 - the page computes it on its first visit
                log.exception("warm-up: the default run of %s failed", name)
                failed.append(name + ".warm")
    log.info("warm-up: engine loaded in %.2f s, the pages' default runs made in %.2f s", t1 - t0,
             time.perf_counter() - t1)
    late = [m for m in (sys.modules.get(name) for name in MODULES) if hasattr(m, "warm_late")]
    if late:        # long runs (a hybrid model's long text) once the server answers: a background thread
        threading.Thread(target=_warm_late, args=(late,), name="kvviz-warm-late", daemon=True).start()
    return failed


def _warm_late(modules: list) -> None:
    """Each page module's ``warm_late()``: runs too long to hold the server's start for (the Real LLM
    page's long text: ≈ 25 s); the page waits for them under the model's lock when asked meanwhile."""
    t0 = time.perf_counter()
    for module in modules:
        try:
            module.warm_late()
        except Exception:                   # noqa: BLE001 - the page computes it on its first visit
            log.exception("warm-up: the late runs of %s failed", module.__name__)
    log.info("warm-up: the late runs made in %.2f s", time.perf_counter() - t0)


@asynccontextmanager
async def lifespan(app) -> AsyncIterator[None]:
    """``st.App`` lifespan: ``warm()`` before the server accepts its first request."""
    await asyncio.to_thread(warm)
    yield
