"""A served run as plain data: the ``serve`` command's JSON and the Paged cache page's download."""
from __future__ import annotations

from kvviz.serving.records import ServeRun


def serve_run_dict(run: ServeRun) -> dict:
    """A run in the CLI's JSON shape (README, "Serving"); with a chunk budget, each step's budget and
    what filled it, (request, positions) pairs."""
    out = {
        "model": run.model_name, "block_size": run.block_size, "num_blocks": run.num_blocks, "policy": run.policy,
        "requests": [{"id": r.id, "prompt": list(r.request.prompt), "arrival_step": r.request.arrival_step,
                      "tokens": list(r.tokens), "first_token_step": r.first_token_step,
                      "finish_step": r.finish_step, "preemptions": r.preemptions,
                      "ttft_steps": r.ttft, "gap_steps": list(r.gaps)} for r in run.requests],
        "steps": [{"step": s.step, "prefill": list(s.prefill), "decode": list(s.decode), "waiting": list(s.waiting),
                   "finished": list(s.finished),
                   "block_tables": {str(i): list(t) for i, t in s.block_tables},
                   "refcounts": {str(b): n for b, n in enumerate(s.refcounts) if n},
                   "free_blocks": len(s.free_blocks)} for s in run.steps],
    }
    for r, d in zip(run.requests, out["requests"]):
        m = run.measured(r)
        if m is not None:           # a timed run: measured seconds beside the steps
            d.update(ttft_s=m[0], gaps_s=list(m[1]))
    if run.chunk_budget is not None:
        out["chunk_budget"] = run.chunk_budget
        for d, s in zip(out["steps"], run.steps):
            d.update(budget=s.budget, chunks=[list(c) for c in s.chunks])
    return out
