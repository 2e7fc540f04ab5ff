"""Benchmark: time per slider key press on the sampling page, as a browser sees it.

Starts a fresh `streamlit run`, opens /Sampling, focuses a slider and presses a key N times (each
press moves the slider one step and reruns the page: every stage, the entropy, N draws and the
charts). Reports the browser round trip and the server time of the page body
(``kvviz.ui.app.perf.timed("sampling.render")``, logged when KVVIZ_TIMING_LOG is set).

usage: python bench/sampling_controls.py [--presses 15] [--draws 100000]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.step_clicks import app_in_browser, server_times, time_press  # noqa: E402
from tools.browser import Page  # noqa: E402

# (slider label, key, query string)
CASES = [("Top-p", "ArrowLeft", "sampling_top_p=0.9"), ("Temperature τ", "ArrowRight", "sampling_tau=0.5")]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presses", type=int, default=15)
    ap.add_argument("--draws", type=int, default=100_000)
    a = ap.parse_args()
    log = Path(tempfile.mkdtemp()) / "timing.csv"
    os.environ["KVVIZ_TIMING_LOG"] = str(log)
    with app_in_browser() as (browser, base):
        for label, key, query in CASES:
            tab = Page(browser)
            tab.goto(f"{base}/Sampling?{query}&sampling_n={a.draws}")
            log.write_text("")
            ms = []
            slider = tab.page.get_by_role("slider", name=label)
            for _ in range(a.presses):
                slider.focus()
                press = time_press(tab, key)
                if press is not None:
                    ms.append(press)
            server_ms = server_times(log, "sampling.render")
            print(f"{label:14s} presses={len(ms):3d} draws={a.draws:,}  server median "
                  f"{statistics.median(server_ms):6.1f} ms max {max(server_ms):6.1f} ms | browser round trip "
                  f"median {statistics.median(ms):6.1f} ms")
            tab.close()


if __name__ == "__main__":
    main()
