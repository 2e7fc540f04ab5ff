"""Key presses lost while a step is still being drawn (a benchmark, not a test).

    python bench/lost_presses.py [--presses 25]

A fresh ``streamlit run``; on each stepping page, ArrowRight is pressed again as soon as the event
heading shows the previous press (so most presses land while the step fragment is still rerunning,
like a lecturer pressing quickly). A press counts as lost when the heading has not moved 8 s later.
The loop is ``tools.browser.Page.lost_presses``, which tests/browser/test_fast_presses.py runs too.
The stepper (kvviz/ui/components/step_view.py) handles the keys in the browser and draws the step there, so a
press no longer waits for a rerun; Streamlit's own button shortcuts used to lose some of these presses.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.step_clicks import app_in_browser  # noqa: E402
from tools.browser import Page  # noqa: E402

PAGES = ["ABC_miniature?new=32", "Weather_heads?new=20", "Tiny_GPT?gpt_new=40",
         "Cost_and_scale?tab=Batching&bt_new=30"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presses", type=int, default=25)
    a = ap.parse_args()
    with app_in_browser() as (browser, base):
        for path in PAGES:
            tab = Page(browser)
            tab.goto(f"{base}/{path}")
            print(f"{path:40s} lost {tab.lost_presses(a.presses)[1]} of {a.presses} presses")
            tab.close()


if __name__ == "__main__":
    main()
