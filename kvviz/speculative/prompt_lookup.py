"""Prompt-lookup decoding (Saxena 2023, transformers' ``generate(prompt_lookup_num_tokens=k)``):
speculation without a second model, on any model of the protocol (SmolLM2 first).

The draft is what followed an earlier occurrence of the text's last n-gram, at most k tokens; the
target verifies it in one forward pass over its kvviz cache, greedy acceptance keeps the longest
prefix equal to the target's argmax plus the target's own next token, and ``crop`` removes the
rejected positions from the cache. Text that repeats itself (copying, editing, quoting the prompt)
is accepted often; an open answer rarely matches anything.

The matching rule is transformers' ``PromptLookupCandidateGenerator`` (5.x) exactly: n from
``max_ngram`` (at most the text's length − 1) down to 1; for each n the occurrences of the last
n tokens from left to right, the first whose continuation is not empty wins (the earliest, not the
most recent); the continuation is cut before its first end token, and an empty cut ends the search
(the round is a plain step). One difference that never changes a token: transformers drafts k
tokens even when fewer are still needed and throws the extra ones away after the pass; here a round
drafts at most the tokens still missing minus one (the target's token comes on top), so no position
is verified only to be dropped.
"""
from __future__ import annotations

import time
from collections.abc import Collection, Sequence

import torch

from kvviz.cache import Cache
from kvviz.decoding.sampling import Greedy, SelectionRule, is_greedy
from kvviz.limits import PROMPT_LOOKUP_MAX_NGRAM, PROMPT_LOOKUP_MAX_TOKENS, LimitError, check_int
from kvviz.models.base import CausalLM
from kvviz.speculative.records import LookupMatch, Speculation, SpeculativeRound
from kvviz.speculative.verify import Drafted, check_prompt_ids, make_round, speculate, verify

DEFAULT_LOOKUP_TOKENS = 10       # transformers' PromptLookupCandidateGenerator default
DEFAULT_MAX_NGRAM = 2            # transformers' default when max_matching_ngram_size is not set


def find_draft(text: Sequence[int], lookup_tokens: int, max_ngram: int,
               end_ids: Collection[int] = ()) -> tuple[LookupMatch | None, tuple[int, ...]]:
    """The draft for ``text`` by transformers' rule (the module docstring): the match and at most
    ``lookup_tokens`` tokens of its continuation, cut before the first of ``end_ids``. (None, ())
    when no n-gram of size max_ngram..1 occurs earlier with something after it."""
    n_text = len(text)
    tried: list[int] = []
    for n in range(min(max_ngram, n_text - 1), 0, -1):
        tried.append(n)
        ngram = tuple(text[-n:])
        for pos in range(n_text - n):             # left to right; the last n-gram itself has no continuation
            if tuple(text[pos:pos + n]) != ngram:
                continue
            cont = tuple(text[pos + n:min(pos + n + lookup_tokens, n_text)])
            if not cont:
                continue
            cut = next((i for i, t in enumerate(cont) if t in end_ids), len(cont))
            # transformers stops at the first non-empty continuation even when the end-token cut empties it
            return LookupMatch(ngram, pos, tuple(tried)), cont[:cut]
    return None, ()


def check_prompt_lookup(max_new_tokens: object, lookup_tokens: object, max_ngram: object,
                        rule: SelectionRule | None = None, max_new_cap: int = 100_000) -> tuple[int, int, int]:
    """Validate a request before any work (and before weights load): greedy only, N within
    ``max_new_cap`` (the model's limit), k and n within kvviz.limits. Returns (N, k, n) as ints."""
    if rule is not None and not is_greedy(rule):
        raise LimitError("Prompt-lookup decoding is greedy only here: the draft has no probabilities to "
                         "test a sample against (use temperature 0).")
    n_new = check_int("New tokens", max_new_tokens, 1, max_new_cap)
    k = check_int("Lookup tokens (draft tokens per round)", lookup_tokens, 1, PROMPT_LOOKUP_MAX_TOKENS)
    n = check_int("N-gram size", max_ngram, 1, PROMPT_LOOKUP_MAX_NGRAM)
    return n_new, k, n


@torch.inference_mode()
def prompt_lookup_round(model: CausalLM, cache: Cache, sequence: Sequence[int], lookup_tokens: int,
                        max_ngram: int, max_draft: int, end_ids: Collection[int] = (),
                        index: int = 0) -> SpeculativeRound:
    """One round on a cache holding a prefix of ``sequence`` (round 0: nothing; later: all but the last
    token). Drafts at most min(k, ``max_draft``) tokens, verifies them in one pass
    (kvviz.speculative.verify.verify, greedy) and crops the cache to the accepted text, so it then holds
    the new sequence except its new last token. ``sequence`` is not changed: append ``round.emitted``."""
    start = cache.get_seq_length()
    if not 0 <= start < len(sequence):
        raise ValueError(f"the cache must hold a proper prefix of the text: {start} positions for "
                         f"{len(sequence)} tokens")
    match, draft = (None, ())
    if max_draft > 0:
        t0 = time.perf_counter()
        match, draft = find_draft(sequence, lookup_tokens, max_ngram, end_ids)
        draft = draft[:max_draft]
        lookup_s = time.perf_counter() - t0
    else:
        lookup_s = 0.0
    drafted = Drafted(tuple(draft), seconds=lookup_s, match=match)
    return make_round(index, "prompt-lookup", drafted, verify(model, cache, sequence, drafted, Greedy()), keep=False)


@torch.inference_mode()
def prompt_lookup_generate(model: CausalLM, ids: Sequence[int], max_new_tokens: int,
                           lookup_tokens: int = DEFAULT_LOOKUP_TOKENS, max_ngram: int = DEFAULT_MAX_NGRAM,
                           rule: SelectionRule | None = None, stop: bool = True,
                           cache: Cache | None = None) -> Speculation:
    """Prompt-lookup decoding of ``model`` (greedy): rounds of ``prompt_lookup_round`` until
    ``max_new_tokens`` tokens are out, or (``stop``) an end token (``model.end_tokens``) is chosen,
    as ``kvviz.decoding.loops.generate_cached`` stops. The tokens equal plain cached greedy decoding's
    and transformers' ``generate(do_sample=False, prompt_lookup_num_tokens=k,
    max_matching_ngram_size=n)``'s (tests/test_prompt_lookup.py). ``cache``: an empty kvviz cache
    (default a static one of the positions needed); after every round it holds the text except its
    last token. The record's ``gamma`` is k."""
    prompt = check_prompt_ids(model, ids)
    n_new, k, n = check_prompt_lookup(max_new_tokens, lookup_tokens, max_ngram, rule, model.limits.max_new_tokens)
    if cache is not None and cache.get_seq_length():
        raise ValueError("the cache must be empty")

    def one(c: Cache, seq: list[int], max_draft: int, end_ids: frozenset[int], i: int) -> SpeculativeRound:
        return prompt_lookup_round(model, c, seq, k, n, max_draft, end_ids, i)
    tokens, rounds, seconds = speculate(model, prompt, n_new, one, stop, cache)
    return Speculation(prompt, tokens, tuple(rounds), k, Greedy().describe(), 0, seconds, 0,
                       source="prompt-lookup", max_new_tokens=n_new, max_ngram=n)
