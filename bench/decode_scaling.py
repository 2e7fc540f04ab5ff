"""Benchmark: decode step time against batch size and context, and TTFT vs TPOT, on this machine.

The same measurement as the "Measured here" tab of the Cost and scale page (kvviz.measure.scaling:
kvviz's GPT built in the tiny or GPT-2-small shape with random weights, fp32, a preallocated
cache), printed as tables.

usage: python bench/decode_scaling.py [--shape tiny|gpt2] [--threads 1]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kvviz.measure.scaling import SHAPES, measure_all  # noqa: E402

# the page's defaults: (batch sizes, context of the batch sweep, prompt lengths)
DEFAULTS = {"tiny": ([1, 2, 4, 8, 16, 32], 128, [8, 32, 128, 512]), "gpt2": ([1, 2, 4, 8], 128, [8, 32, 128])}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    batches, context, prompts = DEFAULTS[a.shape]
    res = measure_all(a.shape, batches, context, [16, 64, 256, 1024], prompts, threads=a.threads)
    print(f"{SHAPES[a.shape].name}, fp32, {res.threads} thread(s), measured in {res.seconds:.1f} s")
    print(f"\ndecode step at context {context}\n batch  ms/step   tokens/s  GFLOP/s  GB/s")
    for p in res.batch:
        print(f"{p.batch:6d} {p.ms_per_step:8.3f} {p.tokens_per_s:10.0f} {p.gflops:8.2f} {p.gbytes_per_s:6.2f}")
    print("\ndecode step at batch 1\n context  ms/step")
    for p in res.context:
        print(f"{p.context:8d} {p.ms_per_step:8.3f}")
    print("\nprompt  TTFT ms  TPOT ms")
    for p in res.prefill:
        print(f"{p.prompt_len:6d} {p.ttft_ms:8.2f} {p.tpot_ms:8.3f}")


if __name__ == "__main__":
    main()
