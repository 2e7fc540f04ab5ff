"""Benchmark: what smaller caches cost in time and accuracy, on any model (``--model gpt``, the
trained tiny GPT, ``--model smollm2``, SmolLM2-135M-Instruct, or ``--model gemma3``, Gemma 3 270M),
through kvviz.compress's one run
(``run_cache``) and one evaluation.

1. Decode step time of each cache kind at each context against the full cache (kvviz's
   DynamicCache, which grows the same way as the window and quantized caches; for the tiny GPT the
   preallocated StaticCache of the fast loops is shown too). Each repetition fills a fresh cache
   with the model's own K/V of the positions before the timed steps (one untimed prefill with the
   full cache, then one ``update`` of every layer with those rows: the window keeps its sinks and
   last window, the quantized cache quantizes what leaves its residual window; the pooled model,
   fewer K/V heads, prefills itself), runs two untimed decode steps, then times the ``--span``
   decode steps whose last one reads ``context`` cached positions, one by one: their mean per step
   includes the steps where a quantized cache quantizes a new group. Kinds are interleaved, medians
   over the repetitions, several runs.
2. The page's table: bytes per token, mean KL(full ‖ variant) and top-1 agreement of every variant
   the page compares (the tiny GPT: ``page_variants()`` over its held-out prompts, deterministic for
   a seed; SmolLM2: ``llm_variants()`` on the held-out text).

3. ``--policies C ...``: one decode step of H2O, SnapKV, PyramidKV, FP8 and the latent cache after C
   positions against the full cache's (kvviz.measure.clock's median).
4. ``--budgets``: every variant at 25 % and 10 % of the full cache's bytes, and the verdict
   (``--csv PATH``: the table's rows as CSV, the page's download).

usage: python bench/compress.py [--model gpt|smollm2|gemma3] [--runs N] [--reps N] [--contexts N ...] [--span N]
       [--threads 1] [--skip-timing] [--skip-table] [--prompts 8] [--new-tokens 32] [--seed 0] [--tokens 96]
       [--policies C ...] [--budgets] [--csv PATH]
(defaults: gpt: 3 runs × 10 repetitions, contexts 128 248, span 32; smollm2: 1 × 1, contexts 128 512, span 8)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kvviz.cache import DynamicCache, StaticCache  # noqa: E402
from kvviz.compress import (  # noqa: E402
    DEFAULT_PREFILL,
    Variant,
    evaluate_prompts,
    evaluate_text,
    held_out_stream,
    llm_variants,
    page_variants,
    run_cache,
    variant_cache,
    variant_model,
)
from kvviz.compress._protocol import next_logits  # noqa: E402
from kvviz.compress.budget import compare_at_budgets, verdict, verdict_text  # noqa: E402
from kvviz.compress.text import HELD_OUT_TEXT  # noqa: E402
from kvviz.measure.clock import interleaved  # noqa: E402

WARM = 2             # untimed decode steps before the timed ones


@dataclass(frozen=True)
class Plan:
    """One model's defaults: what is timed (None: the full StaticCache) and at which contexts."""

    timed: tuple[tuple[str, Variant | None], ...]
    contexts: tuple[int, ...]
    span: int
    runs: int
    reps: int


PLANS = {
    "gpt": Plan((("full (DynamicCache)", Variant.of("full")), ("full (StaticCache)", None),
                 ("window 32 + 4 sinks", Variant.of("window", window=32, sinks=4)),
                 ("int8 K per channel, G 32", Variant.of("quant", bits=8, group_size=32)),
                 ("int4 K per channel, G 32", Variant.of("quant", bits=4, group_size=32)),
                 ("int8 K per token, G 32", Variant.of("quant", bits=8, group_size=32, key_axis="token")),
                 ("int4 K per token, G 32", Variant.of("quant", bits=4, group_size=32, key_axis="token")),
                 ("int4 K per channel, G 32, residual 32", Variant.of("quant", bits=4, group_size=32, residual=32)),
                 ("2 K/V heads", Variant.of("gqa", kv_heads=2)), ("1 K/V head", Variant.of("gqa", kv_heads=1))),
                (128, 248), 32, 3, 10),
    "smollm2": Plan(tuple((v.label(), v) for v in (
        Variant.of("full"), Variant.of("window", window=32, sinks=4, positions="own"),
        Variant.of("window", window=32, sinks=4, positions="cache"),
        Variant.of("quant", bits=4, group_size=32, key_axis="channel", residual=0),
        Variant.of("quant", bits=4, group_size=32, key_axis="token", residual=0),
        Variant.of("quant", bits=2, group_size=32, key_axis="channel", residual=0),
        Variant.of("gqa", kv_heads=1))), (128, 512), 8, 1, 1),
}
PLANS["gemma3"] = PLANS["smollm2"]           # the same kinds (one K/V head: the pooled one is the model itself)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f}"


