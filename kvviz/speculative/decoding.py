"""Speculative decoding of a GPT with a draft model (Leviathan et al. 2023; Chen et al. 2023):
``speculative_round`` and ``speculative_generate``, and their frozen records.

Its rounds are few and small, so unlike the plain loops (kvviz.decoding.loops) a run returns one
record per round (proposals, p and q, the uniform draws, the residual, the cache lengths before and
after the rollback) for a page to step through.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import Cache, StaticCache
from kvviz.decoding.loops import prompt_tensor
from kvviz.decoding.sampling import Greedy, SelectionRule, draw_from, is_greedy, rule_probs, uniform
from kvviz.limits import (
    GPT_MAX_PROMPT_TOKENS,
    MAX_SEED,
    SPECULATIVE_MAX_ATTENTION_TOKENS,
    SPECULATIVE_MAX_GAMMA,
    SPECULATIVE_MAX_NEW_TOKENS,
    LimitError,
    check_int,
)
from kvviz.models.gpt.model import GPT, LayerTrace
from kvviz.models.gpt.weights import TinyGPT, load_draft_gpt, load_tiny_gpt


@dataclass(frozen=True)
class Proposal:
    """One draft token of a round and its test against the target.

    ``p``/``q`` are the probabilities of this token under the target's and the draft's distributions
    after the rule's filters (for greedy one-hot: q = 1, p = 1 exactly when it is the target's argmax).
    """

    token: int
    q: float                  # q(token): the draft's probability of the token it proposed
    p: float                  # p(token): the target's, from the verification pass
    u: float | None           # the uniform draw it was tested with; None for greedy and when untested
    accepted: bool | None     # None: not tested (an earlier proposal of the round was rejected)
    draft_cache_len: int      # the draft's cache after the pass that proposed it

    @property
    def acceptance_probability(self) -> float:
        """min(1, p/q): the chance this token is accepted (u < p/q)."""
        return min(1.0, self.p / self.q)


@dataclass(frozen=True)
class CacheLengths:
    """Positions a cache held before a round, at its largest during the round, and after the rollback."""

    before: int
    grown: int                # target: before + γ + 1 after the verification pass; draft: after proposing
    after: int                # after ``crop``: what was accepted

    @property
    def removed(self) -> range:
        """The positions the rollback removed (rejected tokens' rows)."""
        return range(self.after, self.grown)


@dataclass(frozen=True)
class CacheRowState:
    """One cached position during a round and its fate: "cached", "kept" or "removed"."""

    position: int
    token: int
    status: str


@dataclass(frozen=True)
class SpeculativeRound:
    """One round: the draft proposes γ tokens, the target verifies them in one pass, both caches roll back.

    Before the round the target cache holds the ``start`` positions of the text except its last token,
    ``pending`` (chosen, not yet processed). The draft's first pass processes ``draft_fed`` (the tokens
    its cache lacks: pending, and the previous round's last proposal when all were accepted), each
    further pass one proposal. The target's one pass processes pending and the γ proposals at positions
    start..start+γ; its row i gives p for proposal i, row γ the bonus distribution.
    """

    index: int
    start: int                          # position of ``pending`` = the target cache's length before
    pending: int
    draft_fed: tuple[int, ...]
    proposals: tuple[Proposal, ...]     # γ of them (fewer in a last round that needs fewer tokens)
    q: torch.Tensor                     # [γ, V] float64: the draft's distributions (rule applied)
    p: torch.Tensor                     # [γ + 1, V] float64: the target's distributions (rule applied)
    draft_logits: torch.Tensor          # [γ, V] raw draft logits (before the rule)
    target_logits: torch.Tensor         # [γ + 1, V] raw target logits of the verification pass
    residual: torch.Tensor | None       # [V] norm(max(0, p − q)) at the first rejection, else None
    n_accepted: int
    emitted: tuple[int, ...]            # accepted proposals, then the correction or the bonus token
    target_cache: CacheLengths
    draft_cache: CacheLengths
    attention: torch.Tensor | None = None   # [layers, heads, γ + 1, start + γ + 1] of the verification pass
    draft_seconds: float = 0.0          # wall time of the round's draft passes (the networks only)
    verify_seconds: float = 0.0         # wall time of the verification pass

    @property
    def gamma(self) -> int:
        return len(self.proposals)

    @property
    def n_tested(self) -> int:
        """Proposals the acceptance test looked at: the accepted ones and the first rejected one."""
        return sum(pr.accepted is not None for pr in self.proposals)

    @property
    def rejected_at(self) -> int | None:
        """Index of the first rejected proposal, None when all were accepted."""
        return None if self.n_accepted == self.gamma else self.n_accepted

    @property
    def bonus(self) -> bool:
        """All proposals accepted: the last emitted token was drawn from the target's row γ."""
        return self.n_accepted == self.gamma

    def acceptance_probabilities(self) -> list[float]:
        """For each proposal position i, Σ_x min(p_i(x), q_i(x)): the chance a proposal there is
        accepted before it is drawn (1 − total variation distance; the α of Leviathan et al.)."""
        return torch.minimum(self.p[:self.gamma], self.q).sum(dim=-1).tolist()


@dataclass(frozen=True)
class Speculation:
    """A speculative run: the prompt's prefill, then rounds until ``max_new_tokens`` tokens are out."""

    prompt: list[int]
    tokens: list[int]                   # the new tokens, in order (exactly max_new_tokens)
    rounds: tuple[SpeculativeRound, ...]
    gamma: int
    rule: dict
    seed: int
    seconds: float
    prefill_len: int                    # prompt length − 1: positions both caches got before round 1

    @property
    def accepted(self) -> int:
        return sum(r.n_accepted for r in self.rounds)

    @property
    def tested(self) -> int:
        return sum(r.n_tested for r in self.rounds)

    @property
    def proposed(self) -> int:
        return sum(r.gamma for r in self.rounds)

    @property
    def acceptance_rate(self) -> float | None:
        """accepted / tested: the estimate of α (each tested proposal is a trial; the proposals after
        a rejection are never tested). None when nothing was tested."""
        return self.accepted / self.tested if self.tested else None

    @property
    def target_passes(self) -> int:
        """Target forward passes: the prefill (if the prompt has more than one token) and one per round.
        Plain ``generate_cached`` makes one per new token."""
        return (self.prefill_len > 0) + len(self.rounds)

    @property
    def draft_passes(self) -> int:
        """Draft forward passes: the prefill and one per proposal."""
        return (self.prefill_len > 0) + self.proposed

    def pass_seconds(self) -> tuple[float, float]:
        """Wall time inside the draft's and the target's passes of the rounds (prefill left out): the
        rest of ``seconds`` is the prefill and the rounds' own work (draws, the test, records)."""
        return sum(r.draft_seconds for r in self.rounds), sum(r.verify_seconds for r in self.rounds)

    @property
    def tokens_per_target_pass(self) -> float:
        """New tokens per verification pass (prefill left out; plain decoding makes 1)."""
        return len(self.tokens) / len(self.rounds)

    def cache_rows(self, index: int, which: str = "target") -> tuple[CacheRowState, ...]:
        """The rows of one cache in round ``index`` at its largest (after the verification pass for
        the target, after the last proposal for the draft), each with its fate in the rollback:
        "cached" (there before the round), "kept" (written this round: the pending token and accepted
        proposals) or "removed" (written this round for a rejected proposal, dropped by ``crop``)."""
        r = self.rounds[index]
        lengths = {"target": r.target_cache, "draft": r.draft_cache}.get(which)
        if lengths is None:
            raise ValueError(f"which must be 'target' or 'draft', not {which!r}")
        text = (self.prompt + self.tokens)[:r.start + 1] + [pr.token for pr in r.proposals]
        return tuple(CacheRowState(pos, text[pos], "cached" if pos < lengths.before else
                                   "kept" if pos < lengths.after else "removed")
                     for pos in range(lengths.grown))


def check_speculation(target: GPT, draft: GPT, prompt_len: int, max_new_tokens: object, gamma: object,
                      keep_attention: bool = False) -> tuple[int, int]:
    """Validate a speculative run before any work: the pair shares a vocabulary, γ, N and the prompt
    are within kvviz.limits, and prompt + N − 1 positions fit both models' learned positions.
    Returns (max_new_tokens, gamma) as ints."""
    if target.config.vocab_size != draft.config.vocab_size:
        raise LimitError(f"The draft model's vocabulary ({draft.config.vocab_size} tokens) differs from the "
                         f"target's ({target.config.vocab_size}): they must share one tokenizer.")
    gamma = check_int("Gamma (draft tokens per round)", gamma, 1, SPECULATIVE_MAX_GAMMA)
    cap = SPECULATIVE_MAX_ATTENTION_TOKENS if keep_attention else SPECULATIVE_MAX_NEW_TOKENS
    n = check_int("New tokens", max_new_tokens, 1, cap)
    check_int("Prompt length", prompt_len, 1, GPT_MAX_PROMPT_TOKENS)
    block = min(target.config.block_size, draft.config.block_size)
    if prompt_len + n - 1 > block:
        raise LimitError(f"A {prompt_len}-token prompt leaves room for at most {block - prompt_len + 1} new "
                         f"tokens: the models learned {block} positions (block_size), and the last chosen "
                         f"token is never processed.")
    return n, gamma


def _verify(target: GPT, tokens: list[int], cache: Cache, start: int,
            keep_attention: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The target's one pass over ``tokens`` at positions start.. → logits [N, V] (and its attention
    [layers, heads, N, start + N] when asked: the explicit-weights path of the same network)."""
    idx = torch.tensor([tokens])                                              # [1, γ + 1]
    if not keep_attention:
        return target(idx, cache, start)[0], None
    trace: list[LayerTrace] = []
    x = target.hidden(idx, cache, start, trace=trace)                         # [1, γ + 1, C]
    return target.readout(x[0]), torch.stack([t[3][0] for t in trace])


@dataclass(frozen=True)
class _Drafted:
    """The draft's γ proposals of one round and what they came from."""

    tokens: list[int]
    q: list[torch.Tensor]            # γ × [V] float64 (sampling only; greedy's one-hot q comes from the logits)
    logits: list[torch.Tensor]       # γ × [V] raw draft logits
    cache_lens: list[int]            # the draft cache after each proposing pass
    seconds: float


def _propose(draft: GPT, cache: Cache, fed: list[int], start: int, gamma: int, rule: SelectionRule,
             greedy: bool, generator: torch.Generator | None) -> _Drafted:
    """γ draft passes from position ``start``: the first over ``fed`` (what the cache lacks), then one per
    proposal, each drawing from q = rule_probs(rule, draft logits) (greedy: the argmax)."""
    tokens: list[int] = []
    qs: list[torch.Tensor] = []
    logits_kept: list[torch.Tensor] = []
    lens: list[int] = []
    x, pos, seconds = fed, start, 0.0
    for _ in range(gamma):
        t0 = time.perf_counter()
        logits = draft(torch.tensor([x]), cache, pos, last_only=True)[0]           # [V]
        seconds += time.perf_counter() - t0
        pos += len(x)
        if greedy:                      # the argmax, as Greedy.draw; q (one-hot) for all rows below
            tok = int(torch.argmax(logits))
        else:
            q = rule_probs(rule, logits)                                           # [V] float64
            tok = draw_from(q, generator)
            qs.append(q)
        tokens.append(tok)
        logits_kept.append(logits)
        lens.append(pos)
        x = [tok]
    return _Drafted(tokens, qs, logits_kept, lens, seconds)


def _accept(drafted: _Drafted, ps: torch.Tensor, q_all: torch.Tensor, greedy: bool,
            generator: torch.Generator | None) -> tuple[list[Proposal], int, torch.Tensor | None, int]:
    """The acceptance test: proposal i is accepted while u < p_i(x)/q_i(x) (greedy: while it is the
    target's argmax); the first rejected one is replaced by a draw from norm(max(0, p_i − q_i))
    (greedy: its argmax); all γ accepted: a bonus token from p_γ. Returns the proposals with their
    verdicts, how many were accepted, the residual (None when all were) and the last emitted token."""
    gamma = len(drafted.tokens)
    proposals: list[Proposal] = []
    residual = None
    n_acc = gamma
    last: int | None = None
    for i, tok in enumerate(drafted.tokens):
        p_i, q_i = float(ps[i, tok]), float(q_all[i, tok])
        if n_acc < gamma:                                                      # after the first rejection
            proposals.append(Proposal(tok, q_i, p_i, None, None, drafted.cache_lens[i]))
            continue
        u = None if greedy else uniform(generator)
        ok = (tok == int(torch.argmax(ps[i]))) if greedy else u < p_i / q_i
        proposals.append(Proposal(tok, q_i, p_i, u, ok, drafted.cache_lens[i]))
        if not ok:
            n_acc = i
            diff = (ps[i] - q_all[i]).clamp(min=0.0)
            mass = float(diff.sum())
            # p ≤ q everywhere cannot happen when p(tok) < q(tok) (both sum to 1); guard against rounding
            residual = diff / mass if mass > 0 else ps[i]
            last = int(torch.argmax(residual)) if greedy else draw_from(residual, generator)
    if last is None:                                                           # all accepted: the bonus token
        last = int(torch.argmax(ps[gamma])) if greedy else draw_from(ps[gamma], generator)
    return proposals, n_acc, residual, last


@torch.inference_mode()
def speculative_round(target: GPT, draft: GPT, target_cache: Cache, draft_cache: Cache, sequence: Sequence[int],
                      gamma: int, rule: SelectionRule, generator: torch.Generator | None, index: int = 0,
                      keep_attention: bool = False) -> SpeculativeRound:
    """One round on caches that hold ``sequence`` except its last token (target) and a prefix of it
    (draft); leaves both holding the new sequence except its new last token. ``sequence`` is not
    changed: append ``round.emitted`` to it.

    1. The draft proposes γ tokens, one pass each (the first pass also processes what its cache lacks),
       drawing from q = rule_probs(rule, draft logits) (``_propose``).
    2. The target runs ONE pass over the pending token and the γ proposals: p for every proposal and,
       in row γ, for the token after them (``_verify``).
    3. Proposal i is accepted while u < p_i(x)/q_i(x) (greedy: while it is the target's argmax); the
       first rejected one is replaced by a draw from norm(max(0, p_i − q_i)) (greedy: the argmax); if
       all γ are accepted, a bonus token is drawn from p_γ (``_accept``).
    4. Rollback: both caches are cropped to the positions of the accepted text (the rows of rejected
       proposals, and the draft's row of the last proposal, are dropped).
    """
    start = target_cache.get_seq_length()
    if start != len(sequence) - 1:
        raise ValueError(f"the target cache must hold the text except its last token: {start} positions "
                         f"for {len(sequence)} tokens")
    d_before = draft_cache.get_seq_length()
    if d_before > start:
        raise ValueError("the draft cache holds more positions than the target cache")
    greedy = is_greedy(rule)
    fed = list(sequence[d_before:]) if gamma else []          # a round with γ = 0 runs no draft pass
    drafted = _propose(draft, draft_cache, fed, d_before, gamma, rule, greedy, generator)
    d_grown = drafted.cache_lens[-1] if drafted.cache_lens else d_before
    t0 = time.perf_counter()
    t_logits, attention = _verify(target, [sequence[-1], *drafted.tokens], target_cache, start, keep_attention)
    verify_s = time.perf_counter() - t0
    ps = rule_probs(rule, t_logits)                                                # [γ + 1, V], row by row
    v = t_logits.shape[-1]
    if not drafted.tokens:
        q_all = torch.empty(0, v, dtype=torch.float64)
    else:                                                                          # [γ, V]
        q_all = rule_probs(rule, torch.stack(drafted.logits)) if greedy else torch.stack(drafted.q)
    proposals, n_acc, residual, last = _accept(drafted, ps, q_all, greedy, generator)
    keep = start + 1 + n_acc                  # rollback: the accepted text's positions (the new last token pends)
    target_cache.crop(keep)
    draft_cache.crop(min(d_grown, keep))
    return SpeculativeRound(
        index=index, start=start, pending=sequence[-1], draft_fed=tuple(fed), proposals=tuple(proposals),
        q=q_all, p=ps,
        draft_logits=torch.stack(drafted.logits) if drafted.logits else torch.empty(0, v),
        target_logits=t_logits, residual=residual, n_accepted=n_acc,
        emitted=tuple(drafted.tokens[:n_acc]) + (last,),
        target_cache=CacheLengths(start, start + gamma + 1, target_cache.get_seq_length()),
        draft_cache=CacheLengths(d_before, d_grown, draft_cache.get_seq_length()),
        attention=attention, draft_seconds=drafted.seconds, verify_seconds=verify_s)


@torch.inference_mode()
def speculative_generate(target: GPT, draft: GPT, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
                         gamma: int = 4, rule: SelectionRule | None = None, seed: int = 0,
                         keep_attention: bool = False) -> Speculation:
    """Speculative decoding (Leviathan et al. 2023; Chen et al. 2023) of ``target`` with ``draft``.

    Both models prefill the prompt except its last token, which is pending; then rounds of
    ``speculative_round`` until ``max_new_tokens`` tokens are out (a round proposes at most as many
    tokens as are still missing minus one, so no token is thrown away and the last round may be a
    plain step with γ = 0). After every round the target cache holds exactly the prompt and the new
    tokens except the last one (chosen, not processed), as everywhere in kvviz. Both caches are
    ``StaticCache``s rolled back with ``crop``.

    The rule's filters (temperature, top-k, top-p) make p and q (``rule_probs``): the output is
    distributed exactly as ``generate_cached(target, ..., rule)``'s; greedy output is token-identical to
    it. All draws (proposals, u, residual and bonus tokens) come from one generator seeded with ``seed``
    (same seed ⇒ same run; the tokens differ from generate_cached's for the same seed, their
    distribution does not). ``keep_attention`` keeps every verification pass's attention weights.
    """
    ids = prompt_tensor(idx, target.config.vocab_size, max_new_tokens)
    prompt_len = ids.shape[1]
    n, gamma = check_speculation(target, draft, prompt_len, max_new_tokens, gamma, keep_attention)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(seed)
    length = prompt_len + n - 1                                   # the most either cache ever holds
    t_cache = StaticCache(target.config.n_layer, length)
    d_cache = StaticCache(draft.config.n_layer, length)
    sequence = ids[0].tolist()
    rounds: list[SpeculativeRound] = []
    t0 = time.perf_counter()
    if prompt_len > 1:                                            # prefill: everything but the pending token
        target(ids[:, :-1], t_cache, 0, last_only=True)
        draft(ids[:, :-1], d_cache, 0, last_only=True)
    while len(sequence) - prompt_len < n:
        missing = n - (len(sequence) - prompt_len)
        r = speculative_round(target, draft, t_cache, d_cache, sequence, min(gamma, missing - 1), rule,
                              generator, len(rounds), keep_attention)
        sequence.extend(r.emitted)
        rounds.append(r)
    seconds = time.perf_counter() - t0
    return Speculation(ids[0].tolist(), sequence[prompt_len:], tuple(rounds), gamma, rule.describe(), seed,
                       seconds, prompt_len - 1)


def load_pair() -> tuple[TinyGPT, TinyGPT]:
    """The target (the tiny GPT) and its draft (1 layer, width 64), both shared read-only."""
    return load_tiny_gpt(), load_draft_gpt()
