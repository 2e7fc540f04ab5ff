"""A room of students opening the same link at once (a load generator, not a test).

    python bench/room.py                                   # 10, 50 and 100 visitors on /ABC_miniature?step=4
    python bench/room.py --link /Tiny_GPT --visitors 30 --repeat 2
    python bench/room.py --set server.fileWatcherType=auto --set runner.postScriptGC=true   # Streamlit's defaults
    python bench/room.py --url http://127.0.0.1:8501       # a server that is already running (no CPU/RSS figures)
    python bench/room.py --assets --visitors 100 300       # each visitor fetches the page's files first, as a browser
    python bench/room.py --assets --replicas 2 --visitors 300   # two replicas behind nginx (tools/replicas.py)

Each visitor is its own Streamlit session on the websocket protocol (tools/st_session.py, no
browser). For each N, a fresh ``streamlit run`` (unless ``--url``) is warmed by one visit to the
link, then N visitors open it, spread evenly over ``--spread`` seconds, each waiting until its page
has finished running; all stay connected until the last one is done. Reported per N: visitors with
a complete page (the run finished, the page has its title, no exception), time from connecting to
a complete page (p50 / p90 / max), the server's CPU seconds per visitor (from /proc, the room
only, not the warm-up), its resident memory once everyone is in (and its peak), and when the first
element arrived (before it, a visitor sees a blank page).

``--assets``: before its websocket a visitor fetches what a browser fetches first: the page's
``index.html``, every script, module preload and stylesheet it names, its icon, and kvviz's plotly.js
bundle, over six keep-alive connections (a browser's limit per host), gzip accepted; the time then
runs from the first request. ``--replicas N``: N ``streamlit run`` behind nginx (tools/replicas.py),
each visitor kept on one replica by the cookie its first request gets; the CPU and memory figures are
the replicas' sums, and the split of visitors between replicas is shown. Every row says the
CPU this load generator itself used per visitor and the machine's load average (1 minute) when the
room opened and when it closed: both share the machine's cores with the servers measured.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import gzip
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urljoin, urlsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools.browser import free_port, warm_up_status  # noqa: E402
from tools.replicas import COOKIE, Replicas  # noqa: E402
from tools.st_session import Connection, Session  # noqa: E402

CONNECTIONS = 6              # a browser's parallel connections per host (HTTP/1.1)
_FILES = re.compile(r"<(?:script|link)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"[^>]*>")

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
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        flags = [f"--{s.split('=', 1)[0]}={s.split('=', 1)[1]}" for s in settings]
        self.proc = subprocess.Popen([sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(port),
                                      "--server.address", "127.0.0.1", "--server.headless", "true", *flags],
                                     cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        t0 = time.time()
        while True:                 # it answers at once: wait for its warm-up (kvviz/ui/app/warmup.py) too
            if (warm_up_status(self.url) or {}).get("ready"):
                return
            if time.time() - t0 > 600 or self.proc.poll() is not None:
                self.stop()
                raise RuntimeError("streamlit did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=20)


def children(pid: int) -> list[int]:
    """Child processes of ``pid`` (nginx's workers), from /proc."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(d.name))
            except (OSError, IndexError, ValueError):
                pass
    return out


def plotly_bundle_path() -> str:
    """Where the page loads kvviz's plotly.js bundle (kvviz/ui/components/plotly_js.py: app/static/, with its hash)."""
    from kvviz.ui.components import plotly_js
    return f"/app/static/{plotly_js.PLOTLY_BUNDLE}?v={plotly_js.BUNDLE_HASH}"


@dataclass
class Files:
    """What a visitor's browser fetched before opening the websocket."""
    seconds: float = 0.0
    count: int = 0
    bytes: int = 0
    failed: list[str] = field(default_factory=list)
    cookie: str = ""            # the replica cookie nginx gave (none on a single server)
    replica: str = ""


async def fetch_files(base: str, link: str) -> Files:
    """The page's index.html, then everything it names and the plotly bundle, six at a time."""
    t0 = time.perf_counter()
    out = Files()
    first = Connection(base)
    status, headers, body = await first.get(link)
    for c in headers.get("set-cookie", []):
        if c.startswith(COOKIE + "="):
            out.cookie = c.split(";", 1)[0]
    out.replica = (headers.get("x-kvviz-replica") or [""])[0]
    zipped = "gzip" in ",".join(headers.get("content-encoding", []))
    html = (gzip.decompress(body) if zipped else body).decode("utf-8", "replace")
    page_url = base + link
    paths = []
    for ref in _FILES.findall(html):
        u = urlsplit(urljoin(page_url, ref))
        if u.netloc == urlsplit(base).netloc and "/_stcore/" not in u.path:
            paths.append(u.path + ("?" + u.query if u.query else ""))
    paths.append(plotly_bundle_path())
    out.count, out.bytes = 1 + len(paths), len(body)
    if status != 200:
        out.failed.append(f"{link}: {status}")
    queue = collections.deque(paths)

    async def worker(conn: Connection) -> None:
        while queue:
            path = queue.popleft()
            st, _, b = await conn.get(path, out.cookie)
            out.bytes += len(b)
            if st != 200:
                out.failed.append(f"{path}: {st}")
        await conn.close()

    await asyncio.gather(worker(first), *(worker(Connection(base)) for _ in range(CONNECTIONS - 1)))
    out.seconds = time.perf_counter() - t0
    return out


@dataclass
class Visit:
    seconds: float | None        # connect → page complete; None: never completed
    complete: bool
    problem: str = ""
    first: float | None = None   # connect → the first element drawn (before it, the page is blank)
    files: Files | None = None   # --assets: what it fetched before the websocket
    replica: str = ""            # --replicas: which one served its websocket


class Room:
    """N visitors on one link; everyone stays connected until the last one has been served."""

    def __init__(self, url: str, link: str, n: int, spread: float, timeout: float, pids: list[int],
                 assets: bool = False):
        self.url, self.n, self.spread, self.timeout, self.pids, self.assets = url, n, spread, timeout, pids, assets
        self.link = link
        self.page, _, self.query = link.lstrip("/").partition("?")
        self.served = 0
        self.memory = (float("nan"), float("nan"))

    async def run(self) -> list[Visit]:
        self.everyone_in = asyncio.Event()
        return await asyncio.gather(*(self.visitor(self.spread * i / self.n) for i in range(self.n)))

    def _served_one(self) -> None:
        self.served += 1
        if self.served == self.n:              # the room is full: its memory, then everyone may leave
            if self.pids:
                mem = [memory_mb(p) for p in self.pids]
                self.memory = (sum(m[0] for m in mem), sum(m[1] for m in mem))
            self.everyone_in.set()

    async def visitor(self, delay: float) -> Visit:
        await asyncio.sleep(delay)
        s = Session(self.url, self.page, self.query, timeout=self.timeout)
        t0 = time.perf_counter()
        files = None
        try:
            if self.assets:
                files = await fetch_files(self.url, self.link)
                if files.cookie:
                    s.headers = {"Cookie": files.cookie}
            await s.open()
            took = time.perf_counter() - t0
            problem = "; ".join(s.exceptions()) or ("" if s.headings() else "no title")
            problem = problem or ("; ".join(files.failed[:3]) if files else "")
            visit = Visit(took, not problem, problem, s.timings.get("first_delta", t0) - t0, files,
                          s.response_headers.get("x-kvviz-replica", ""))
        except Exception as e:                 # noqa: BLE001 - a failed visit is a result here
            visit = Visit(None, False, f"{type(e).__name__}: {e}", files=files)
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
    ap.add_argument("--assets", action="store_true", help="each visitor first fetches the page's files, as a browser")
    ap.add_argument("--replicas", type=int, default=0, help="start this many replicas behind nginx (tools/replicas.py)")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.OPTION=VALUE",
                    help="a Streamlit option for the started server, e.g. server.fileWatcherType=auto")
    a = ap.parse_args()
    settings = " ".join(a.set) or ".streamlit/config.toml"
    where = a.url or (f"{a.replicas} replicas behind nginx" if a.replicas else "one streamlit run")
    print(f"link {a.link}, arrivals spread over {a.spread:g} s, {where}, settings: {settings}"
          f"{', with the page files' if a.assets else ''}, {os.cpu_count()} cores")
    print(f"{'N':>4} {'complete':>9} {'p50 s':>7} {'p90 s':>7} {'max s':>7} {'CPU s/visitor':>14} "
          f"{'RSS MB':>7} {'peak MB':>8} {'warm-up s':>9} {'first el. p50':>13} {'files p50 s':>11} "
          f"{'MB/visitor':>10} {'bench CPU s/v':>13} {'load avg':>11}  split")
    for n in a.visitors:
        for _ in range(a.repeat):
            server = replicas = None
            if a.url:
                url, pids, warm_urls = a.url, [], [a.url]
            elif a.replicas:
                replicas = Replicas(a.replicas, free_port(), "127.0.0.1", settings=a.set).start()
                url, pids = replicas.url, [p.pid for p in replicas.procs]
                warm_urls = [f"http://127.0.0.1:{p}" for p in replicas.ports]
            else:
                server = Server(a.set)
                url, pids, warm_urls = server.url, [server.proc.pid], [server.url]
            try:
                path, _, query = a.link.lstrip("/").partition("?")
                t0 = time.perf_counter()
                for w in warm_urls:                  # the lecturer's own visit (on every replica)
                    asyncio.run(Session(w, path, query, timeout=a.timeout).open())
                    if a.assets:
                        asyncio.run(fetch_files(w, a.link))
                warm = time.perf_counter() - t0
                proxy = [replicas.proxy.pid, *children(replicas.proxy.pid)] if replicas else []
                cpu0 = sum(cpu_seconds(p) for p in pids)
                proxy0 = sum(cpu_seconds(p) for p in proxy)
                load0 = os.getloadavg()[0]
                own0 = time.process_time()
                r = Room(url, a.link, n, a.spread, a.timeout, pids, a.assets)
                visits = asyncio.run(r.run())
                own = (time.process_time() - own0) / n        # this load generator's own CPU: it shares the cores
                load1 = os.getloadavg()[0]
                rss, peak = r.memory
                cpu = (sum(cpu_seconds(p) for p in pids) - cpu0) / n if pids else float("nan")
                proxy_cpu = (sum(cpu_seconds(p) for p in proxy) - proxy0) / n if proxy else None
            finally:
                if server:
                    server.stop()
                if replicas:
                    replicas.stop()
            times = [v.seconds for v in visits if v.complete]
            done = len(times)
            p50, p90, worst = (pct(times, 0.5), pct(times, 0.9), max(times)) if times else (float("nan"),) * 3
            first = pct([v.first for v in visits if v.complete], 0.5) if times else float("nan")
            fetched = [v.files for v in visits if v.files]
            files = pct([f.seconds for f in fetched], 0.5) if fetched else float("nan")
            mb = sum(f.bytes for f in fetched) / len(fetched) / 1e6 if fetched else float("nan")
            split = collections.Counter(v.replica.rsplit(":", 1)[-1] for v in visits if v.replica)
            split_text = " / ".join(str(c) for _, c in sorted(split.items())) if split else "-"
            if proxy_cpu is not None:
                split_text += f" (nginx {proxy_cpu * 1e3:.1f} ms CPU/visitor)"
            print(f"{n:>4} {done:>5}/{n:<3} {p50:7.2f} {p90:7.2f} {worst:7.2f} {cpu:14.3f} {rss:7.0f} {peak:8.0f} "
                  f"{warm:9.2f} {first:13.2f} {files:11.2f} {mb:10.2f} {own:13.3f} {load0:5.1f}→{load1:<5.1f}  "
                  f"{split_text}",
                  flush=True)
            for v in visits:
                if not v.complete:
                    print(f"     not complete: {v.problem[:160]}")
                    break


if __name__ == "__main__":
    main()
