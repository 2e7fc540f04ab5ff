"""Frames of the speculative decoding page, for every draft source (``Speculation.source``).

A draft model (``kvviz.speculative.decoding.speculative_generate`` on the tiny GPT): every round as
steps — the draft's proposals one by one (its cache growing), the target's one verification pass (its
cache growing by γ + 1 rows), the acceptance test of each proposal, the correction drawn from the
residual or the bonus token, and the rollback of both caches.

Prompt lookup or early exit (the model drafts for itself, SmolLM2 on the page): one step per round —
what the draft was, the verification pass, the cache before, after the pass and after the rollback.

Pure: a ``Speculation`` (a draft model's with the verification passes' attention) and ``tr`` in, a
``Payload`` out. Every number comes from the run's records, none measured (an export is the same
twice); the figures are kvviz.viz.speculative's and kvviz.viz.theme's plain-JSON builders. The layer
and head of the attention map are view options: one payload per choice.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from kvviz.decoding.loops import next_token_probs
from kvviz.limits import SPECULATIVE_MAX_STEP_TOKENS, LimitError
from kvviz.speculative.records import CacheRowState, Speculation, SpeculativeRound
from kvviz.ui.app import fmt
from kvviz.ui.frames import (
    PRESENT_TOP_K,
    Payload,
    Tr,
    figure_words,
    html_block,
    lines_block,
    metrics,
    moments,
    note_block,
    presenter_only,
    strip_block,
    strip_tail,
    table_block,
)
from kvviz.ui.frames.speculative_notice import greedy, notice, round_notice
from kvviz.viz.attention import attention_heatmap_spec
from kvviz.viz.logits import top_probs_bar_spec
from kvviz.viz.speculative import LABELS, cache_spec, lookup_rounds_spec, position_spec, proposals_spec, verify_spec

KINDS = ("draft", "verify", "test", "fix", "rollback")
PRESENT_STRIP = 120     # presenter mode: one row of chips, in characters (strip_tail): the newest, proposals among them
PRESENT_TICKS = 14      # presenter mode: the verification map's key axis labelled by position, at most this often
TABLE_COLS = ["position", "token", "target", "draft"]      # engine names of the cache table's columns (CSV)


@dataclass(frozen=True)
class Step:
    """One event of the page: round ``r`` (0-based), what happens (``KINDS``) and, for "draft" and
    "test", which proposal (0-based)."""

    r: int
    kind: str
    i: int = 0


def plan(spec: Speculation) -> list[Step]:
    """The events of a run, in order: per round γ draft passes, the verification pass, one acceptance
    test per tested proposal, the correction or bonus token, the rollback; a self-drafted run
    (prompt lookup, early exit) has one event per round."""
    if spec.source != "draft-model":
        return [Step(rd.index, "round") for rd in spec.rounds]
    out: list[Step] = []
    for rd in spec.rounds:
        out += [Step(rd.index, "draft", k) for k in range(rd.gamma)]
        out.append(Step(rd.index, "verify"))
        out += [Step(rd.index, "test", k) for k in range(rd.n_tested)]
        out += [Step(rd.index, "fix"), Step(rd.index, "rollback")]
    return out


def first_step(spec: Speculation, r: int, kind: str = "draft") -> int:
    """Index of round ``r``'s first event of ``kind`` (the lecture script and tests link to it)."""
    return next(n for n, s in enumerate(plan(spec)) if s.r == r and s.kind == kind)


def phase(spec: Speculation, s: Step) -> str:
    """The event's name (``spec.phase_<name>``): the kind, with "fix" told apart as a correction drawn
    from the residual, a bonus token after all γ were accepted, or a plain step (γ = 0)."""
    if s.kind != "fix":
        return s.kind
    rd = spec.rounds[s.r]
    return "plain" if rd.gamma == 0 else "bonus" if rd.bonus else "correct"


# ---------------------------------------------------------------- the caches at one event

