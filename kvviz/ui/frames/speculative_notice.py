"""What to notice at each event of the speculative decoding page (``notice_block`` lines): a draft
model's run, event by event (kvviz/ui/frames/speculative.py's steps), and a self-drafted run (prompt
lookup, early exit), round by round. Every number from the run's records."""
from __future__ import annotations

from collections.abc import Sequence

from kvviz.speculative.records import Speculation
from kvviz.ui.app import fmt
from kvviz.ui.frames import Tr, notice_block


def greedy(spec: Speculation) -> bool:
    return spec.rule.get("name") == "greedy"


def notice(spec: Speculation, steps: Sequence, n: int, vocab: Sequence[str], tr: Tr) -> dict:
    """What to notice at event ``n`` of a draft model's run, from its round's record: the two caches
    while the draft proposes (nothing checked yet: the jump to the verification), the target's one pass
    over every proposal (the saving), the proposal's bar in the test row (at a rejection p < q, and the
    residual that keeps the text distributed as the target's), why a bonus token is free, the rows
    the rollback strikes out."""
    lang = getattr(tr, "lang", "en")
    s = steps[n]
    rd = spec.rounds[s.r]
    if s.kind == "draft":
        pr = rd.proposals[s.i]
        j = next(k for k, x in enumerate(steps) if x.r == s.r and x.kind == "verify")
        return notice_block(tr("notice_spec.draft", k=s.i + 1, tok=vocab[pr.token], d=pr.draft_cache_len,
                               t=rd.target_cache.before), j, tr("notice_spec.jump_verify", j=j))
    if s.kind == "verify":
        if rd.gamma == 0:
            return notice_block(tr("notice_spec.verify_plain"))
        return notice_block(tr("notice_spec.verify", g=rd.gamma, g1=rd.target_cache.grown - rd.target_cache.before))
    if s.kind == "test":
        pr = rd.proposals[s.i]
        common = dict(i=s.i + 1, tok=vocab[pr.token])
        if greedy(spec):
            if pr.accepted:
                return notice_block(tr("notice_spec.test_greedy_ok", **common))
            return notice_block(tr("notice_spec.test_greedy_bad", best=vocab[int(rd.p[s.i].argmax())],
                                   n=rd.gamma - s.i - 1, **common))
        nums = {k: fmt.fixed(v, 3, lang=lang) for k, v in
                (("p", pr.p), ("q", pr.q), ("a", pr.acceptance_probability), ("u", pr.u))}
        return notice_block(tr("notice_spec.test_ok" if pr.accepted else "notice_spec.test_bad", **common, **nums))
    last = vocab[rd.emitted[-1]]
    if s.kind == "fix":
        if rd.gamma == 0:
            return notice_block(tr("notice_spec.fix_plain", tok=last))
        if rd.bonus:
            return notice_block(tr("notice_spec.fix_bonus", tok=last, g=rd.gamma, pos=rd.start + rd.gamma + 1,
                                   n=len(rd.emitted)))
        if greedy(spec):
            return notice_block(tr("notice_spec.fix_greedy", tok=last))
        return notice_block(tr("notice_spec.fix_residual", tok=last, pos=rd.start + 1 + rd.rejected_at))
    t, d = len(rd.target_cache.removed), len(rd.draft_cache.removed)
    if t or d:
        return notice_block(tr("notice_spec.rollback", t=t, d=d))
    return notice_block(tr("notice_spec.rollback_none", keep=rd.target_cache.after))


def round_notice(run: Speculation, i: int, vocab: Sequence[str], tr: Tr) -> dict:
    """What to notice in round ``i`` of a self-drafted run (prompt lookup, early exit): the verification
    rows (how many drafted tokens equal the model's own greedy ones, how many tokens the one pass
    emits, the rows rolled back); a round without a draft is plain decoding (the jump to the next draft)."""
    r = run.rounds[i]
    tok = vocab[r.target_token]
    if not r.draft:
        j = next((k for k in range(i + 1, len(run.rounds)) if run.rounds[k].draft), None)
        return notice_block(tr("notice_spec.self_plain", tok=tok), j,
                            tr("notice_spec.jump_draft", r=j + 1, j=j) if j is not None else None)
    common = dict(d=len(r.draft), tok=tok, e=len(r.emitted), rm=len(r.target_cache.removed))
    if r.n_accepted == len(r.draft):
        return notice_block(tr("notice_spec.self_all", **common))
    if r.n_accepted == 0:
        return notice_block(tr("notice_spec.self_none", **common))
    return notice_block(tr("notice_spec.self_some", acc=r.n_accepted, **common))
