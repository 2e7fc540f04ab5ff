"""Benchmark: SmolLM2's chat requests served from one paged cache (the Paged cache page's
?pg_model=smollm2 case, kvviz.serving on HFCausalLM.forward_batch).

For each block size: the stream of --requests chat requests of --new tokens (one arriving per step,
each inside the chat template), served with prefix caching and checked against every request's
solo greedy run (a contiguous cache): blocks shared and prefill positions saved per request and in
all, tokens equal, the largest |Δ| of any row's logits against the solo run (the tolerance is 1e-4
in float32), the fork of the first prompt that ends inside a block (copy-on-write, bit for bit),
and the wall time of the served run (its solo runs included) and of the fork. The machine is
shared: the load average is printed; times move by 2× between runs, the counts never.

usage: python bench/paged_smollm2.py [--requests 4] [--new 4] [--blocks 32] [--sizes 8 16]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvviz.models.smollm2 import SmolLM2  # noqa: E402
from kvviz.serving import chat_stream, common_prefix, fork_run, serve  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--new", type=int, default=4)
    ap.add_argument("--blocks", type=int, default=32)
    ap.add_argument("--sizes", type=int, nargs="+", default=[8, 16])
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    model = SmolLM2()
    stream = chat_stream(model, a.requests, a.new)
    print(f"{a.requests} requests of {a.new} tokens; prompts {[len(r.prompt) for r in stream]} tokens, "
          f"the first {common_prefix(stream)} shared")
    for bs in a.sizes:
        t0 = time.perf_counter()
        run = serve(model, stream, bs, a.blocks, prefix_caching=True, check=True)
        t1 = time.perf_counter()
        worst = max(r.max_abs_diff for r in run.requests)
        print(f"\nblocks of {bs}: {run.total_steps} steps, served and checked in {t1 - t0:.1f} s")
        for r in run.requests:
            print(f"  request {r.id}: {len(r.request.prompt)} prompt tokens, {r.blocks_saved} blocks shared, "
                  f"{r.prefill_saved} prefill positions saved, same tokens as solo: {r.tokens == r.solo_tokens}, "
                  f"max |Δ| {r.max_abs_diff:.2e}, answer {model.decode(r.tokens)!r}")
        print(f"  in all: {run.blocks_saved} blocks, {run.prefill_saved} of "
              f"{sum(len(r.request.prompt) for r in run.requests)} prompt positions saved; max |Δ| {worst:.2e} "
              f"(tolerance {run.tolerance:g})")
        rid = next((r.id for r in run.requests if len(r.request.prompt) % bs), 0)
        t2 = time.perf_counter()
        fork = fork_run(model, stream[rid].prompt, max(2, min(4, a.new)), bs, a.blocks, samples=2)
        print(f"  fork of request {rid}: copies {fork.copies}, bit for bit at every step: {all(fork.identical)} "
              f"({time.perf_counter() - t2:.1f} s)")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
