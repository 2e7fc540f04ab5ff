"""Benchmark: the stall a long prompt causes among running decodes, with and without chunked prefill
(kvviz.serving's ``chunk_budget``), measured on this machine (real passes, timed by
kvviz.measure.clock, one sample per pass).

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
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvviz.measure.clock import run_locked  # noqa: E402
from kvviz.models.registry import get_model  # noqa: E402
from kvviz.serving import Request, serve  # noqa: E402

LONG = ("Today the weather is so nice that we go to the beach and eat ice cream , and tomorrow it will be "
        "cold so we stay inside and read a book . ")
SHORT = ["Today the weather is", "Yesterday it was", "Tomorrow it will be"]


def stream(m, long_words: int, arrive: int, new: int) -> list[Request]:
    long = (m.tokenize(LONG) * (1 + long_words // 20))[:long_words]
    return [Request(i, m.tokenize(t), new, 0) for i, t in enumerate(SHORT)] + [Request(3, long, 4, arrive)]


def measured(m, reqs, budget, repeats) -> dict:
    # one torch thread under the measurement lock (kvviz.measure.clock.run_locked: steady on a shared machine)
    runs = [run_locked(lambda i=i: serve(m, reqs, 16, 64, check=i == 0, chunk_budget=budget, timed=True))
            for i in range(repeats)]
    first = runs[0]
    step_s = [statistics.median(r.steps[k].seconds for r in runs) for k in range(first.total_steps)]
    ends = [sum(step_s[:k + 1]) for k in range(len(step_s))]
    out = []
    for r in first.requests:
        start = ends[r.request.arrival_step - 1] if r.request.arrival_step else 0.0
        t = [ends[k] for k in r.token_steps]
        out.append({"id": r.id, "prompt_tokens": len(r.request.prompt), "same_as_solo": r.tokens == r.solo_tokens,
                    "ttft_steps": r.ttft, "gap_steps": list(r.gaps), "ttft_s": round(t[0] - start, 5),
                    "gaps_s": [round(b - a, 5) for a, b in zip(t, t[1:])],
                    "max_gap_s": round(max((b - a for a, b in zip(t, t[1:])), default=0.0), 5)})
    return {"chunk_budget": budget, "steps": first.total_steps, "passes_s": [round(x, 5) for x in step_s],
            "requests": out}


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
    reqs = stream(m, a.long, a.arrive, a.new)
    print(f"load average {os.getloadavg()[0]:.1f}; {a.model}; long prompt {len(reqs[3].prompt)} tokens",
          file=sys.stderr)
    print(json.dumps([measured(m, reqs, b, a.repeats) for b in [None, *a.budgets]], indent=1))


if __name__ == "__main__":
    main()
