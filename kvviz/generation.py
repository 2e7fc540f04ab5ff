"""The stepper: prefill -> choose -> decode -> choose -> ...

Every event is an immutable record, so stepping back and forth only replays records. After a
``choose`` the chosen token is *pending*: it is not in the cache until the next ``decode`` processes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch

from kvviz.cache import CacheSnapshot, KVCache
from kvviz.limits import MAX_NEW_TOKENS, MAX_PROMPT_TOKENS, MAX_SEED, LimitError, check_int
from kvviz.models.base import Model, PassRecord, encode
from kvviz.sampling import Choice, Greedy, SelectionRule


@dataclass(frozen=True)
class RecomputeCheck:
    """The same positions computed again from scratch, without any cache."""

    output: torch.Tensor          # [N, d_out] recomputed output of the new positions
    logits: torch.Tensor          # [N, V_out]
    output_max_abs_diff: float
    logits_max_abs_diff: float

    @property
    def max_abs_diff(self) -> float:
        return max(self.output_max_abs_diff, self.logits_max_abs_diff)


@dataclass(frozen=True)
class Event:
    """One step of generation. ``record``/``check`` on passes, ``choice`` on choose events."""

    index: int
    phase: str                     # "prefill" | "decode" | "choose"
    tokens: list[str]              # prefill/decode: tokens processed; choose: [chosen]
    positions: list[int]           # absolute positions of those tokens
    sequence: list[str]            # every token known after this event (prompt + chosen)
    pending: str | None            # chosen but not yet processed, after this event
    cache: CacheSnapshot           # the cache after this event
    record: PassRecord | None      # pass events
    check: RecomputeCheck | None   # pass events
    choice: Choice | None          # choose events
    logits: torch.Tensor           # [V_out] logits of the last processed position (current for choose)
    kv_computed: int               # cumulative K/V positions computed with the cache
    kv_recompute: int              # cumulative positions a no-cache run would have computed
    repaired: bool = False         # the weather model's manual key rewrite happened in this pass

    @property
    def cache_len(self) -> int:
        return len(self.cache)

    @property
    def chosen(self) -> str | None:
        return self.tokens[0] if self.phase == "choose" else None


@dataclass(frozen=True)
class Run:
    model_name: str
    prompt: list[str]
    events: list[Event]
    rule: dict
    seed: int = 0                  # the draws' torch.Generator seed (same seed, same tokens)


# A hook a model may provide to fix its cache before a decode pass (the weather seed's repair).
RepairHook = Callable[[KVCache, int, int], bool]


def _check(model: Model, ids: list[int], rec: PassRecord) -> RecomputeCheck:
    """Rerun the whole prefix without a cache and compare the new positions."""
    full = model.forward(ids, None, 0)
    n = len(rec.positions)
    out, lg = full.output[-n:], full.logits[-n:]
    return RecomputeCheck(out, lg, float((out - rec.output).abs().max()), float((lg - rec.logits).abs().max()))


def run_generation(model: Model, prompt: Sequence[str], new_tokens: int,
                   rule: SelectionRule | None = None, seed: int = 0,
                   repair: RepairHook | None = None,
                   max_prompt: int = MAX_PROMPT_TOKENS, max_new: int = MAX_NEW_TOKENS) -> Run:
    """Generate ``new_tokens`` tokens and return every event.

    Events: prefill, choose, then (decode, choose) for each further token, so 2 * new_tokens
    events; the last chosen token stays pending.
    """
    prompt = list(prompt)
    if not prompt:
        raise LimitError("The prompt is empty: give at least one token.")
    check_int("Prompt length", len(prompt), 1, max_prompt)
    new_tokens = check_int("New tokens", new_tokens, 1, max_new)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    ids = encode(model, prompt)
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(seed)   # one stream per run: same seed, same draws
    cache = KVCache(model.n_layers)
    events: list[Event] = []
    sequence = list(prompt)
    kv_computed = kv_recompute = 0

    def do_pass(phase: str, tokens: list[str], start: int) -> None:
        nonlocal kv_computed, kv_recompute
        cache.current_event, cache.current_phase = len(events), phase
        repaired = bool(repair and phase == "decode" and repair(cache, start, len(events)))
        rec = model.forward(ids[start:start + len(tokens)], cache, start)
        cache.add_rows(tokens, start)
        kv_computed += len(tokens)
        kv_recompute += start + len(tokens)
        check = _check(model, ids[:start + len(tokens)], rec)
        events.append(Event(len(events), phase, tokens, rec.positions, list(sequence), None,
                            cache.snapshot(), rec, check, None, rec.logits[-1], kv_computed,
                            kv_recompute, repaired))

    def do_choose() -> None:
        last = events[-1]
        choice = rule.choose(last.logits, generator)
        token = model.logit_tokens[choice.index]
        sequence.append(token)
        ids.append(model.vocab.index(token))
        pos = len(sequence) - 1
        events.append(Event(len(events), "choose", [token], [pos], list(sequence), token,
                            cache.snapshot(), None, None, choice, last.logits, kv_computed,
                            kv_recompute))

    do_pass("prefill", prompt, 0)
    do_choose()
    for _ in range(new_tokens - 1):
        pos = len(sequence) - 1
        do_pass("decode", [sequence[pos]], pos)
        do_choose()
    return Run(model.name, prompt, events, rule.describe(), seed)
