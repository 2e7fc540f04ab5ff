"""Speculative decoding with a draft model (Leviathan et al. 2023; Chen et al. 2023) on any pair of
models of the protocol (kvviz.models.base.CausalLM) that share a vocabulary: ``speculative_round``
and ``speculative_generate``. The draft is this source's own part (``propose``); the verification,
the acceptance test and the records are every source's (kvviz.speculative.verify, .records).

Its rounds are few and small, so unlike the plain loops (kvviz.decoding.loops) a run returns one
record per round (proposals, p and q, the uniform draws, the residual, the cache lengths before and
after the rollback) for a page to step through.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import torch

from kvviz.cache import Cache
from kvviz.decoding.sampling import Greedy, SelectionRule, draw_from, is_greedy, rule_probs
from kvviz.limits import (
    MAX_SEED,
    SPECULATIVE_MAX_ATTENTION_TOKENS,
    SPECULATIVE_MAX_GAMMA,
    SPECULATIVE_MAX_NEW_TOKENS,
    LimitError,
    check_int,
)
from kvviz.models.base import CausalLM
from kvviz.models.gpt import GPTModel, load_draft_gpt, load_tiny_gpt
from kvviz.speculative.records import CacheLengths, Speculation, SpeculativeRound
from kvviz.speculative.verify import Drafted, check_prompt_ids, make_round, speculate, verify


def check_speculation(target: CausalLM, draft: CausalLM, prompt_len: int, max_new_tokens: object, gamma: object,
                      keep_attention: bool = False) -> tuple[int, int]:
    """Validate a speculative run before any work: the pair shares a vocabulary, γ, N and the prompt
    are within kvviz.limits, and prompt + N − 1 positions fit both models' learned positions (when
    they have any). Returns (max_new_tokens, gamma) as ints."""
    if len(target.vocab) != len(draft.vocab):
        raise LimitError(f"The draft model's vocabulary ({len(draft.vocab)} tokens) differs from the "
                         f"target's ({len(target.vocab)}): they must share one tokenizer.")
    gamma = check_int("Gamma (draft tokens per round)", gamma, 1, SPECULATIVE_MAX_GAMMA)
    cap = SPECULATIVE_MAX_ATTENTION_TOKENS if keep_attention else SPECULATIVE_MAX_NEW_TOKENS
    n = check_int("New tokens", max_new_tokens, 1, cap)
    check_int("Prompt length", prompt_len, 1, target.limits.max_prompt_tokens)
    learned = [m.max_positions for m in (target, draft) if m.max_positions is not None]
    block = min(learned) if learned else None
    if block is not None and prompt_len + n - 1 > block:
        raise LimitError(f"A {prompt_len}-token prompt leaves room for at most {block - prompt_len + 1} new "
                         f"tokens: the models learned {block} positions (block_size), and the last chosen "
                         f"token is never processed.")
    return n, gamma


@torch.inference_mode()
def propose(draft: CausalLM, cache: Cache, fed: list[int], start: int, gamma: int, rule: SelectionRule,
            generator: torch.Generator | None) -> Drafted:
    """γ draft passes from position ``start``: the first over ``fed`` (what the cache lacks), then one per
    proposal, each drawing from q = rule_probs(rule, draft logits) (greedy: the argmax)."""
    greedy = is_greedy(rule)
    tokens: list[int] = []
    qs: list[torch.Tensor] = []
    logits_kept: list[torch.Tensor] = []
    lens: list[int] = []
    x, pos, seconds = fed, start, 0.0
    for _ in range(gamma):
        t0 = time.perf_counter()
        logits = draft.logits(x, cache, pos, keep=1)[0]                            # [V]
        seconds += time.perf_counter() - t0
        pos += len(x)
        if greedy:                      # the argmax, as Greedy.draw; q one-hot on it
            tok = int(torch.argmax(logits))
        else:
            q = rule_probs(rule, logits)                                           # [V] float64
            tok = draw_from(q, generator)
            qs.append(q)
        tokens.append(tok)
        logits_kept.append(logits)
        lens.append(pos)
        x = [tok]
    v = len(draft.logit_tokens)
    return Drafted(tuple(tokens), torch.stack(qs) if qs else None,
                   torch.stack(logits_kept) if logits_kept else torch.empty(0, v), tuple(lens), seconds,
                   tuple(fed))


@torch.inference_mode()
def speculative_round(target: CausalLM, draft: CausalLM, target_cache: Cache, draft_cache: Cache,
                      sequence: Sequence[int], gamma: int, rule: SelectionRule, generator: torch.Generator | None,
                      index: int = 0, keep_attention: bool = False) -> SpeculativeRound:
    """One round on caches that hold ``sequence`` except its last token (target) and a prefix of it
    (draft); leaves both holding the new sequence except its new last token. ``sequence`` is not
    changed: append ``round.emitted`` to it.

    1. The draft proposes γ tokens, one pass each (the first pass also processes what its cache lacks),
       drawing from q = rule_probs(rule, draft logits) (``propose``).
    2. The target runs ONE pass over the pending token and the γ proposals: p for every proposal and,
       in row γ, for the token after them; the acceptance test min(1, p/q) (kvviz.speculative.verify).
    3. Rollback: both caches are cropped to the positions of the accepted text (the rows of rejected
       proposals, and the draft's row of the last proposal, are dropped).
    """
    start = target_cache.get_seq_length()
    if start != len(sequence) - 1:
        raise ValueError(f"the target cache must hold the text except its last token: {start} positions "
                         f"for {len(sequence)} tokens")
    d_before = draft_cache.get_seq_length()
    if d_before > start:
        raise ValueError("the draft cache holds more positions than the target cache")
    fed = list(sequence[d_before:]) if gamma else []          # a round with γ = 0 runs no draft pass
    drafted = propose(draft, draft_cache, fed, d_before, gamma, rule, generator)
    d_grown = drafted.cache_lens[-1] if drafted.cache_lens else d_before
    v = verify(target, target_cache, sequence, drafted, rule, generator, keep_attention)
    draft_cache.crop(min(d_grown, v.cache.after))
    lengths = CacheLengths(d_before, d_grown, draft_cache.get_seq_length())
    return make_round(index, "draft-model", replace(drafted, cache=lengths), v, keep=True)


@torch.inference_mode()
def speculative_generate(target: CausalLM, draft: CausalLM, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
                         gamma: int = 4, rule: SelectionRule | None = None, seed: int = 0,
                         keep_attention: bool = False) -> Speculation:
    """Speculative decoding (Leviathan et al. 2023; Chen et al. 2023) of ``target`` with ``draft``.

    Both models prefill the prompt except its last token, which is pending; then rounds of
    ``speculative_round`` until ``max_new_tokens`` tokens are out (a round proposes at most as many
    tokens as are still missing minus one, so no token is thrown away and the last round may be a
    plain step with γ = 0), or the target chose an end token. After every round the target cache
    holds exactly the prompt and the new tokens except the last one (chosen, not processed), as
    everywhere in kvviz. Both caches are static caches (``new_cache("static")``) rolled back with
    ``crop``.

    The rule's filters (temperature, top-k, top-p) make p and q (``rule_probs``): the output is
    distributed exactly as ``generate_cached(target, ..., rule)``'s; greedy output is token-identical to
    it. All draws (proposals, u, residual and bonus tokens) come from one generator seeded with ``seed``
    (same seed ⇒ same run; the tokens differ from generate_cached's for the same seed, their
    distribution does not). ``keep_attention`` keeps every verification pass's attention weights.
    """
    prompt = check_prompt_ids(target, idx)
    if max_new_tokens < 1:
        raise LimitError(f"New tokens must be at least 1, got {max_new_tokens}.")
    prompt_len = len(prompt)
    n, gamma = check_speculation(target, draft, prompt_len, max_new_tokens, gamma, keep_attention)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(seed)
    length = prompt_len + n - 1                                   # the most either cache ever holds
    t_cache = target.new_cache("static", max_length=length)
    d_cache = draft.new_cache("static", max_length=length)
    t0 = time.perf_counter()
    if prompt_len > 1:                                            # prefill: everything but the pending token
        target.logits(prompt[:-1], t_cache, 0, keep=1)
        draft.logits(prompt[:-1], d_cache, 0, keep=1)

    def one(cache: Cache, seq: list[int], max_draft: int, _end: frozenset[int], i: int) -> SpeculativeRound:
        return speculative_round(target, draft, cache, d_cache, seq, min(gamma, max_draft), rule, generator, i,
                                 keep_attention)
    tokens, rounds, _ = speculate(target, prompt, n, one, cache=t_cache)
    seconds = time.perf_counter() - t0
    return Speculation(prompt, tokens, tuple(rounds), gamma, rule.describe(), seed, seconds, prompt_len - 1,
                       source="draft-model", max_new_tokens=n)


def load_pair() -> tuple[GPTModel, GPTModel]:
    """The target (the tiny GPT) and its draft (1 layer, width 64), both shared read-only."""
    return GPTModel(load_tiny_gpt()), GPTModel(load_draft_gpt())
