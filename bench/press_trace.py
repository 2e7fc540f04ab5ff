"""Benchmark: where a step press's time goes, from a Chrome trace, on the Real LLM page's long Gemma 3 view.

Opens ``?llm_model=gemma3&llm_text=long`` in a fresh tab per run (as bench/step_clicks.py does), records
a Chrome trace (``devtools.timeline``) of ``--clicks`` Right presses and prints, per press, the time
from the key event to the event drawn and painted (bench/step_clicks.py ``time_press``), the
stepper's own script (``step_view.js`` ``render``) and the page's main thread by trace event within
that time (style recalculation ``UpdateLayoutTree``, ``Layout`` with its text shaping, ``Paint``,
``Commit``, script ``FunctionCall``; nested events are each counted: the names overlap).

usage: KVVIZ_REAL_MODELS=gemma3 python bench/press_trace.py [--clicks 10] [--runs 2] [--keep DIR]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from step_clicks import app_in_browser, ready_tab, time_press  # noqa: E402

PATH = "Real_LLM?llm_model=gemma3&llm_text=long"
CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "blink"]
SHOWN = ("UpdateLayoutTree", "Layout", "InlineNode::ShapeTextIncludingFirstLine", "PrePaint", "Paint", "Commit",
         "FunctionCall", "HitTest", "MinorGC", "MajorGC")


def per_press(trace: Path, drawn: list[float]) -> list[collections.Counter]:
    """The main thread's milliseconds by event name from each keydown's dispatch until it was drawn."""
    ev = json.loads(trace.read_text())
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    threads = collections.Counter((e["pid"], e["tid"]) for e in ev if e.get("name") == "EventDispatch")
    main = threads.most_common(1)[0][0]                  # the renderer's main thread: it dispatches the events
    keys = sorted(e["ts"] for e in ev if e.get("name") == "EventDispatch"
                  and e.get("args", {}).get("data", {}).get("type") == "keydown")
    out = []
    for k, ms in zip(keys, drawn):
        sums: collections.Counter = collections.Counter()
        for e in ev:
            if (e.get("pid"), e.get("tid")) == main and e.get("ph") == "X" and k <= e["ts"] < k + ms * 1000:
                sums[e["name"]] += e.get("dur", 0) / 1000
        out.append(sums)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clicks", type=int, default=10)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--keep", default="", help="a folder to keep the traces in (Chrome's Performance panel reads them)")
    a = ap.parse_args()
    folder = Path(a.keep or tempfile.mkdtemp())
    folder.mkdir(parents=True, exist_ok=True)
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    totals: collections.Counter = collections.Counter()
    n = 0
    with app_in_browser() as (browser, base):
        for run in range(a.runs):
            tab = ready_tab(browser, f"{base}/{PATH}", drawn_timeout=300_000)
            trace = folder / f"presses-{run}.json"
            browser.start_tracing(page=tab.page, path=str(trace), categories=CATEGORIES)
            got = [s for s in (time_press(tab, i) for i in range(a.clicks)) if s is not None]
            browser.stop_tracing()
            tab.close()
            print(f"run {run + 1} (load {os.getloadavg()[0]:.1f}): drawn ms | stepper's script ms | main thread ms")
            for s, sums in zip(got, per_press(trace, [s[1] for s in got])):
                totals.update(sums)
                n += 1
                parts = ", ".join(f"{k} {sums[k]:.1f}" for k in SHOWN if sums[k] >= 0.5)
                print(f"  {s[1]:6.1f} | {s[3]:5.1f} | {parts}", flush=True)
    print(f"mean per press over {n}: " + ", ".join(f"{k} {totals[k] / max(1, n):.1f}" for k in SHOWN))
    print(f"traces in {folder}; load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
