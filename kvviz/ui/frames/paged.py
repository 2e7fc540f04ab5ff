"""Frames of the Paged cache page: one frame per scheduler step of a served run (``kvviz.serving.ServeRun``).

Each frame shows what the allocator did at that step (blocks taken at a boundary, shared by a prefix
hit, copied, freed; a preemption), every running request's logical cache as a token strip and as
rows (position → logical block → physical block and slot, with layer 1's keys read through the
block table), the physical pool as a grid, the block tables, the memory so far, and the check of
every row against the request's solo run with a contiguous cache. Pure: records and ``tr`` in,
dicts out."""
from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence

from kvviz.serving import ServeRun, StepRecord
from kvviz.ui.app import fmt
from kvviz.ui.frames import (
    Payload,
    Tr,
    cols_block,
    md,
    metrics,
    moments,
    note_block,
    notice_block,
    presenter_only,
    strip_block,
    table_block,
)
from kvviz.viz import paged_serving
from kvviz.viz.paged import WORDS, block_pool_spec, memory_spec, timeline_spec

K_DIMS = 4             # the first components of layer 1, head 1's key shown per cache row (head size 32)
POOL_COLUMNS = 8       # blocks per row of the pool grid
STRIP_TAIL = 8         # a request's strip shows its newest cached positions (all of them are in the rows)
PRESENT_STRIP_TAIL = 3  # in presenter mode: one line per request, so the charts keep their height at 720 px
CSV_COLS = ["request", "position", "token", "logical block", "block", "slot", "k (h1)"]
PRESENT_POOL_GAP = 36   # presenter mode: px between two rows of the pool (holders 13 px over ids 12 px)
PRESENT_CELL_PX = 18    # presenter mode: the least height of a pool slot
PRESENT_OUTLINE = 0.21  # presenter mode: an outline's half height, in pool rows (just around the slots)
PRESENT_LEGEND_PX = 14  # presenter mode's memory legend, beside its plot (chart labels stay ≥ 12 px)
PRESENT_COLS = ["request", "position", "token", "logical block", "block", "slot"]


def figure_words(tr: Tr) -> dict[str, str]:
    """The words of kvviz.viz.paged in ``tr``'s language."""
    return {k: tr(f"paged.fw_{k}") for k in WORDS}


def serving_words(tr: Tr) -> dict[str, str]:
    """The words of kvviz.viz.paged_serving in ``tr``'s language."""
    return {k: tr(f"serving.fw_{k}") for k in paged_serving.WORDS}


def budget_line(run: ServeRun, s: StepRecord, tr: Tr) -> str | None:
    """What filled this step's token budget (chunked prefill): the decodes first, then the prompt
    chunks, in the scheduler's order; None without a budget or when nothing ran."""
    if run.chunk_budget is None or not s.chunks:
        return None
    contexts = dict(s.contexts)
    decodes = sum(n for r, n in s.chunks if r in s.decode)
    chunks = [tr("serving.chunk", r=r, n=n, done=len(contexts.get(r, ())))
              for r, n in s.chunks if r not in s.decode]
    return tr("serving.did_budget", budget=run.chunk_budget, decodes=decodes, chunks=", ".join(chunks) or "—",
              left=run.chunk_budget - s.tokens_used)


def _next_pool_change(run: ServeRun, s: StepRecord) -> int | None:
    """The next step after ``s`` at which the pool changes: blocks taken, shared, copied or freed."""
    return next((x.step for x in run.steps[s.step + 1:] if x.taken or x.freed or x.copied or x.shared
                 or x.preempted), None)


