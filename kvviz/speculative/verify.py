"""The one verification of self-drafted speculation on a transformers causal LM (kvviz.models.hf):
prompt lookup (kvviz.speculative.prompt_lookup) and early exit (kvviz.speculative.early_exit) differ
only in where the draft comes from; both hand it to ``verify_draft``.

The target processes what its cache lacks (the whole prompt in the first round, afterwards the
pending last token) and the draft in one forward pass; greedy acceptance keeps the longest prefix
of the draft equal to the target's argmax, plus the target's own next token; ``crop`` removes the
rejected positions' rows from every layer. A run is rounds of it until N tokens are out
(``self_speculate``), whose tokens are plain cached greedy decoding's.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import Cache, DynamicCache
from kvviz.limits import LimitError, check_int
from kvviz.models.hf import HFCausalLM
from kvviz.speculative.decoding import CacheLengths


@dataclass(frozen=True)
class Verification:
    """One verification pass: what it fed, the target's greedy token at the last fed position and at
    every draft position (len(draft) + 1 ids), how many draft tokens it accepted, the cache's lengths
    (before, after the pass, after the rollback) and the pass's wall time."""

    fed: tuple[int, ...]
    argmax: tuple[int, ...]
    n_accepted: int
    cache: CacheLengths
    seconds: float


@torch.inference_mode()
def verify_draft(model: HFCausalLM, cache: Cache, sequence: Sequence[int], draft: Sequence[int]) -> Verification:
    """Verify ``draft`` as the continuation of ``sequence`` on a cache holding a proper prefix of it
    (every layer the same length): one pass over the missing text and the draft, greedy acceptance,
    then ``cache.crop`` to the accepted text (the text so far and the accepted draft; the target's
    own token is pending, processed by the next round)."""
    start = cache.get_seq_length()
    if not 0 <= start < len(sequence):
        raise ValueError(f"the cache must hold a proper prefix of the text: {start} positions for "
                         f"{len(sequence)} tokens")
    fed = tuple(int(i) for i in sequence[start:])
    draft = tuple(int(i) for i in draft)
    todo = list(fed) + list(draft)
    positions = torch.arange(start, start + len(todo)).unsqueeze(0)                   # [1, F + D]
    t0 = time.perf_counter()
    out = model.model(input_ids=torch.tensor([todo]), position_ids=positions, past_key_values=cache,
                      use_cache=True, logits_to_keep=len(draft) + 1)
    seconds = time.perf_counter() - t0
    # the logits of the last fed position and of every draft position, [D + 1, V]; float32 as transformers
    choice = tuple(out.logits[0].float().argmax(dim=-1).tolist())                      # D + 1 ids
    n_acc = 0
    while n_acc < len(draft) and draft[n_acc] == choice[n_acc]:
        n_acc += 1
    grown = start + len(todo)
    cache.crop(start + len(fed) + n_acc)          # rollback: the rejected draft positions' rows go
    return Verification(fed, choice, n_acc, CacheLengths(start, grown, cache.get_seq_length()), seconds)


def check_prompt_ids(model: HFCausalLM, ids: Sequence[int]) -> list[int]:
    """The prompt as a list of ints, or a LimitError: empty, longer than the model's cap, an id
    outside the vocabulary."""
    prompt = [int(i) for i in ids]
    if not prompt:
        raise LimitError("The prompt is empty: give at least one token.")
    check_int("Prompt length", len(prompt), 1, model.limits.max_prompt_tokens)
    if min(prompt) < 0 or max(prompt) >= len(model.vocab):
        raise LimitError("A token id is outside the vocabulary.")
    return prompt


# a round: (model, cache, sequence, most draft tokens, end ids, round index) → a record with
# ``emitted`` and ``target_token``
Round = Callable[[HFCausalLM, Cache, list[int], int, frozenset[int], int], object]


@torch.inference_mode()
def self_speculate(model: HFCausalLM, prompt: list[int], n_new: int, one_round: Round, stop: bool = True,
                   cache: Cache | None = None) -> tuple[list[int], list, float]:
    """Rounds of ``one_round`` until ``n_new`` tokens are out, or (``stop``) the target chose an end
    token (``model.end_tokens``), as ``kvviz.decoding.loops.generate_cached`` stops. A round drafts at
    most the tokens still missing minus one (the target's token comes on top), so no position is
    verified only to be dropped. Returns the new tokens, the rounds and the wall time."""
    end_ids = frozenset(model.vocab.index(t) for t in model.end_tokens) if stop else frozenset()
    cache = DynamicCache(model.n_layers) if cache is None else cache
    if cache.get_seq_length():
        raise ValueError("the cache must be empty")
    sequence = list(prompt)
    rounds: list = []
    t0 = time.perf_counter()
    while len(sequence) - len(prompt) < n_new:
        missing = n_new - (len(sequence) - len(prompt))
        r = one_round(model, cache, sequence, missing - 1, end_ids, len(rounds))
        rounds.append(r)
        sequence.extend(r.emitted)
        if r.target_token in end_ids:            # drafts never hold an end token: only the target's can be one
            break
    return sequence[len(prompt):], rounds, time.perf_counter() - t0
