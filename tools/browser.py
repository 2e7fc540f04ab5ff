"""The browser and server drivers that the tests and the benches share: Debian's chromium through
Playwright, a fresh ``streamlit run app.py``, and ``Page``, a tab on the app that records page errors
and knows when a rerun has finished.

Outside tests/ so that bench/ imports no test code; tests/conftest.py's fixtures (``server``,
``browser``, ``tab``) are thin wrappers around these. Needs Playwright (requirements-dev.txt) only
when a browser is launched.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# The tests' browser: Debian's chromium-headless-shell, chromium's engine (Blink, V8, the same layout
# and fonts) without the browser around it (Playwright's own choice for headless runs). A page opened
# in it costs about a third less processor time than in chromium's --headless (six pages: 12 against
# 18 s, measured alternately, docs/testing.md); chromium where the shell is not installed. The
# benches time a visitor's browser, so they use chromium itself. ``KVVIZ_TEST_CHROMIUM`` names
# another browser for the tests.
TEST_CHROMIUM = os.environ.get("KVVIZ_TEST_CHROMIUM") or shutil.which("chromium-headless-shell") or CHROMIUM
CHROME_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run"]


def free_port() -> int:
    """A TCP port on localhost that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log: Path | None = None, env: dict[str, str] | None = None) -> tuple[subprocess.Popen, str, Path]:
    """Start ``streamlit run app.py`` on a free localhost port (its output in ``log``, a temporary file by
    default; ``env`` added to this process's environment) and return at once: the process, its base
    URL and its log. It answers at once and warms up in the background (``wait_healthy``)."""
    port = free_port()
    log = log or Path(tempfile.gettempdir()) / f"kvviz-server-{port}.log"
    out = open(log, "w")        # the server's own: the child keeps the file open
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"],
                            cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    out.close()
    return proc, f"http://127.0.0.1:{port}", log


def warm_up_status(base: str) -> dict | None:
    """Where the server's warm-up stands (its ``/_kvviz/ready``, kvviz/ui/app/warmup.py ``status``); None
    while it does not answer."""
    try:
        return json.loads(urllib.request.urlopen(base + "/_kvviz/ready", timeout=2).read())
    except (OSError, ValueError):
        return None


def wait_healthy(base: str, log: Path, timeout: float = 240, proc: subprocess.Popen | None = None,
                 ready: bool = True) -> None:
    """Wait until the server at ``base`` answers its health check and (``ready``) has finished its
    warm-up: it answers at once, and prepares every page's default run and its real models in the
    background (kvviz/ui/app/warmup.py), while step presses would be timed against it. RuntimeError
    (naming ``log``) when that does not happen within ``timeout`` seconds or its process (when this
    process started it) has ended."""
    t0 = time.time()
    healthy = False
    while True:
        try:
            if not healthy:
                healthy = urllib.request.urlopen(base + "/_stcore/health", timeout=1).read() == b"ok"
            if healthy and (not ready or (warm_up_status(base) or {}).get("ready")):
                return
        except OSError:
            pass
        if time.time() - t0 > timeout or (proc is not None and proc.poll() is not None):
            raise RuntimeError(f"streamlit did not {'finish its warm-up' if healthy else 'start'}; see {log}")
        time.sleep(0.1)


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextmanager
def streamlit_server(log: Path | None = None, start_timeout: float = 240,
                     env: dict[str, str] | None = None) -> Iterator[str]:
    """A fresh ``streamlit run app.py`` on localhost (its output in ``log``, a temporary file by
    default; ``env`` added to this process's environment): yields its base URL once it answers its
    health check and has finished its warm-up; stops it afterwards."""
    proc, base, log = start_server(log, env)
    try:
        wait_healthy(base, log, start_timeout, proc)
        yield base
    finally:
        stop_server(proc)


_CONTEXTS: dict[int, object] = {}


def shared_context(browser):
    """One browser context per test worker: its HTTP cache keeps Streamlit's frontend bundles and
    plotly.js between tests (a fresh context loads and parses them again, ≈ 1 s per page). Each tab is
    still its own Streamlit session (its own websocket); tests that need a window of their own tabs
    use ``Page(..., beside=...)``."""
    ctx = _CONTEXTS.get(id(browser))
    if ctx is None:
        ctx = _CONTEXTS[id(browser)] = browser.new_context(viewport={"width": 1400, "height": 900})
    return ctx


