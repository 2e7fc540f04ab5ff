"""Parallel sampling from one paged cache: a prompt prefilled once and forked, copy-on-write when a
sample first writes into the shared, partly filled last block (``fork_run``)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.decoding.batching import BatchModel
from kvviz.decoding.sampling import Sampler
from kvviz.limits import (
    MAX_SEED,
    MAX_SERVE_BATCH,
    MAX_SERVE_BLOCK_SIZE,
    MAX_SERVE_BLOCKS,
    MAX_SERVE_NEW_TOKENS,
    LimitError,
    check_int,
)
from kvviz.models.base import encode
from kvviz.serving.kv_manager import KVCacheManager
from kvviz.serving.records import StepRecord
from kvviz.serving.workload import Request, solo_run


@dataclass(frozen=True)
class ForkRun:
    """Parallel sampling from one paged cache: the prompt is prefilled once, then ``len(seeds)``
    samples continue it, sharing its blocks (``KVCacheManager.fork``); the first write into the shared,
    partly filled last block copies it (copy-on-write). Step 0 is the prefill and the fork, step t
    each sample's decode of its token t − 1; after the last step every block is freed.

    ``identical[t]``: at step t every sample's logits equal, bit for bit (``torch.equal``), those of
    its own run alone through a contiguous cache (the stepper with a DynamicCache, same seed)."""

    prompt: tuple[str, ...]
    block_size: int
    num_blocks: int
    seeds: tuple[int, ...]
    samples: tuple[tuple[str, ...], ...]     # each sample's generated tokens
    steps: tuple[StepRecord, ...]
    identical: tuple[bool, ...]

    @property
    def copies(self) -> tuple[tuple[int, int, int], ...]:
        """(step, source block, its copy) of every copy-on-write."""
        return tuple((s.step, a, b) for s in self.steps for a, b in s.copied)


def fork_run(model: BatchModel, prompt: Sequence[str], new_tokens: int = 3, block_size: int = 4,
             num_blocks: int = 16, samples: int = 2, seed: int = 0, temperature: float = 1.0) -> ForkRun:
    """``samples`` sampled continuations of one prompt from one paged cache (see ``ForkRun``):
    sample i draws with ``temperature`` and seed ``seed + i``, the draws of its contiguous run."""
    check_int("Prompt length", len(prompt), 1, model.limits.max_prompt_tokens)
    limits = model.limits
    new_tokens = check_int("New tokens", new_tokens, 1,
                           min(MAX_SERVE_NEW_TOKENS, limits.max_new_tokens, limits.serve_new_tokens))
    block_size = check_int("Block size", block_size, 1, MAX_SERVE_BLOCK_SIZE)
    num_blocks = check_int("Number of blocks", num_blocks, 1, MAX_SERVE_BLOCKS)
    n = check_int("Samples", samples, 1, MAX_SERVE_BATCH)
    limits.check_serve_pool(n, block_size, num_blocks)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    seeds = tuple((seed + i) % (MAX_SEED + 1) for i in range(n))
    ids = encode(model, prompt)
    rule = Sampler(temperature)
    req = Request(0, tuple(prompt), new_tokens)
    solo = [solo_run(model, req, rule, s) for s in seeds]                  # contiguous: the reference
    max_length = len(ids) + new_tokens - 1
    shared = len(ids) // block_size
    if shared + n * (-(-max_length // block_size) - shared) > num_blocks:
        raise LimitError(f"{n} samples of {max_length} positions need more than the {num_blocks} blocks of the pool.")
    kv = KVCacheManager(model.n_layers, block_size, num_blocks)
    steps: list[StepRecord] = []
    identical: list[bool] = []
    with torch.no_grad():
        for t in range(new_tokens):
            rows: list[torch.Tensor] = []
            if t == 0:                                                   # prefill once, then fork
                kv.set_rows([0])
                rows = [model.forward(ids, kv.cache, 0).logits[-1]] * n
                for i in range(1, n):
                    kv.fork(0, i)
            else:
                for i in range(n):
                    kv.set_rows([i])
                    rows.append(model.forward([solo[i][0][t - 1]], kv.cache, len(ids) + t - 1).logits[-1])
            identical.append(all(torch.equal(r, solo[i][1][t]) for i, r in enumerate(rows)))
            diff = max(float((r - solo[i][1][t]).abs().max()) for i, r in enumerate(rows))
            memory = kv.memory(range(n), [max_length] * n)
            contexts = tuple((i, tuple(prompt) + tuple(model.vocab[x] for x in solo[i][0][:t])) for i in range(n))
            last = t == new_tokens - 1
            if last:                                                     # done: every block goes back
                for i in range(n):
                    kv.free(i)
            steps.append(StepRecord.of(
                t, kv.state(() if last else range(n)), memory, prefill=(0,) if t == 0 else (),
                decode=range(n) if t else (), finished=range(n) if last else (),
                chosen=[(i, model.logit_tokens[solo[i][0][t]]) for i in range(n)], contexts=contexts,
                prefill_saved=len(ids) * (n - 1) if t == 0 else 0, max_abs_diff=diff))
    return ForkRun(tuple(prompt), block_size, num_blocks, seeds,
                   tuple(tuple(model.logit_tokens[x] for x in s[0]) for s in solo), tuple(steps), tuple(identical))