def cache_rows(spec: Speculation, s: Step) -> tuple[list[CacheRowState], list[CacheRowState]]:
    """Rows of the target and the draft cache as event ``s`` shows them. Before the rollback a row
    written this round is "kept" (the figure calls it "written this round": its fate is not decided
    yet); at the rollback each row carries its fate, "removed" for the rows ``crop`` drops."""
    rd = spec.rounds[s.r]
    target, draft = spec.cache_rows(s.r, "target"), spec.cache_rows(s.r, "draft")
    if s.kind == "rollback":
        return list(target), list(draft)
    t_len = rd.target_cache.before if s.kind == "draft" else rd.target_cache.grown
    d_len = rd.proposals[s.i].draft_cache_len if s.kind == "draft" else rd.draft_cache.grown

    def undecided(row: CacheRowState) -> CacheRowState:
        return row if row.status == "cached" else replace(row, status="kept")
    return ([undecided(x) for x in target if x.position < t_len], [undecided(x) for x in draft if x.position < d_len])


def new_positions(spec: Speculation, s: Step) -> tuple[set[int], set[int]]:
    """Positions this event's pass wrote into the target and the draft cache."""
    rd = spec.rounds[s.r]
    if s.kind == "draft":
        before = rd.draft_cache.before if s.i == 0 else rd.proposals[s.i - 1].draft_cache_len
        return set(), set(range(before, rd.proposals[s.i].draft_cache_len))
    if s.kind == "verify":
        return set(range(rd.target_cache.before, rd.target_cache.grown)), set()
    return set(), set()


def _cell(row: CacheRowState | None, final: bool, tr: Tr) -> str:
    if row is None:
        return "—"
    if row.status == "cached":
        return tr("speculative.cell_cached")
    if row.status == "removed":
        return tr("speculative.cell_removed")
    return tr("speculative.cell_kept") if final else tr("speculative.cell_written")


def cache_table(pl: Payload, spec: Speculation, s: Step, vocab: Sequence[str], tr: Tr) -> dict:
    """Both caches in one table, a row per position: what each cache holds there. At the rollback the
    rows it removes are struck out; the next event shows them gone."""
    target, draft = cache_rows(spec, s)
    t_by, d_by = {r.position: r for r in target}, {r.position: r for r in draft}
    final = s.kind == "rollback"
    positions = sorted(set(t_by) | set(d_by))
    rows = []
    for p in positions:
        tok = (t_by.get(p) or d_by[p]).token
        rows.append([p, vocab[tok], _cell(t_by.get(p), final, tr), _cell(d_by.get(p), final, tr)])
    t_new, d_new = new_positions(spec, s)
    new = [k for k, p in enumerate(positions) if p in t_new | d_new]
    struck = [k for k, p in enumerate(positions) if final and t_by.get(p) is not None and t_by[p].status == "removed"]
    notes = [tr("speculative.table_note")]
    if new:
        notes.append(tr("speculative.table_new"))
    if struck:
        notes.append(tr("speculative.table_struck"))
    headers = [tr("charts.col_position"), tr("charts.col_token"), tr("speculative.col_target"),
               tr("speculative.col_draft")]
    return pl.cache_table(TABLE_COLS, headers, rows, tr("speculative.table_title", t=len(target), d=len(draft)),
                          new=new, struck=struck, notes=" ".join(notes))


# ---------------------------------------------------------------- words and numbers

# kvviz.viz.speculative's words a self-drafted run's figures draw (``specllm.w_<key>``, "-" as "_")
SELF_WORDS = ("draft_row", "target_row", "verified", "target_token", "round", "tokens", "rejected_tokens",
              "accepted_tokens", "acceptance_rate", "prompt-lookup", "early-exit", "no_draft", "accepted",
              "rejected", "untested", "target_cache", "draft_cache", "position", "cached", "kept", "removed",
              "plain", "speedup", "unused")


