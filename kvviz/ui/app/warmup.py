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
directory (``times_file``) for the next start's messages. The terminal says what is prepared and
when the server is ready; ``/_kvviz/ready`` (kvviz/ui/app/serve_files.py) answers ``status()`` as
JSON, which the tests' server waits for (tools/browser.py ``wait_healthy``).

Why a thread and not the lifespan: the lifespan made the server answer only once everything was
loaded (30 s after ``streamlit run`` here, 54 s on the reference machine, 119 s there from a cold
cache directory), and a browser opened at the printed address showed nothing meanwhile. The imports
had been put in the lifespan because a thread importing torch held the GIL (and a core) while the
server sent the frontend's files; that still costs a first page 0.3-0.7 s here, so the imports let a
visitor's page load pass (``WarmUp.let_pass``: they wait while the browser's requests keep coming,
at most a few seconds, and not at all once a page waits for the warm-up). The home page is then
drawn 2.2-2.6 s after ``streamlit run``, as with no warm-up at all (bench/first_page.py,
docs/measured.md). A module that fails to import, or a step that fails, is logged and skipped; its
page does the work again and shows the error. ``KVVIZ_WARM=imports`` stops
after the imports (each page's run is computed on its first visit: for tests of routing, not for a
lecture).
"""
from __future__ import annotations

import functools
import importlib
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.logger import get_logger

from kvviz.ui.app.pages import PAGES

ENV_WARM = "KVVIZ_WARM"
# the imports wait while a visitor's browser loads a page: until no request came for QUIET_S seconds,
# at most FIRST_PASS_S before the first import (the server has just answered: a browser opened at its
# address asks within a fraction of a second) and PASS_S before each further one
QUIET_S, FIRST_PASS_S, PASS_S = 0.4, 4.0, 1.0
ENV_CACHE = "KVVIZ_CACHE_DIR"        # kvviz.models.real.ENV_CACHE: the record sits beside the converted weights
TIMES_FILE = "warm-up-times.json"
# the engine and every page's body (each imports what its page draws with), in teaching order
MODULES = ("torch", "pandas", "plotly.graph_objects", *(page.body for page in PAGES if page.body))
# what the home page imports: loaded by the lifespan, so its first run imports nothing
HOME_MODULES = ("kvviz.ui.app.i18n", "kvviz.ui.app.links", "kvviz.ui.app.nav")
PAGE_KEY = {page.body: page.key for page in PAGES if page.body}

log = get_logger(__name__)


@dataclass(frozen=True)
class Step:
    """One step of the warm-up: what it makes ready (``key``), its words for a visitor (``label``, a
    key of kvviz/ui/locales/*/warmup.json, with ``page``: a page's key, ``model``: a model's title) and
    for the terminal (``text``), and the work."""
    key: str
    label: str
    text: str
    work: Callable[[], object] = field(compare=False, repr=False)
    page: str | None = None
    model: str | None = None


def times_file(env: dict[str, str] | None = None) -> Path:
    """The record of the last start's step durations, in the cache directory (kvviz.models.real.cache_root,
    without importing the engine)."""
    env = os.environ if env is None else env
    root = env.get(ENV_CACHE)
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "kvviz") / TIMES_FILE


def read_times(path: Path | None = None) -> dict:
    """The last durations of each step: ``{"steps": {key: seconds}}`` ({} if none)."""
    try:
        got = json.loads((path or times_file()).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) and isinstance(got.get("steps", {}), dict) else {}


def write_times(update: dict, path: Path | None = None) -> None:
    """Merge ``update`` into the record (its ``steps`` key by key), written whole and renamed into place
    (several servers may share a cache directory); a directory that cannot be written is left alone."""
    path = path or times_file()
    record = read_times(path)
    record.update({k: v for k, v in update.items() if k != "steps"})
    record["steps"] = {**record.get("steps", {}), **update.get("steps", {})}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


class WarmUp:
    """Where the warm-up stands: its steps, the one running, what each took now and last time. One per
    process (``STATE``): the warm-up thread writes it, pages and the ready endpoint read it."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self.thread: threading.Thread | None = None
        self._reset()

    def _reset(self) -> None:
        self.steps: list[Step] = []
        self.planned = False            # every step known (the plan is made once the imports are done)
        self.current = -1               # index of the step running
        self.started: float | None = None
        self.step_started = 0.0
        self.took: dict[str, float] = {}
        self.failed: list[str] = []
        self.ready_s: float | None = None
        self.last: dict = {}            # the previous start's record (read_times)
        self.last_visit = time.monotonic()  # a visitor's last request (``visited``)
        self.hurry = threading.Event()  # a page waits for the warm-up: no more letting visitors pass

    # ---- the warm-up's side

    def begin(self, last: dict | None = None) -> None:
        with self._changed:
            self._reset()
            self.last = read_times() if last is None else last
            self.started = time.monotonic()
            self._changed.notify_all()

    def add(self, steps: Iterable[Step], planned: bool = False) -> None:
        with self._changed:
            self.steps += list(steps)
            self.planned = self.planned or planned
            self._changed.notify_all()

    def run(self, step: Step) -> float:
        """Do ``step`` (a failure is logged and listed); returns its seconds."""
        with self._changed:
            self.current = self.steps.index(step)
            self.step_started = time.monotonic()
            self._changed.notify_all()
        try:
            step.work()
        except Exception:                           # noqa: BLE001 - its page does the work itself and shows why
            log.exception("kvviz: warm-up step %s failed", step.key)
            self.failed.append(step.key)
        seconds = time.monotonic() - self.step_started
        with self._changed:
            self.took[step.key] = seconds
            self._changed.notify_all()
        write_times({"steps": {step.key: round(seconds, 2)}})
        return seconds

    def finish(self) -> float:
        with self._changed:
            self.planned = True
            self.current = -1
            self.ready_s = time.monotonic() - (self.started or time.monotonic())
            self._changed.notify_all()
        return self.ready_s

    def let_pass(self, limit: float) -> None:
        """Wait while a visitor's browser is loading a page (its last request less than ``QUIET_S``
        ago), at most ``limit`` seconds, unless a page waits for the warm-up (``hurry``): the page's
        files and script then have the interpreter, which an import in this thread would hold."""
        end = time.monotonic() + limit
        while not self.hurry.is_set():
            now = time.monotonic()
            idle = now - self.last_visit
            if idle >= QUIET_S or now >= end:
                return
            self.hurry.wait(min(QUIET_S - idle, end - now))

    # ---- the server's and the readers' side

    def visited(self) -> None:
        """A visitor's request arrived (kvviz/ui/app/serve_files.py, for every request but the health
        and ready checks)."""
        self.last_visit = time.monotonic()

    @property
    def running(self) -> bool:
        return self.started is not None and self.ready_s is None

    def done(self, key: str) -> bool:
        """``key`` needs no waiting: made, or not a step of this warm-up (none running, or its plan
        without it)."""
        if not self.running or key in self.took:
            return True
        return self.planned and all(s.key != key for s in self.steps)

    def wait(self, timeout: float) -> None:
        """Until the next change (a step started or ended), at most ``timeout`` seconds."""
        with self._changed:
            self._changed.wait(timeout)

    def index(self, key: str) -> int | None:
        return next((i for i, s in enumerate(self.steps) if s.key == key), None)

    def count(self) -> int | None:
        """How many steps (None until the plan is made, after the imports)."""
        return len(self.steps) if self.planned else None

    def last_seconds(self, key: str) -> float | None:
        got = self.last.get("steps", {}).get(key)
        return float(got) if isinstance(got, (int, float)) else None

    def status(self) -> dict:
        """For ``/_kvviz/ready`` and the logs: ready or not, the step running, what failed."""
        with self._changed:
            step = self.steps[self.current] if self.running and 0 <= self.current < len(self.steps) else None
            return {"started": self.started is not None, "ready": self.ready_s is not None,
                    "ready_s": None if self.ready_s is None else round(self.ready_s, 2),
                    "step": None if step is None else self.current + 1, "steps": self.count(),
                    "doing": None if step is None else step.key,
                    "elapsed_s": None if self.started is None else round(time.monotonic() - self.started, 2),
                    "done": list(self.took), "failed": list(self.failed)}


STATE = WarmUp()


def status() -> dict:
    return STATE.status()


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
        STATE.let_pass(PASS_S)
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
    failed: list[str] = []
    if not begun:
        STATE.begin()
    try:
        return _warm(failed)
    finally:
        if STATE.running:                   # an error outside the steps: the pages stop waiting
            log.error("kvviz: the warm-up stopped early")
            STATE.finish()


def _warm(failed: list[str]) -> list[str]:
    engine = Step("engine", "warmup.step_engine", "the engine and the pages", functools.partial(_engine, failed))
    STATE.add([engine])
    log.info("kvviz: loading the engine in the background…")
    STATE.let_pass(FIRST_PASS_S)
    took = STATE.run(engine)
    steps = plan()
    STATE.add(steps, planned=True)
    if steps:
        log.info("kvviz: engine loaded in %.1f s; preparing %s in the background…", took, _summary(steps))
    for step in steps:
        if step.key.startswith("prepare:"):
            log.info("kvviz: %s…", step.text)
        seconds = STATE.run(step)
        if step.model and not step.key.startswith("runs:"):
            log.info("kvviz: %s took %.1f s", step.text, seconds)
    ready = STATE.finish()
    failed += STATE.failed
    models = [s for s in steps if s.key.startswith(("prepare:", "model:", "runs:"))]
    log.info("kvviz: ready in %.1f s (engine %.1f s, pages' default runs %.1f s%s%s)%s", ready, took,
             sum(STATE.took[s.key] for s in steps if s.page),
             f", real models {sum(STATE.took[s.key] for s in models):.1f} s" if models else "",
             f", long runs {STATE.took['late']:.1f} s" if STATE.took.get("late", 0) >= 0.05 else "",
             f"; failed: {', '.join(failed)}" if failed else "")
    return failed


def start() -> threading.Thread:
    """The warm-up in a background thread (one per process)."""
    if STATE.thread is None or not STATE.thread.is_alive():
        STATE.begin()
        STATE.thread = threading.Thread(target=warm, args=(True,), name="kvviz-warm-up", daemon=True)
        STATE.thread.start()
    return STATE.thread


def in_warm_up() -> bool:
    """This code runs in the warm-up itself (which must not wait for its own steps)."""
    return threading.current_thread() is STATE.thread


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
