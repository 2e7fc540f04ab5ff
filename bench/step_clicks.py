"""Benchmark: how long a step press takes to show, on every stepping page, as a browser sees it.

Starts a fresh `streamlit run`, opens each page, presses Right N times (waiting a second between
presses, as a lecturer would) and measures, in the page's own clock, from the key event
(``KeyboardEvent.timeStamp``, recorded by a listener installed before the app loads) until

- **heading**: the stepper's heading shows the new event, and
- **drawn**: the new event is drawn completely (its figures shown, ``data-drawn`` set by
  kvviz/ui/components/step_view.js) and the browser has painted that frame (the next animation frame).

The stepper draws steps in the browser; 250 ms after the last press it reports the step to Python,
which reruns the stepper's fragment. That rerun's **server time** is what ``kvviz.ui.app.perf.timed``
logs when KVVIZ_TIMING_LOG is set; the bench also counts the reruns a press caused.

usage: python bench/step_clicks.py [--clicks 10] [--only Real_LLM] [--runs 1]

``--runs N`` opens each page N times in a fresh tab (one server) and prints each run and all presses
pooled: on a shared machine one run's p90 is one or two presses that waited for another job.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import Browser, sync_playwright  # noqa: E402

from tools.browser import CHROME_ARGS, CHROMIUM, Page, streamlit_server  # noqa: E402

# (URL path, timing label of its stepper fragment) for every page that steps
PAGES = [("ABC_miniature", "abc.step"),
         ("ABC_miniature?abc_rule=sample&abc_tau=1.5&abc_seed=3", "abc.step"),
         ("Weather_heads?new=8", "weather.step"),
         ("Cost_and_scale?tab=Batching&bt_new=6", "cost.batch_step"),
         ("Cost_and_scale?tab=Batching&bt_model=gpt&bt_new=6", "cost.batch_step"),
         ("Tiny_GPT", "gpt.step"),
         ("Paged_cache", "paged.step"),
         ("Smaller_caches", "compress.step"),
         ("Speculative_decoding", "speculative.step"),
         ("Real_LLM", "llm.step"),
         ("Real_LLM?llm_model=gemma3", "llm.step"),
         ("Real_LLM?llm_model=gemma3&llm_text=long", "llm.step")]     # Gemma 3's long text (728 tokens)

# installed before the app's own scripts: sees every keydown first (the stepper's listener stops it)
KEY_CLOCK = "window.addEventListener('keydown', (e) => { window.__kvKey = e.timeStamp; }, true);"

ARM = """(next) => {
  const root = document.querySelector('.kvs-root');
  const heading = root.querySelector('.kvs-heading');
  const app = document.querySelector("[data-testid='stApp']");
  window.__kvT = {runs: 0};
  (window.__kvObs || []).forEach((o) => o.disconnect());
  const a = new MutationObserver((m, o) => {
    if (heading.textContent.startsWith('Event ' + next + ' ')) {
      window.__kvT.heading = performance.now(); o.disconnect();
    }
  });
  a.observe(heading, {childList: true, characterData: true, subtree: true});
  // drawn: data-drawn set (figures shown), then the frame painted (next animation frame, then a task)
  const b = new MutationObserver((m, o) => {
    if (root.dataset.drawn === String(next)) {
      o.disconnect();
      requestAnimationFrame(() => setTimeout(() => { window.__kvT.drawn = performance.now(); }, 0));
    }
  });
  b.observe(root, {attributes: true, attributeFilter: ['data-drawn']});
  const c = new MutationObserver(() => {
    if (app.getAttribute('data-test-script-state') === 'running') window.__kvT.runs += 1;
  });
  c.observe(app, {attributes: true, attributeFilter: ['data-test-script-state']});
  window.__kvObs = [a, b, c];
}"""


def time_press(tab: Page, step: int) -> tuple[float, float, int, float] | None:
    """(heading ms, drawn ms, reruns, the stepper's own ``render`` up to its figures shown in ms) for
    one Right press from event ``step``; None: the event did not show within 10 s."""
    tab.page.evaluate(ARM, step + 1)
    tab.page.keyboard.press("ArrowRight")
    try:
        tab.page.wait_for_function("() => window.__kvT.drawn !== undefined && window.__kvT.heading !== undefined",
                                   timeout=10_000)
    except Exception:                                   # noqa: BLE001 - reported as a missing sample
        return None
    tab.page.wait_for_timeout(700)                      # the step report (250 ms later) and its rerun
    tab.settle()
    t = tab.page.evaluate("(n) => [window.__kvKey, window.__kvT.heading, window.__kvT.drawn, window.__kvT.runs, "
                          "((window.__kvsLog || []).filter((e) => e[0] === n).pop() || [0, 0, 0])[2]]", step + 1)
    key, heading, drawn, runs, render = t
    return heading - key, drawn - key, runs, render


def server_times(log: Path, label: str) -> list[float]:
    """The server-side durations that ``kvviz.ui.app.perf.timed(label)`` logged."""
    return [float(line.split(",")[1]) for line in log.read_text().splitlines() if line.startswith(label + ",")]


@contextmanager
def app_in_browser() -> Iterator[tuple[Browser, str]]:
    """A fresh ``streamlit run`` (tools/browser.py, as the browser tests' fixture) and Debian's chromium: yields
    (browser, base URL); stops both afterwards."""
    # a loaded machine may take minutes to warm the real models before the server answers
    with streamlit_server(start_timeout=600) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        try:
            yield browser, base
        finally:
            browser.close()


def pct(xs: list[float], q: float) -> float:
    return sorted(xs)[int(q * (len(xs) - 1))]


def ready_tab(browser: Browser, url: str, drawn_timeout: int = 90_000) -> Page:
    """A fresh tab on ``url`` ready for timed presses: the key clock installed, event 0 drawn, a second
    to settle, the page (not a widget) focused."""
    tab = Page(browser)
    tab.page.add_init_script(KEY_CLOCK)
    for attempt in range(4):         # a long text's run may still be computing (a loaded machine)
        try:
            tab.goto(url)
            break
        except Exception:              # noqa: BLE001 - Playwright's timeout: open it again
            if attempt == 3:
                raise
    tab.wait_drawn(0, timeout=drawn_timeout)
    time.sleep(1.0)
    tab.page.locator("h1").first.click()
    return tab


def run_page(browser: Browser, base: str, path: str, label: str, clicks: int,
             log: Path) -> tuple[list[tuple[float, float, int, float]], list[float]]:
    """One visit of ``path`` in a fresh tab: ``clicks`` Right presses timed; (samples, server times)."""
    tab = ready_tab(browser, f"{base}/{path}")
    log.write_text("")
    samples = [time_press(tab, i) for i in range(clicks)]
    tab.assert_clean()
    tab.close()
    return [s for s in samples if s is not None], server_times(log, label)


def report(path: str, got: list[tuple[float, float, int, float]], clicks: int, srv: list[float],
           each: bool = False) -> None:
    heading = [s[0] for s in got]
    drawn = [s[1] for s in got]
    runs = sum(s[2] for s in got)
    print(f"{path:45s} presses={len(got):3d}/{clicks}  heading median {statistics.median(heading):5.1f} ms "
          f"p90 {pct(heading, 0.9):5.1f} | drawn median {statistics.median(drawn):5.1f} ms "
          f"p90 {pct(drawn, 0.9):5.1f} | reruns {runs}, "
          f"server median {statistics.median(srv) if srv else 0:5.1f} ms "
          f"max {max(srv) if srv else 0:5.1f} | load {os.getloadavg()[0]:.1f}", flush=True)
    if each:        # press by press: drawn ms (the stepper's own render ms)
        print("    " + " ".join(f"{s[1]:.0f}({s[3]:.0f})" for s in got), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clicks", type=int, default=10)
    ap.add_argument("--only", default="", help="only the pages whose path contains this text")
    ap.add_argument("--runs", type=int, default=1, help="open each page this many times (presses pooled too)")
    ap.add_argument("--each", action="store_true", help="print every press: drawn ms (render ms)")
    a = ap.parse_args()
    log = Path(tempfile.mkdtemp()) / "timing.csv"
    os.environ["KVVIZ_TIMING_LOG"] = str(log)     # inherited by the streamlit server
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at start")
    with app_in_browser() as (browser, base):
        for path, label in [pl for pl in PAGES if a.only in pl[0]]:
            pooled: list[tuple[float, float, int, float]] = []
            pooled_srv: list[float] = []
            for _ in range(a.runs):
                got, srv = run_page(browser, base, path, label, a.clicks, log)
                pooled += got
                pooled_srv += srv
                report(path, got, a.clicks, srv, a.each)
            if a.runs > 1:
                report(f"{path} (all {a.runs} runs)", pooled, a.clicks * a.runs, pooled_srv)
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at the end")


if __name__ == "__main__":
    main()