def fig_labels(tr: Tr, source: str = "draft-model", **override: str) -> dict[str, str]:
    """kvviz.viz.speculative's words in ``tr``'s language, as a run of ``source`` names them (the tiny
    GPT's "target" and "draft"; the model drafting for itself: "model's cache", "draft's rows")."""
    if source == "draft-model":
        words = {k: tr("speculative.fig_" + k) for k in LABELS}
    else:
        words = {k: tr("specllm.w_" + k.replace("-", "_")) for k in SELF_WORDS}
    return {**words, **override}


def _n(x: float, lang: str, digits: int = 3) -> str:
    return fmt.fixed(x, digits, lang=lang)


def _words(ids: Sequence[int], vocab: Sequence[str]) -> str:
    return " ".join(f"**{vocab[t]}**" for t in ids)


def sentences(spec: Speculation, s: Step, vocab: Sequence[str], tr: Tr) -> tuple[str, str | None]:
    """What just happened, and what has not happened yet."""
    lang = getattr(tr, "lang", "en")
    rd = spec.rounds[s.r]
    g = greedy(spec)
    if s.kind == "draft":
        pr = rd.proposals[s.i]
        how = tr("speculative.how_greedy") if g else tr("speculative.how_sampled", q=_n(pr.q, lang))
        common = dict(r=s.r + 1, tok=vocab[pr.token], pos=rd.start + 1 + s.i, how=how, n=pr.draft_cache_len)
        if s.i == 0:
            did = tr("speculative.did_draft_first", fed=_words(rd.draft_fed, vocab), k=len(rd.draft_fed), **common)
        else:
            did = tr("speculative.did_draft", k=s.i + 1, prev=vocab[rd.proposals[s.i - 1].token], **common)
        return did, tr("speculative.todo_draft", n=rd.target_cache.before)
    if s.kind == "verify":
        if rd.gamma == 0:
            return (tr("speculative.did_verify_plain", r=s.r + 1, pending=vocab[rd.pending], pos=rd.start,
                       n=rd.target_cache.grown), None)
        return (tr("speculative.did_verify", pending=vocab[rd.pending], g=rd.gamma, g1=rd.gamma + 1, a=rd.start,
                   b=rd.start + rd.gamma, before=rd.target_cache.before, n=rd.target_cache.grown),
                tr("speculative.todo_verify"))
    if s.kind == "test":
        pr = rd.proposals[s.i]
        common = dict(i=s.i + 1, tok=vocab[pr.token], pos=rd.start + 1 + s.i)
        if g:
            best = int(rd.p[s.i].argmax())
            did = (tr("speculative.did_test_greedy_ok", **common) if pr.accepted
                   else tr("speculative.did_test_greedy_bad", best=vocab[best], **common))
        else:
            nums = dict(p=_n(pr.p, lang), q=_n(pr.q, lang), a=_n(pr.acceptance_probability, lang), u=_n(pr.u, lang))
            did = tr("speculative.did_test_ok" if pr.accepted else "speculative.did_test_bad", **common, **nums)
        if not pr.accepted:
            todo = tr("speculative.todo_test_bad", n=rd.gamma - s.i - 1)
        elif s.i + 1 < rd.gamma:
            todo = tr("speculative.todo_test_next", i=s.i + 2)
        else:
            todo = tr("speculative.todo_test_all", g=rd.gamma)
        return did, todo
    last = rd.emitted[-1]
    if s.kind == "fix":
        if rd.gamma == 0:
            did = tr("speculative.did_fix_plain", tok=vocab[last], p=_n(float(rd.p[0, last]), lang))
        elif rd.bonus:
            did = tr("speculative.did_fix_bonus", g=rd.gamma, pos=rd.start + rd.gamma + 1, tok=vocab[last],
                     p=_n(float(rd.p[rd.gamma, last]), lang), n=len(rd.emitted))
        else:
            i = rd.rejected_at
            did = tr("speculative.did_fix_greedy" if g else "speculative.did_fix_residual", i=i + 1, tok=vocab[last],
                     res=_n(float(rd.residual[last]), lang), pos=rd.start + 1 + i)
        return did, tr("speculative.todo_fix", n=rd.target_cache.grown - rd.target_cache.after,
                       m=rd.draft_cache.grown - rd.draft_cache.after)
    t_removed, d_removed = rd.target_cache.removed, rd.draft_cache.removed
    if len(t_removed) or len(d_removed):
        did = tr("speculative.did_rollback", keep=rd.target_cache.after, nd=len(d_removed),
                 positions=list(t_removed), dkeep=rd.draft_cache.after, tok=vocab[last])
    else:
        did = tr("speculative.did_rollback_none", keep=rd.target_cache.after, dkeep=rd.draft_cache.after,
                 tok=vocab[last])
    done = s.r == len(spec.rounds) - 1
    return did, tr("speculative.todo_done" if done else "speculative.todo_rollback", n=len(spec.tokens))


