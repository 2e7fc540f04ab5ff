"""How soon a static export's page shows its first chart (a benchmark, not a test).

    python -m kvviz export --out /tmp/kvviz-site                    # once
    python bench/static_first_chart.py /tmp/kvviz-site              # every screen, 3 times each, from file://
    python bench/static_first_chart.py /tmp/kvviz-site --http       # the same over python -m http.server
    python bench/static_first_chart.py /tmp/kvviz-site --warm       # one browser tab going from screen to screen

Each visit is a fresh browser context of Debian's chromium (its usual processes, as a visitor's
browser: not the tests' one-process mode) opening one screen (``--warm``: one tab opens every
screen in turn, as a student clicking through the lecture: the browser's caches stay warm); the
page records, on its own clock from the start of the navigation (``performance.now()``), when
plotly has drawn the first chart (the first ``.main-svg`` in the document) and when the stepper
has drawn its whole first event (``.kvs-root[data-drawn]``; pages without a stepper: their first
chart). Reported: the median and the worst per screen, then over all screens, with the machine's
load average.
"""
from __future__ import annotations

import argparse
import functools
import http.server
import os
import statistics
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.browser import CHROME_ARGS, CHROMIUM, free_port  # noqa: E402

# marks, on the page's own clock, the first chart and the stepper's first complete event
MARKS = """(() => {
  const seen = () => {
    const now = performance.now();
    if (window.__firstChart === undefined && document.querySelector('.main-svg')) window.__firstChart = now;
    if (window.__firstEvent === undefined && document.querySelector('.kvs-root[data-drawn]')) window.__firstEvent = now;
  };
  new MutationObserver(seen).observe(document, {subtree: true, childList: true, attributes: true,
                                                  attributeFilter: ['data-drawn']});
})();"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", type=Path, help="a folder written by python -m kvviz export")
    ap.add_argument("--repeat", type=int, default=3, help="visits per screen")
    ap.add_argument("--http", action="store_true", help="serve the folder with http.server instead of file://")
    ap.add_argument("--only", nargs="*", help="screen files (default: every NN_*.html)")
    ap.add_argument("--warm", action="store_true", help="one tab for every visit (caches kept) instead of fresh ones")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    pages = a.only or sorted(p.name for p in a.site.glob("[0-9][0-9]_*.html"))
    if a.http:
        port = free_port()
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(a.site))
        handler.log_message = lambda *args: None
        httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        base = f"http://127.0.0.1:{port}/"
    else:
        base = a.site.resolve().as_uri() + "/"
    print(f"{len(pages)} screens from {'http.server' if a.http else 'file://'}, {a.repeat} "
          f"{'visits each in one tab' if a.warm else 'fresh visits each'}, load average {os.getloadavg()[0]:.1f}")
    firsts, events = [], []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        tab = None
        if a.warm:
            tab = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            tab.add_init_script(MARKS)
        for name in pages:
            got = []
            for _ in range(a.repeat):
                if tab is None:
                    ctx = browser.new_context(viewport={"width": 1400, "height": 900})
                    page = ctx.new_page()
                    page.add_init_script(MARKS)
                else:
                    ctx, page = None, tab
                page.goto(base + name)
                page.wait_for_function("window.__firstChart !== undefined && (window.__firstEvent !== undefined"
                                       " || !document.querySelector('[data-kvx-stepper]'))", timeout=30_000)
                chart, event = page.evaluate("[window.__firstChart, window.__firstEvent ?? window.__firstChart]")
                got.append((chart / 1e3, event / 1e3))
                if ctx is not None:
                    ctx.close()
            c = [g[0] for g in got]
            e = [g[1] for g in got]
            firsts += c
            events += e
            print(f"  {name:30s} first chart {statistics.median(c):.3f} s (worst {max(c):.3f})   "
                  f"first event whole {statistics.median(e):.3f} s (worst {max(e):.3f})", flush=True)
        browser.close()
    print(f"all screens: first chart median {statistics.median(firsts):.3f} s, worst {max(firsts):.3f} s; "
          f"first event whole median {statistics.median(events):.3f} s, worst {max(events):.3f} s; "
          f"load average {os.getloadavg()[0]:.1f}")
    if a.http:
        httpd.shutdown()


if __name__ == "__main__":
    main()
