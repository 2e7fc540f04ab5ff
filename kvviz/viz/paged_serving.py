"""Figures of serving as engines run it now (kvviz.serving, kvviz.cache.radix): each step's token
budget and what filled it (chunked prefill), block hashing against a radix tree on one stream of
prompts, and the bytes a disaggregated run ships. Pure: records in, plotly JSON dicts out."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from kvviz.cache.radix import PrefixTrace
from kvviz.serving import ServeRun
from kvviz.viz import theme
from kvviz.viz.theme import COLORS

WORDS = {
    "step": "step", "tokens": "tokens in the pass", "decode": "decode (1 token each)", "prefill": "prompt chunks",
    "budget": "budget", "unused": "unused", "request": "request", "budget_title": "Each step's token budget",
    "prompt": "prompt", "hits_hash": "block hashing", "hits_radix": "radix tree", "hits": "positions found cached",
    "held": "held", "hits_title": "Prefix hits per request", "node": "node", "tokens_short": "tokens",
    "last_used": "last used at request", "tree_title": "The radix tree", "root": "root",
}


def budget_spec(run: ServeRun, title: str | None = None, words: Mapping[str, str] | None = None,
                step: int | None = None) -> dict:
    """Tokens each step's pass processed, stacked: the decodes first (one token per running request),
    then each prompt's chunk; a dashed line at the budget (chunked prefill, ``run.chunk_budget``)."""
    w = theme.words(WORDS, words)
    xs = [s.step for s in run.steps]
    decode = [sum(n for r, n in s.chunks if r in s.decode) for s in run.steps]
    prefill = [sum(n for r, n in s.chunks if r not in s.decode) for s in run.steps]
    who = ["<br>".join(f"{w['request']} {r}: {n}" for r, n in s.chunks if r not in s.decode) for s in run.steps]
    data = [
        {"type": "bar", "x": xs, "y": decode, "name": w["decode"], "marker": {"color": COLORS["decode"]},
         "hovertemplate": f"{w['step']} %{{x}}<br>{w['decode']}: %{{y}}<extra></extra>"},
        {"type": "bar", "x": xs, "y": prefill, "name": w["prefill"], "marker": {"color": COLORS["prefill"]},
         "customdata": who, "hovertemplate": f"{w['step']} %{{x}}<br>{w['prefill']}: %{{y}}<br>%{{customdata}}"
                                             "<extra></extra>"},
    ]
    if run.chunk_budget is not None:
        data.append({"type": "scatter", "x": [xs[0] - 0.5, xs[-1] + 0.5], "y": [run.chunk_budget] * 2,
                     "mode": "lines", "name": f"{w['budget']} {run.chunk_budget}",
                     "line": {"color": COLORS["chosen"], "dash": "dash", "width": 2}, "hoverinfo": "skip"})
    xaxis: dict = {"title": {"text": w["step"]}}
    if len(xs) <= 24:
        xaxis["dtick"] = 1
    layout = theme.layout(title if title is not None else w["budget_title"], 300, xaxis=xaxis, barmode="stack",
                          yaxis={"title": {"text": w["tokens"]}, "rangemode": "tozero"})
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0}
    if step is not None:
        layout["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": step, "x1": step, "y0": 0, "y1": 1,
                             "line": {"color": "#000000", "width": 2}}]
    return {"data": data, "layout": layout}


def hits_spec(trace: PrefixTrace, upto: int | None = None, title: str | None = None,
              words: Mapping[str, str] | None = None) -> dict:
    """Per prompt, the positions found cached under block hashing and under the radix tree (grouped
    bars), the prompts after ``upto`` left empty (the stream has not reached them)."""
    w = theme.words(WORDS, words)
    n = len(trace.prompts) if upto is None else upto + 1
    xs = [f"{w['request']} {i}" for i in range(len(trace.prompts))]
    data = []
    for mode, color in (("hash", COLORS["bar"]), ("radix", COLORS["chosen"])):
        ys = [h if i < n else None for i, h in enumerate(trace.hits(mode))]
        data.append({"type": "bar", "x": xs, "y": ys, "name": w[f"hits_{mode}"], "marker": {"color": color},
                     "text": ys, "textposition": "outside",
                     "hovertemplate": f"{w[f'hits_{mode}']}<br>%{{x}}: %{{y}}<extra></extra>"})
    top = max(len(p) for p in trace.prompts)
    layout = theme.layout(title if title is not None else w["hits_title"], 320, barmode="group",
                          yaxis={"title": {"text": w["hits"]}, "range": [0, top * 1.15]})
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0}
    return {"data": data, "layout": layout}


def tree_spec(nodes: Sequence[tuple[int, int, int, str, int, bool]], title: str | None = None,
              words: Mapping[str, str] | None = None) -> dict:
    """A radix tree as a left-to-right drawing: ``nodes`` are (id, parent id or -1, depth, label,
    tokens on its edge, matched now). Leaves are spread top to bottom in order; an inner node sits
    at the middle of its children. The nodes the newest prompt matched are drawn in the focus colour."""
    w = theme.words(WORDS, words)
    children: dict[int, list[int]] = {}
    for nid, parent, *_ in nodes:
        children.setdefault(parent, []).append(nid)
    y: dict[int, float] = {}
    row = [0]

    def place(nid: int) -> float:
        kids = children.get(nid, [])
        if not kids:
            y[nid] = row[0]
            row[0] += 1
        else:
            ys = [place(k) for k in kids]
            y[nid] = sum(ys) / len(ys)
        return y[nid]

    for root in children.get(-1, []):
        place(root)
    by_id = {n[0]: n for n in nodes}
    edges_x: list[float | None] = []
    edges_y: list[float | None] = []
    for nid, parent, depth, *_ in nodes:
        if parent >= 0:
            edges_x += [by_id[parent][2], depth, None]
            edges_y += [y[parent], y[nid], None]
    data: list[dict] = [{"type": "scatter", "x": edges_x, "y": edges_y, "mode": "lines",
                         "line": {"color": COLORS["removed"], "width": 2}, "hoverinfo": "skip", "showlegend": False}]
    for matched, color in ((False, COLORS["prefill"]), (True, COLORS["chosen"])):
        pts = [n for n in nodes if n[5] == matched]
        data.append({"type": "scatter", "x": [n[2] for n in pts], "y": [y[n[0]] for n in pts],
                     "mode": "markers+text", "text": [n[3] for n in pts], "textposition": "middle right",
                     "marker": {"size": [8 + 2 * min(n[4], 12) for n in pts], "color": color},
                     "customdata": [n[4] for n in pts], "showlegend": False,
                     "hovertemplate": f"%{{text}}<br>%{{customdata}} {w['tokens_short']}<extra></extra>"})
    depth = max((n[2] for n in nodes), default=0)
    layout = theme.layout(title if title is not None else w["tree_title"], 120 + 26 * max(row[0], 1),
                          xaxis={"visible": False, "range": [-0.3, depth + 1.6]},
                          yaxis={"visible": False, "autorange": "reversed"})
    return {"data": data, "layout": layout}


__all__ = ["WORDS", "budget_spec", "hits_spec", "tree_spec"]
