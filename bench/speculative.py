"""Benchmark: speculative vs plain cached decoding of the tiny GPT, γ = 1..6, greedy and sampled (docs/design.md §5).

The same measurement as the page's button (kvviz.speculative.measure_speedup): per γ, --runs
speculative runs of N tokens (seeds 0..runs−1) interleaved with as many plain generate_cached runs,
medians; the acceptance rate α of those runs; single passes for the cost ratio c = draft pass /
target pass and for the verification pass over γ + 1 positions, v = its time / a one-position pass.
Beside the measured speed-up it prints the expected one of Leviathan et al. (v = 1), the same with
the measured v, and where a round's time goes inside the fastest speculative run: γ draft passes,
the verification pass, and the rest (draws, the acceptance test, records, the prompt's prefill).
Every --repeat repeats the whole measurement; the load average is printed before and after.

usage: python bench/speculative.py [--repeat 3] [--runs 7] [--n 64] [--threads 1] [--clock wall|cpu]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kvviz.decoding.sampling import Greedy, Sampler  # noqa: E402
from kvviz.limits import SPECULATIVE_MEASURE_MAX_TOKENS  # noqa: E402
from kvviz.speculative import load_pair, measure_speedup  # noqa: E402

PROMPT = "Today the weather is so"
RULES = {"greedy": Greedy(), "sampled (τ = 1)": Sampler(1.0)}


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def table(name: str, m) -> list[dict]:
    print(f"\n{name}: c = {m.c:.3f} (draft {m.draft_ms:.3f} ms / target {m.target_ms:.3f} ms per decode pass at "
          f"{m.context} cached positions; FLOP ratio {m.c_flops:.3f}), N = {m.new_tokens}, {m.runs} runs, "
          f"{m.seconds:.1f} s")
    print("| γ | α | tokens / target pass (expected) | spec tok/s | plain tok/s | measured × (fastest runs) "
          "| expected × (v = 1) | v | expected × (measured v) | fastest run per round: draft + verify + rest ms "
          "| plain ms/token |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for p in m.points:
        v = p.verify_ms / m.target_ms
        plain_step = p.plain_best_s * 1e3 / p.new_tokens
        print(f"| {p.gamma} | {p.acceptance_rate:.2f} | {p.tokens_per_target_pass:.2f} "
              f"({p.expected_tokens_per_pass:.2f}) "
              f"| {p.speculative_tps:,.0f} | {p.plain_tps:,.0f} | {p.measured:.2f} ({p.measured_best:.2f}) "
              f"| {p.expected:.2f} | {v:.2f} | {p.expected_with_verify:.2f} "
              f"| {p.gamma} × {p.run_draft_ms:.3f} + {p.run_verify_ms:.3f} + {p.run_other_ms:.3f} | {plain_step:.3f} |")
        rows.append(dict(gamma=p.gamma, measured=p.measured, best=p.measured_best, expected=p.expected,
                         expected_v=p.expected_with_verify, alpha=p.acceptance_rate, v=v, c=m.c,
                         draft=p.run_draft_ms, verify=p.run_verify_ms, other=p.run_other_ms, plain=plain_step,
                         spec_tps=p.speculative_tps, plain_tps=p.plain_tps))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="whole measurements (default 3)")
    ap.add_argument("--runs", type=int, default=7, help="timed runs per γ and loop (≤ 10)")
    ap.add_argument("--n", type=int, default=SPECULATIVE_MEASURE_MAX_TOKENS, help="new tokens per run")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall time, or the process's CPU time (steadier when other jobs share the cores)")
    a = ap.parse_args()
    target, draft = load_pair()
    ids = target.tokenizer.encode(PROMPT)
    print(f"torch {torch.__version__}, {a.threads} thread(s); target {target.model.n_params():,} parameters "
          f"(4 layers, d 128), draft {draft.model.n_params():,} (1 layer, d 64); prompt {PROMPT!r}; "
          f"load average before: {load()}")
    summary: dict[str, list[list[dict]]] = {k: [] for k in RULES}
    for rep in range(a.repeat):
        print(f"\n## run {rep + 1} (load average {load()}), {a.clock} clock")
        for name, rule in RULES.items():
            summary[name].append(table(name, measure_speedup(target, draft, ids, range(1, 7), a.n, rule,
                                                             a.runs, threads=a.threads, clock=a.clock)))
    print(f"\n## medians over {a.repeat} runs, {a.clock} clock (load average after: {load()})")
    for name, runs in summary.items():
        print(f"\n{name}")
        print("| γ | α | spec tok/s | plain tok/s | measured × (fastest) | expected × (v = 1) | v "
              "| expected × (measured v) | c | per round: draft + verify + rest ms | plain ms/token |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for i in range(len(runs[0])):
            med = {k: statistics.median(r[i][k] for r in runs) for k in runs[0][i]}
            print(f"| {runs[0][i]['gamma']} | {med['alpha']:.2f} | {med['spec_tps']:,.0f} | {med['plain_tps']:,.0f} "
                  f"| {med['measured']:.2f} ({med['best']:.2f}) | {med['expected']:.2f} | {med['v']:.2f} "
                  f"| {med['expected_v']:.2f} | {med['c']:.3f} | {runs[0][i]['gamma']} × {med['draft']:.3f} + "
                  f"{med['verify']:.3f} + {med['other']:.3f} | {med['plain']:.3f} |")


if __name__ == "__main__":
    main()
