"""Server start-up: the server answers at once, and prepares the engine in the background.

``app.py`` serves the app as an ``st.App`` whose lifespan (``lifespan``) does only what the first
page needs, which is cheap (the home page imports no torch): Streamlit's frontend files and the
home page's modules, ≈ 0.1 s. The server then answers its health check, and a background thread
(``start``) runs the warm-up, one step after another (``plan``):

1. ``engine``: torch, pandas, plotly and every page's body imported, the first figure, table and
   tensor calls made (2.8-3.6 s on 2 cores);
2. ``warm:<module>``: each page module's ``warm()``, its default run, frames and sections (its
   cached results), so a default first visit computes nothing (tests/test_warmup.py checks that
   nothing is left);
3. per real model this server loads (kvviz/ui/app/models.py, the host's ``KVVIZ_REAL_MODELS``):
   ``prepare:<name>`` when its weights are not converted (or downloaded) yet (≈ 25 s, once per cache
   directory), ``model:<name>`` its load, ``runs:<name>`` each page module's ``warm_model(name)``
   (the Real LLM page's default run and loop views, the Sampling page's long tail);
4. ``late``: each page module's ``warm_late()``: a hybrid model's long text (≈ 25 s for Gemma 3).

A page asked for meanwhile waits for the steps it needs, and says so with the step, the time so far
and the time it took last time (kvviz/ui/app/waiting.py; ``nav.page_setup`` for its default run,
``models.real_model`` for a real model): it never computes a second copy of what the warm-up is
computing, and it is drawn as soon as its steps are done. Each step's duration is kept in the cache
directory (kvviz/ui/app/warmup_state.py, where the warm-up's state lives) for the next start's
messages. The terminal says what is prepared and when the server is ready; ``/_kvviz/ready``
(kvviz/ui/app/serve_files.py) answers the state as JSON, which the tests' server waits for
(tools/browser.py ``wait_healthy``).

Why a thread and not the lifespan: the lifespan made the server answer only once everything was
loaded (30 s after ``streamlit run`` here, 54 s on the reference machine, 119 s there from a cold
cache directory), and a browser opened at the printed address showed nothing meanwhile. The imports
had been put in the lifespan because a thread importing torch held the GIL (and a core) while the
server sent the frontend's files; that still costs a first page 0.3-0.7 s here, so the imports let a
visitor's page load pass (``warmup_state.WarmUp.let_pass``: they wait while the browser's requests
keep coming, at most a few seconds, and not at all once a page waits for the warm-up). The home page
is then drawn 2.2-2.8 s after ``streamlit run`` here, as with no warm-up at all (bench/first_page.py,
docs/measured.md). A module that fails to import, or a step that fails, is logged and skipped; its
page does the work again and shows the error. ``KVVIZ_WARM=imports`` stops after the imports (each
page's run is computed on its first visit: for tests of routing, not for a lecture).
"""
from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from streamlit.logger import get_logger

from kvviz.ui.app import warmup_state
from kvviz.ui.app.pages import PAGES
from kvviz.ui.app.warmup_state import Step

ENV_WARM = "KVVIZ_WARM"
# the imports wait while a visitor's browser loads a page (warmup_state.QUIET_S), at most FIRST_PASS_S
# before the first import (the server has just answered: a browser opened at its address asks within a
# fraction of a second) and PASS_S before each further one
FIRST_PASS_S, PASS_S = 4.0, 1.0
# the engine and every page's body (each imports what its page draws with), in teaching order
MODULES = ("torch", "pandas", "plotly.graph_objects", *(page.body for page in PAGES if page.body))
# what the home page imports: loaded by the lifespan, so its first run imports nothing
HOME_MODULES = ("kvviz.ui.app.i18n", "kvviz.ui.app.links", "kvviz.ui.app.nav")
PAGE_KEY = {page.body: page.key for page in PAGES if page.body}

log = get_logger(__name__)


# ---- the steps -----------------------------------------------------------------------------------------

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


def _static_files() -> None:
    """The middleware's files read once (and compressed), before the first request needs them."""
    from kvviz.ui.app import serve_files
    serve_files.frontend_files()
    serve_files.page_html()
    serve_files.page_names()


def _engine(failed: list[str]) -> None:
    """Import every module a page needs and make the first calls (what failed is added to ``failed``),
    letting a visitor's page load pass before each import (``WarmUp.let_pass``)."""
    for name in MODULES:
        warmup_state.STATE.let_pass(PASS_S)
        try:
            importlib.import_module(name)
        except Exception:                   # noqa: BLE001 - its page imports it again and shows the error
            log.exception("kvviz: importing %s failed", name)
            failed.append(name)
    try:
        _first_calls()
    except Exception:                       # noqa: BLE001 - the first page makes these calls itself
        log.exception("kvviz: the first figure and tensor calls failed")
        failed.append("first calls")
    try:                                    # the charts' plotly.js, compressed once
        from kvviz.ui.app import serve_files
        serve_files.plotly_bundle()
    except Exception:                       # noqa: BLE001 - the first request reads it instead
        log.exception("kvviz: reading plotly.js failed")
        failed.append("static files")


