"""The fast generation loops of a GPT: without a cache (``generate``) and with one (``generate_cached``);
speculative decoding with a draft model builds on them (kvviz.speculative.decoding).

``generate`` is the lesson's loop (docs/design.md §3): at every step it runs the whole text, cropped to the last
``block_size`` tokens, through the model and keeps only the last position's logits.
``generate_cached`` runs the prompt once (prefill) into a preallocated cache (kvviz.cache.StaticCache),
then one token per step at ``start_pos`` (decode); past ``block_size`` it stops with a LimitError,
since learned positions cannot slide. Both run the one network (kvviz.models.gpt.model) and choose
with ``rule.draw`` on a generator seeded the same way, so the same seed gives the same tokens
(docs/design.md §3), and the same tokens as the stepper.

``hf_generate`` is the same loop for a transformers causal LM (kvviz.models.hf, SmolLM2): its own
forward with one of kvviz's caches, or the whole text at every step without one.

These loops skip everything the stepper records (attention weights, snapshots): they exist to be
timed and compared.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import Cache, DynamicCache, StaticCache
from kvviz.decoding.sampling import Greedy, SelectionRule
from kvviz.limits import LimitError, check_int
from kvviz.models.gpt.model import GPT
from kvviz.models.hf import HFCausalLM


@dataclass(frozen=True)
class Generation:
    """What one generation loop produced."""

    prompt: list[int]
    tokens: list[int]                 # the new token ids, in order
    logits: torch.Tensor | None       # [N, V] the logits each choice used (None if not kept)
    seconds: float                    # wall time of the loop (prefill included)
    cache_bytes: int | None = None    # measured bytes of the cache (cached path only)
    cached: bool = False
    step_seconds: tuple[float, ...] = ()   # hf_generate: each pass's wall time (the prefill first)


def prompt_tensor(idx: Sequence[int] | torch.Tensor, model: GPT, max_new_tokens: int) -> torch.Tensor:
    """The prompt ids as ``[1, P]``, refused (LimitError) when empty, out of the vocabulary, or
    asked for no new tokens."""
    ids = torch.as_tensor(idx, dtype=torch.long).reshape(1, -1)            # [1, P]
    if ids.shape[1] == 0:
        raise LimitError("The prompt is empty: give at least one token.")
    if max_new_tokens < 1:
        raise LimitError(f"New tokens must be at least 1, got {max_new_tokens}.")
    if int(ids.max()) >= model.config.vocab_size or int(ids.min()) < 0:
        raise LimitError("A token id is outside the vocabulary.")
    return ids


@torch.inference_mode()
def generate(model: GPT, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
             rule: SelectionRule | None = None, seed: int = 0, keep_logits: bool = True) -> Generation:
    """No cache: every step reruns the text, cropped to the last block_size tokens."""
    ids = prompt_tensor(idx, model, max_new_tokens)
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(int(seed))
    block = model.config.block_size
    kept: list[torch.Tensor] = []
    t0 = time.perf_counter()
    for _ in range(max_new_tokens):
        logits = model(ids[:, -block:], last_only=True)[0]                # [V] of the last position
        nxt = rule.draw(logits, generator)
        if keep_logits:
            kept.append(logits)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)              # [1, P + t + 1]
    seconds = time.perf_counter() - t0
    new = ids[0, -max_new_tokens:].tolist()
    return Generation(ids[0, :-max_new_tokens].tolist(), new, torch.stack(kept) if kept else None, seconds)


def max_cached_new_tokens(model: GPT, prompt_len: int) -> int:
    """The most tokens ``generate_cached`` can produce: the last chosen token is never processed, so
    the cache needs prompt_len + new − 1 ≤ block_size positions."""
    return model.config.block_size - prompt_len + 1


@torch.inference_mode()
def generate_cached(model: GPT, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
                    rule: SelectionRule | None = None, seed: int = 0, keep_logits: bool = True,
                    cache: Cache | None = None) -> Generation:
    """Prefill once, then decode one token per step with ``start_pos``; same draws as ``generate``.
    ``cache``: an empty cache of any kind (default a StaticCache of exactly the positions needed)."""
    ids = prompt_tensor(idx, model, max_new_tokens)
    prompt_len = ids.shape[1]
    limit = max_cached_new_tokens(model, prompt_len)
    if max_new_tokens > limit:
        raise LimitError(
            f"With the cache this GPT can generate at most {limit} tokens after a {prompt_len}-token "
            f"prompt: its {model.config.block_size} learned positions (block_size) cannot slide. "
            f"Without the cache, generate crops the oldest tokens instead.")
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(int(seed))
    if cache is None:
        cache = StaticCache(model.config.n_layer, prompt_len + max_new_tokens - 1)
    kept: list[torch.Tensor] = []
    new: list[int] = []
    t0 = time.perf_counter()
    logits = model(ids, cache, 0, last_only=True)[0]                       # prefill: [V]
    pos = prompt_len
    for step in range(max_new_tokens):
        nxt = rule.draw(logits, generator)
        if keep_logits:
            kept.append(logits)
        new.append(nxt)
        if step + 1 < max_new_tokens:                                     # the last choice stays pending
            logits = model(torch.tensor([[nxt]]), cache, pos, last_only=True)[0]   # decode: [V]
            pos += 1
    seconds = time.perf_counter() - t0
    return Generation(ids[0].tolist(), new, torch.stack(kept) if kept else None, seconds,
                      cache_bytes=cache.nbytes(), cached=True)


@torch.inference_mode()
def hf_generate(model: HFCausalLM, ids: Sequence[int], new_tokens: int, rule: SelectionRule | None = None,
                seed: int = 0, cached: bool = True, cache: Cache | None = None, keep_logits: bool = True,
                stop: bool = True) -> Generation:
    """A transformers model: prefill, then one token per step through its own forward (``logits_to_keep=1``),
    choosing with ``rule.draw`` on a generator seeded like the stepper's (same seed, same draws);
    ``cache``: an empty kvviz cache (default a DynamicCache). ``cached=False`` reruns the whole text at
    every step instead. ``stop``: end once an end token (``model.end_tokens``) is chosen, as the
    stepper does (a benchmark turns it off to time a fixed number of steps)."""
    prompt = [int(i) for i in ids]
    if not prompt:
        raise LimitError("The prompt is empty: give at least one token.")
    check_int("New tokens", new_tokens, 1, 100_000)
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(int(seed))
    end_ids = {model.vocab.index(t) for t in model.end_tokens} if stop else set()
    if cached and cache is None:
        cache = DynamicCache(model.n_layers)
    net = model.model
    seq, todo, start = list(prompt), list(prompt), 0
    kept: list[torch.Tensor] = []
    steps: list[float] = []
    t0 = time.perf_counter()
    for _ in range(new_tokens):
        t_step = time.perf_counter()
        if cached:           # the new tokens at positions start.. against the cache
            pos = torch.arange(start, start + len(todo)).unsqueeze(0)                  # [1, n]
            out = net(input_ids=torch.tensor([todo]), position_ids=pos, past_key_values=cache, use_cache=True,
                      logits_to_keep=1)
        else:                # the whole text again, no cache
            out = net(input_ids=torch.tensor([seq]), use_cache=False, logits_to_keep=1)
        logits = out.logits[0, -1].float()                                             # [V]
        steps.append(time.perf_counter() - t_step)
        nxt = rule.draw(logits, generator)
        if keep_logits:
            kept.append(logits)
        start += len(todo)
        seq.append(nxt)
        todo = [nxt]
        if nxt in end_ids:
            break
    seconds = time.perf_counter() - t0
    return Generation(prompt, seq[len(prompt):], torch.stack(kept) if kept else None, seconds,
                      cache_bytes=cache.nbytes() if cached else None, cached=cached, step_seconds=tuple(steps))


@dataclass(frozen=True)
class Comparison:
    """The two loops side by side for the same prompt, rule and seed."""

    uncached: Generation
    cached: Generation
    identical: bool                  # same tokens
    first_difference: int | None     # index of the first differing new token
    max_abs_logit_diff: float        # over the steps both loops shared (up to the first difference)


def compare(model: GPT, idx: Sequence[int], max_new_tokens: int, rule: SelectionRule | None = None,
            seed: int = 0, warm: bool = True) -> Comparison:
    """Run ``generate`` and ``generate_cached`` with the same seed and compare tokens and logits.

    ``warm``: run both loops once on a short prefix first, so neither pays a first-call warm-up
    (allocator, kernels) in the times the page shows."""
    if warm:
        n = min(2, max_new_tokens)
        generate(model, idx, n, rule, seed, keep_logits=False)
        generate_cached(model, idx, n, rule, seed, keep_logits=False)
    a = generate(model, idx, max_new_tokens, rule, seed)
    b = generate_cached(model, idx, max_new_tokens, rule, seed)
    diff = next((i for i, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y), None)
    upto = len(a.tokens) if diff is None else diff + 1    # logits of step i+1 differ trivially after a split
    delta = float((a.logits[:upto] - b.logits[:upto]).abs().max())  # type: ignore[index]
    return Comparison(a, b, diff is None, diff, delta)


def next_token_probs(logits: torch.Tensor) -> list[float]:
    """The model's next-token distribution: softmax of the logits [V] (before any sampling filter)."""
    return torch.softmax(logits.detach().to(torch.float64), dim=-1).tolist()
