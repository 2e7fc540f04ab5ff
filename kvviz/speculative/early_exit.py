"""Early-exit self-speculation (LayerSkip, Elhoushi et al. 2024): the draft is the target itself cut
after its first k layers — those layers, then the final norm and the vocabulary projection
(``lm_head``) — so no second model is needed; the verification is every draft source's
(kvviz.speculative.verify.verify). The first k layers are the model's own business: the protocol's
optional ``exit_logits(ids, cache, k)`` (kvviz.models.hf.HFCausalLM, kvviz.models.gpt.GPTModel).

The cache: the draft **shares the target's cache for its k layers**. It reads the rows the target's
passes wrote for the accepted text (no second cache, no second prefill), appends its own rows for the
tokens it drafts, and those rows are cropped away before the verification pass, which computes
those positions again in all the layers. LayerSkip also reuses the draft's rows of the first k
layers in the verification (only the remaining layers run there); we do not, so that the target's
pass is the same one prompt lookup makes.

The first round is the prefill (the draft has no cache rows to read yet): a plain step. SmolLM2 was
not trained for early exit (LayerSkip trains with layer dropout and an early-exit loss), so its
first layers' guesses agree with the whole network less often, and a draft pass of k of 30 layers
costs k/30 of a target pass: measured on this machine, it is slower than plain decoding
(docs/measured-smollm2.md).
"""
from __future__ import annotations

import time
from collections.abc import Collection, Sequence

import torch

from kvviz.cache import Cache
from kvviz.decoding.sampling import Greedy, SelectionRule
from kvviz.limits import EARLY_EXIT_MAX_TOKENS, LimitError, check_int
from kvviz.models.base import CausalLM
from kvviz.speculative.prompt_lookup import check_prompt_lookup
from kvviz.speculative.records import CacheLengths, Speculation, SpeculativeRound
from kvviz.speculative.verify import Drafted, check_prompt_ids, make_round, speculate, verify

DEFAULT_EXIT_LAYER = 24          # of SmolLM2's 30: fewer layers draft faster but are accepted less
DEFAULT_DRAFT_TOKENS = 4         # draft tokens per round (γ)


def check_early_exit(model: CausalLM | None, exit_layer: object, draft_tokens: object,
                     n_layers: int | None = None) -> tuple[int, int]:
    """k within 1..layers − 1 (all layers would be the target itself) and the draft tokens per round
    within kvviz.limits. Returns (k, draft tokens)."""
    layers = n_layers if model is None else model.n_layers
    if layers is None or layers < 2:
        raise LimitError("Early exit needs a model with at least two layers.")
    k = check_int("Exit layer", exit_layer, 1, layers - 1)
    d = check_int("Draft tokens per round", draft_tokens, 1, EARLY_EXIT_MAX_TOKENS)
    return k, d


@torch.inference_mode()
def early_exit_round(model: CausalLM, cache: Cache, sequence: Sequence[int], exit_layer: int, draft_tokens: int,
                     max_draft: int, end_ids: Collection[int] = (), index: int = 0) -> SpeculativeRound:
    """One round on a cache holding a prefix of ``sequence``: the first ``exit_layer`` layers draft
    at most min(``draft_tokens``, ``max_draft``) tokens greedily (cut before an end token), their rows
    are cropped, the whole model verifies them in one pass (``verify``). Round 0 (an empty cache)
    is the prefill, a plain step. ``sequence`` is not changed: append ``round.emitted``."""
    start = cache.get_seq_length()
    if not 0 <= start < len(sequence):
        raise ValueError(f"the cache must hold a proper prefix of the text: {start} positions for "
                         f"{len(sequence)} tokens")
    draft: list[int] = []
    lens: list[int] = []
    grown = start
    t0 = time.perf_counter()
    if start > 0:
        fed = list(sequence[start:])
        for _ in range(min(draft_tokens, max_draft)):
            tok = int(model.exit_logits(fed, cache, exit_layer).argmax())
            if tok in end_ids:                   # the target's own token says whether the text ends here
                break
            draft.append(tok)
            lens.append(cache.get_seq_length())
            fed = [tok]
        grown = cache.get_seq_length()
        cache.crop(start)                        # the draft's rows go: the verification writes them in every layer
    draft_s = time.perf_counter() - t0
    drafted = Drafted(tuple(draft), cache_lens=tuple(lens), seconds=draft_s,
                      cache=CacheLengths(start, max(grown, start), start))
    return make_round(index, "early-exit", drafted, verify(model, cache, sequence, drafted, Greedy()), keep=False)


@torch.inference_mode()
def early_exit_generate(model: CausalLM, ids: Sequence[int], max_new_tokens: int,
                        exit_layer: int = DEFAULT_EXIT_LAYER, draft_tokens: int = DEFAULT_DRAFT_TOKENS,
                        rule: SelectionRule | None = None, stop: bool = True,
                        cache: Cache | None = None) -> Speculation:
    """Early-exit self-speculation of ``model`` (greedy): rounds of ``early_exit_round`` until
    ``max_new_tokens`` tokens are out or an end token is chosen. The tokens equal plain cached greedy
    decoding's (tests/test_early_exit.py). The record's ``source`` is "early-exit", ``exit_layer`` k,
    ``gamma`` the draft tokens per round."""
    prompt = check_prompt_ids(model, ids)
    k, d = check_early_exit(model, exit_layer, draft_tokens)
    n_new, _, _ = check_prompt_lookup(max_new_tokens, 1, 1, rule, model.limits.max_new_tokens)
    if cache is not None and cache.get_seq_length():
        raise ValueError("the cache must be empty")

    def one(c: Cache, seq: list[int], max_draft: int, end_ids: frozenset[int], i: int) -> SpeculativeRound:
        return early_exit_round(model, c, seq, k, d, max_draft, end_ids, i)
    tokens, rounds, seconds = speculate(model, prompt, n_new, one, stop, cache)
    return Speculation(prompt, tokens, tuple(rounds), d, Greedy().describe(), 0, seconds, 0,
                       source="early-exit", max_new_tokens=n_new, exit_layer=k)
