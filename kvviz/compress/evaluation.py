"""What a smaller cache costs, measured on held-out prompts (``evaluate``; the CLI and every page
share it).

Held-out prompts (``held_out_prompts``: ``COMPRESS_PROMPT_TOKENS`` tokens from the start of a sentence
in the tail of the training corpus that no training batch read, picked with a seeded
``random.Random``); the full-cache model generates greedily; each variant runs teacher-forced on the
same text, and at every generated position we record KL(full ‖ variant) of the next-token
distributions and whether the variant's top-1 token is the full model's. Per variant: mean KL, top-1
agreement and cache bytes per token (``nbytes()`` of the cache object at the end of each run over the
positions it processed, averaged over the prompts). Same seed, same numbers.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from kvviz.cache import Cache, DynamicCache
from kvviz.compress.variants import Variant
from kvviz.limits import (
    COMPRESS_MAX_NEW_TOKENS,
    COMPRESS_MAX_PROMPTS,
    COMPRESS_MAX_VARIANTS,
    COMPRESS_PROMPT_TOKENS,
    MAX_SEED,
    check_int,
)
from kvviz.models.gpt import GPT, TinyGPT, load_tiny_gpt
from kvviz.models.gpt.corpus import corpus_tokens
from kvviz.models.gpt.train import split_train_val

# --- held-out prompts -------------------------------------------------------------------------

@dataclass(frozen=True)
class HeldOutPrompt:
    """``tokens`` from the held-out tail of the training corpus, starting at ``offset`` in that tail
    (always the first token of a sentence)."""

    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    offset: int


@lru_cache(maxsize=2)
def held_out_stream(sentences: int, seed: int) -> tuple[str, ...]:
    """The tail of the corpus stream that training never read (kvviz.models.gpt.train.split_train_val)."""
    return tuple(split_train_val(corpus_tokens(sentences, seed))[1])


def held_out_prompts(n: int, seed: int = 0, tiny: TinyGPT | None = None,
                     length: int = COMPRESS_PROMPT_TOKENS) -> list[HeldOutPrompt]:
    """``n`` prompts of ``length`` tokens, each from the start of a different held-out sentence,
    chosen with ``random.Random(seed)``. The corpus is regenerated with the sentences and seed the
    checkpoint records (kvviz/data/tiny_gpt.json)."""
    n = check_int("Prompts", n, 1, COMPRESS_MAX_PROMPTS)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    tiny = tiny or load_tiny_gpt()
    training = tiny.meta.get("training", {})
    stream = held_out_stream(int(training.get("corpus_sentences", 30_000)), int(training.get("seed", 0)))
    starts = [i for i in range(1, len(stream) - length + 1) if stream[i - 1] in (".", "!")]
    picked = random.Random(seed).sample(starts, n)
    index = tiny.tokenizer.index
    return [HeldOutPrompt(stream[i:i + length], tuple(index[t] for t in stream[i:i + length]), i) for i in picked]


# --- the evaluation ---------------------------------------------------------------------------

@torch.inference_mode()
def run_cache(network: GPT, prompt: Sequence[int], new_tokens: int, cache: Cache,
              forced: Sequence[int] | None = None) -> tuple[list[int], torch.Tensor]:
    """Prefill ``prompt`` into ``cache``, then decode one token per step: greedily, or the tokens
    ``forced`` (teacher forcing). Returns the tokens and the next-token logits [new_tokens, V] that
    chose (or would have chosen) each; the last token is never processed, as in generation."""
    logits = network(torch.tensor([list(prompt)]), cache, 0, last_only=True)[0]
    rows, tokens = [], []
    pos = len(prompt)
    for step in range(new_tokens):
        rows.append(logits)
        tokens.append(int(torch.argmax(logits)) if forced is None else int(forced[step]))
        if step + 1 < new_tokens:
            logits = network(torch.tensor([[tokens[-1]]]), cache, pos, last_only=True)[0]
            pos += 1
    return tokens, torch.stack(rows)


def kl_divergence(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) in nats of the softmax distributions, over the last axis (float64; rounding below
    zero is clipped to 0)."""
    p, q = torch.log_softmax(p_logits.double(), -1), torch.log_softmax(q_logits.double(), -1)
    return (p.exp() * (p - q)).sum(-1).clamp(min=0.0)


