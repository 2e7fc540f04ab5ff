"""Plotly figures of a served run (kvviz.serving): a step record or a run in, a figure out.

- ``block_pool_figure``: the physical block pool after one step, one cell per slot, blocks side by
  side in rows; slots coloured by what they hold (prompt blue, generated green; pale: reserved but
  empty), free blocks grey (darker if they still hold a cached prefix block), each held block
  labelled with its requests (r0, r0 r2 ×2 when shared), blocks taken / copied / freed this step
  outlined.
- ``memory_figure``: KV bytes over the steps: reserved under contiguous reservation, held by
  paging, and holding K/V; the gap between the last two is paging's slack.
- ``timeline_figure``: one row per request, one column per step: waiting, prefill, decode,
  preempted (then blank once done).
- ``latency_figure``: TTFT per request for several runs of the same stream (continuous vs static).
- ``block_size_figure``: peak bytes against block size (serving.block_size_sweep).

Colours are kvviz.viz.theme's roles (docs/colours.md), the same as the token chips beside them:
prompt blue, generated green; prefill blue and decode green, waiting reddish purple, preempted
vermillion (focus). Requests are told apart by their labels (r0, r1, …), not by hue.

As in kvviz.viz.attention, each builder has a ``*_spec`` twin returning plain plotly JSON (``{"data": [...],
"layout": {...}}``) without a validated ``go.Figure``: the stepper draws one pool, memory and timeline
per step, and plotly's validation of ~60 figures was most of the page's first run. The builder is
``go.Figure(spec)``, so both always agree.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from kvviz.serving.records import ServeRun, StepRecord
from kvviz.serving.sweeps import SizePoint
from kvviz.viz import theme
from kvviz.viz.theme import COLORS

# a filled slot's colour by its role, as the token chips beside the pool (prompt, generated)
ROLE_COLORS = [COLORS["prompt"], COLORS["generated"]]
FREE = "#EEEEEE"
CACHED_FREE = "#C8C8C8"
MARKS = {"taken": "#000000", "copied": COLORS["focus"], "freed": "#777777"}

WORDS = {
    "block": "block", "slot": "slot", "request": "request", "free": "free", "cached": "free, cached prefix",
    "refcount": "holders", "filled": "filled", "empty": "reserved, empty", "taken": "taken this step",
    "copied": "copied this step", "freed": "freed this step", "step": "step", "bytes": "KV bytes",
    "contiguous": "reserved, contiguous (max length per request)", "paged": "held, paged (blocks)",
    "used": "holding K/V", "waiting": "waiting", "prefill": "prefill", "decode": "decode",
    "preempted": "preempted", "ttft": "TTFT (steps)", "block_size": "block size (positions)",
    "total_steps": "steps", "pool": "Block pool", "memory": "KV memory over the steps",
    "timeline": "Requests over the steps", "latency": "Time to first token", "sizes": "Block size and slack",
}


def _pale(hex_color: str, keep: float = 0.3) -> str:
    """``hex_color`` mixed with white (``keep`` of the colour): a reserved but empty slot."""
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return "#" + "".join(f"{round(255 - keep * (255 - c)):02X}" for c in (r, g, b))


# the pool grid's categories: z value -> colour (2 + 2 · role + (1 if reserved, still empty))
_CATEGORIES = [FREE, CACHED_FREE] + [c for color in ROLE_COLORS for c in (color, _pale(color))]


def _short(token: str, n: int = 6) -> str:
    """A token as it fits in one slot cell (the whole word is on hover)."""
    return token if len(token) <= n else token[:n - 1] + "…"


def _top_legend(layout: dict) -> dict:
    """``layout`` with a legend in one row above the plot, below the title (more room on top)."""
    return {**layout, "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.02, "x": 0},
            "margin": {**layout["margin"], "t": 90}}


def _vline(x: float, line: dict) -> dict:
    """A vertical line at ``x`` over the plot's whole height (what ``go.Figure.add_vline`` adds)."""
    return {"type": "line", "x0": x, "x1": x, "xref": "x", "y0": 0, "y1": 1, "yref": "y domain", "line": line}