class Page:
    """A browser tab on the app that records page errors and knows when a rerun has finished."""

    def __init__(self, browser, width: int = 1400, height: int = 900, beside: Page | None = None,
                 fresh: bool = False):
        """A new window, or with ``beside`` another tab of that tab's window (same cookies); ``fresh``:
        in a context of its own, nothing cached (a first visit's browser; closed with the tab)."""
        self.owns_ctx = fresh and beside is None
        if beside is not None:
            self.ctx = beside.ctx
        elif fresh:
            self.ctx = browser.new_context(viewport={"width": width, "height": height})
        else:
            self.ctx = shared_context(browser)
        self.page = self.ctx.new_page()
        self.page.set_viewport_size({"width": width, "height": height})
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def settle(self, timeout: int = 60_000) -> None:
        self.page.wait_for_timeout(200)
        idle = self.page.locator("[data-testid='stApp'][data-test-script-state='notRunning']")
        idle.wait_for(state="attached", timeout=timeout)
        # a browser's first page with a stepper runs again whole once the stepper has drawn
        # (step_view.whole_page): settled when its placeholder is gone
        rest = self.page.locator(".st-key-kvs_rest")
        if rest.count():
            rest.wait_for(state="detached", timeout=timeout)
            self.page.wait_for_timeout(200)
            idle.wait_for(state="attached", timeout=timeout)
        self.page.wait_for_timeout(250)

    @property
    def event_heading(self):
        """The stepper's "Event i of n: phase" heading (in any language)."""
        return self.page.locator("h3").filter(has_text=re.compile(r"^(Event|Evento|Ereignis) ")).first

    def heading(self) -> str:
        return self.event_heading.inner_text()

    # the stepper component (kvviz/ui/components/step_view.py) in the page's own DOM
    @property
    def charts(self):
        """The stepper's plots on screen (each figure is drawn once and shown or hidden)."""
        return self.page.locator(".kvs-root .kvs-fig:visible")

    def wait_drawn(self, step: int, timeout: int = 30_000) -> None:
        """Wait until the stepper has drawn event ``step`` completely (its figures included)."""
        self.page.locator(f".kvs-root[data-drawn='{step}']").wait_for(state="attached", timeout=timeout)

    def stepper_button(self, act: str):
        """prev / next / reset / end / play"""
        return self.page.locator(f".kvs-root .kvs-bar [data-act='{act}']")

    def wait_heading(self, pattern: str, timeout: int = 30_000) -> None:
        """Wait until the page's event heading matches ``pattern``: after a key press or click, a
        settle alone may look before the rerun has started (seen on a loaded CI machine)."""
        from playwright.sync_api import expect
        expect(self.event_heading).to_have_text(re.compile(pattern), timeout=timeout)

    def wait_url(self, pattern: str, timeout: int = 10_000) -> None:
        """Wait until the address matches ``pattern``: the stepper writes a press's ``?step=`` once
        the step is drawn (step_view.js urlLater), after its heading."""
        from playwright.sync_api import expect
        expect(self.page).to_have_url(re.compile(pattern), timeout=timeout)

    def lost_presses(self, presses: int, key: str = "ArrowRight") -> tuple[int, int]:
        """Press ``key`` again as soon as the (English) heading shows the previous press, so most
        presses land while the step is still being drawn; a press is lost when the heading has not
        moved 8 s later. Returns (events moved, presses lost); the page starts at event 0."""
        shows = "(n) => [...document.querySelectorAll('h3')].some(e => e.innerText.startsWith('Event ' + n + ' of'))"
        self.page.locator("h1").first.click()      # focus the page, not a widget
        at = lost = 0
        for _ in range(presses):
            self.page.keyboard.press(key)
            try:
                self.page.wait_for_function(shows, arg=at + 1, timeout=8_000)
                at += 1
            except Exception:                       # noqa: BLE001 - the heading did not move
                lost += 1
        return at, lost

    def goto(self, url: str) -> None:
        self.page.goto(url, timeout=90_000)
        self.page.locator("[data-testid='stApp']").wait_for(timeout=90_000)
        self.settle()

    def assert_clean(self) -> None:
        assert self.page.locator("[data-testid='stException']").count() == 0, \
            self.page.locator("[data-testid='stException']").first.inner_text()
        assert not self.errors, self.errors
        failed = self.page.locator(".kvc-chart[data-drawn='error']")     # a chart says why it is blank
        assert failed.count() == 0, failed.first.inner_text()

    def close(self) -> None:
        (self.ctx if self.owns_ctx else self.page).close()
