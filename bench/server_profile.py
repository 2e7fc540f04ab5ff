"""Benchmark: a fresh server's start-up, its first visit, its memory per page, and a soak of many reruns.

- first visit: for each stepping page, a fresh `streamlit run`; once it has finished its warm-up
  (the engine, the pages' default runs and the real models loaded, kvviz/ui/app/warmup.py: the health
  check answers at once, bench/first_page.py times that), the page's link is opened in a new
  browser (nothing cached) once it has finished starting (the machine idle again; --no-settle: at
  once, its start-up sharing the cores) and timed until its charts are drawn (the stepper's first
  event drawn completely, figures shown; the target is ≤ 3 s); the time from `streamlit run` to
  the end of the warm-up is printed too;
- time from `streamlit run` to the home page drawn in the browser (first visit, cold);
- the server's resident memory (VmRSS) after opening each page in turn;
- with --files: the server's time per frontend file, from memory (kvviz/ui/app/serve_files.py) and as
  Streamlit's own StaticFiles sends it (the same requests with a Range header, which the middleware
  leaves to Streamlit): the files of Streamlit's index.html fetched six at a time, as a browser does;
- a soak: SOAK reruns (Right / Home key presses across the stepping pages); RSS sampled every
  50 reruns, to show that memory settles instead of growing without bound.

usage: python bench/server_profile.py [--soak 300] [--first-visit-only] [--no-settle] [--files]
"""
from __future__ import annotations

import argparse
import functools
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from playwright.sync_api import sync_playwright  # noqa: E402

from kvviz.ui.app.pages import PAGES  # noqa: E402
from tools.browser import CHROME_ARGS, CHROMIUM, Page, free_port, warm_up_status  # noqa: E402

STEPPING = ["ABC_miniature", "Weather_heads", "Tiny_GPT", "Cost_and_scale?tab=Batching", "Paged_cache",
            "Smaller_caches", "Speculative_decoding"]   # pages stepped with Right
