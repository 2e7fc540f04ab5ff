"""Where the server's warm-up stands (kvviz/ui/app/warmup.py runs it): its steps, the one running, what
each took now and at the last start, and whether a visitor's page is loading.

One ``WarmUp`` per process (``STATE``): the warm-up's thread writes it; the pages' waits
(kvviz/ui/app/waiting.py), the ready endpoint and the request hook (kvviz/ui/app/serve_files.py) read
and touch it. Below all of them, so none imports another to reach it. The last durations are kept
in the cache directory (``times_file``), for the next start's messages.
"""
from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from streamlit.logger import get_logger

from kvviz.paths import cache_root

TIMES_FILE = "warm-up-times.json"
# the warm-up's imports wait while a visitor's browser loads a page: until no request came for this long
QUIET_S = 0.4

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
    """The record of the last start's step durations, in the cache directory beside the converted weights."""
    return cache_root(env) / TIMES_FILE


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


def in_warm_up() -> bool:
    """This code runs in the warm-up's own thread (which must not wait for its own steps)."""
    return threading.current_thread() is STATE.thread