def _so_far(spec: Speculation, s: Step) -> dict[str, int]:
    """The run's counters up to and including event ``s`` (sums of the round records)."""
    rd = spec.rounds[s.r]
    before = spec.rounds[:s.r]
    pre = int(spec.prefill_len > 0)
    verified = s.kind != "draft"
    emitted = s.kind in ("fix", "rollback")
    tested = [pr for pr in rd.proposals[: s.i + 1]] if s.kind == "test" else list(rd.proposals) if emitted else []
    return {
        "target_passes": pre + s.r + verified,
        "draft_passes": pre + sum(r.gamma for r in before) + (s.i + 1 if s.kind == "draft" else rd.gamma),
        "tokens": sum(len(r.emitted) for r in before) + (len(rd.emitted) if emitted else 0),
        "accepted": sum(r.n_accepted for r in before) + sum(bool(pr.accepted) for pr in tested),
        "tested": sum(r.n_tested for r in before) + sum(pr.accepted is not None for pr in tested),
    }


def counters(spec: Speculation, s: Step, tr: Tr) -> dict:
    target, draft = cache_rows(spec, s)
    rd = spec.rounds[s.r]
    c = _so_far(spec, s)
    lang = getattr(tr, "lang", "en")
    rate = fmt.percent(c["accepted"] / c["tested"], lang=lang) if c["tested"] else "—"
    badge = None
    if s.kind == "rollback":
        held = len(spec.prompt) + c["tokens"] - 1             # the invariant: all but the last token
        ok = rd.target_cache.after == held and rd.draft_cache.after <= held
        badge = ("ok" if ok else "bad", tr("speculative.badge_ok" if ok else "speculative.badge_bad", n=held,
                                           t=rd.target_cache.after, d=rd.draft_cache.after))
    return metrics([
        (tr("speculative.m_target_rows"), len([r for r in target if r.status != "removed"]),
         tr("speculative.m_target_rows_help"), None),
        (tr("speculative.m_draft_rows"), len([r for r in draft if r.status != "removed"]),
         tr("speculative.m_draft_rows_help"), None),
        (tr("speculative.m_tokens"), c["tokens"], tr("speculative.m_tokens_help"), None),
        (tr("speculative.m_target_passes"), c["target_passes"], tr("speculative.m_target_passes_help"), None),
        (tr("speculative.m_draft_passes"), c["draft_passes"], tr("speculative.m_draft_passes_help"), None),
        (tr("speculative.m_accepted"), f"{c['accepted']} / {c['tested']} ({rate})", tr("speculative.m_accepted_help"),
         None),
    ], badge)


# ---------------------------------------------------------------- strips and figures

