"""The records of speculative decoding, one of each for every draft source (docs/design.md §5).

A round (``SpeculativeRound``) is the same whatever made its draft: a draft model
(kvviz.speculative.decoding), the text itself (prompt lookup, kvviz.speculative.prompt_lookup) or
the target's own first layers (early exit, kvviz.speculative.early_exit). The target verifies the
draft in one pass (kvviz.speculative.verify), every proposal faces the acceptance test
min(1, p/q), the cache rolls back. A run (``Speculation``) is the prompt, the new tokens and its
rounds.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

SOURCES = ("draft-model", "prompt-lookup", "early-exit")   # where a round's draft comes from


@dataclass(frozen=True)
class Proposal:
    """One draft token of a round and its test against the target.

    ``p``/``q`` are the probabilities of this token under the target's and the draft's distributions
    after the rule's filters (for greedy one-hot: q = 1, p = 1 exactly when it is the target's argmax;
    a draft looked up in the text has no distribution: q = 1, its token for sure).
    """

    token: int
    q: float                  # q(token): the draft's probability of the token it proposed
    p: float                  # p(token): the target's, from the verification pass
    u: float | None           # the uniform draw it was tested with; None for greedy and when untested
    accepted: bool | None     # None: not tested (an earlier proposal of the round was rejected)
    draft_cache_len: int | None = None   # the draft's cache after the pass that proposed it (None: no pass)

    @property
    def acceptance_probability(self) -> float:
        """min(1, p/q): the chance this token is accepted (u < p/q)."""
        return min(1.0, self.p / self.q)


@dataclass(frozen=True)
class CacheLengths:
    """Positions a cache held before a round, at its largest during the round, and after the rollback."""

    before: int
    grown: int                # target: after the verification pass; draft: after proposing
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
class LookupMatch:
    """The n-gram a prompt-lookup round looked up and the earlier occurrence it took the draft from."""

    ngram: tuple[int, ...]      # the text's last n tokens
    position: int               # where the earlier occurrence starts in the text (its continuation: position + n)
    tried: tuple[int, ...]      # the n-gram sizes tried, largest first (the last one matched)

    @property
    def size(self) -> int:
        return len(self.ngram)


@dataclass(frozen=True)
class SpeculativeRound:
    """One round: a draft of γ tokens, ONE target pass over what its cache lacks and the draft, the
    acceptance test, the rollback.

    Before the round the target cache holds the text's first ``start`` positions; the pass processes
    ``fed`` (the text the cache lacks: the pending last token, or the whole prompt in a round that is
    also the prefill) and the draft; its row for the last fed position gives p for proposal 0, … ,
    its last row the distribution after the whole draft (the bonus). ``argmax`` is the target's
    greedy token at each of those len(draft) + 1 rows.

    The distributions (``p``, ``q``, the logits, the residual) are kept when the run asks for them
    (the tiny GPT's page steps through them), None otherwise (a transformers model's vocabulary
    makes them large).
    """

    index: int
    source: str                         # "draft-model", "prompt-lookup" or "early-exit" (SOURCES)
    start: int                          # the target cache's length before the round
    fed: tuple[int, ...]                # the text the verification pass processed before the draft
    draft: tuple[int, ...]              # the proposed tokens (γ; fewer in a last round that needs fewer)
    proposals: tuple[Proposal, ...]     # one per draft token, with its test
    argmax: tuple[int, ...]             # the target's greedy token at each verified position
    n_accepted: int
    emitted: tuple[int, ...]            # accepted proposals, then the correction or the bonus token
    target_cache: CacheLengths          # before, after the verification pass, after the rollback (crop)
    draft_cache: CacheLengths | None = None   # the draft's cache (early exit: the shared first layers)
    draft_fed: tuple[int, ...] = ()     # what the draft's first pass processed (the tokens its cache lacked)
    match: LookupMatch | None = None    # prompt lookup: the n-gram and where it occurred (None: no match)
    q: torch.Tensor | None = None       # [γ, V] float64: the draft's distributions (rule applied)
    p: torch.Tensor | None = None       # [γ + 1, V] float64: the target's distributions (rule applied)
    draft_logits: torch.Tensor | None = None    # [γ, V] raw draft logits (before the rule)
    target_logits: torch.Tensor | None = None   # [γ + 1, V] raw target logits of the verification pass
    residual: torch.Tensor | None = None        # [V] norm(max(0, p − q)) at the first rejection, else None
    attention: torch.Tensor | None = None       # [layers, heads, N, start + N] of the verification pass
    draft_seconds: float = 0.0          # wall time of making the draft (its passes, or the lookup)
    verify_seconds: float = 0.0         # wall time of the verification pass

    @property
    def gamma(self) -> int:
        return len(self.draft)

    @property
    def pending(self) -> int:
        """The last token the verification pass was fed: chosen before the round, not processed."""
        return self.fed[-1]

    @property
    def target_token(self) -> int:
        """The target's own token after the accepted draft (the correction, or a bonus when all passed)."""
        return self.emitted[-1]

    @property
    def n_tested(self) -> int:
        """Proposals the acceptance test looked at: the accepted ones and the first rejected one."""
        return sum(pr.accepted is not None for pr in self.proposals)

    @property
    def rejected_at(self) -> int | None:
        """Index of the first rejected proposal, None when all were accepted (or there was none)."""
        return None if self.n_accepted == self.gamma else self.n_accepted

    @property
    def bonus(self) -> bool:
        """All proposals accepted: the last emitted token was drawn from the target's last row."""
        return self.n_accepted == self.gamma

    def acceptance_probabilities(self) -> list[float]:
        """For each proposal position i, Σ_x min(p_i(x), q_i(x)): the chance a proposal there is
        accepted before it is drawn (1 − total variation distance; the α of Leviathan et al.).
        Needs the kept distributions."""
        if self.p is None or self.q is None:
            raise ValueError("this round kept no distributions")
        return torch.minimum(self.p[:self.gamma], self.q).sum(dim=-1).tolist()