@dataclass(frozen=True)
class VariantResult:
    """One variant over every prompt: per prompt and generated position the KL(full ‖ variant) and
    top-1 agreement, and per prompt the cache's bytes at the end and the positions it processed."""

    variant: Variant
    kl: tuple[tuple[float, ...], ...]           # [prompt][position]
    agree: tuple[tuple[bool, ...], ...]         # [prompt][position]
    cache_bytes: tuple[int, ...]                # [prompt] nbytes() of the cache after the run
    cached_positions: tuple[int, ...]           # [prompt] positions processed (prompt + new − 1)

    @property
    def prompts(self) -> int:
        return len(self.kl)

    @property
    def positions(self) -> int:
        return sum(len(row) for row in self.kl)

    @property
    def kl_mean(self) -> float:
        return sum(sum(row) for row in self.kl) / self.positions

    @property
    def top1_agreement(self) -> float:
        return sum(sum(row) for row in self.agree) / self.positions

    @property
    def bytes_per_token(self) -> float:
        """Bytes of the cache per position it processed, at the end of each run, averaged over prompts."""
        return sum(b / t for b, t in zip(self.cache_bytes, self.cached_positions)) / self.prompts

    def as_dict(self) -> dict:
        """The CLI's JSON: kind, settings, bytes_per_token, kl_mean, top1_agreement, prompts, positions."""
        return {"kind": self.variant.kind, "settings": self.variant.settings(),
                "bytes_per_token": round(self.bytes_per_token, 3), "kl_mean": round(self.kl_mean, 8),
                "top1_agreement": round(self.top1_agreement, 6), "prompts": self.prompts,
                "positions": self.positions}


@dataclass(frozen=True)
class Evaluation:
    """The held-out prompts, what the full cache generated from them, and every variant's result."""

    prompts: tuple[HeldOutPrompt, ...]
    generated: tuple[tuple[int, ...], ...]      # [prompt] the full cache's greedy tokens
    new_tokens: int
    seed: int
    results: tuple[VariantResult, ...]
    vocab: tuple[str, ...] = field(repr=False, default=())

    def result(self, variant: Variant) -> VariantResult:
        return next(r for r in self.results if r.variant == variant)


Progress = Callable[[int, int], None]      # (runs done, runs in all), e.g. a page's progress bar


def evaluate(variants: Sequence[Variant], prompts: int = 8, new_tokens: int = 32, seed: int = 0,
             tiny: TinyGPT | None = None, progress: Progress | None = None, threads: int = 1) -> Evaluation:
    """Every variant against the full cache on ``prompts`` held-out prompts (see the module doc).

    Runs on ``threads`` torch threads (restored afterwards): one by default, since on a shared
    2-core machine two threads waiting for each other made these one-token steps many times slower."""
    variants = list(variants)
    check_int("Variants", len(variants), 1, COMPRESS_MAX_VARIANTS)
    new_tokens = check_int("New tokens", new_tokens, 1, COMPRESS_MAX_NEW_TOKENS)
    threads = check_int("Threads", threads, 1, 64)
    tiny = tiny or load_tiny_gpt()
    for v in variants:
        v.network(tiny.model)                          # refuse a bad head count before any work
    chosen = held_out_prompts(prompts, seed, tiny)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        return _evaluate(variants, chosen, new_tokens, seed, tiny, progress)
    finally:
        torch.set_num_threads(before)


def _evaluate(variants: list[Variant], chosen: list[HeldOutPrompt], new_tokens: int, seed: int,
              tiny: TinyGPT, progress: Progress | None) -> Evaluation:
    base = tiny.model
    n_layers = base.config.n_layer
    total, done = len(chosen) * (len(variants) + 1), 0
    reference = []
    for p in chosen:                                   # the full cache generates greedily
        reference.append(run_cache(base, p.ids, new_tokens, DynamicCache(n_layers)))
        done += 1
        if progress:
            progress(done, total)
    results = []
    for v in variants:
        network = v.network(base)
        kl, agree, nbytes, cached = [], [], [], []
        for p, (tokens, full_logits) in zip(chosen, reference):
            cache = v.make_cache(n_layers)
            _, logits = run_cache(network, p.ids, new_tokens, cache, forced=tokens)
            kl.append(tuple(kl_divergence(full_logits, logits).tolist()))
            agree.append(tuple(bool(a) for a in (logits.argmax(-1) == torch.tensor(tokens)).tolist()))
            nbytes.append(cache.nbytes())
            cached.append(len(p.ids) + new_tokens - 1)
            done += 1
            if progress:
                progress(done, total)
        results.append(VariantResult(v, tuple(kl), tuple(agree), tuple(nbytes), tuple(cached)))
    return Evaluation(tuple(chosen), tuple(tuple(t) for t, _ in reference), new_tokens, seed, tuple(results),
                      tuple(tiny.tokenizer.vocab))