def _discrete_scale(colors: Sequence[str]) -> list[list]:
    """A colour scale giving integer z = i the colour ``colors[i]`` (zmin 0, zmax len - 1)."""
    n = len(colors)
    scale = []
    for i, c in enumerate(colors):
        scale += [[i / n, c], [(i + 1) / n, c]]
    return scale


def _holders(step: StepRecord, block_size: int, prompt_lens: Mapping[int, int] | None = None
             ) -> tuple[dict[int, list[int]], dict[tuple[int, int], str], dict[tuple[int, int], int]]:
    """Per block the requests whose tables hold it; per (block, slot) the token written there and its
    role (0: a prompt position, 1: generated) for the first table that holds it."""
    owners: dict[int, list[int]] = {}
    slot_token: dict[tuple[int, int], str] = {}
    slot_role: dict[tuple[int, int], int] = {}
    contexts = dict(step.contexts)
    for rid, table in step.block_tables:
        tokens = contexts.get(rid, ())
        n_prompt = (prompt_lens or {}).get(rid, 0)
        for i, block in enumerate(table):
            owners.setdefault(block, []).append(rid)
            for o in range(block_size):
                slot_role.setdefault((block, o), 0 if i * block_size + o < n_prompt else 1)
                if i * block_size + o < len(tokens):
                    slot_token.setdefault((block, o), tokens[i * block_size + o])
    return owners, slot_token, slot_role


