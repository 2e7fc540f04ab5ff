"""The fast generation loops: the lesson's loop without a cache (``generate``, the tiny GPT) and the
one cached loop of every model (``generate_cached``); speculative decoding builds on the same model
protocol (kvviz.speculative).

``generate`` is docs/design.md §1.3's loop: at every step it runs the whole text, cropped to the
last ``block_size`` tokens, through the GPT and keeps only the last position's logits.
``generate_cached`` runs any model of the protocol (kvviz.models.base.CausalLM: the tiny GPT's
adapter, a transformers causal LM) through ``model.logits``: the prompt once (prefill) into a fresh
cache (``model.new_cache("static")``, preallocated, unless one is given), then one token per step at
``start_pos`` (decode); a model with learned positions (``max_positions``) refuses to run past them
with a LimitError, since learned positions cannot slide. ``cached=False`` runs the whole text at
every step instead (the recompute reference). Both loops choose with ``rule.draw`` on a generator
seeded the same way, so the same seed gives the same tokens (docs/design.md §3), and the same tokens
as the stepper.

These loops skip everything the stepper records (attention weights, snapshots): they exist to be
timed and compared.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import Cache
from kvviz.decoding.sampling import Greedy, SelectionRule
from kvviz.limits import LimitError
from kvviz.models.base import CausalLM
from kvviz.models.gpt.adapter import GPTModel
from kvviz.models.gpt.model import GPT


@dataclass(frozen=True)
class Generation:
    """What one generation loop produced."""

    prompt: list[int]
    tokens: list[int]                 # the new token ids, in order
    logits: torch.Tensor | None       # [N, V] the logits each choice used (None if not kept)
    seconds: float                    # wall time of the loop (prefill included)
    cache_bytes: int | None = None    # measured bytes of the cache (cached path only)
    cached: bool = False
    step_seconds: tuple[float, ...] = ()   # generate_cached: each pass's wall time (the prefill first)


def prompt_tensor(idx: Sequence[int] | torch.Tensor, vocab_size: int, max_new_tokens: int) -> torch.Tensor:
    """The prompt ids as ``[1, P]``, refused (LimitError) when empty, out of the vocabulary
    (``vocab_size`` ids), or asked for no new tokens."""
    ids = torch.as_tensor(idx, dtype=torch.long).reshape(1, -1)            # [1, P]
    if ids.shape[1] == 0:
        raise LimitError("The prompt is empty: give at least one token.")
    if max_new_tokens < 1:
        raise LimitError(f"New tokens must be at least 1, got {max_new_tokens}.")
    if int(ids.max()) >= vocab_size or int(ids.min()) < 0:
        raise LimitError("A token id is outside the vocabulary.")
    return ids


@torch.inference_mode()
def generate(model: GPT, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
             rule: SelectionRule | None = None, seed: int = 0, keep_logits: bool = True) -> Generation:
    """No cache: every step reruns the text, cropped to the last block_size tokens."""
    ids = prompt_tensor(idx, model.config.vocab_size, max_new_tokens)
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


def max_cached_new_tokens(model: CausalLM, prompt_len: int) -> int | None:
    """The most tokens ``generate_cached`` can produce on a model with learned positions: the last
    chosen token is never processed, so the cache needs prompt_len + new − 1 ≤ max_positions
    positions. None when the model's positions are unbounded."""
    if model.max_positions is None:
        return None
    return model.max_positions - prompt_len + 1


@torch.inference_mode()
def generate_cached(model: CausalLM, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
                    rule: SelectionRule | None = None, seed: int = 0, keep_logits: bool = True,
                    cache: Cache | None = None, *, cached: bool = True, stop: bool = True) -> Generation:
    """Prefill once, then decode one token per step at ``start_pos`` through ``model.logits``
    (the last position's logits only), choosing with ``rule.draw`` on a generator seeded like the
    stepper's; same draws as ``generate``.

    ``cache``: an empty cache of any kind (default ``model.new_cache("static")`` of exactly the
    positions needed). ``cached=False`` reruns the whole text at every step instead. ``stop``: end
    once an end token (``model.end_tokens``) is chosen, as the stepper does (a benchmark turns it off
    to time a fixed number of steps)."""
    ids = prompt_tensor(idx, len(model.vocab), max_new_tokens)
    prompt = ids[0].tolist()
    prompt_len = len(prompt)
    limit = max_cached_new_tokens(model, prompt_len)
    if limit is not None and max_new_tokens > limit:
        raise LimitError(
            f"With the cache this model can generate at most {limit} tokens after a {prompt_len}-token "
            f"prompt: its {model.max_positions} learned positions (block_size) cannot slide. "
            f"Without the cache, generate crops the oldest tokens instead.")
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(int(seed))
    end_ids = {model.vocab.index(t) for t in model.end_tokens} if stop else set()
    if cached and cache is None:
        cache = model.new_cache("static", max_length=prompt_len + max_new_tokens - 1)
    seq, todo, start = list(prompt), prompt, 0
    kept: list[torch.Tensor] = []
    steps: list[float] = []
    t0 = time.perf_counter()
    for _ in range(max_new_tokens):
        t_step = time.perf_counter()
        if cached:          # the new tokens at positions start.. against the cache
            logits = model.logits(todo, cache, start, keep=1)[0]                      # [V]
        else:               # the whole text again, no cache
            logits = model.logits(seq, None, 0, keep=1)[0]
        steps.append(time.perf_counter() - t_step)
        nxt = rule.draw(logits, generator)
        if keep_logits:
            kept.append(logits)
        start += len(todo)
        seq.append(nxt)
        todo = [nxt]        # chosen, not yet processed: the last choice stays pending
        if nxt in end_ids:
            break
    seconds = time.perf_counter() - t0
    return Generation(prompt, seq[prompt_len:], torch.stack(kept) if kept else None, seconds,
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
    """Run ``generate`` and ``generate_cached`` on a GPT with the same seed and compare tokens and logits.

    ``warm``: run both loops once on a short prefix first, so neither pays a first-call warm-up
    (allocator, kernels) in the times the page shows."""
    cached_model = GPTModel(model)
    if warm:
        n = min(2, max_new_tokens)
        generate(model, idx, n, rule, seed, keep_logits=False)
        generate_cached(cached_model, idx, n, rule, seed, keep_logits=False)
    a = generate(model, idx, max_new_tokens, rule, seed)
    b = generate_cached(cached_model, idx, max_new_tokens, rule, seed)
    diff = next((i for i, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y), None)
    upto = len(a.tokens) if diff is None else diff + 1    # logits of step i+1 differ trivially after a split
    delta = float((a.logits[:upto] - b.logits[:upto]).abs().max())  # type: ignore[index]
    return Comparison(a, b, diff is None, diff, delta)


def next_token_probs(logits: torch.Tensor) -> list[float]:
    """The model's next-token distribution: softmax of the logits [V] (before any sampling filter)."""
    return torch.softmax(logits.detach().to(torch.float64), dim=-1).tolist()