@dataclass(frozen=True)
class Speculation:
    """A speculative run: rounds until ``max_new_tokens`` tokens are out (or an end token is chosen).

    ``source`` says where the drafts came from; ``gamma`` is the most draft tokens a round has (prompt
    lookup's k, early exit's draft tokens per round). A draft model's run prefills both caches with
    the prompt except its last token before round 1 (``prefill_len``); a self-drafted run's round 0
    is the prefill (``prefill_len`` 0)."""

    prompt: list[int]
    tokens: list[int]                   # the new tokens, in order
    rounds: tuple[SpeculativeRound, ...]
    gamma: int
    rule: dict
    seed: int
    seconds: float
    prefill_len: int                    # positions the caches got before round 1
    source: str = "draft-model"
    max_new_tokens: int = 0
    max_ngram: int = 0                  # prompt lookup: the largest n-gram looked up (n)
    exit_layer: int | None = None       # early exit: the layers the draft runs (k)

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
    def accepted_fraction(self) -> float | None:
        """accepted / proposed: the share of all draft tokens that were kept (None when nothing was
        proposed); what the self-drafting views show."""
        return self.accepted / self.proposed if self.proposed else None

    @property
    def matched_rounds(self) -> int:
        """Rounds that had a draft at all."""
        return sum(bool(r.draft) for r in self.rounds)

    @property
    def target_passes(self) -> int:
        """Target forward passes: the prefill (if any) and one per round. Plain cached decoding makes
        one per new token."""
        return (self.prefill_len > 0) + len(self.rounds)

    @property
    def draft_passes(self) -> int:
        """A draft model's forward passes: the prefill and one per proposal."""
        return (self.prefill_len > 0) + self.proposed

    def pass_seconds(self) -> tuple[float, float]:
        """Wall time making the drafts and inside the target's verification passes (prefill left
        out): the rest of ``seconds`` is the prefill and the rounds' own work (draws, the test, records)."""
        return sum(r.draft_seconds for r in self.rounds), sum(r.verify_seconds for r in self.rounds)

    @property
    def tokens_per_target_pass(self) -> float:
        """New tokens per verification pass (a separate prefill left out; plain decoding makes 1)."""
        return len(self.tokens) / len(self.rounds)

    def cache_rows(self, index: int, which: str = "target") -> tuple[CacheRowState, ...]:
        """The rows of one cache in round ``index`` at its largest (after the verification pass for
        the target, after the last proposal for the draft), each with its fate in the rollback:
        "cached" (there before the round), "kept" (written this round and accepted) or "removed"
        (written this round for a rejected proposal, dropped by ``crop``). A prompt-lookup round has
        no draft cache (no rows); early exit's draft rows are the shared first layers', all removed
        before the verification pass."""
        r = self.rounds[index]
        if which not in ("target", "draft"):
            raise ValueError(f"which must be 'target' or 'draft', not {which!r}")
        lengths = r.target_cache if which == "target" else r.draft_cache
        if lengths is None:
            return ()
        text = (self.prompt + self.tokens)[:r.start + len(r.fed)] + list(r.draft)
        return tuple(CacheRowState(pos, text[pos], "cached" if pos < lengths.before else
                                   "kept" if pos < lengths.after else "removed")
                     for pos in range(lengths.grown))
