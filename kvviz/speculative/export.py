"""A speculative run as plain data: the ``speculate`` command's JSON and the page's download."""
from __future__ import annotations

from collections.abc import Sequence

from kvviz.speculative.decoding import Speculation


def speculation_dict(spec: Speculation, vocab: Sequence[str], detail: bool = False) -> dict:
    """The ``speculate`` command's JSON: tokens as words; per round the draft's proposals, how many
    were accepted, the emitted tokens, and both caches' lengths after the rollback. ``detail`` (the
    page's download) adds the prompt, γ, rule and seed, and per round the position of the pending token,
    every proposal's q, p, u and verdict (None: not tested), and the rows each cache removed."""
    words = lambda ids: [vocab[i] for i in ids]     # noqa: E731
    rate = spec.acceptance_rate
    if detail:
        out = {"prompt": words(spec.prompt), "gamma": spec.gamma, "rule": spec.rule, "seed": spec.seed,
               **speculation_dict(spec, vocab)}
        for r, row in zip(spec.rounds, out["rounds"]):
            row.update(start=r.start, pending=vocab[r.pending],
                       proposals=[{"token": vocab[pr.token], "q": pr.q, "p": pr.p, "u": pr.u,
                                   "accepted": pr.accepted} for pr in r.proposals],
                       target_removed=list(r.target_cache.removed), draft_removed=list(r.draft_cache.removed))
        return out
    return {
        "tokens": words(spec.tokens),
        "rounds": [{"draft": words(pr.token for pr in r.proposals), "accepted": r.n_accepted,
                    "emitted": words(r.emitted), "target_cache_len": r.target_cache.after,
                    "draft_cache_len": r.draft_cache.after} for r in spec.rounds],
        "acceptance_rate": None if rate is None else round(rate, 4),
        "target_passes": spec.target_passes,
        "draft_passes": spec.draft_passes,
    }
