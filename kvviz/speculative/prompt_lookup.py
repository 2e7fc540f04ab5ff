"""Prompt-lookup decoding (Saxena 2023, transformers' ``generate(prompt_lookup_num_tokens=k)``):
speculation without a second model, on a transformers causal LM (kvviz.models.hf, SmolLM2 first).

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
from dataclasses import dataclass

import torch

from kvviz.cache import Cache
from kvviz.decoding.sampling import SelectionRule, is_greedy
from kvviz.limits import PROMPT_LOOKUP_MAX_NGRAM, PROMPT_LOOKUP_MAX_TOKENS, LimitError, check_int
from kvviz.models.hf import HFCausalLM
from kvviz.speculative.decoding import CacheLengths, CacheRowState
from kvviz.speculative.verify import check_prompt_ids, self_speculate, verify_draft

DEFAULT_LOOKUP_TOKENS = 10       # transformers' PromptLookupCandidateGenerator default
DEFAULT_MAX_NGRAM = 2            # transformers' default when max_matching_ngram_size is not set


@dataclass(frozen=True)
class LookupMatch:
    """The n-gram a round looked up and the earlier occurrence it took the draft from."""

    ngram: tuple[int, ...]      # the text's last n tokens
    position: int               # where the earlier occurrence starts in the text (its continuation: position + n)
    tried: tuple[int, ...]      # the n-gram sizes tried, largest first (the last one matched)

    @property
    def size(self) -> int:
        return len(self.ngram)


@dataclass(frozen=True)
class LookupRound:
    """One round: look the draft up, verify it in one target pass, keep what the target agrees with.
    (Early exit's rounds, kvviz.speculative.early_exit, are these records too, with ``match`` None.)

    Before the round the cache holds the text's first ``start`` positions; the pass processes ``fed``
    (the text the cache lacks: the whole prompt in round 0, afterwards the pending last token) and
    the draft. ``argmax`` is the target's choice after each fed-and-drafted position from the last
    fed one on (len(draft) + 1 tokens): draft i is accepted while it equals argmax[i].
    """

    index: int
    start: int                          # the cache's length before the round
    fed: tuple[int, ...]
    match: LookupMatch | None           # None: nothing matched, the round is one plain decode step
    draft: tuple[int, ...]              # the proposed tokens (empty without a match, or cut to nothing)
    argmax: tuple[int, ...]             # the target's greedy token at each verified position
    n_accepted: int
    cache: CacheLengths                 # before, after the verification pass, after the rollback (crop)
    seconds: float                      # wall time of the verification pass
    draft_seconds: float = 0.0          # wall time of making the draft (the lookup; early exit: its passes)
    draft_grown: int = 0                # early exit: the shared first layers' length after the draft's passes

    @property
    def target_token(self) -> int:
        """The target's own token after the accepted draft (the correction, or a bonus when all passed)."""
        return self.argmax[self.n_accepted]

    @property
    def emitted(self) -> tuple[int, ...]:
        return self.draft[:self.n_accepted] + (self.target_token,)

    @property
    def rejected_at(self) -> int | None:
        """Index of the first rejected draft token; None when all were accepted (or there was none)."""
        return None if self.n_accepted == len(self.draft) else self.n_accepted


@dataclass(frozen=True)
class PromptLookup:
    """A prompt-lookup run: rounds until ``max_new_tokens`` tokens are out or an end token is chosen.
    An early-exit run (kvviz.speculative.early_exit) is one too: ``method`` says which, ``lookup_tokens``
    is then its most draft tokens per round."""

    prompt: list[int]
    tokens: list[int]                   # the new tokens, in order
    rounds: tuple[LookupRound, ...]
    lookup_tokens: int                  # k: the most tokens a draft has
    max_ngram: int                      # n: the largest n-gram looked up
    max_new_tokens: int
    seconds: float
    method: str = "prompt-lookup"       # where the drafts came from: "prompt-lookup" or "early-exit"
    exit_layer: int | None = None       # early exit: the layers the draft runs (max_ngram is then 0)

    @property
    def proposed(self) -> int:
        return sum(len(r.draft) for r in self.rounds)

    @property
    def accepted(self) -> int:
        return sum(r.n_accepted for r in self.rounds)

    @property
    def acceptance_rate(self) -> float | None:
        """Accepted draft tokens / proposed draft tokens (None when nothing was proposed)."""
        return self.accepted / self.proposed if self.proposed else None

    @property
    def matched_rounds(self) -> int:
        return sum(bool(r.draft) for r in self.rounds)

    @property
    def target_passes(self) -> int:
        """Forward passes of the target: one per round (round 0 is the prefill too). Plain cached
        greedy decoding makes one per new token."""
        return len(self.rounds)

    @property
    def tokens_per_pass(self) -> float:
        return len(self.tokens) / len(self.rounds)

    def cache_rows(self, index: int, which: str = "target") -> tuple[CacheRowState, ...]:
        """The rows of the target's cache in round ``index`` at its largest (after the verification
        pass), each "cached" (there before the round), "kept" (written this round and accepted) or
        "removed" (a rejected draft token's, dropped by ``crop``). ``which="draft"`` (early exit): the
        rows the draft's passes wrote into the shared first layers (the text it was fed and its drafts
        but the last), all "removed" before the verification pass."""
        r = self.rounds[index]
        text = (self.prompt + self.tokens)[:r.start + len(r.fed)] + list(r.draft)
        if which == "target":
            return tuple(CacheRowState(pos, text[pos], "cached" if pos < r.cache.before else
                                       "kept" if pos < r.cache.after else "removed")
                         for pos in range(r.cache.grown))
        if which != "draft":
            raise ValueError(f"which must be 'target' or 'draft', not {which!r}")
        if self.method != "early-exit":
            return ()
        return tuple(CacheRowState(pos, text[pos], "cached" if pos < r.start else "removed")
                     for pos in range(max(r.draft_grown, r.start)))


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
def prompt_lookup_round(model: HFCausalLM, cache: Cache, sequence: Sequence[int], lookup_tokens: int,
                        max_ngram: int, max_draft: int, end_ids: Collection[int] = (),
                        index: int = 0) -> LookupRound:
    """One round on a cache holding a prefix of ``sequence`` (round 0: nothing; later: all but the last
    token). Drafts at most min(k, ``max_draft``) tokens, verifies them in one pass
    (kvviz.speculative.verify.verify_draft) and crops the cache to the accepted text, so it then holds
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
    v = verify_draft(model, cache, sequence, draft)
    return LookupRound(index=index, start=start, fed=v.fed, match=match, draft=tuple(draft), argmax=v.argmax,
                       n_accepted=v.n_accepted, cache=v.cache, seconds=v.seconds, draft_seconds=lookup_s)


@torch.inference_mode()
def prompt_lookup_generate(model: HFCausalLM, ids: Sequence[int], max_new_tokens: int,
                           lookup_tokens: int = DEFAULT_LOOKUP_TOKENS, max_ngram: int = DEFAULT_MAX_NGRAM,
                           rule: SelectionRule | None = None, stop: bool = True,
                           cache: Cache | None = None) -> PromptLookup:
    """Prompt-lookup decoding of ``model`` (greedy): rounds of ``prompt_lookup_round`` until
    ``max_new_tokens`` tokens are out, or (``stop``) an end token (``model.end_tokens``) is chosen,
    as ``kvviz.decoding.loops.generate_cached`` stops. The tokens equal plain cached greedy decoding's
    and transformers' ``generate(do_sample=False, prompt_lookup_num_tokens=k,
    max_matching_ngram_size=n)``'s (tests/test_prompt_lookup.py). ``cache``: an empty kvviz cache
    (default a DynamicCache); after every round it holds the text except its last token."""
    prompt = check_prompt_ids(model, ids)
    n_new, k, n = check_prompt_lookup(max_new_tokens, lookup_tokens, max_ngram, rule, model.limits.max_new_tokens)

    def one(m: HFCausalLM, c: Cache, seq: list[int], max_draft: int, end_ids: frozenset[int], i: int) -> LookupRound:
        return prompt_lookup_round(m, c, seq, k, n, max_draft, end_ids, i)
    tokens, rounds, seconds = self_speculate(model, prompt, n_new, one, stop, cache)
    return PromptLookup(prompt, tokens, tuple(rounds), k, n, n_new, seconds)
