"""Benchmark: prompt lookup and early exit on SmolLM2-135M-Instruct against plain greedy decoding
(the Speculative decoding page's button, kvviz.speculative.measure.measure_self_speedup).

Both prompts of the page (a text to repeat, an open question; chat template), each method with the
page's defaults (prompt lookup k = 10, n = 2; early exit γ = 4 at --exit-layer), --runs timed runs
of each against as many plain ``generate_cached`` runs of the same tokens (greedy, stopped at the end
token), after an untimed warm-up; medians and the fastest. Prints the load average before and
after, and a JSON line per point.

usage: python bench/speculative_smollm2.py [--runs 3] [--n 32] [--exit-layer 24] [--threads 1]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvviz.models.smollm2 import SmolLM2  # noqa: E402
from kvviz.speculative.measure import measure_self_speedup  # noqa: E402
from kvviz.ui.pages.speculative import PRESETS  # noqa: E402


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--n", type=int, default=32)
    ap.add_argument("--exit-layer", type=int, default=24)
    ap.add_argument("--draft-tokens", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    model = SmolLM2()
    prompts = [(case, model.ids(model.prompt(text, chat=True))) for case, text in PRESETS.items()]
    print(f"load before {load()}")
    m = measure_self_speedup(model, prompts, new_tokens=a.n, exit_layer=a.exit_layer, draft_tokens=a.draft_tokens,
                             runs=a.runs, threads=a.threads)
    print(f"load after {load()}; {m.seconds:.1f} s")
    print(f"{'prompt':8} {'method':14} {'tokens':>6} {'α':>6} {'tok/pass':>8} {'spec s':>7} {'plain s':>7} "
          f"{'×':>5} {'× best':>6} same")
    for p in m.points:
        rate = "—" if p.acceptance_rate is None else f"{p.acceptance_rate:.2f}"
        print(f"{p.prompt:8} {p.method:14} {p.new_tokens:6} {rate:>6} {p.tokens_per_pass:8.2f} {p.speculative_s:7.2f} "
              f"{p.plain_s:7.2f} {p.measured:5.2f} {p.measured_best:6.2f} {p.same_tokens}")
    for p in m.points:
        print(json.dumps({"prompt": p.prompt, "method": p.method, "tokens": p.new_tokens, "proposed": p.proposed,
                          "accepted": p.accepted, "passes": p.target_passes, "speculative_s": round(p.speculative_s, 3),
                          "plain_s": round(p.plain_s, 3), "speedup": round(p.measured, 3),
                          "speedup_best": round(p.measured_best, 3), "same_tokens": p.same_tokens}))


if __name__ == "__main__":
    main()
