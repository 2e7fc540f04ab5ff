"""Benchmark: what smaller caches cost in time and accuracy on the trained tiny GPT.

1. Decode step time of each cache kind at context 128 and 248 against the full cache (kvviz's
   DynamicCache, which grows the same way as the window and quantized caches; the preallocated
   StaticCache of the fast loops is shown too). Each repetition builds a fresh cache, prefills
   held-out text (untimed) and times the 32 decode steps whose last one reads 128 / 248 cached
   positions, one by one: their mean per step includes the steps where a quantized cache
   quantizes a new group (every 32 steps per channel, every step per token). Kinds are interleaved,
   medians over the repetitions, several runs.
2. The page's table: bytes per token, mean KL(full ‖ variant) and top-1 agreement of every variant
   of ``kvviz.compress.page_variants()`` over the held-out prompts (deterministic for a seed).

usage: python bench/compress.py [--runs 3] [--reps 10] [--contexts 128 248] [--prompts 8] [--new-tokens 32]
       [--threads 1] [--skip-timing] [--skip-table]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kvviz.cache import StaticCache  # noqa: E402
from kvviz.compress import Variant, evaluate, held_out_stream, page_variants  # noqa: E402
from kvviz.models.gpt import load_tiny_gpt  # noqa: E402

CONTEXTS = (128, 248)
TIMED = [("full (DynamicCache)", Variant.of("full")),
         ("full (StaticCache)", None),
         ("window 32 + 4 sinks", Variant.of("window", window=32, sinks=4)),
         ("int8 K per channel, G 32", Variant.of("quant", bits=8, group_size=32)),
         ("int4 K per channel, G 32", Variant.of("quant", bits=4, group_size=32)),
         ("int8 K per token, G 32", Variant.of("quant", bits=8, group_size=32, key_axis="token")),
         ("int4 K per token, G 32", Variant.of("quant", bits=4, group_size=32, key_axis="token")),
         ("int4 K per channel, G 32, residual 32", Variant.of("quant", bits=4, group_size=32, residual=32)),
         ("2 K/V heads", Variant.of("gqa", kv_heads=2)),
         ("1 K/V head", Variant.of("gqa", kv_heads=1))]


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f}"


@torch.inference_mode()
def time_steps(tiny, variant: Variant | None, ids: list[int], context: int, span: int) -> float:
    """Mean seconds per decode step over the ``span`` steps whose last one reads ``context`` keys,
    after an untimed prefill (the steps that quantize a new group of rows are among them, so their
    cost is spread as in a long generation)."""
    n_layers = tiny.model.config.n_layer
    network = tiny.model if variant is None else variant.network(tiny.model)
    cache = StaticCache(n_layers, context) if variant is None else variant.make_cache(n_layers)
    start = context - span
    network(torch.tensor([ids[:start]]), cache, 0, last_only=True)
    total = 0.0
    for pos in range(start, context):
        step = torch.tensor([[ids[pos]]])
        t0 = time.perf_counter()
        network(step, cache, pos, last_only=True)
        total += time.perf_counter() - t0
    return total / span


def timing(tiny, runs: int, reps: int, contexts: tuple[int, ...] = CONTEXTS, span: int = 32) -> None:
    stream = [tiny.tokenizer.index[t] for t in held_out_stream(30_000, 0)]
    ids = stream[1000:1000 + max(contexts)]
    print(f"\n## Decode step time (ms per step, the mean of the {span} steps up to the context, median of "
          f"{reps} repetitions per run; ratio to the full DynamicCache)\n")
    for _name, v in TIMED:                                  # warm-up: grouped networks, first calls
        time_steps(tiny, v, ids, span + 2, span)
    table: dict[tuple[str, int], list[float]] = {}
    for run in range(runs):
        print(f"run {run + 1}: {load()} (before)")
        for context in contexts:
            samples: dict[str, list[float]] = {name: [] for name, _ in TIMED}
            for _ in range(reps):
                for name, v in TIMED:                        # interleaved: load changes hit every kind alike
                    samples[name].append(time_steps(tiny, v, ids, context, span))
            for name in samples:
                table.setdefault((name, context), []).append(statistics.median(samples[name]) * 1e3)
        print(f"run {run + 1}: {load()} (after)")
    head = " | ".join(f"context {c}: ms per run → median (× full)" for c in contexts)
    print(f"\n| cache | {head} |\n|---|" + "---|" * len(contexts))
    for name, _ in TIMED:
        cells = []
        for c in contexts:
            ms = table[(name, c)]
            ratio = statistics.median(ms) / statistics.median(table[("full (DynamicCache)", c)])
            cells.append(" / ".join(f"{x:.2f}" for x in ms) + f" → **{statistics.median(ms):.2f}** ({ratio:.2f}×)")
        print(f"| {name} | " + " | ".join(cells) + " |")


def accuracy(prompts: int, new_tokens: int, seed: int) -> None:
    t0 = time.perf_counter()
    ev = evaluate(page_variants(), prompts=prompts, new_tokens=new_tokens, seed=seed)
    positions = ev.results[0].positions
    print(f"\n## Accuracy: {prompts} held-out prompts of 16 tokens, {new_tokens} greedy tokens each "
          f"({positions} positions), seed {seed}; {time.perf_counter() - t0:.1f} s, {load()}\n")
    print("| variant | bytes per token | mean KL (nats) | top-1 agreement |\n|---|---|---|---|")
    for r in ev.results:
        print(f"| {r.variant.label()} | {r.bytes_per_token:,.0f} | {r.kl_mean:.2g} | {r.top1_agreement:.1%} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--contexts", type=int, nargs="+", default=list(CONTEXTS),
                    help="cached positions a step reads (≤ 256)")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-table", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tiny = load_tiny_gpt()
    print(f"tiny GPT ({tiny.model.config.n_layer} layers, {tiny.model.config.n_head} heads, "
          f"d {tiny.model.config.n_embd}), fp32, {a.threads} torch thread(s), {os.cpu_count()} cores, {load()}")
    if not a.skip_timing:
        timing(tiny, a.runs, a.reps, tuple(a.contexts))
    if not a.skip_table:
        accuracy(a.prompts, a.new_tokens, a.seed)


if __name__ == "__main__":
    main()