def strips(spec: Speculation, s: Step, vocab: Sequence[str], tr: Tr) -> list[dict]:
    """One token strip: the text the target cache is built on (prompt, processed, pending), then this
    round's proposals at their positions — orange while untested, green once accepted, struck out
    once rejected or dropped — and, once drawn, the correction or bonus token (pending)."""
    rd = spec.rounds[s.r]
    text = [vocab[t] for t in spec.prompt + spec.tokens]
    cached = rd.start + (s.kind != "draft")          # the verification pass processes the pending token
    out = strip_block(text[: rd.start + 1], len(spec.prompt), cached, legend=False, label=tr("speculative.strip_text"))
    chips = out["strip"]["chips"]
    upto = s.i if s.kind == "draft" else rd.gamma - 1
    drawn = s.kind in ("fix", "rollback")
    for k, pr in enumerate(rd.proposals[: upto + 1]):
        decided = drawn or (s.kind == "test" and k <= s.i)
        if decided and pr.accepted:
            kind, tok = "processed", "✓ " + vocab[pr.token]
        elif (decided and pr.accepted is False) or (drawn and pr.accepted is None):
            kind, tok = "removed", "✗ " + vocab[pr.token]
        else:
            kind, tok = "pending", vocab[pr.token]
        chips.append([rd.start + 1 + k, tok, kind])
    if drawn:
        chips.append([rd.start + 1 + rd.n_accepted, vocab[rd.emitted[-1]], "pending"])
    label = tr("speculative.strip_text")
    return strip_tail(out, PRESENT_STRIP, lambda n: label + " " + tr("projector.strip_tail", n=n))


def revealed(rd: SpeculativeRound, upto: int) -> SpeculativeRound:
    """The round as known after testing proposals 0..``upto`` (−1: none): later tests hidden."""
    return replace(rd, proposals=tuple(pr if k <= upto else replace(pr, u=None, accepted=None)
                                       for k, pr in enumerate(rd.proposals)))


def attention_fig(pl: Payload, spec: Speculation, rd: SpeculativeRound, vocab: Sequence[str], layer: int, head: int,
                  tr: Tr) -> list[dict]:
    """The verification pass's attention (one layer and head): the pending token and the γ proposals
    (queries) over every position the target cache holds during that pass (keys)."""
    text = (spec.prompt + spec.tokens)[: rd.start + 1] + [pr.token for pr in rd.proposals]
    keys = [f"{p}:{vocab[t]}" for p, t in enumerate(text)]
    queries = keys[rd.start:]
    title = tr("speculative.att_title", r=rd.index + 1, layer=layer + 1, head=head + 1)
    fig = attention_heatmap_spec(rd.attention[layer, head], queries, keys, title, words=figure_words(tr),
                                 show_values=len(keys) <= 8)
    # on a projector the keys by position only (the strip numbers them; hovering names the token), upright
    # and without the axis's title: a round's slanted "position:token" keys took the cache table's rows
    short = attention_heatmap_spec(rd.attention[layer, head], queries, keys, title, words=figure_words(tr),
                                   show_values=len(keys) <= 8, position_ticks=PRESENT_TICKS)
    short["layout"]["xaxis"]["title"] = None
    return _pair(pl, fig, tr("speculative.att_alt"), short)


def present_proposals(spec: dict) -> dict:
    """The proposals' figure on a projector: without its title (its legend names q and p, its lower
    row's axis the test, its ticks each proposal), its two rows of bars each at the height their three
    ticks need (the test's row a little taller, the gap between them lower), the bars' values at their
    full size (plotly would shrink a value wider than its bar: 11.6 px with five proposals). The round's
    screen then keeps the cache table's rows."""
    lay = spec["layout"]
    if "yaxis2" not in lay:                                   # no proposals: a note only
        return spec
    return {"data": [{**d, "constraintext": "none"} if d.get("type") == "bar" else d for d in spec["data"]],
            "layout": {**lay, "title": None, "yaxis": {**lay["yaxis"], "domain": [0.52, 1.0]},
                       "yaxis2": {**lay["yaxis2"], "domain": [0.0, 0.46]}}}


def _pair(pl: Payload, spec: dict, alt: str, present: dict) -> list[dict]:
    """A figure, and in its place on a projector its ``present`` form."""
    return [pl.fig(spec, alt, explain=True), presenter_only(pl.fig(present, alt))]


