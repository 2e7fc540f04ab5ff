"""The one verification of speculative decoding, for every draft source and every model of the
protocol (kvviz.models.base.CausalLM), and the one loop of rounds.

``verify`` runs the target ONCE over what its cache lacks and the draft (``model.logits``, or
``model.forward`` when the attention is kept), turns the logits into the rule's distributions p
(kvviz.decoding.sampling.rule_probs) and tests the proposals in order (Leviathan et al. 2023; Chen et
al. 2023): proposal i is accepted while u < p_i(x) / q_i(x); the first rejected one is replaced by a
draw from norm(max(0, p_i − q_i)); when all are accepted a bonus token is drawn from the last row.
Greedy is one case of the same test: p and q are one-hot, p/q is 1 exactly when the proposal is the
target's argmax (no uniform draw is made), and the residual's argmax is the target's own token. A
draft without a distribution (looked up in the text) has q one-hot on its token. ``crop`` then
removes the rejected positions' rows from the cache.

``speculate`` runs rounds until N tokens are out, or the target chose an end token; a round drafts
at most the tokens still missing minus one (the target's token comes on top), so no position is
verified only to be dropped.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import Cache
from kvviz.decoding.sampling import SelectionRule, draw_from, is_greedy, rule_probs, uniform
from kvviz.limits import LimitError, check_int
from kvviz.models.base import CausalLM
from kvviz.speculative.records import CacheLengths, LookupMatch, Proposal, SpeculativeRound


@dataclass(frozen=True)
class Drafted:
    """A round's draft, whatever made it: the tokens, their distributions under the draft (None: a
    draft without one, each token proposed for sure), the raw draft logits, the draft's cache after
    each proposing pass, and the time it took."""

    tokens: tuple[int, ...]
    q: torch.Tensor | None = None              # [D, V] float64 (a sampling draft model)
    logits: torch.Tensor | None = None         # [D, V] raw draft logits (a draft model)
    cache_lens: tuple[int, ...] = ()           # the draft's cache after each proposing pass
    seconds: float = 0.0
    fed: tuple[int, ...] = ()                  # what the draft's first pass processed
    match: LookupMatch | None = None           # prompt lookup: where the draft was found
    cache: CacheLengths | None = None          # the draft's cache lengths in the round, when it has one


@dataclass(frozen=True)
class Verification:
    """What one verification pass and its acceptance test found (``verify``)."""

    fed: tuple[int, ...]
    logits: torch.Tensor              # [D + 1, V] the target's raw logits of the verified rows
    p: torch.Tensor                   # [D + 1, V] float64, the rule applied
    proposals: tuple[Proposal, ...]
    argmax: tuple[int, ...]           # the target's greedy token at each verified row
    n_accepted: int
    residual: torch.Tensor | None     # [V] at the first rejection
    last: int                         # the correction or the bonus token
    cache: CacheLengths               # before, after the pass, after the rollback
    seconds: float
    attention: torch.Tensor | None = None


def _one_hot(token: int, like: torch.Tensor) -> torch.Tensor:
    return torch.zeros_like(like).index_fill_(-1, torch.tensor([token]), 1.0)


@torch.inference_mode()
def verify(model: CausalLM, cache: Cache, sequence: Sequence[int], drafted: Drafted, rule: SelectionRule,
           generator: torch.Generator | None = None, keep_attention: bool = False) -> Verification:
    """Verify ``drafted`` as the continuation of ``sequence`` on a cache holding a proper prefix of it
    (every layer the same length): one pass over the missing text and the draft, the acceptance test
    (the module docstring), then ``cache.crop`` to the accepted text (the text so far and the accepted
    draft; the target's own token is pending, processed by the next round)."""
    start = cache.get_seq_length()
    if not 0 <= start < len(sequence):
        raise ValueError(f"the cache must hold a proper prefix of the text: {start} positions for "
                         f"{len(sequence)} tokens")
    fed = tuple(int(i) for i in sequence[start:])
    draft = tuple(int(i) for i in drafted.tokens)
    n_rows = len(draft) + 1
    attention = None
    t0 = time.perf_counter()
    if keep_attention:      # the explicit-weights path of the same network
        rec = model.forward(list(fed + draft), cache, start)
        logits, attention = rec.logits[-n_rows:], rec.attention
    else:
        logits = model.logits(list(fed + draft), cache, start, keep=n_rows)          # [D + 1, V]
    seconds = time.perf_counter() - t0
    greedy = is_greedy(rule)
    ps = rule_probs(rule, logits)                                                    # [D + 1, V] float64
    argmax = tuple(logits.argmax(dim=-1).tolist())
    proposals: list[Proposal] = []
    residual, last, n_acc = None, None, len(draft)
    lens = drafted.cache_lens or (None,) * len(draft)
    for i, tok in enumerate(draft):
        q_row = drafted.q[i] if drafted.q is not None else None
        p_i, q_i = float(ps[i, tok]), float(q_row[tok]) if q_row is not None else 1.0
        if n_acc < len(draft):                                                       # after the first rejection
            proposals.append(Proposal(tok, q_i, p_i, None, None, lens[i]))
            continue
        u = None if greedy else uniform(generator)
        ok = (tok == argmax[i]) if greedy else u < p_i / q_i
        proposals.append(Proposal(tok, q_i, p_i, u, ok, lens[i]))
        if not ok:
            n_acc = i
            q_full = q_row if q_row is not None else _one_hot(tok, ps[i])
            diff = (ps[i] - q_full).clamp(min=0.0)
            mass = float(diff.sum())
            # p ≤ q everywhere cannot happen when p(tok) < q(tok) (both sum to 1); guard against rounding
            residual = diff / mass if mass > 0 else ps[i]
            last = int(torch.argmax(residual)) if greedy else draw_from(residual, generator)
    if last is None:                                                                 # all accepted: the bonus
        last = argmax[-1] if greedy else draw_from(ps[-1], generator)
    grown = start + len(fed) + len(draft)
    cache.crop(start + len(fed) + n_acc)           # rollback: the rejected draft positions' rows go
    return Verification(fed, logits, ps, tuple(proposals), argmax, n_acc, residual, last,
                        CacheLengths(start, grown, cache.get_seq_length()), seconds, attention)


def make_round(index: int, source: str, drafted: Drafted, v: Verification, keep: bool) -> SpeculativeRound:
    """The round record of a draft and its verification; ``keep``: with the distributions and logits."""
    d = len(drafted.tokens)
    q = None
    if keep:
        vocab = v.p.shape[-1]
        if drafted.q is not None:
            q = drafted.q
        elif d:
            q = torch.zeros(d, vocab, dtype=torch.float64).scatter_(
                -1, torch.tensor(drafted.tokens).unsqueeze(1), 1.0)                # one-hot on each token
        else:
            q = torch.empty(0, vocab, dtype=torch.float64)
    draft_logits = drafted.logits if keep else None
    if keep and draft_logits is None:
        draft_logits = torch.empty(0, v.logits.shape[-1])
    return SpeculativeRound(
        index=index, source=source, start=v.cache.before, fed=v.fed, draft=tuple(drafted.tokens),
        proposals=v.proposals, argmax=v.argmax, n_accepted=v.n_accepted,
        emitted=tuple(drafted.tokens[:v.n_accepted]) + (v.last,), target_cache=v.cache,
        draft_cache=drafted.cache, draft_fed=drafted.fed, match=drafted.match,
        q=q, p=v.p if keep else None, draft_logits=draft_logits, target_logits=v.logits if keep else None,
        residual=v.residual if keep else None, attention=v.attention, draft_seconds=drafted.seconds,
        verify_seconds=v.seconds)


def check_prompt_ids(model: CausalLM, ids: Sequence[int] | torch.Tensor) -> list[int]:
    """The prompt as a list of ints, or a LimitError: empty, longer than the model's cap, an id
    outside the vocabulary."""
    prompt = [int(i) for i in torch.as_tensor(ids, dtype=torch.long).reshape(-1).tolist()]
    if not prompt:
        raise LimitError("The prompt is empty: give at least one token.")
    check_int("Prompt length", len(prompt), 1, model.limits.max_prompt_tokens)
    if min(prompt) < 0 or max(prompt) >= len(model.vocab):
        raise LimitError("A token id is outside the vocabulary.")
    return prompt


# a round: (cache, sequence, most draft tokens, end ids, round index) → its record
Round = Callable[[Cache, list[int], int, frozenset[int], int], SpeculativeRound]


@torch.inference_mode()
def speculate(model: CausalLM, prompt: list[int], n_new: int, one_round: Round, stop: bool = True,
              cache: Cache | None = None) -> tuple[list[int], list[SpeculativeRound], float]:
    """Rounds of ``one_round`` until ``n_new`` tokens are out, or (``stop``) the target chose an end
    token (``model.end_tokens``), as ``kvviz.decoding.loops.generate_cached`` stops. A round drafts
    at most the tokens still missing minus one. ``cache`` (default a fresh static cache of the
    positions needed) holds a prefix of the text: empty, or the prompt except its last token.
    Returns the new tokens, the rounds and the wall time."""
    end_ids = frozenset(model.vocab.index(t) for t in model.end_tokens) if stop else frozenset()
    cache = model.new_cache("static", max_length=len(prompt) + n_new - 1) if cache is None else cache
    sequence = list(prompt)
    rounds: list[SpeculativeRound] = []
    t0 = time.perf_counter()
    while len(sequence) - len(prompt) < n_new:
        missing = n_new - (len(sequence) - len(prompt))
        r = one_round(cache, sequence, missing - 1, end_ids, len(rounds))
        rounds.append(r)
        sequence.extend(r.emitted)
        if any(t in end_ids for t in r.emitted):
            break
    return sequence[len(prompt):], rounds, time.perf_counter() - t0
