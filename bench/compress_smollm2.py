"""Benchmark: smaller caches on the real SmolLM2-135M-Instruct, in time and accuracy.

1. Decode step time of each cache kind at 128 and 512 cached positions against the full cache.
   Each kind's cache is filled with the model's own K/V of the first N positions (one prefill with
   the full cache, untimed, then one ``update`` of every layer with those rows: the window keeps its
   sinks and last window, the quantized cache quantizes what leaves its residual window), then
   ``--steps`` decode steps through transformers' forward are timed one by one after two warm-up
   steps; median per step. The pooled model (one K/V head) prefills itself. The text is the held-out
   text repeated (512 positions are more than it has).
2. The page's table: kvviz.compress.llm.evaluate_llm(llm_variants()) on the held-out text.

usage: python bench/compress_smollm2.py [--positions 128 512] [--steps 8] [--tokens 96] [--threads 1]
       [--skip-timing] [--skip-table]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kvviz.cache import DynamicCache  # noqa: E402
from kvviz.compress import Variant  # noqa: E402
from kvviz.compress.llm import DEFAULT_PREFILL, evaluate_llm, llm_variants, variant_cache, variant_network  # noqa: E402
from kvviz.compress.text import HELD_OUT_TEXT  # noqa: E402
from kvviz.models.smollm2 import SmolLM2  # noqa: E402

KINDS = [Variant.of("full"), Variant.of("window", window=32, sinks=4, positions="own"),
         Variant.of("window", window=32, sinks=4, positions="cache"),
         Variant.of("quant", bits=4, group_size=32, key_axis="channel", residual=0),
         Variant.of("quant", bits=4, group_size=32, key_axis="token", residual=0),
         Variant.of("quant", bits=2, group_size=32, key_axis="channel", residual=0),
         Variant.of("gqa", kv_heads=1)]


@torch.inference_mode()
def step_times(model: SmolLM2, variant: Variant, ids: list[int], n: int, steps: int) -> list[float]:
    net = variant_network(model.model, variant)
    full = DynamicCache(model.n_layers)
    net(input_ids=torch.tensor([ids[:n]]), past_key_values=full, use_cache=True, logits_to_keep=1)
    if variant.kind in ("full", "gqa"):
        cache = full
    else:
        cache = variant_cache(model, variant)
        for mine, theirs in zip(cache.layers, full.layers):
            mine.update(theirs.keys, theirs.values)
    out = []
    for i in range(steps + 2):
        pos = n + i
        t0 = time.perf_counter()
        net(input_ids=torch.tensor([[ids[pos]]]), position_ids=torch.tensor([[pos]]), past_key_values=cache,
            use_cache=True)
        if i >= 2:
            out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--positions", type=int, nargs="+", default=[128, 512])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-table", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    model = SmolLM2()
    if not a.skip_timing:
        ids = model.tokenizer.encode((HELD_OUT_TEXT + " ") * 4, add_special_tokens=False)
        print(f"decode step time (median of {a.steps}, {a.threads} thread), ms")
        print("| cache | " + " | ".join(f"{n} positions" for n in a.positions) + " |")
        print("|---|" + "---:|" * len(a.positions))
        base = {}
        for v in KINDS:
            cells = []
            for n in a.positions:
                ms = 1000 * statistics.median(step_times(model, v, ids, n, a.steps))
                base.setdefault(n, ms)
                cells.append(f"{ms:.1f} ({ms / base[n]:.2f}×)")
            print(f"| {v.label()} | " + " | ".join(cells) + " |", flush=True)
    if not a.skip_table:
        t0 = time.perf_counter()
        ev = evaluate_llm(model, llm_variants(), a.tokens, DEFAULT_PREFILL, threads=a.threads)
        print(f"\ntrade-off on the held-out text's first {a.tokens} tokens ({DEFAULT_PREFILL} prefilled), "
              f"{time.perf_counter() - t0:.0f} s")
        print("| variant | bytes per token | mean KL | top-1 |")
        print("|---|---:|---:|---:|")
        for r in ev.results:
            print(f"| {r.variant.label()} | {r.bytes_per_token:,.0f} | {r.kl_mean:.4g} | {r.top1_agreement:.1%} |")
        print(json.dumps([r.as_dict() for r in ev.results]))


if __name__ == "__main__":
    main()