def draft_probs_blocks(pl: Payload, spec: Speculation, rd: SpeculativeRound, i: int, vocab: Sequence[str],
                       tr: Tr) -> list[dict]:
    """What the draft proposed from: q (the rule applied) when sampling; for greedy the softmax of its
    logits, whose argmax it proposes (q itself is one-hot then). Presenter mode shows the top 5 (and
    the proposal, if it is not among them): ten bars beside the caches' figure leave no room for the
    cache table on a projector's screen."""
    pr = rd.proposals[i]
    probs = next_token_probs(rd.draft_logits[i]) if greedy(spec) else rd.q[i].tolist()
    key = "speculative.q_title_greedy" if greedy(spec) else "speculative.q_title"
    title = tr(key, pos=rd.start + 1 + i)
    fig = top_probs_bar_spec(probs, vocab, pr.token, title, axis_title=tr("speculative.q_axis"))
    short = top_probs_bar_spec(probs, vocab, pr.token, title, k=PRESENT_TOP_K, axis_title="")
    return [pl.fig(fig, tr("speculative.q_alt"), explain=True), presenter_only(pl.fig(short, tr("speculative.q_alt")))]


def proposals_table(spec: Speculation, rd: SpeculativeRound, upto: int, vocab: Sequence[str], tr: Tr) -> dict:
    """The proposals so far with the probability the draft gave each. A greedy draft's q is one-hot
    (q(x) = 1: it always proposes its largest), so the table also shows the softmax probability the
    chart beside it draws for x (0.998, say), and the two never seem to disagree."""
    lang = getattr(tr, "lang", "en")
    shown = rd.proposals[: upto + 1]
    rows = [[k + 1, rd.start + 1 + k, vocab[pr.token], _n(pr.q, lang)] for k, pr in enumerate(shown)]
    head = [tr("speculative.col_proposal"), tr("charts.col_position"), tr("charts.col_token"), "q(x)"]
    if greedy(spec):
        head.append(tr("speculative.q_axis"))
        for k, (row, pr) in enumerate(zip(rows, shown)):
            row.append(_n(next_token_probs(rd.draft_logits[k])[pr.token], lang))
    return table_block(head, rows, title=f"**{tr('speculative.proposals_title')}**", row_marks=[(upto, "bold")])


