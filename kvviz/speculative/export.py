"""A speculative run as plain data: a draft model's run as the ``speculate`` command's JSON and the
page's download; a self-drafted run (prompt lookup, early exit) as ``speculate --draft
prompt-lookup``'s JSON."""
from __future__ import annotations

from collections.abc import Sequence

from kvviz.speculative.records import Speculation


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


def prompt_lookup_dict(run: Speculation, vocab: Sequence[str]) -> dict:
    """A prompt-lookup run (kvviz.speculative.prompt_lookup) as the ``speculate --draft prompt-lookup``
    command's JSON (an early-exit run adds its method and exit layer). The prompt and new tokens as
    strings and ids; per round the cache's length before, how many text tokens the pass fed, the
    n-gram looked up and where it occurred (null: no match), the draft, how many were accepted, the
    target's own token, and the cache's length after the verification pass and after the rollback;
    the totals."""
    words = lambda ids: [vocab[i] for i in ids]     # noqa: E731
    rate = run.accepted_fraction
    return {
        "prompt": words(run.prompt), "prompt_ids": list(run.prompt),
        "tokens": words(run.tokens), "new_ids": list(run.tokens),
        "lookup_tokens": run.gamma, "ngram": run.max_ngram,
        **({"method": run.source, "exit_layer": run.exit_layer} if run.source != "prompt-lookup" else {}),
        "rounds": [{"cache_before": r.target_cache.before, "fed": len(r.fed),
                    "ngram": None if r.match is None else words(r.match.ngram),
                    "match_position": None if r.match is None else r.match.position,
                    "draft": words(r.draft), "accepted": r.n_accepted, "target_token": vocab[r.target_token],
                    "emitted": words(r.emitted), "cache_grown": r.target_cache.grown,
                    "cache_after": r.target_cache.after}
                   for r in run.rounds],
        "proposed": run.proposed, "accepted": run.accepted,
        "acceptance_rate": None if rate is None else round(rate, 4),
        "target_passes": run.target_passes,
    }
