"""Benchmark: the tiny GPT's lean loops against transformers, and the cache's speed-up (docs/design.md §3).

Measured in one run, same machine, same shape, same prompt and token count, greedy, batch 1, fp32:
  1. tiny shape (4 layers, 4 heads, 128): generate_cached tok/s vs transformers
     GPT2LMHeadModel.generate(use_cache=True) — target ≥ 2×;
  2. GPT-2-small shape (12 layers, 768, vocab 50,257, random weights): the same — target ≥ 0.95×;
  3. tiny shape, N = 248: generate_cached vs the recomputing generate — target ≥ 7×.
Each figure is the median of --runs runs (the two contenders interleaved, so both see the same
load); "best runs" compares the fastest run of each, which filters out other jobs on a shared
machine. Needs transformers (requirements.txt).

usage: python bench/gpt_speed.py [--runs 9] [--n 248] [--big-n 32]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kvviz import cost  # noqa: E402
from kvviz.decoding.loops import generate, generate_cached  # noqa: E402
from kvviz.models.gpt import GPTModel, gpt_config, load_tiny_gpt, random_gpt, to_transformers  # noqa: E402

PROMPT = "Today the weather is so nice . It"     # 8 tokens: 8 + 248 − 1 fits in 256 positions


def transformers_generate(hf, ids: list[int], n: int) -> tuple[list[int], float]:
    x = torch.tensor([ids])
    mask = torch.ones_like(x)       # explicit: otherwise generate masks every prompt token equal to pad_token_id
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = hf.generate(x, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                          use_cache=True, pad_token_id=0)
    return out[0, len(ids):].tolist(), time.perf_counter() - t0


def ours_vs_hf(model, ids: list[int], n: int, runs: int) -> dict:
    hf = to_transformers(model)
    fast = GPTModel(model)
    generate_cached(fast, ids, min(n, 4), keep_logits=False)    # warm-up both
    transformers_generate(hf, ids, min(n, 4))
    ours_s, hf_s, same = [], [], True
    for _ in range(runs):
        g = generate_cached(fast, ids, n, keep_logits=False)
        toks, s = transformers_generate(hf, ids, n)
        ours_s.append(g.seconds)
        hf_s.append(s)
        same &= toks == g.tokens
    o, h = statistics.median(ours_s), statistics.median(hf_s)
    return {"ours_tps": n / o, "hf_tps": n / h, "ratio": h / o, "best_ratio": min(hf_s) / min(ours_s), "same": same}


def cached_vs_uncached(model, ids: list[int], n: int, runs: int) -> dict:
    generate(model, ids, 4, keep_logits=False)
    fast = GPTModel(model)
    c_s, u_s, same = [], [], True
    for _ in range(runs):
        c = generate_cached(fast, ids, n, keep_logits=False)
        u = generate(model, ids, n, keep_logits=False)
        c_s.append(c.seconds)
        u_s.append(u.seconds)
        same &= c.tokens == u.tokens
    c, u = statistics.median(c_s), statistics.median(u_s)
    return {"cached_tps": n / c, "uncached_tps": n / u, "speedup": u / c, "best_speedup": min(u_s) / min(c_s),
            "same": same}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--n", type=int, default=248, help="new tokens on the tiny shape")
    ap.add_argument("--big-n", type=int, default=32, help="new tokens on the GPT-2-small shape")
    a = ap.parse_args()
    from transformers import __version__ as hf_version
    from transformers.utils import logging
    logging.set_verbosity_error()
    print(f"torch {torch.__version__}, transformers {hf_version}, {torch.get_num_threads()} threads, "
          f"{a.runs} runs, medians")

    tiny = load_tiny_gpt()
    ids = tiny.tokenizer.encode(PROMPT)
    r1 = ours_vs_hf(tiny.model, ids, a.n, a.runs)
    print(f"1. tiny shape, N={a.n}: ours {r1['ours_tps']:,.0f} tok/s, transformers {r1['hf_tps']:,.0f} tok/s "
          f"-> {r1['ratio']:.2f}x (target >= 2x) {'PASS' if r1['ratio'] >= 2 else 'FAIL'} "
          f"[best runs {r1['best_ratio']:.2f}x]; same tokens: {r1['same']}")

    big = random_gpt(gpt_config(cost.GPT2_SMALL), seed=0)        # the one GPT-2-small shape (kvviz.cost)
    big_ids = [int(i) for i in torch.randint(0, 50_257, (len(ids),), generator=torch.Generator().manual_seed(0))]
    r2 = ours_vs_hf(big, big_ids, a.big_n, a.runs)
    print(f"2. GPT-2-small shape (random weights), N={a.big_n}: ours {r2['ours_tps']:,.1f} tok/s, transformers "
          f"{r2['hf_tps']:,.1f} tok/s -> {r2['ratio']:.2f}x (target >= 0.95x) "
          f"{'PASS' if r2['ratio'] >= 0.95 else 'FAIL'} [best runs {r2['best_ratio']:.2f}x]; same tokens: {r2['same']}")
    del big

    r3 = cached_vs_uncached(tiny.model, ids, a.n, a.runs)
    print(f"3. tiny shape, N={a.n}: cached {r3['cached_tps']:,.0f} tok/s, uncached {r3['uncached_tps']:,.0f} tok/s "
          f"-> speed-up {r3['speedup']:.1f}x (target >= 7x) {'PASS' if r3['speedup'] >= 7 else 'FAIL'} "
          f"[best runs {r3['best_speedup']:.1f}x]; same tokens: {r3['same']}")


if __name__ == "__main__":
    main()
