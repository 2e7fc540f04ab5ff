"""Where one visitor's first page load spends the server's time (a profile, not a test).

    python bench/profile_visit.py                            # /ABC_miniature?step=4, 20 visitors
    python bench/profile_visit.py --link /Tiny_GPT --visitors 10 --top 30
    python bench/profile_visit.py --set server.fileWatcherType=auto --set runner.postScriptGC=true

Starts ``streamlit run`` inside a profiling wrapper: every script run (the page, in Streamlit's
script thread) and the server's event loop (its main thread, where new sessions are set up) run
under cProfile. One warm-up visit, then the visitors one after another (each a new session, over
tools/st_session.py); prints the functions that took the most time over the visitors' runs, and
in the event loop, with the server CPU seconds per visitor.
"""
from __future__ import annotations

import argparse
import asyncio
import atexit
import cProfile
import io
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def serve(port: str, out: str, flags: list[str]) -> None:
    """The server side: ``streamlit run app.py`` with every script run and the main thread profiled."""
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.web import cli

    original = script_runner.ScriptRunner._run_script
    runs = iter(range(10**9))

    def profiled(self, rerun_data):
        prof = cProfile.Profile()
        prof.enable()
        try:
            return original(self, rerun_data)
        finally:
            prof.disable()
            prof.dump_stats(f"{out}/run-{next(runs):05d}.prof")

    script_runner.ScriptRunner._run_script = profiled
    main_thread = cProfile.Profile()

    @atexit.register                           # Streamlit handles SIGTERM itself, then exits normally
    def stop():
        main_thread.disable()
        main_thread.dump_stats(f"{out}/main.prof")

    sys.argv = ["streamlit", "run", "app.py", "--server.port", port, "--server.address", "127.0.0.1",
                "--server.headless", "true", *flags]
    main_thread.enable()
    cli.main()


def top(paths: list[Path], n: int, title: str, order: str) -> None:
    stats = pstats.Stats(*map(str, paths), stream=(buf := io.StringIO()))
    stats.sort_stats(order).print_stats(n)
    print(f"\n=== {title}, by {order} time ===")
    print("\n".join(line for line in buf.getvalue().splitlines() if line.strip() and not line.strip().startswith(
        ("Ordered", "List reduced")) and ".prof" not in line))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--serve":
        serve(sys.argv[2], sys.argv[3], sys.argv[4:])
        return
    from bench.room import cpu_seconds
    from tools.browser import free_port, warm_up_status
    from tools.st_session import Session

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--link", default="/ABC_miniature?step=4")
    ap.add_argument("--visitors", type=int, default=20)
    ap.add_argument("--top", type=int, default=25, help="functions to list")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.OPTION=VALUE")
    a = ap.parse_args()
    out = Path(tempfile.mkdtemp(prefix="kvviz-profile-"))
    port = str(free_port())
    url = f"http://127.0.0.1:{port}"
    flags = [f"--{s.split('=', 1)[0]}={s.split('=', 1)[1]}" for s in a.set]
    proc = subprocess.Popen([sys.executable, __file__, "--serve", port, str(out), *flags], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        for _ in range(6000):           # it answers at once: wait for its warm-up (kvviz/ui/app/warmup.py)
            if (warm_up_status(url) or {}).get("ready"):
                break
            time.sleep(0.1)
        page, _, query = a.link.lstrip("/").partition("?")
        asyncio.run(Session(url, page, query).open())                  # warm-up: imports, caches
        warm_runs = len(list(out.glob("run-*.prof")))
        cpu0, t0 = cpu_seconds(proc.pid), time.perf_counter()
        for _ in range(a.visitors):
            asyncio.run(Session(url, page, query).open())
        cpu = (cpu_seconds(proc.pid) - cpu0) / a.visitors
        wall = (time.perf_counter() - t0) / a.visitors
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    runs = sorted(out.glob("run-*.prof"))[warm_runs:]
    print(f"{a.link}: {a.visitors} visitors one after another, {len(runs)} script runs; server CPU "
          f"{cpu:.3f} s per visitor, {wall:.3f} s wall per visitor; settings: {' '.join(a.set) or 'config.toml'}")
    for order in ("cumulative", "tottime"):
        top(runs, a.top, "script thread: the visitors' page runs", order)
    top([out / "main.prof"], a.top, "main thread: the event loop, whole server life", "tottime")


if __name__ == "__main__":
    main()
