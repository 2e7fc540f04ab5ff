"""Benchmark: step presses on Gemma 3's long text (the Real LLM page, ``?llm_model=gemma3&llm_text=long``),
with and without the rule that renders the 728 token chips below the stepper only near the screen
(kvviz/ui/app/style.css, ``content-visibility``), in turns in one tab of one server.

On a shared machine the load moves between runs of bench/step_clicks.py by more than a change is
worth; here both ways are timed in the same tab, in turns (A B A B …), so that the load falls on both.
"Without" injects ``.kv-toks { content-visibility: visible !important }`` (what the page drew before);
each turn goes back to event 0 (Home) and presses Right ``--clicks`` times, timed as
bench/step_clicks.py times them (key event → event drawn and painted).

usage: KVVIZ_REAL_MODELS=gemma3 python bench/long_view_presses.py [--clicks 10] [--turns 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from step_clicks import app_in_browser, pct, ready_tab, time_press  # noqa: E402

PATH = "Real_LLM?llm_model=gemma3&llm_text=long"
SHIPPED = "() => { document.getElementById('kv-bench-off')?.remove(); }"
WITHOUT = """() => { const s = document.createElement('style'); s.id = 'kv-bench-off';
  s.textContent = '.kv-toks { content-visibility: visible !important; }'; document.head.appendChild(s); }"""
WAYS = {"as shipped": SHIPPED, "without content-visibility": WITHOUT}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clicks", type=int, default=10)
    ap.add_argument("--turns", type=int, default=3)
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    got: dict[str, list[float]] = {w: [] for w in WAYS}
    with app_in_browser() as (browser, base):
        tab = ready_tab(browser, f"{base}/{PATH}", drawn_timeout=300_000)
        for turn in range(a.turns):
            for way, js in WAYS.items():
                tab.page.evaluate(SHIPPED)
                tab.page.evaluate(js)
                tab.page.keyboard.press("Home")
                tab.wait_drawn(0)
                tab.settle()
                drawn = [s[1] for s in (time_press(tab, i) for i in range(a.clicks)) if s is not None]
                got[way] += drawn
                print(f"turn {turn + 1} {way:28s} drawn median {statistics.median(drawn):6.1f} ms "
                      f"p90 {pct(drawn, 0.9):6.1f} | load {os.getloadavg()[0]:.1f}", flush=True)
        tab.assert_clean()
        tab.close()
    for way, drawn in got.items():
        print(f"all turns {way:28s} drawn median {statistics.median(drawn):6.1f} ms p90 {pct(drawn, 0.9):6.1f} "
              f"({len(drawn)} presses)")
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