def build(spec: Speculation, vocab: Sequence[str], layer: int, head: int, tr: Tr, *, n_layers: int = 0) -> Payload:
    """Every event of a speculative run; ``vocab[i]``: token ``i`` as the figures show it.

    A draft model's run (``keep_attention=True``): ``layer``, ``head`` (0-based) choose the
    verification pass's attention map. A self-drafted run (prompt lookup, early exit): one event per
    round (``rounds``; ``n_layers``: the model's, which early exit's draft runs the first of)."""
    if spec.source != "draft-model":
        return rounds(spec, vocab, n_layers, tr)
    if len(spec.tokens) > SPECULATIVE_MAX_STEP_TOKENS:
        raise LimitError(f"The page steps through at most {SPECULATIVE_MAX_STEP_TOKENS} new tokens.")
    if any(rd.attention is None for rd in spec.rounds):
        raise ValueError("the page needs the verification passes' attention (keep_attention=True)")
    pl = Payload(tr, ratio=(1, 1), csv="speculative")
    steps = plan(spec)
    last = len(steps) - 1
    words = fig_labels(tr)
    undecided = fig_labels(tr, kept=tr("speculative.fig_written"), untested=tr("speculative.fig_not_yet"))
    # on a projector a proposal still to be tested is "not tested" (the round's verdict reads it as "yet"):
    # German's "noch nicht getestet" is wider than a bar of four
    short = fig_labels(tr, kept=tr("speculative.fig_written"))

    def proposals(rd_shown: SpeculativeRound, labels: dict, present: dict) -> list[dict]:
        title = tr("speculative.pq_title")
        return _pair(pl, proposals_spec(rd_shown, vocab, title, labels), tr("speculative.pq_alt"),
                     present_proposals(proposals_spec(rd_shown, vocab, title, present)))
    for n, s in enumerate(steps):
        rd = spec.rounds[s.r]
        target, draft = cache_rows(spec, s)
        final = s.kind == "rollback"
        cache = pl.fig(cache_spec(target, draft, vocab, tr("speculative.cache_fig_title", r=s.r + 1),
                                  window=16, labels=words if final else undecided), tr("speculative.cache_alt"))
        main: list[dict] = []
        side: list[dict] = []
        more: list[dict] = []
        # one projector screen per step: presenter mode keeps one row of charts, the caches' figure
        # beside the draft's probabilities, or the verification pass's attention beside the test
        # (the cache table below still shows the newest rows of both caches)
        if s.kind == "draft":
            side = draft_probs_blocks(pl, spec, rd, s.i, vocab, tr)
            main = [dict(proposals_table(spec, rd, s.i, vocab, tr), x=1)]
        else:
            cache = dict(cache, x=1)
            main = attention_fig(pl, spec, rd, vocab, layer, head, tr)
            if s.kind == "verify":
                side = proposals(revealed(rd, -1), undecided, short)
            elif s.kind == "test":
                side = proposals(revealed(rd, s.i), undecided, short)
            elif s.kind == "fix":
                at = rd.gamma if rd.rejected_at is None else rd.rejected_at
                title = tr("speculative.residual_title" if rd.rejected_at is not None else "speculative.bonus_title",
                           pos=rd.start + 1 + at)
                side = [pl.fig(position_spec(rd, at, vocab, title, labels=words),
                               tr("speculative.residual_alt" if rd.rejected_at is not None
                                  else "speculative.bonus_alt"))]
            else:
                side = proposals(rd, words, words)
            more.append(note_block(tr("speculative.att_note"), explain=True))
        did, todo = sentences(spec, s, vocab, tr)
        if s.kind == "test" and not greedy(spec):
            more.append(note_block(tr("speculative.test_note"), explain=True))
        if s.kind == "fix" and rd.rejected_at is not None:
            more.append(note_block(tr("speculative.residual_note"), explain=True))
        if final:
            more.append(html_block(tr("speculative.rollback_note"), explain=True))
        pl.add(tr("speculative.event_heading", i=n, last=last, r=s.r + 1,
                  phase=tr("speculative.phase_" + phase(spec, s))),
               top=strips(spec, s, vocab, tr) + [lines_block(did, todo)],
               lead=[cache], main=main, side=side, metrics=counters(spec, s, tr),
               table=cache_table(pl, spec, s, vocab, tr), more=more, notice=notice(spec, steps, n, vocab, tr))
    moments.speculative(pl, spec, steps, tr)
    return pl


# ---------------------------------------------------------------- the model drafting for itself

def _shown(ids: Sequence[int], vocab: Sequence[str]) -> str:
    return "".join(vocab[i] for i in ids)


def _lower(spec: dict, by: int, axis_title: bool = True) -> dict:
    """The presenter form of a round's figure: ``by`` px lower (its strips' rows keep their labels'
    room), without its x axis's title where its own title says it, so that the round's two figures
    share one 1280×720 screen."""
    spec = {**spec, "layout": {**spec["layout"], "height": spec["layout"]["height"] - by}}
    if not axis_title:
        spec["layout"]["xaxis"] = {**spec["layout"]["xaxis"], "title": None}
    return spec


def _both(pl: Payload, spec: dict, alt: str, by: int, axis_title: bool = True) -> list[dict]:
    """A figure, and its lower presenter form in its place on a projector."""
    return [pl.fig(spec, alt, explain=True), presenter_only(pl.fig(_lower(spec, by, axis_title), alt))]