def _each(calls: list[Callable[[], object]], what: str) -> None:
    """Every call, each one's failure logged (the others still made)."""
    failed = []
    for call in calls:
        try:
            call()
        except Exception:                   # noqa: BLE001 - the page computes it on its first visit
            log.exception("kvviz: %s failed", what)
            failed.append(call)
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(calls)} failed")


def _modules() -> list:
    return [sys.modules[name] for name in MODULES if name.startswith("kvviz.") and name in sys.modules]


def _title(module) -> str:
    from kvviz.ui.app.i18n import lookup
    return lookup(f"nav.{PAGE_KEY[module.__name__]}", "en")


def plan() -> list[Step]:
    """The steps after the imports (they read the imported page modules and the server's real models)."""
    if os.environ.get(ENV_WARM) == "imports":
        return []
    modules = _modules()
    steps = [Step(f"warm:{m.__name__}", "warmup.step_page", f"the default run of {_title(m)}", m.warm,
                  page=PAGE_KEY[m.__name__]) for m in modules if hasattr(m, "warm")]
    from kvviz.ui.app import models
    for name in models.enabled():
        if models.source(name) is None:            # not installed: its pages say how to get it
            continue
        title = models.spec(name).title
        if not models.weights_ready(name):
            steps.append(Step(f"prepare:{name}", "warmup.step_prepare", f"converting {title}'s weights (once "
                              "per cache directory)", functools.partial(models.prepare_weights, name), model=title))
        steps.append(Step(f"model:{name}", "warmup.step_model", f"loading {title}",
                          functools.partial(models.prepare, name), model=title))
        runs = [functools.partial(m.warm_model, name) for m in modules if hasattr(m, "warm_model")]
        steps.append(Step(f"runs:{name}", "warmup.step_runs", f"{title}'s default runs",
                          functools.partial(_each, runs, f"a default run of {title}"), model=title))
    late = [m.warm_late for m in modules if hasattr(m, "warm_late")]
    if late and steps:
        steps.append(Step("late", "warmup.step_late", "the long runs (a hybrid model's long text)",
                          functools.partial(_each, late, "a long run")))
    return steps


def _summary(steps: list[Step]) -> str:
    pages = [s for s in steps if s.page]
    models = list(dict.fromkeys(s.model for s in steps if s.model))
    parts = [f"{len(pages)} pages' default runs"] if pages else []
    if models:
        parts.append(f"{len(models)} model{'s' if len(models) > 1 else ''} ({', '.join(models)})")
    return " and ".join(parts) or "nothing more"


def warm(begun: bool = False) -> list[str]:
    """The whole warm-up in this thread (``start`` runs it in a thread of its own, ``begun``: the state
    already started, so a page asked for before the thread runs waits too); returns what failed (logged)."""
    state = warmup_state.STATE
    if not begun:
        state.begin()
    try:
        return _warm(state)
    finally:
        if state.running:                   # an error outside the steps: the pages stop waiting
            log.error("kvviz: the warm-up stopped early")
            state.finish()


def _warm(state: warmup_state.WarmUp) -> list[str]:
    failed: list[str] = []
    engine = Step("engine", "warmup.step_engine", "the engine and the pages", functools.partial(_engine, failed))
    state.add([engine])
    log.info("kvviz: loading the engine in the background…")
    state.let_pass(FIRST_PASS_S)
    took = state.run(engine)
    steps = plan()
    state.add(steps, planned=True)
    if steps:
        log.info("kvviz: engine loaded in %.1f s; preparing %s in the background…", took, _summary(steps))
    for step in steps:
        if step.key.startswith("prepare:"):
            log.info("kvviz: %s…", step.text)
        seconds = state.run(step)
        if step.model and not step.key.startswith("runs:"):
            log.info("kvviz: %s took %.1f s", step.text, seconds)
    ready = state.finish()
    failed += state.failed
    models = [s for s in steps if s.key.startswith(("prepare:", "model:", "runs:"))]
    late = state.took.get("late", 0.0)
    log.info("kvviz: ready in %.1f s (engine %.1f s, pages' default runs %.1f s%s%s)%s", ready, took,
             sum(state.took[s.key] for s in steps if s.page),
             f", real models {sum(state.took[s.key] for s in models):.1f} s" if models else "",
             f", long runs {late:.1f} s" if late >= 0.05 else "",
             f"; failed: {', '.join(failed)}" if failed else "")
    return failed


def start() -> threading.Thread:
    """The warm-up in a background thread (one per process)."""
    state = warmup_state.STATE
    if state.thread is None or not state.thread.is_alive():
        state.begin()
        state.thread = threading.Thread(target=warm, args=(True,), name="kvviz-warm-up", daemon=True)
        state.thread.start()
    return state.thread


@asynccontextmanager
async def lifespan(app) -> AsyncIterator[None]:
    """``st.App`` lifespan: what the first page needs (its files in memory, its modules), then the rest
    in the background (``start``) while the server answers."""
    t0 = time.perf_counter()
    try:
        _static_files()
        for name in HOME_MODULES:
            importlib.import_module(name)
    except Exception:                       # noqa: BLE001 - the first request reads and imports them itself
        log.exception("kvviz: reading the first page's files failed")
    log.info("kvviz: first page ready in %.2f s; the server answers now", time.perf_counter() - t0)
    start()
    yield