def load_model(name: str):
    """The kvviz model ``name`` names (its one difference here: where it comes from)."""
    if name == "gpt":
        from kvviz.models.gpt import GPTModel, load_tiny_gpt
        return GPTModel(load_tiny_gpt())
    from kvviz.models.registry import get_model
    return get_model(name)


def text_ids(model, name: str, length: int) -> list[int]:
    """Held-out ids to time on: the tiny GPT's held-out corpus tail, or the held-out text repeated."""
    if name == "gpt":
        index = model.tokenizer.index
        return [index[t] for t in held_out_stream(30_000, 0)][1000:1000 + length]
    ids = model.tokenizer.encode((HELD_OUT_TEXT + " ") * (1 + length // 200), add_special_tokens=False)
    return ids[:length]


@torch.inference_mode()
def step_time(model, variant: Variant | None, ids: list[int], context: int, span: int) -> float:
    """Mean seconds per decode step over the ``span`` steps whose last one reads ``context`` cached
    positions (see the module doc for the fill and the warm-up)."""
    start = context - span - WARM - 1                       # the first position after the fill
    runner = model if variant is None else variant_model(model, variant)
    if runner is not model:                                 # fewer K/V heads: the pooled model fills itself
        cache = DynamicCache(model.n_layers)
        run_cache(runner, ids[:start], 1, cache)
    else:
        full = DynamicCache(model.n_layers)
        run_cache(model, ids[:start], 1, full)
        cache = StaticCache(model.n_layers, context) if variant is None else variant_cache(model, variant)
        if variant is None or variant.kind != "full":
            for i, layer in enumerate(full.layers):
                cache.update(layer.keys, layer.values, i)
        else:
            cache = full
    stamps: list[float] = []
    run_cache(runner, ids[start:start + 1], span + WARM + 1, cache, forced=ids[start + 1:context],
              step=lambda: stamps.append(time.perf_counter()), start=start)
    return (stamps[-1] - stamps[WARM - 1]) / span           # the last ``span`` passes, back to back


def timing(model, plan: Plan, ids: list[int], runs: int, reps: int, contexts: tuple[int, ...], span: int) -> None:
    print(f"\n## Decode step time (ms per step, the mean of the {span} steps up to the context, median of "
          f"{reps} repetitions per run; ratio to the full DynamicCache)\n")
    for _name, v in plan.timed:                            # warm-up: pooled models, first calls
        step_time(model, v, ids, span + WARM + 8, span)
    table: dict[tuple[str, int], list[float]] = {}
    for run in range(runs):
        print(f"run {run + 1}: {load()} (before)")
        for context in contexts:
            samples: dict[str, list[float]] = {name: [] for name, _ in plan.timed}
            for _ in range(reps):
                for name, v in plan.timed:                 # interleaved: load changes hit every kind alike
                    samples[name].append(step_time(model, v, ids, context, span))
            for name in samples:
                table.setdefault((name, context), []).append(statistics.median(samples[name]) * 1e3)
        print(f"run {run + 1}: {load()} (after)")
    base = plan.timed[0][0]
    head = " | ".join(f"context {c}: ms per run → median (× full)" for c in contexts)
    print(f"\n| cache | {head} |\n|---|" + "---|" * len(contexts))
    for name, _ in plan.timed:
        cells = []
        for c in contexts:
            ms = table[(name, c)]
            ratio = statistics.median(ms) / statistics.median(table[(base, c)])
            cells.append(" / ".join(f"{x:.2f}" for x in ms) + f" → **{statistics.median(ms):.2f}** ({ratio:.2f}×)")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


def accuracy(model, name: str, a: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    if name == "gpt":
        ev = evaluate_prompts(page_variants(), a.prompts, a.new_tokens, a.seed, model, threads=a.threads)
        what = (f"{a.prompts} held-out prompts of 16 tokens, {a.new_tokens} greedy tokens each "
                f"({ev.results[0].positions} positions), seed {a.seed}")
    else:
        ev = evaluate_text(model, llm_variants(), a.tokens, DEFAULT_PREFILL, threads=a.threads)
        what = f"the held-out text's first {a.tokens} tokens ({DEFAULT_PREFILL} prefilled)"
    print(f"\n## Accuracy: {what}; {time.perf_counter() - t0:.1f} s, {load()}\n")
    print("| variant | bytes per token | mean KL (nats) | top-1 agreement |\n|---|---:|---:|---:|")
    for r in ev.results:
        print(f"| {r.variant.label()} | {r.bytes_per_token:,.0f} | {r.kl_mean:.4g} | {r.top1_agreement:.1%} |")
    print(json.dumps([r.as_dict() for r in ev.results]))


POLICIES = (("full, fast path", None), ("full, recording forward", "forward"),
            ("H2O 64", Variant.of("h2o", budget=64)),
            ("SnapKV 64, held", Variant.of("snapkv", budget=64, hold=True)),
            ("PyramidKV 64, held", Variant.of("pyramid", budget=64, hold=True)),
            ("FP8 per tensor", Variant.of("fp8")), ("latent rank 96", Variant.of("latent", rank=96)))


@torch.inference_mode()
def policy_steps(model, ids: list[int], context: int, repeats: int) -> None:
    """3. One decode step of each policy after a prefill of ``context`` positions, against the full
    cache's (the fast path the loops run, and the recording forward a scoring policy runs to get its
    attention): kvviz.measure.clock.interleaved, the median of ``repeats`` steps each (every step
    appends one position: the full cache's context grows by ``repeats`` over the run)."""
    work, state = {}, {}
    for name, v in POLICIES:
        cache = DynamicCache(model.n_layers) if v in (None, "forward") else variant_cache(model, v)
        if v == "forward":
            cache.needs_attention = True            # the recording forward, nothing observed
            cache.observe = lambda attention: None
        next_logits(model, ids[:context], cache, 0)
        state[name] = [cache, context]

        def step(name=name) -> None:
            cache, pos = state[name]
            next_logits(model, [ids[pos % len(ids)]], cache, pos)
            state[name][1] = pos + 1
        work[name] = step
    times = interleaved(work, repeats, warmups=2)
    base, rec = times["full, fast path"].median, times["full, recording forward"].median
    print(f"\ndecode step after {context} positions, median of {repeats} ({load()})")
    for name, _ in POLICIES:
        t = times[name]
        print(f"  {name:26s} {t.median * 1e3:8.2f} ms  ×{t.median / base:4.2f} of the fast path  "
              f"×{t.median / rec:4.2f} of the recording forward  (range {t.low * 1e3:.2f}..{t.high * 1e3:.2f})")


def budgets(model, name: str, tokens: int, csv: str | None = None) -> None:
    """4. Every variant at 25 % and 10 % of the full cache's bytes on the held-out text, the verdict."""
    t0 = time.perf_counter()
    cmp = compare_at_budgets(model, tokens)
    if csv:
        import pandas as pd
        rows = [{**r, "model": name, "settings": json.dumps(r["settings"])} for r in cmp.rows()]
        pd.DataFrame(rows).to_csv(csv, index=False)
    print(f"\nat equal bytes, held-out text of {tokens} tokens, prefill {DEFAULT_PREFILL} "
          f"({time.perf_counter() - t0:.0f} s, {load()}):")
    for r in cmp.rows():
        print(f"  {r['fraction']:4.0%} {r['variant']:34s} bytes {r['bytes_fraction']:6.1%}  KL {r['kl_mean']:.4g}  "
              f"top-1 {r['top1_agreement']:.1%}  answer {'changed' if r['answer_changed'] else 'kept'}")
    for f, un in zip(cmp.fractions, cmp.unreachable):
        print(f"  {f:4.0%} cannot reach: {', '.join(un) or '-'}")
    print(verdict_text(name, verdict(cmp)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(PLANS), default="gpt")
    ap.add_argument("--runs", type=int)
    ap.add_argument("--reps", type=int)
    ap.add_argument("--span", type=int, help="timed decode steps per repetition")
    ap.add_argument("--contexts", type=int, nargs="+", help="cached positions the last timed step reads")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=8, help="gpt: held-out prompts")
    ap.add_argument("--new-tokens", type=int, default=32, help="gpt: greedy tokens per prompt")
    ap.add_argument("--seed", type=int, default=0, help="gpt: picks the prompts")
    ap.add_argument("--tokens", type=int, default=96, help="smollm2: tokens of the held-out text")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-table", action="store_true")
    ap.add_argument("--policies", type=int, nargs="*", metavar="CONTEXT",
                    help="time one decode step of each eviction/FP8/latent policy after these contexts")
    ap.add_argument("--budgets", action="store_true", help="every variant at 25 %% and 10 %% of the bytes")
    ap.add_argument("--csv", help="--budgets: write the table's rows to this CSV file")
    a = ap.parse_args()
    plan = PLANS[a.model]
    torch.set_num_threads(a.threads)
    model = load_model(a.model)
    cfg = model.cost_config
    print(f"{a.model} ({cfg.n_layers} layers, {cfg.n_heads} heads, {cfg.n_kv_heads} K/V heads, d {cfg.d_model}), "
          f"{a.threads} torch thread(s), {os.cpu_count()} cores, {load()}")
    if a.policies is not None or a.budgets:
        for context in a.policies or ():
            policy_steps(model, text_ids(model, a.model, context + 64), context, a.reps or 20)
        if a.budgets:
            budgets(model, a.model, a.tokens, a.csv)
        return
    if not a.skip_timing:
        contexts = tuple(a.contexts or plan.contexts)
        ids = text_ids(model, a.model, max(contexts))
        timing(model, plan, ids, a.runs or plan.runs, a.reps or plan.reps, contexts, a.span or plan.span)
    if not a.skip_table:
        accuracy(model, a.model, a)


if __name__ == "__main__":
    main()