def round_draft_text(run: Speculation, rd: SpeculativeRound, vocab: Sequence[str], n_layers: int, tr: Tr) -> str:
    """What the round's draft was: the prefill (round 1), the n-gram prompt lookup matched, or the
    first layers' proposal."""
    out = []
    if rd.index == 0:
        out.append(tr("specllm.round0", fed=len(rd.fed)) + " " + (
            tr("specllm.round0_ee") if run.source == "early-exit" else ""))
    if run.source == "prompt-lookup":
        if rd.match is None:
            out.append(tr("specllm.no_match"))
        else:
            out.append(tr("specllm.match", ngram=_shown(rd.match.ngram, vocab), n=rd.match.size,
                          pos=rd.match.position, draft=_shown(rd.draft, vocab) or "—", tried=list(rd.match.tried)))
    elif rd.index:
        out.append(tr("specllm.ee_draft", k=run.exit_layer, layers=n_layers, d=len(rd.draft),
                      draft=_shown(rd.draft, vocab) or "—"))
    return "\n\n".join(x.strip() for x in out)


def rounds(run: Speculation, vocab: Sequence[str], n_layers: int, tr: Tr) -> Payload:
    """One event per round of a self-drafted run: what the draft was, the verification pass (the
    draft above the model's own greedy tokens), the cache before, after the pass and after the
    rollback, the round among all rounds. No time in any frame: they were measured while the run
    ran, so an export would differ each time (the speed-up, measured behind a button, says what
    the passes cost)."""
    pl = Payload(tr, ratio=None)
    words = fig_labels(tr, run.source)
    n = len(run.rounds)
    for i, r in enumerate(run.rounds):
        title = tr("specllm.verify_title", r=i + 1, n=len(r.fed) + len(r.draft))
        verify = _both(pl, verify_spec(r, vocab, title, words), tr("specllm.verify_alt"), 66, axis_title=False)
        draft_rows, rows = run.cache_rows(i, "draft"), run.cache_rows(i, "target")
        ctitle = tr("specllm.cache_title", before=r.target_cache.before, grown=r.target_cache.grown,
                    after=r.target_cache.after)
        cwords = {**words, "draft_cache": tr("specllm.w_draft_cache_ee", k=run.exit_layer or 0)}
        cache = _both(pl, cache_spec(rows, draft_rows, vocab, ctitle, labels=cwords), tr("specllm.cache_alt"),
                      65 if draft_rows else 15, axis_title=not draft_rows)
        tok = vocab[r.target_token]
        if r.draft and r.n_accepted == len(r.draft):
            body = tr("specllm.verify_body_all", d=len(r.draft), tok=tok, emitted=len(r.emitted))
        elif r.draft:
            body = tr("specllm.verify_body", acc=r.n_accepted, d=len(r.draft), tok=tok, emitted=len(r.emitted))
        else:
            body = tr("specllm.verify_body_plain", tok=tok)
        rollback = tr("specllm.rollback", removed=len(r.target_cache.removed), after=r.target_cache.after)
        if run.source == "early-exit" and r.index:
            rollback += " " + tr("specllm.rollback_ee", k=run.exit_layer, d=max(0, r.draft_cache.grown - r.start))
        overview = pl.fig(lookup_rounds_spec(run, tr("specllm.rounds_title", n=n), words, current=i),
                          tr("specllm.rounds_alt"), explain=True)
        pl.add(tr("specllm.round_heading", r=i + 1, n=n),
               top=[html_block(round_draft_text(run, r, vocab, n_layers, tr))],
               # full width, one above the other (in presenter mode too): the tokens in the cells need it
               wide=verify + [html_block(body, explain=True)] + cache + [html_block(rollback, explain=True), overview],
               metrics=metrics([
                   (tr("specllm.m_cache_before"), fmt.integer(r.target_cache.before, lang=pl.lang),
                    tr("specllm.m_cache_before_help"), None),
                   (tr("specllm.m_draft"), fmt.integer(len(r.draft), lang=pl.lang), tr("specllm.m_draft_help"), None),
                   (tr("specllm.m_accepted"), fmt.integer(r.n_accepted, lang=pl.lang), None, None),
                   (tr("specllm.m_emitted"), fmt.integer(len(r.emitted), lang=pl.lang), tr("specllm.m_emitted_help"),
                    None)]), notice=round_notice(run, i, vocab, tr))
    moments.speculative(pl, run, plan(run), tr)
    return pl