FIRST_VISIT = ["ABC_miniature", "Weather_heads", "Tiny_GPT", "Paged_cache", "Smaller_caches", "Speculative_decoding"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_server() -> tuple[subprocess.Popen, str, float]:
    """A fresh ``streamlit run``: (process, base URL, seconds until it had finished its warm-up: it
    answers its health check at once and warms up in the background, kvviz/ui/app/warmup.py)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    while not (warm_up_status(base) or {}).get("ready"):
        if proc.poll() is not None:
            raise RuntimeError("streamlit did not start")
        time.sleep(0.05)
    return proc, base, time.perf_counter() - t0


def _cpu_times() -> tuple[int, int]:
    """(idle, total) jiffies of all cores since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return fields[3] + fields[4], sum(fields)           # idle + iowait


def wait_idle(min_idle: float = 0.85, window: float = 0.25, limit: float = 5.0) -> float:
    """Wait until the machine's cores were at least ``min_idle`` idle over one ``window`` (seconds),
    at most ``limit`` seconds; returns the seconds waited. A browser just launched keeps both cores
    busy for a while (its GPU and network processes starting): a link opened meanwhile shares them
    with it, which no visitor's running browser does."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < limit:
        idle0, total0 = _cpu_times()
        time.sleep(window)
        idle1, total1 = _cpu_times()
        if total1 > total0 and (idle1 - idle0) / (total1 - total0) >= min_idle:
            return time.perf_counter() - t0
    print(f"  (the machine did not become idle within {limit:.0f} s: the link is opened anyway)", flush=True)
    return time.perf_counter() - t0


def first_visit(p, path: str, settle: bool = True) -> tuple[float, float, float]:
    """(seconds from ``streamlit run`` until the server answered, seconds the new browser took to
    finish starting, seconds from opening ``path`` on
    that fresh server until its stepper has drawn its first event, charts included); the browser is
    fresh too (nothing cached), and has finished starting when the link is opened (``settle``: the
    machine idle again, ``wait_idle``)."""
    proc, base, healthy = start_server()
    try:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        settled = wait_idle() if settle else 0.0
        t0 = time.perf_counter()
        page.goto(f"{base}/{path}", wait_until="commit")
        page.locator(".kvs-root[data-drawn] .kvs-fig:visible").first.wait_for(timeout=120_000)
        seconds = time.perf_counter() - t0
        browser.close()
        return healthy, settled, seconds
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def frontend_files(rounds: int = 5) -> None:
    """ms per file the server needs for the files a first visit starts with, six in flight."""
    import re
    from concurrent.futures import ThreadPoolExecutor
    proc, base, _ = start_server()
    try:
        index = urllib.request.urlopen(base + "/").read().decode()
        files = re.findall(r'(?:src|href)="\./(static/[^"]+)"', index)

        def get(path: str, ranged: bool) -> int:
            req = urllib.request.Request(f"{base}/{path}", headers={"Range": "bytes=0-"} if ranged else {})
            with urllib.request.urlopen(req) as r:
                assert r.status == (206 if ranged else 200)
                return len(r.read())

        for ranged, how in ((False, "from memory (kvviz)"), (True, "Streamlit's StaticFiles")):
            times = []
            for _ in range(rounds):
                t0 = time.perf_counter()
                with ThreadPoolExecutor(6) as pool:
                    size = sum(pool.map(functools.partial(get, ranged=ranged), files))
                times.append((time.perf_counter() - t0) / len(files) * 1e3)
            print(f"{len(files)} frontend files ({size / 1e6:.1f} MB), {how:24s}: "
                  + ", ".join(f"{t:.2f}" for t in sorted(times)) + " ms per file", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--soak", type=int, default=300)
    ap.add_argument("--first-visit-only", action="store_true", help="only the first visits of the stepping pages")
    ap.add_argument("--files", action="store_true", help="only the server's time per frontend file")
    ap.add_argument("--no-settle", action="store_true",
                    help="open each link right after launching the browser (its start-up shares the cores)")
    a = ap.parse_args()
    if a.files:
        frontend_files()
        return
    import os
    print(f"load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} at start")
    with sync_playwright() as p:
        for path in FIRST_VISIT:
            healthy, settled, seconds = first_visit(p, path, settle=not a.no_settle)
            print(f"first visit of a fresh server: {path:20s} charts drawn {seconds:.2f} s after opening the link "
                  f"(server warmed up {healthy:.2f} s after start; browser started in {settled:.2f} s)", flush=True)
    if a.first_visit_only:
        return
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                             "--server.address", "127.0.0.1", "--server.headless", "true"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROME_ARGS)
            tab = Page(browser)
            while True:
                try:
                    urllib.request.urlopen(base + "/_stcore/health", timeout=1)
                    break
                except OSError:
                    time.sleep(0.05)
            health = time.perf_counter() - t0
            tab.goto(base)
            tab.page.locator("h1").first.wait_for()
            first = time.perf_counter() - t0
            print(f"start-up: server healthy after {health:.2f} s, home page drawn after {first:.2f} s")
            print(f"RSS after home page: {rss_mb(proc.pid):.0f} MB")
            for page in PAGES[1:]:
                tab.goto(f"{base}{page.url}")
                print(f"RSS after {page.url[1:]:20s}: {rss_mb(proc.pid):.0f} MB")
            samples = []
            pages = [f"{base}/{name}" for name in STEPPING]
            for i in range(a.soak):
                if i % 25 == 0:
                    tab.goto(pages[(i // 25) % len(pages)])
                    tab.page.locator("h1").first.click()
                tab.page.keyboard.press("Home" if i % 10 == 9 else "ArrowRight")
                tab.page.wait_for_timeout(350)      # the step report (250 ms after the press) starts a rerun
                tab.settle()
                if i % 50 == 49:
                    samples.append(rss_mb(proc.pid))
            print(f"soak of {a.soak} reruns, RSS every 50 (MB): " + ", ".join(f"{s:.0f}" for s in samples))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
