"""How soon a fresh server answers, draws its first page, and has every default run ready (a benchmark).

    python bench/first_page.py                          # 3 starts with the cache directory as it is (warm)
    python bench/first_page.py --cold 1 --warm 3        # first 1 start from a fresh, empty cache directory
    KVVIZ_REAL_MODELS=smollm2 python bench/first_page.py --warm 2     # a host that loads SmolLM2 only

Each start is a fresh ``streamlit run app.py`` (tools/browser.py ``start_server``; every real model
kvviz knows unless ``KVVIZ_REAL_MODELS`` says otherwise), timed from starting the process until:

- **health**: it answers ``/_stcore/health`` (polled every 20 ms);
- **home page**: chromium (already running, as a visitor's browser: Debian's chromium with its
  usual processes, or chromium-headless-shell where chromium is not installed; a fresh context,
  nothing cached) opened the printed address as soon as the
  health check answered, and the home page is drawn: its title, its list of pages and its last
  element, the script finished (tools/browser.py ``Page``);
- **ready**: the warm-up in the background (kvviz/ui/app/warmup.py) has made every page's default
  run and prepared and loaded every real model (``/_kvviz/ready``, polled every 100 ms); a cold start
  (``--cold``: a new temporary ``KVVIZ_CACHE_DIR``, removed afterwards) converts each model's weights
  first (≈ 25 s each).

The machine's cpu score is measured first (the reference machine's fixed mix of torch matmuls, a
softmax and Python loops, one thread, median of five; smaller is faster) and every figure is also
shown scaled to the reference machine: × ``--reference`` / score. The load average is printed per start.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools import browser as tb  # noqa: E402

REFERENCE_SCORE = 1.65      # seconds: the reference machine's cpu score


def cpu_score(runs: int = 5) -> float:
    """Seconds for a fixed mix, single-threaded (median of ``runs``): torch matmuls of a small model's
    shapes, a softmax over a 512-token prefill's attention, plain Python loops (a rerun's share)."""
    import torch
    torch.set_num_threads(1)
    times = []
    for _ in range(runs):
        torch.manual_seed(0)
        t0 = time.perf_counter()
        a, b = torch.randn(64, 576), torch.randn(576, 1536)
        for _ in range(200):
            a @ b
        x = torch.randn(2, 9, 512, 64)
        for _ in range(20):
            torch.softmax(x @ x.transpose(-1, -2) / 8.0, dim=-1) @ x
        s = 0
        for i in range(1_000_000):
            s += i % 7
        d = {}
        for i in range(300_000):
            d[str(i)] = i
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def one_start(browser, env: dict[str, str], timeout: float) -> dict[str, float]:
    """Seconds from ``streamlit run`` to its health check, its home page drawn, its warm-up ready."""
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc, base, log = tb.start_server(env=env)
    got: dict[str, float] = {"load": load}
    tab = None
    try:
        while True:
            try:
                if urllib.request.urlopen(base + "/_stcore/health", timeout=1).read() == b"ok":
                    got["health"] = time.perf_counter() - t0
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"the server did not answer; see {log}")
            time.sleep(0.02)
        tab = tb.Page(browser, fresh=True)
        tab.page.goto(base + "/", wait_until="commit", timeout=timeout * 1000)
        # the home page's title and its last element (the expander of every page), its script finished
        tab.page.locator("h1").first.wait_for(timeout=timeout * 1000)
        tab.page.locator("[data-testid='stExpander']").last.wait_for(timeout=timeout * 1000)
        tab.page.locator("[data-testid='stApp'][data-test-script-state='notRunning']").wait_for(
            state="attached", timeout=timeout * 1000)
        got["home"] = time.perf_counter() - t0
        status: dict = {}
        while not status.get("ready"):
            if proc.poll() is not None or time.perf_counter() - t0 > timeout:
                raise RuntimeError(f"the warm-up did not finish; see {log}")
            time.sleep(0.1)
            status = tb.warm_up_status(base) or {}
        got["ready"] = time.perf_counter() - t0
        got["steps"] = status.get("steps") or 0
        if status.get("failed"):
            print(f"  (failed steps: {', '.join(status['failed'])}; see {log})", flush=True)
        assert not tab.errors, tab.errors
    finally:
        if tab is not None:
            tab.close()
        tb.stop_server(proc)
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=int, default=3, help="starts with the cache directory as it is")
    ap.add_argument("--cold", type=int, default=0, help="starts from a fresh temporary cache directory (first)")
    ap.add_argument("--reference", type=float, default=REFERENCE_SCORE, help="the reference machine's cpu score (s)")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per start")
    a = ap.parse_args()
    from playwright.sync_api import sync_playwright

    # a visitor's browser: chromium, else (not installed) the tests' chromium-headless-shell
    chromium = tb.CHROMIUM if Path(tb.CHROMIUM).exists() else tb.TEST_CHROMIUM
    score = cpu_score()
    scale = a.reference / score
    models = os.environ.get("KVVIZ_REAL_MODELS", "every real model")
    print(f"cpu score {score:.2f} s (reference {a.reference:.2f} s): figures × {scale:.2f} for the reference; "
          f"models: {models}; browser: {Path(chromium).name}", flush=True)
    print(f"{'start':>10} {'load':>5} | {'health':>7} {'home':>7} {'ready':>7} s | scaled: {'health':>7} "
          f"{'home':>7} {'ready':>7} s", flush=True)
    results: dict[str, list[dict]] = {"cold": [], "warm": []}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=tb.CHROME_ARGS)
        try:
            for kind, n in (("cold", a.cold), ("warm", a.warm)):
                for i in range(n):
                    cache = tempfile.mkdtemp(prefix="kvviz-cold-cache-") if kind == "cold" else None
                    try:
                        got = one_start(browser, {"KVVIZ_CACHE_DIR": cache} if cache else {}, a.timeout)
                    finally:
                        if cache:
                            shutil.rmtree(cache, ignore_errors=True)
                    results[kind].append(got)
                    print(f"{kind + ' ' + str(i + 1):>10} {got['load']:5.1f} | "
                          + " ".join(f"{got[k]:7.2f}" for k in ("health", "home", "ready")) + "   | "
                          + " ".join(f"{got[k] * scale:7.2f}" for k in ("health", "home", "ready")), flush=True)
        finally:
            browser.close()
    for kind, runs in results.items():
        if len(runs) > 1:
            med = {k: statistics.median(r[k] for r in runs) for k in ("health", "home", "ready")}
            print(f"{kind + ' median':>10} {'':5} | " + " ".join(f"{med[k]:7.2f}" for k in med) + "   | "
                  + " ".join(f"{med[k] * scale:7.2f}" for k in med), flush=True)


if __name__ == "__main__":
    main()