def _pool_cells(step: StepRecord, block_size: int, columns: int, w: Mapping[str, str],
                prompt_lens: Mapping[int, int] | None = None) -> tuple[list, list, list]:
    """The grid's z (a category of _CATEGORIES), texts and hovers: block b at row b // columns, its
    slots from column (b % columns) · (block_size + 1) on, a blank column between blocks."""
    owners, slot_token, slot_role = _holders(step, block_size, prompt_lens)
    n_blocks = len(step.refcounts)
    rows = -(-n_blocks // columns)
    width = columns * (block_size + 1) - 1
    z: list[list[int | None]] = [[None] * width for _ in range(rows)]
    text = [[""] * width for _ in range(rows)]
    hover = [[""] * width for _ in range(rows)]
    for b in range(n_blocks):
        r, c0 = b // columns, (b % columns) * (block_size + 1)
        holders = sorted(owners.get(b, []))
        for o in range(block_size):
            c = c0 + o
            if not holders:
                z[r][c] = 1 if step.cached[b] else 0
                state = w["cached"] if step.cached[b] else w["free"]
                hover[r][c] = f"{w['block']} {b} · {w['slot']} {o}<br>{state}"
                continue
            filled = o < step.filled[b]
            z[r][c] = 2 + 2 * slot_role[(b, o)] + (0 if filled else 1)
            tok = slot_token.get((b, o), "") if filled else ""
            text[r][c] = _short(tok)
            who = ", ".join(str(h) for h in holders)
            hover[r][c] = (f"{w['block']} {b} · {w['slot']} {o}<br>{w['request']} {who} · "
                           f"{w['refcount']} {step.refcounts[b]}<br>{tok if filled else w['empty']}")
    return z, text, hover


def _pool_marks(step: StepRecord, block_size: int, columns: int, block_ids: bool) -> tuple[list, list]:
    """Outlines of the blocks taken, copied and freed this step; over each held block its requests
    (r0; r0 r2 ×2 when shared: the holders count) and (``block_ids``) each block's id under it."""
    shapes, notes = [], []
    marked = [(b, "taken") for b in step.taken if b not in {c for _, c in step.copied}]
    marked += [(c, "copied") for _, c in step.copied] + [(b, "freed") for b in step.freed]
    for b, kind in marked:
        r, c0 = b // columns, (b % columns) * (block_size + 1)
        line = {"color": MARKS[kind], "width": 3, "dash": "dot" if kind == "freed" else "solid"}
        shapes.append({"type": "rect", "x0": c0 - 0.5, "x1": c0 + block_size - 0.5, "y0": r - 0.45, "y1": r + 0.45,
                       "line": line, "name": kind})
    owners, _, _ = _holders(step, block_size)
    for b, n in enumerate(step.refcounts):
        if owners.get(b):
            r, c0 = b // columns, (b % columns) * (block_size + 1)
            label = " ".join(f"r{h}" for h in sorted(owners[b])) + (f" ×{n}" if n > 1 else "")
            notes.append({"x": c0 + (block_size - 1) / 2, "y": r - 0.5, "text": label, "showarrow": False,
                          "yanchor": "bottom", "font": {"size": 13, "color": "#000000"}, "name": "holders"})
    if block_ids:
        for b in range(len(step.refcounts)):
            r, c0 = b // columns, (b % columns) * (block_size + 1)
            notes.append({"x": c0 + (block_size - 1) / 2, "y": r + 0.5, "text": str(b), "showarrow": False,
                          "yanchor": "top", "font": {"size": 12, "color": "#555555"}, "name": "block id"})
    return shapes, notes


def block_pool_spec(step: StepRecord, block_size: int, columns: int = 8, title: str | None = None,
                    words: Mapping[str, str] | None = None, show_tokens: bool | None = None,
                    block_ids: bool = False, prompt_lens: Mapping[int, int] | None = None) -> dict:
    """The pool after ``step``: block b is drawn at row b // columns, column b % columns, as
    ``block_size`` slot cells. Filled slots carry their token (while the grid is small, or
    ``show_tokens``); hovering a slot names block, slot, holders and token. ``block_ids``: each
    block's id under it, so block tables can be read off the grid. ``prompt_lens``: each request's
    prompt length, which colours its slots prompt or generated (without it every slot is generated)."""
    w = theme.words(WORDS, words)
    n_blocks = len(step.refcounts)
    rows = -(-n_blocks // columns)
    width = columns * (block_size + 1) - 1
    z, text, hover = _pool_cells(step, block_size, columns, w, prompt_lens)
    if show_tokens is None:
        show_tokens = n_blocks * block_size <= 96
    trace = {"type": "heatmap", "z": z, "textfont": {"size": 12}, "customdata": hover,
             "hovertemplate": "%{customdata}<extra></extra>", "colorscale": _discrete_scale(_CATEGORIES),
             "zmin": -0.5, "zmax": len(_CATEGORIES) - 0.5, "showscale": False, "xgap": 1,
             "ygap": 22 if block_ids else 6, "hoverongaps": False}
    if show_tokens:
        trace.update(text=text, texttemplate="%{text}")
    shapes, notes = _pool_marks(step, block_size, columns, block_ids)
    layout = theme.layout(title if title is not None else f"{w['pool']} · {w['step']} {step.step}",
                          130 + (62 if block_ids else 46) * rows,
                          xaxis={"visible": False, "range": [-0.6, width - 0.4]},
                          yaxis={"visible": False, "autorange": "reversed"})
    layout["margin"].update(t=75, b=28 if block_ids else 10)    # room for the ids under the last row
    if shapes:
        layout["shapes"] = shapes
    if notes:
        layout["annotations"] = notes
    return {"data": [trace], "layout": layout}


def block_pool_figure(*args, **kwargs) -> go.Figure:
    """``block_pool_spec`` as a figure (same arguments)."""
    return go.Figure(block_pool_spec(*args, **kwargs))


def memory_spec(run: ServeRun, title: str | None = None, words: Mapping[str, str] | None = None,
                step: int | None = None) -> dict:
    """Bytes over the steps from the allocator's counts: contiguous reservation, paging's held
    blocks, and the slots holding K/V (the shaded gap to the paged line is the last blocks' slack).
    ``step``: a vertical line at the step the page shows."""
    w = theme.words(WORDS, words)
    xs = [s.step for s in run.steps]
    traces = []
    series = [("used", COLORS["processed"], "solid", None), ("paged", COLORS["prompt"], "solid", "tonexty"),
              ("contiguous", COLORS["focus"], "dash", None)]
    for what, color, dash, fill in series:
        # the legend names the line, the hover says it all ("reserved, contiguous" and, on hover, its
        # "(max length per request)": the whole entry was wider than the stepper's column)
        trace = {"type": "scatter", "x": xs, "y": [s.memory.bytes(what) for s in run.steps],
                 "name": w[what].split(" (")[0], "mode": "lines",
                 "line": {"color": color, "dash": dash, "width": 3, "shape": "hv"},
                 "hovertemplate": f"{w['step']} %{{x}}<br>{w[what]}: %{{y:,}} B<extra></extra>"}
        if fill:
            trace.update(fill=fill, fillcolor=_pale(COLORS["prompt"], 0.25))
        traces.append(trace)
    shapes = [] if step is None else [_vline(step, {"color": "#555555", "width": 1, "dash": "dot"})]
    layout = theme.layout(title if title is not None else w["memory"], 400, xaxis={"title": {"text": w["step"]}},
                          yaxis={"title": {"text": w["bytes"]}, "rangemode": "tozero"})
    if shapes:
        layout["shapes"] = shapes
    return {"data": traces, "layout": _top_legend(layout)}


def memory_figure(*args, **kwargs) -> go.Figure:
    """``memory_spec`` as a figure (same arguments)."""
    return go.Figure(memory_spec(*args, **kwargs))


_STATES = ["waiting", "prefill", "decode", "preempted"]


def timeline_states(run: ServeRun) -> dict[int, list[str | None]]:
    """Per request, its state at every step: "waiting", "prefill", "decode", "preempted" or None
    (not arrived yet, or done)."""
    out: dict[int, list[str | None]] = {r.id: [None] * run.total_steps for r in run.requests}
    for s in run.steps:
        for rid in s.waiting:
            out[rid][s.step] = "waiting"
        for rid in s.prefill:
            out[rid][s.step] = "prefill"
        for rid in s.decode:
            out[rid][s.step] = "decode"
        for rid in s.preempted:
            out[rid][s.step] = "preempted"
    return out


def timeline_spec(run: ServeRun, title: str | None = None, words: Mapping[str, str] | None = None,
                  step: int | None = None, show_tokens: bool | None = None) -> dict:
    """Requests (rows) over steps (columns); a prefill or decode cell carries the token it chose."""
    w = theme.words(WORDS, words)
    states = timeline_states(run)
    chosen = {(s.step, rid): tok for s in run.steps for rid, tok in s.chosen}
    ids = [r.id for r in run.requests]
    z = [[None if st is None else _STATES.index(st) for st in states[i]] for i in ids]
    text = [[chosen.get((t, i), "") for t in range(run.total_steps)] for i in ids]
    hover = [[f"{w['request']} {i} · {w['step']} {t}<br>{w[st] if st else ''} {chosen.get((t, i), '')}"
              for t, st in enumerate(states[i])] for i in ids]
    if show_tokens is None:
        show_tokens = run.total_steps <= 30
    colors = [COLORS["waiting"], COLORS["prefill"], COLORS["decode"], COLORS["focus"]]
    grid = {"type": "heatmap", "z": z, "x": list(range(run.total_steps)), "y": [f"{w['request']} {i}" for i in ids],
            "textfont": {"size": 12, "color": "#FFFFFF"}, "customdata": hover,
            "hovertemplate": "%{customdata}<extra></extra>", "colorscale": _discrete_scale(colors),
            "zmin": -0.5, "zmax": len(colors) - 0.5, "showscale": False, "xgap": 1, "ygap": 2, "hoverongaps": False}
    if show_tokens:
        grid.update(text=text, texttemplate="%{text}")
    legend = [{"type": "scatter", "x": [None], "y": [None], "mode": "markers", "name": w[name],   # the categories
               "marker": {"symbol": "square", "size": 14, "color": color}} for name, color in zip(_STATES, colors)]
    xaxis: dict = {"title": {"text": w["step"]}}
    if run.total_steps <= 16:        # every step labelled while that fits half a page's width (≈ 390 px)
        xaxis["dtick"] = 1
    layout = theme.layout(title if title is not None else f"{w['timeline']} ({run.policy})", 170 + 28 * len(ids),
                          xaxis=xaxis, yaxis={"autorange": "reversed", "type": "category"}, plot_bgcolor="#FFFFFF")
    if step is not None:
        layout["shapes"] = [_vline(step, {"color": "#000000", "width": 2})]
    return {"data": [grid, *legend], "layout": _top_legend(layout)}


def timeline_figure(*args, **kwargs) -> go.Figure:
    """``timeline_spec`` as a figure (same arguments)."""
    return go.Figure(timeline_spec(*args, **kwargs))


def latency_spec(runs: Mapping[str, ServeRun], title: str | None = None,
                 words: Mapping[str, str] | None = None) -> dict:
    """TTFT per request, one bar group per request, one colour per run (e.g. continuous, static);
    the legend gives each run's total steps and mean TTFT."""
    w = theme.words(WORDS, words)
    palette = [COLORS["prompt"], COLORS["pending"], COLORS["processed"], COLORS["focus"]]
    traces = [{"type": "bar", "x": [f"{w['request']} {r.id}" for r in run.requests],
               "y": [r.ttft for r in run.requests],
               "name": f"{name}: {run.total_steps} {w['total_steps']}, {w['ttft']} ⌀ {run.mean_ttft:.2f}",
               "marker": {"color": palette[i % len(palette)]}, "text": [r.ttft for r in run.requests],
               "textposition": "outside", "hovertemplate": f"{name}<br>%{{x}}: %{{y}}<extra></extra>"}
              for i, (name, run) in enumerate(runs.items())]
    return {"data": traces, "layout": _top_legend(theme.layout(
        title if title is not None else w["latency"], 400, yaxis={"title": {"text": w["ttft"]}, "rangemode": "tozero"},
        barmode="group"))}


def latency_figure(*args, **kwargs) -> go.Figure:
    """``latency_spec`` as a figure (same arguments)."""
    return go.Figure(latency_spec(*args, **kwargs))


def block_size_spec(points: Sequence[SizePoint], title: str | None = None,
                    words: Mapping[str, str] | None = None) -> dict:
    """Peak bytes against block size for one stream: paging's held blocks vs the slots holding K/V
    (the gap is the last blocks' slack; it grows with the block size), and contiguous reservation."""
    w = theme.words(WORDS, words)
    xs = [p.block_size for p in points]
    traces = [{"type": "scatter", "x": xs, "y": [getattr(p, what) for p in points], "name": w[what],
               "mode": "lines+markers", "line": {"color": color, "dash": dash, "width": 3}, "marker": {"size": 9},
               "hovertemplate": f"{w['block_size']} %{{x}}<br>{w[what]}: %{{y:,}} B<extra></extra>"}
              for what, color, dash in (("used", COLORS["processed"], "solid"), ("paged", COLORS["prompt"], "solid"),
                                        ("contiguous", COLORS["focus"], "dash"))]
    return {"data": traces, "layout": _top_legend(theme.layout(
        title if title is not None else w["sizes"], 400,
        xaxis={"title": {"text": w["block_size"]}, "type": "log", "tickvals": xs, "ticktext": [str(x) for x in xs]},
        yaxis={"title": {"text": w["bytes"]}, "rangemode": "tozero"}))}


def block_size_figure(*args, **kwargs) -> go.Figure:
    """``block_size_spec`` as a figure (same arguments)."""
    return go.Figure(block_size_spec(*args, **kwargs))


__all__ = ["ROLE_COLORS", "WORDS", "block_pool_figure", "block_pool_spec", "block_size_figure", "block_size_spec",
           "latency_figure", "latency_spec", "memory_figure", "memory_spec", "timeline_figure",
           "timeline_spec", "timeline_states"]
