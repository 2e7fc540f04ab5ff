"""Benchmark: the stall a long prompt causes among running decodes, with and without chunked prefill
(kvviz.serving's ``chunk_budget``), measured on this machine (real passes, timed by
kvviz.measure.clock, one sample per pass): kvviz.serving.stall, the record the Paged cache page's
``?pg_view=stall`` draws.

Three short requests start decoding at step 0; at step --arrive a long prompt arrives. Served with
whole-prompt prefill and with each --budgets N: per request its TTFT and inter-token gaps in steps
and in measured seconds. Each setting is served --repeats times, taking turns; a step's time is the
median over the repeats (the steps are the same in every repeat: the schedule is deterministic).
Every request's tokens are checked equal to its solo greedy run. The machine is shared: the load
average is printed.

usage: python bench/paged_stall.py [--model gpt|smollm2] [--budgets 8 32] [--repeats 3] [--long 120]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvviz.models.registry import get_model  # noqa: E402
from kvviz.serving.stall import measure_stall, stall_stream  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("gpt", "smollm2"), default="gpt")
    ap.add_argument("--budgets", type=int, nargs="+", default=[8, 32])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--long", type=int, default=120, help="tokens of the long prompt")
    ap.add_argument("--arrive", type=int, default=2)
    ap.add_argument("--new", type=int, default=10)
    a = ap.parse_args()
    m = get_model(a.model)
    reqs = stall_stream(m, a.long, a.arrive, a.new)
    print(f"load average {os.getloadavg()[0]:.1f}; {a.model}; long prompt {len(reqs[-1].prompt)} tokens",
          file=sys.stderr)
    run = measure_stall(m, reqs, a.budgets, a.repeats)
    print(json.dumps([{"chunk_budget": s.chunk_budget, "steps": s.steps, "passes_s": [round(x, 5) for x in s.passes_s],
                       "requests": [r for r in run.rows() if r["chunk_budget"] == s.chunk_budget]}
                      for s in run.settings], indent=1))


if __name__ == "__main__":
    main()
