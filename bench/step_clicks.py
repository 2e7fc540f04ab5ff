"""Benchmark: time per step click on every stepping page, as a browser sees it.

Starts a fresh `streamlit run`, opens each page, presses Right N times and measures from the key
press until the rerun it caused has finished (the app's script state back to notRunning). This is
an upper bound on server time (it includes the websocket round trip and the browser's drawing).
It also reports the server time alone: each page's step fragment is wrapped in
``kvviz.ui.perf.timed``, which logs its duration when KVVIZ_TIMING_LOG is set.

usage: python bench/step_clicks.py [--clicks 15]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import Browser, sync_playwright  # noqa: E402

from tests.conftest import CHROME_ARGS, CHROMIUM, Page, server  # noqa: E402

# (URL path, key to press, timing label of its step fragment) for every page that steps
PAGES = [("ABC_miniature", "ArrowRight", "abc.step"),
         ("ABC_miniature?abc_rule=sample&abc_tau=1.5&abc_seed=3", "ArrowRight", "abc.step"),
         ("Weather_heads?new=8", "ArrowRight", "weather.step"),
         ("Cost_and_scale?tab=Batching", "ArrowRight", "cost.batch_step"),
         ("Cost_and_scale?tab=Batching&bt_model=gpt", "ArrowRight", "cost.batch_step"),
         ("Tiny_GPT", "ArrowRight", "gpt.step")]

WATCH = """() => { window.__kv = []; const app = document.querySelector("[data-testid='stApp']");
  new MutationObserver(() => window.__kv.push([performance.now(), app.getAttribute('data-test-script-state')]))
    .observe(app, {attributes: true, attributeFilter: ['data-test-script-state']}); }"""


def time_press(tab: Page, key: str) -> float | None:
    """Milliseconds from pressing ``key`` until the rerun it caused finished (None: no rerun seen)."""
    tab.page.evaluate(WATCH)
    t0 = tab.page.evaluate("() => performance.now()")
    tab.page.keyboard.press(key)
    tab.settle()
    done = [t for t, s in tab.page.evaluate("() => window.__kv") if s == "notRunning"]
    return done[-1] - t0 if done else None


def server_times(log: Path, label: str) -> list[float]:
    """The server-side durations that ``kvviz.ui.perf.timed(label)`` logged."""
    return [float(line.split(",")[1]) for line in log.read_text().splitlines() if line.startswith(label + ",")]


def time_clicks(tab: Page, key: str, clicks: int) -> list[float]:
    tab.page.locator("h1").first.click()
    times = (time_press(tab, key) for _ in range(clicks))
    return [ms for ms in times if ms is not None]


@contextmanager
def app_in_browser() -> Iterator[tuple[Browser, str]]:
    """A fresh ``streamlit run`` (the browser tests' own fixture) and Debian's chromium: yields
    (browser, base URL); stops both afterwards."""
    gen = server.__wrapped__()
    base = next(gen)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
            try:
                yield browser, base
            finally:
                browser.close()
    finally:
        next(gen, None)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clicks", type=int, default=15)
    a = ap.parse_args()
    log = Path(tempfile.mkdtemp()) / "timing.csv"
    os.environ["KVVIZ_TIMING_LOG"] = str(log)     # inherited by the streamlit server
    with app_in_browser() as (browser, base):
        for path, key, label in PAGES:
            tab = Page(browser)
            tab.goto(f"{base}/{path}")
            log.write_text("")
            ms = time_clicks(tab, key, a.clicks)
            server_ms = server_times(log, label)
            print(f"{path:20s} clicks={len(ms):3d}  server median {statistics.median(server_ms):6.1f} ms "
                  f"max {max(server_ms):6.1f} ms | browser round trip median {statistics.median(ms):6.1f} ms "
                  f"p90 {sorted(ms)[int(0.9 * (len(ms) - 1))]:6.1f} ms")
            tab.close()


if __name__ == "__main__":
    main()
