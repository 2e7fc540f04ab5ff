"""A room of students opening the same link at once (a load generator, not a test).

    python bench/room.py                                   # 10, 50 and 100 visitors on /ABC_miniature?step=4
    python bench/room.py --link /Tiny_GPT --visitors 30 --repeat 2
    python bench/room.py --set server.fileWatcherType=auto --set runner.postScriptGC=true   # Streamlit's defaults
    python bench/room.py --url http://127.0.0.1:8501       # a server that is already running (no CPU/RSS figures)

Each visitor is its own Streamlit session on the websocket protocol (tests/st_session.py, no
browser). For each N, a fresh ``streamlit run`` (unless ``--url``) is warmed by one visit to the
link, then N visitors open it, spread evenly over ``--spread`` seconds, each waiting until its page
has finished running; all stay connected until the last one is done. Reported per N: visitors with
a complete page (the run finished, the page has its title, no exception), time from connecting to
a complete page (p50 / p90 / max), the server's CPU seconds per visitor (from /proc, the room
only, not the warm-up), its resident memory once everyone is in (and its peak), and when the first
element arrived (before it, a visitor sees a blank page).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import _free_port  # noqa: E402
from tests.st_session import Session  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads), from /proc/PID/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK          # utime, stime (fields 14 and 15)


def memory_mb(pid: int) -> tuple[float, float]:
    """(resident, peak resident) memory in MB, from /proc/PID/status."""
    kb = {line.split(":")[0]: int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
          if line.startswith(("VmRSS", "VmHWM"))}
    return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024


class Server:
    """A fresh ``streamlit run app.py`` on a free port, with extra ``--section.option=value`` flags."""

    def __init__(self, settings: list[str]):
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        flags = [f"--{s.split('=', 1)[0]}={s.split('=', 1)[1]}" for s in settings]
        self.proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                      "--server.address", "127.0.0.1", "--server.headless", "true", *flags],
                                     cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        t0 = time.time()
        while True:
            try:
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=1).read() == b"ok":
                    return
            except OSError:
                pass
            if time.time() - t0 > 90 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("streamlit did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


@dataclass
class Visit:
    seconds: float | None        # connect → page complete; None: never completed
    complete: bool
    problem: str = ""
    first: float | None = None   # connect → the first element drawn (before it, the page is blank)


class Room:
    """N visitors on one link; everyone stays connected until the last one has been served."""

    def __init__(self, url: str, link: str, n: int, spread: float, timeout: float, pid: int | None):
        self.url, self.n, self.spread, self.timeout, self.pid = url, n, spread, timeout, pid
        self.page, _, self.query = link.lstrip("/").partition("?")
        self.served = 0
        self.memory = (float("nan"), float("nan"))

    async def run(self) -> list[Visit]:
        self.everyone_in = asyncio.Event()
        return await asyncio.gather(*(self.visitor(self.spread * i / self.n) for i in range(self.n)))

    def _served_one(self) -> None:
        self.served += 1
        if self.served == self.n:              # the room is full: its memory, then everyone may leave
            if self.pid:
                self.memory = memory_mb(self.pid)
            self.everyone_in.set()

    async def visitor(self, delay: float) -> Visit:
        await asyncio.sleep(delay)
        s = Session(self.url, self.page, self.query, timeout=self.timeout)
        t0 = time.perf_counter()
        try:
            await s.open()
            took = time.perf_counter() - t0
            problem = "; ".join(s.exceptions()) or ("" if s.headings() else "no title")
            visit = Visit(took, not problem, problem, s.timings.get("first_delta", t0) - t0)
        except Exception as e:                 # noqa: BLE001 - a failed visit is a result here
            visit = Visit(None, False, f"{type(e).__name__}: {e}")
        self._served_one()
        await self.everyone_in.wait()
        await s.close()
        return visit


def pct(values: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of ``values``."""
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * len(v) + 0.5) - 1))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", default="/ABC_miniature?step=4", help="page and query every visitor opens")
    ap.add_argument("--visitors", type=int, nargs="+", default=[10, 50, 100])
    ap.add_argument("--spread", type=float, default=3.0, help="seconds over which the visitors arrive")
    ap.add_argument("--repeat", type=int, default=1, help="rooms per N, each on a fresh server")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds a visitor waits for its page")
    ap.add_argument("--url", help="use this running server instead of starting one (no CPU or memory figures)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.OPTION=VALUE",
                    help="a Streamlit option for the started server, e.g. server.fileWatcherType=auto")
    a = ap.parse_args()
    settings = " ".join(a.set) or ".streamlit/config.toml"
    print(f"link {a.link}, arrivals spread over {a.spread:g} s, settings: {settings}")
    print(f"{'N':>4} {'complete':>9} {'p50 s':>7} {'p90 s':>7} {'max s':>7} {'CPU s/visitor':>14} "
          f"{'RSS MB':>7} {'peak MB':>8} {'warm-up s':>9} {'first element p50 s':>19}")
    for n in a.visitors:
        for _ in range(a.repeat):
            server = None if a.url else Server(a.set)
            url, pid = (a.url, None) if a.url else (server.url, server.proc.pid)
            try:
                path, _, query = a.link.lstrip("/").partition("?")
                t0 = time.perf_counter()
                asyncio.run(Session(url, path, query, timeout=a.timeout).open())     # the lecturer's own visit
                warm = time.perf_counter() - t0
                cpu0 = cpu_seconds(pid) if pid else 0.0
                r = Room(url, a.link, n, a.spread, a.timeout, pid)
                visits = asyncio.run(r.run())
                rss, peak = r.memory
                cpu = (cpu_seconds(pid) - cpu0) / n if pid else float("nan")
            finally:
                if server:
                    server.stop()
            times = [v.seconds for v in visits if v.complete]
            done = len(times)
            p50, p90, worst = (pct(times, 0.5), pct(times, 0.9), max(times)) if times else (float("nan"),) * 3
            first = pct([v.first for v in visits if v.complete], 0.5) if times else float("nan")
            print(f"{n:>4} {done:>5}/{n:<3} {p50:7.2f} {p90:7.2f} {worst:7.2f} {cpu:14.3f} {rss:7.0f} {peak:8.0f} "
                  f"{warm:9.2f} {first:19.2f}", flush=True)
            for v in visits:
                if not v.complete:
                    print(f"     not complete: {v.problem[:160]}")
                    break


if __name__ == "__main__":
    main()
