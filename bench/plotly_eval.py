"""Benchmark: how long a fresh browser takes to load and evaluate a plotly.js bundle.

Serves each file from a local HTTP server and loads it with a plain ``<script>`` tag in a new
browser context (nothing cached), timing in the page's clock from just before the tag until its
``onload`` (fetch, compile and evaluation; ``window.Plotly`` checked). The files alternate, so a
change of the machine's speed hits all of them alike. By default the app's bundle
(``static/plotly-kvviz-<version>.min.js``); give others to compare, e.g. the distributed cartesian
bundle from npm's ``plotly.js-cartesian-dist-min``.

usage: python bench/plotly_eval.py [--runs 7] [FILE ...]
"""
from __future__ import annotations

import argparse
import http.server
import statistics
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playwright.sync_api import sync_playwright  # noqa: E402

from kvviz.ui.components.plotly_js import PLOTLY_BUNDLE, STATIC  # noqa: E402
from tools.browser import CHROME_ARGS, CHROMIUM  # noqa: E402

PAGE = ("<!doctype html><html><body><script>window.t0 = performance.now()</script>"
        "<script src='/{i}.js' onload='window.t1 = performance.now()'></script></body></html>")


def serve(files: list[Path]) -> http.server.ThreadingHTTPServer:
    """/<i>.html loads /<i>.js, which is files[i]."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:                       # noqa: N802 - http.server's name
            stem, _, ext = self.path.lstrip("/").partition(".")
            if not stem.isdigit() or int(stem) >= len(files):      # e.g. the browser's favicon
                self.send_error(404)
                return
            body = (PAGE.format(i=stem).encode() if ext == "html" else files[int(stem)].read_bytes())
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if ext == "html" else "text/javascript")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("files", nargs="*", type=Path, default=[STATIC / PLOTLY_BUNDLE])
    a = ap.parse_args()
    httpd = serve(a.files)
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    times: list[list[float]] = [[] for _ in a.files]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        for _ in range(a.runs):
            for i in range(len(a.files)):
                context = browser.new_context()             # empty cache, no compiled code kept
                page = context.new_page()
                page.goto(f"{base}/{i}.html")
                page.wait_for_function("window.t1 !== undefined")
                assert page.evaluate("typeof window.Plotly.newPlot") == "function", a.files[i]
                times[i].append(page.evaluate("window.t1 - window.t0"))
                context.close()
        browser.close()
    httpd.shutdown()
    for f, ts in zip(a.files, times):
        print(f"{f.name:40s} {f.stat().st_size / 1e6:4.2f} MB  load + evaluate: median "
              f"{statistics.median(ts):4.0f} ms  (min {min(ts):.0f}, max {max(ts):.0f}; {len(ts)} runs)")


if __name__ == "__main__":
    main()