def notice(run: ServeRun, s: StepRecord, prev: StepRecord | None, tr: Tr) -> dict:
    """What to notice at this step, from the record: the block that carries its point (preempted,
    copied on write, shared, taken at a boundary, freed) and why it matters; at a step where the
    pool does not change, that it does not and the jump to the next step where it does."""
    before = prev.tables if prev is not None else {}
    if s.preempted:
        r = s.preempted[0]
        n = sum(1 for earlier in run.steps[:s.step] for rid, _ in earlier.chosen if rid == r)
        back = next((x.step for x in run.steps[s.step + 1:] if r in x.recomputed), None)
        text = tr("notice_pages.pg_preempt", r=r, blocks=list(before.get(r, ())), n=n)
        if back is None:
            return notice_block(text)
        return notice_block(text + " " + tr("notice_pages.pg_preempt_back", j=back), back,
                            tr("notice.jump", j=back))
    if s.copied:
        src, dst = s.copied[0]
        return notice_block(tr("notice_pages.pg_copy", src=src, dst=dst, bs=run.block_size))
    if s.recomputed:
        r = s.recomputed[0]
        was = next((x.step for x in reversed(run.steps[:s.step]) if r in x.preempted), None)
        return notice_block(tr("notice_pages.pg_recomputed", r=r, n=len(dict(s.contexts).get(r, ())),
                               blocks=list(s.tables.get(r, ())), j=was if was is not None else s.step))
    if s.shared:
        blocks = sorted(set(s.shared))
        who = [r for r in s.prefill if set(blocks) & set(s.tables.get(r, ()))] or list(s.prefill)
        return notice_block(tr("notice_pages.pg_shared", blocks=blocks, r=who[0] if who else 0, saved=s.prefill_saved))
    if run.chunk_budget is not None:
        part = [(r, n) for r, n in s.chunks if r not in s.decode and r not in dict(s.chosen)]
        if part:
            r, n = part[0]
            return notice_block(tr("notice_pages.pg_chunk", r=r, n=n, budget=run.chunk_budget, decodes=len(s.decode)))
    if s.finished:
        return notice_block(tr("notice_pages.pg_finished", ids=list(s.finished), blocks=list(s.freed),
                               waiting=len(s.waiting)))
    for r in s.decode:
        new = [b for b in s.tables.get(r, ()) if b not in before.get(r, ())]
        if new:
            n = len(dict(s.contexts)[r])
            return notice_block(tr("notice_pages.pg_boundary", r=r, block=new[-1], pos=n - 1,
                                   logical=(n - 1) // run.block_size, bs=run.block_size))
    if s.prefill:
        r = s.prefill[0]
        return notice_block(tr("notice_pages.pg_prefill", ids=list(s.prefill), r=r,
                               n=len(dict(s.contexts).get(r, ())), blocks=list(s.tables.get(r, ())),
                               bs=run.block_size))
    j = _next_pool_change(run, s)
    jump = {} if j is None else {"jump": j, "jump_label": tr("notice.jump", j=j)}
    if s.decode:
        return notice_block(tr("notice_pages.pg_decode", n=len(s.decode), free=len(s.free_blocks))
                            + (" " + tr("notice_pages.pg_next", j=j) if j is not None else ""), **jump)
    return notice_block(tr("notice_pages.pg_idle") + (" " + tr("notice_pages.pg_next", j=j) if j is not None else ""),
                        **jump)


def _blocks(blocks: Sequence[int]) -> str:
    return "[" + ", ".join(str(b) for b in blocks) + "]"


def what_happened(run: ServeRun, s: StepRecord, prev: StepRecord | None, tr: Tr) -> tuple[list[str], str | None]:
    """The step in sentences, in the order the scheduler did it, and who still waits."""
    before = prev.tables if prev is not None else {}
    now = s.tables
    contexts = dict(s.contexts)
    bs = run.block_size
    out = []
    for r in s.preempted:
        n = sum(1 for earlier in run.steps[:s.step] for rid, _ in earlier.chosen if rid == r)
        out.append(tr("paged.did_preempted", r=r, blocks=list(before.get(r, ())), n=n))
    fresh = [r for r in s.prefill if r not in s.recomputed]
    if fresh:
        out.append(tr("paged.did_prefill", ids=fresh))
    for r in s.recomputed:
        out.append(tr("paged.did_recomputed", r=r, n=len(contexts.get(r, ()))))
    if s.shared:
        out.append(tr("paged.did_shared", blocks=sorted(set(s.shared)), saved=s.prefill_saved))
    if s.decode:
        out.append(tr("paged.did_decode", ids=list(s.decode)))
    for r in s.decode:                     # a decode that crossed into a new logical block
        new = [b for b in now.get(r, ()) if b not in before.get(r, ())]
        if new:
            n = len(contexts[r])
            out.append(tr("paged.did_boundary", r=r, pos=n - 1, logical=(n - 1) // bs, block=new[-1], bs=bs))
    for src, dst in s.copied:
        out.append(tr("paged.did_copied", src=src, dst=dst))
    if s.finished:
        out.append(tr("paged.did_finished", ids=list(s.finished), blocks=list(s.freed or ())))
    if not s.running:
        out.append(tr("paged.did_idle"))
    todo = tr("paged.todo_waiting", ids=list(s.waiting)) if s.waiting else None
    return out, todo


def heading(s: StepRecord, last: int, tr: Tr) -> str:
    parts = []
    if s.preempted:
        parts.append(tr("paged.h_preempt", ids=list(s.preempted)))
    if s.prefill:
        parts.append(tr("paged.h_prefill", ids=list(s.prefill)))
    if s.decode:
        parts.append(tr("paged.h_decode", ids=list(s.decode)))
    if s.finished:
        parts.append(tr("paged.h_finished", ids=list(s.finished)))
    return tr("paged.heading", i=s.step, last=last, what=" · ".join(parts) or tr("paged.h_idle"))


def strips(run: ServeRun, s: StepRecord, tr: Tr, tail: int = STRIP_TAIL) -> list[dict]:
    """Every request of this step's pass: its newest cached tokens (the last ``tail`` positions)
    and the token chosen now (pending: not in the cache yet), labelled with its block table (or
    that its blocks were freed)."""
    chosen = dict(s.chosen)
    tables = s.tables
    out = []
    for r, ctx in s.contexts:
        prompt = run.requests[r].request.prompt
        start = max(0, len(ctx) - tail)
        seq = list(ctx[start:]) + ([chosen[r]] if r in chosen else [])    # a prompt chunk chooses nothing yet
        where = (tr("paged.strip_table", blocks=_blocks(tables[r])) if r in tables
                 else tr("paged.strip_freed"))
        out.append(strip_block(seq, max(0, min(len(prompt), len(ctx)) - start), len(ctx) - start, legend=False,
                               position_base=start, label=tr("paged.strip_label", r=r) + " · " + where))
    return out


def block_table_block(run: ServeRun, s: StepRecord, prev: StepRecord | None, tr: Tr) -> dict:
    """Logical block i → physical block, per running request; shared blocks carry their holders
    (×n), blocks taken this step are marked."""
    tables = s.block_tables
    width = max((len(t) for _, t in tables), default=0)
    cols = [tr("paged.col_request")] + [str(i) for i in range(width)]
    rows, marks = [], []
    taken = set(s.taken)
    for i, (r, table) in enumerate(tables):
        cells = [str(r)]
        for j, b in enumerate(table):
            n = s.refcounts[b]
            cells.append(f"{b} ×{n}" if n > 1 else str(b))
            if b in taken:
                marks.append((i, j + 1, "mark"))
        rows.append(cells + [""] * (width - len(table)))
    title = tr("paged.tables_title") if tables else tr("paged.tables_none")
    return table_block(cols, rows, title=f"**{title}**", row_head=True, marks=marks, explain=True)


def tables_note(tr: Tr) -> dict:
    return note_block(tr("paged.tables_note"), explain=True)


def with_shown_keys(run: ServeRun) -> ServeRun:
    """``run`` with each step's kept K pool cut to what ``cache_rows`` shows (head 1, the first K_DIMS
    components): a few KB per run instead of the whole pool per step, so the page can cache the run
    it serves with ``keep_kv=True`` and use it for everything else too."""
    if all(s.pool_keys is None for s in run.steps):
        return run
    steps = tuple(s if s.pool_keys is None else dataclasses.replace(s, pool_keys=s.pool_keys[:, :1, :, :K_DIMS].clone())
                  for s in run.steps)
    return dataclasses.replace(run, steps=steps)


def cache_rows(run: ServeRun, s: StepRecord, lang: str) -> tuple[list[list[object]], list[int]]:
    """The logical cache of every request in this step's pass, one row per position: request,
    position, token, logical block, physical block, slot, layer 1's key (head 1, first K_DIMS
    components) read from the pool through the block table; and the rows written by this pass.
    A request that finished at this step has no block table any more: its rows say so."""
    bs = run.block_size
    rows, new = [], []
    shared = set(s.shared)
    processed = dict(s.chunks)
    for r, ctx in s.contexts:
        table = s.tables.get(r)
        keys = s.logical_keys(r)           # [H, T, d] or None (finished, or the run kept no pool)
        first_new = len(ctx) - processed.get(r, len(ctx))      # this pass's rows (a decode's one, a chunk's)
        for p, tok in enumerate(ctx):
            k = ("[" + ", ".join(fmt.fixed(x, 2, lang=lang) for x in keys[0, p, :K_DIMS].tolist()) + ", …]"
                 if keys is not None else "")
            block = table[p // bs] if table is not None else "—"
            if p >= first_new and block not in shared:
                new.append(len(rows))
            rows.append([r, p, tok, p // bs, block, p % bs, k])
    return rows, new


def check_badge(run: ServeRun, s: StepRecord, tr: Tr) -> tuple[str, str]:
    """This step's rows against each request's solo run with a contiguous cache (``serve(check=True)``)."""
    lang = getattr(tr, "lang", fmt.REFERENCE)
    if s.max_abs_diff is None:
        return "info", tr("paged.check_none")
    if s.max_abs_diff == 0.0:
        return "ok", tr("paged.check_exact", n=len(s.running))
    if s.max_abs_diff <= run.tolerance:
        return "ok", tr("paged.check_ok", n=len(s.running), diff=fmt.sci(s.max_abs_diff, 1, lang=lang),
                        tol=fmt.sci(run.tolerance, 0, lang=lang))
    return "bad", tr("paged.check_bad", diff=fmt.sci(s.max_abs_diff, 1, lang=lang),
                     tol=fmt.sci(run.tolerance, 0, lang=lang))


def step_metrics(run: ServeRun, s: StepRecord, tr: Tr) -> dict:
    lang = getattr(tr, "lang", fmt.REFERENCE)
    m = s.memory
    return metrics([
        (tr("paged.m_running"), len(s.running), tr("paged.m_running_help"), None),
        (tr("paged.m_waiting"), len(s.waiting), tr("paged.m_waiting_help"), None),
        (tr("paged.m_free"), f"{len(s.free_blocks)} / {run.num_blocks}", tr("paged.m_free_help"), None),
        (tr("paged.m_paged"), fmt.nbytes(m.bytes("paged"), lang=lang), tr("paged.m_paged_help"),
         tr("paged.m_used_delta", used=fmt.nbytes(m.bytes("used"), lang=lang))),
        (tr("paged.m_contiguous"), fmt.nbytes(m.bytes("contiguous"), lang=lang), tr("paged.m_contiguous_help"),
         None),
    ], check_badge(run, s, tr), notes=[tr("paged.check_note", tol=fmt.sci(run.tolerance, 0, lang=lang))])


def pool_blocks(pl: Payload, run: ServeRun, s: StepRecord, words: dict[str, str], tr: Tr) -> list[dict]:
    """The block pool after step ``s``: the page's, and presenter mode's, whose rows keep apart (each
    block's holders above it and its id below fit between two rows) and whose slots stay a bar's
    height when the stepper cuts its charts to what they need (plotly_view.js needHeight)."""
    spec = block_pool_spec(s, run.block_size, columns=POOL_COLUMNS, words=words, show_tokens=False, block_ids=True,
                           prompt_lens={r.id: len(r.request.prompt) for r in run.requests},
                           title=tr("paged.pool_title", i=s.step, n=run.num_blocks, bs=run.block_size))
    present = copy.deepcopy(spec)
    present["data"][0]["ygap"] = PRESENT_POOL_GAP
    present["layout"]["meta"] = {"cell_px": PRESENT_CELL_PX}
    present["layout"]["margin"]["t"] = 50       # the first row's holders move into the plot (below)
    # the outlines (taken, copied, freed) around a block's slots only, not the ids and holders between
    # the rows: ±0.45 of a row reached into that gap (a row is ≈ 54 px, its slots 18 of them)
    for shape in present["layout"].get("shapes", ()):
        mid = (shape["y0"] + shape["y1"]) / 2
        shape.update(y0=mid - PRESENT_OUTLINE, y1=mid + PRESENT_OUTLINE)
    # and each block's holders just above its slots, its id just below (at ±0.5, the middle of the
    # gap, a row's ids sat under the next row's holders: read as the next row's)
    for note in present["layout"].get("annotations", ()):
        if note["name"] == "holders":
            note["y"] += 0.5 - PRESENT_OUTLINE
        elif note["name"] == "block id":
            note["y"] -= 0.5 - PRESENT_OUTLINE
    return [pl.fig(spec, tr("paged.pool_alt"), explain=True), presenter_only(pl.fig(present, tr("paged.pool_alt")))]


def memory_blocks(pl: Payload, run: ServeRun, s: StepRecord, words: dict[str, str], tr: Tr) -> list[dict]:
    """The memory chart of step ``s`` for the side column: the page's, its legend below the axis; and
    presenter mode's, its legend beside the plot, which keeps the chart as low as the pool beside it
    (a legend below wraps into three rows there: the step ran past a 1280×720 screen)."""
    spec = memory_spec(run, words=words, step=s.step, title=tr("paged.memory_title"))
    # a narrow column: the legend below the axis (its title left out: the chart's title says "steps")
    layout = spec["layout"]
    layout.update(height=330, margin={**layout["margin"], "t": 50, "b": 100},
                  legend={"orientation": "h", "yanchor": "top", "y": -0.15, "x": 0})
    del layout["xaxis"]["title"]
    # presenter mode: the legend's three lines beside the plot; the axis titles left out too (the
    # chart's title says "KV bytes" and "steps")
    present = copy.deepcopy(spec)
    layout = present["layout"]
    del layout["yaxis"]["title"]
    layout.update(height=220, margin={**layout["margin"], "b": 10},
                  legend={"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top",
                          "font": {"size": PRESENT_LEGEND_PX}})
    return [pl.fig(spec, tr("paged.memory_alt"), explain=True), presenter_only(pl.fig(present, tr("paged.memory_alt")))]


def present_budget(spec: dict) -> dict:
    """``paged_serving.budget_spec`` for presenter mode's side column: the legend beside the plot (above
    it, it wraps into two rows there), the step axis labelled as plotly sees fit (one label per step
    would crowd its narrow width), no axis titles (the title and the legend say them)."""
    present = copy.deepcopy(spec)
    layout = present["layout"]
    layout["xaxis"].pop("dtick", None)
    del layout["xaxis"]["title"]
    del layout["yaxis"]["title"]
    layout["legend"] = {"orientation": "v", "x": 1.02, "xanchor": "left", "y": 1, "yanchor": "top",
                        "font": {"size": PRESENT_LEGEND_PX}}
    return present


def build(run: ServeRun, tr: Tr) -> Payload:
    """One frame per step of ``run`` (served with ``check=True``; ``keep_kv=True`` adds the keys)."""
    pl = Payload(tr, ratio=(3, 2), csv="paged_cache")
    words = figure_words(tr)
    last = run.total_steps - 1
    headers = [tr(f"paged.col_{key}") for key in ("request", "position", "token", "logical", "block", "slot", "k")]
    prev = None
    for s in run.steps:
        did, todo = what_happened(run, s, prev, tr)
        pool = pool_blocks(pl, run, s, words, tr)
        memory = memory_blocks(pl, run, s, words, tr)
        timeline = timeline_spec(run, words=words, step=s.step,
                                 title=tr("paged.timeline_title", policy=tr("paged.policy_" + run.policy)))
        wide = [dict(pl.fig(timeline, tr("paged.timeline_alt")), x=1)]
        if run.chunk_budget is not None:       # each step's budget and what filled it, under the timeline
            budget = paged_serving.budget_spec(run, words=serving_words(tr), step=s.step,
                                               title=tr("serving.budget_title", budget=run.chunk_budget))
            wide.append(pl.fig(budget, tr("serving.budget_alt"), explain=True))
            # presenter mode: the budget in the side column, in the memory chart's place (the point of a
            # chunked run; the counters still give the bytes), its step axis labelled every few steps
            memory = [b for b in memory if not b.get("p")] + [presenter_only(pl.fig(
                present_budget(budget), tr("serving.budget_alt")))]
        rows, new = cache_rows(run, s, pl.lang)
        notes = [tr("paged.rows_note", bs=run.block_size, d=K_DIMS)]
        if s.finished:
            notes.append(tr("paged.rows_freed"))
        if not rows:
            notes.append(tr("paged.rows_empty"))
        budget = budget_line(run, s, tr)
        if budget is not None:
            did.append(budget)
        top: list[dict] = [{"lines": [["did", md(x)] for x in did] + ([["todo", md(todo)]] if todo else [])}]
        for tail in (STRIP_TAIL, PRESENT_STRIP_TAIL):     # the page's strips, presenter mode's shorter ones
            s_strips = strips(run, s, tr, tail)
            if s_strips:
                block = cols_block([s_strips[0::2], s_strips[1::2]]) if len(s_strips) > 1 else s_strips[0]
                top.append(dict(block, x=1) if tail == STRIP_TAIL else presenter_only(block))
        if s.contexts:
            top.append(note_block(tr("paged.strip_note", n=STRIP_TAIL), explain=True))
        pl.add(heading(s, last, tr), top=top,
               main=[*pool, note_block(tr("paged.pool_note"), explain=True)],
               side=[block_table_block(run, s, prev, tr), tables_note(tr), *memory],
               wide=wide,
               metrics=step_metrics(run, s, tr),
               table=pl.cache_table(CSV_COLS, headers, rows, tr("paged.rows_title", n=len(rows)), new=new,
                                    notes=" ".join(notes), present_cols=[CSV_COLS.index(c) for c in PRESENT_COLS]),
               notice=notice(run, s, prev, tr))
        prev = s
    moments.paged(pl, run, tr)
    return pl
