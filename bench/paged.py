"""Benchmark: what reading through a block table costs, and what continuous batching buys (docs/design.md §5).

1. Decode step time of the shipped tiny GPT (4 layers, 4 heads, 128 wide, fp32) at context 128,
   batch 1 and 8: the contiguous StaticCache against the PagedCache (blocks of 16, vLLM's default,
   and of 1, the extreme), the same network and the same tokens. Each round prefills the context
   once, then times --steps single decode steps per cache kind, the kinds interleaved so they see
   the same load; the figures are medians over all rounds' steps of the wall time and of the
   thread's CPU time (which leaves out the time other jobs held the core), and the fastest step.
2. The same seeded request streams served with continuous and static batching (kvviz.serving):
   total steps, mean TTFT and mean time per output token, in steps (no clock: these do not vary
   between runs), preemptions and peak KV bytes under paging vs contiguous reservation.

The machine is shared: the load average is printed before and after; step times move by 2× or
more between runs, so compare the kinds within one run.

usage: python bench/paged.py [--rounds 7] [--steps 16] [--threads 1] [--streams 5]
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

from kvviz.cache import PagedCache, StaticCache  # noqa: E402
from kvviz.models.gpt import GPTModel  # noqa: E402
from kvviz.serving import compare_policies, request_stream  # noqa: E402

CONTEXT = 128


def kinds(n_layers: int, batch: int, steps: int) -> dict:
    """Empty caches of each kind, big enough for context + steps positions per sequence."""
    length = CONTEXT + steps
    return {
        "contiguous": lambda: StaticCache(n_layers, length),
        "paged, blocks of 16": lambda: PagedCache(n_layers, 16, batch * -(-length // 16)),
        "paged, blocks of 1": lambda: PagedCache(n_layers, 1, batch * length),
    }


@torch.inference_mode()
def decode_times(net, make, batch: int, steps: int,
                 gen: torch.Generator) -> tuple[list[tuple[float, float]], torch.Tensor]:
    """Prefill ``batch`` random contexts of CONTEXT tokens, then time ``steps`` decode steps:
    (wall, thread CPU) seconds per step, and the logits of every step."""
    cache = make()
    if isinstance(cache, PagedCache):
        cache.set_active(range(batch))                    # row b is sequence b
    ids = torch.randint(0, net.config.vocab_size, (batch, CONTEXT), generator=gen)
    logits = net(ids, cache, 0, last_only=True)
    out, last = [], []
    for i in range(steps):
        nxt = logits.argmax(-1, keepdim=True)             # [B, 1]
        t0, c0 = time.perf_counter(), time.thread_time()
        logits = net(nxt, cache, CONTEXT + i, last_only=True)
        out.append((time.perf_counter() - t0, time.thread_time() - c0))
        last.append(logits)
    return out, torch.stack(last)


def step_times(net, rounds: int, steps: int) -> None:
    print(f"\n1. decode step of the tiny GPT at context {CONTEXT}, ms per step: wall median / CPU median / "
          f"fastest, over {rounds} rounds × {steps} steps; × = wall and CPU medians over the contiguous cache's")
    for batch in (1, 8):
        makers = kinds(net.config.n_layer, batch, steps)
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in makers}
        same = True
        for r in range(rounds):
            ref = None
            for name, make in makers.items():
                t, logits = decode_times(net, make, batch, steps, torch.Generator().manual_seed(r))
                times[name] += t
                same &= ref is None or torch.equal(logits, ref)
                ref = logits if ref is None else ref
        base = [statistics.median(x[j] for x in times["contiguous"]) for j in (0, 1)]
        print(f"  batch {batch} (logits of every step identical across the kinds: {same})")
        for name, t in times.items():
            wall, cpu = (statistics.median(x[j] for x in t) for j in (0, 1))
            ratio = "" if name == "contiguous" else f"   ×{wall / base[0]:.2f} / ×{cpu / base[1]:.2f}"
            print(f"    {name:20s} {wall * 1e3:7.3f} / {cpu * 1e3:7.3f} / {min(x[0] for x in t) * 1e3:7.3f}{ratio}")


def streams(model, n_streams: int) -> None:
    print(f"\n2. the same streams (seeds 0..{n_streams - 1}), continuous vs static batching: 8 requests, ≤ 12 new "
          "tokens, blocks of 4, batch ≤ 4; in steps, not seconds")
    print("  waste = mean over the steps of the KV bytes reserved but not holding K/V (paged / contiguous)")
    print("  pool, prefix         policy      steps (per seed)          mean TTFT  mean TPOT  preempt.  "
          "waste paged / contiguous")
    for pool, prefix in ((64, 0), (10, 0), (64, 8)):
        for name in ("continuous", "static"):
            total, ttft, tpot, pre, waste_p, waste_c = [], [], [], 0, [], []
            for seed in range(n_streams):
                run = compare_policies(model, request_stream(8, seed, 12, prefix), block_size=4, num_blocks=pool,
                                       prefix_caching=prefix > 0)[name]
                busy = [s.memory for s in run.steps if s.running]
                total.append(run.total_steps)
                ttft.append(run.mean_ttft)
                tpot.append(run.mean_tpot)
                pre += run.preemptions
                waste_p += [m.waste("paged") for m in busy]
                waste_c += [m.waste("contiguous") for m in busy]
            label = f"{pool} blocks" + (f", prefix {prefix}" if prefix else "")
            print(f"  {label:20s} {name:11s} {' '.join(f'{t:2d}' for t in total):25s} {statistics.mean(ttft):9.2f} "
                  f"{statistics.mean(tpot):10.2f} {pre:9d}  {statistics.mean(waste_p):6.1%} / "
                  f"{statistics.mean(waste_c):.1%}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--streams", type=int, default=5, help="seeds of the request stream")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores), "
          f"torch {torch.__version__}, {a.threads} thread(s)")
    model = GPTModel()
    step_times(model.network, a.rounds, a.steps)
    streams(model, a.streams)
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
