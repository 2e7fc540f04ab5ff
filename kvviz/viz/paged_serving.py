"""Figures of serving as engines run it now (kvviz.serving, kvviz.cache.radix): each step's token
budget and what filled it (chunked prefill), block hashing against a radix tree on one stream of
prompts, the bytes a disaggregated run ships, and the stall a long prompt causes among running decodes
(each token's measured time, with and without a budget). Pure: records in, plotly JSON dicts out."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from kvviz.cache.radix import PrefixTrace
from kvviz.serving import ServeRun
from kvviz.serving.stall import StallRun
from kvviz.viz import theme
from kvviz.viz.theme import COLORS

WORDS = {
    "step": "step", "tokens": "tokens in the pass", "decode": "decode (1 token each)", "prefill": "prompt chunks",
    "budget": "budget", "unused": "unused", "request": "request", "budget_title": "Each step's token budget",
    "prompt": "prompt", "hits_hash": "block hashing", "hits_radix": "radix tree", "hits": "positions found cached",
    "held": "held", "hits_title": "Prefix hits per request", "node": "node", "tokens_short": "tokens",
    "last_used": "last used at request", "tree_title": "The radix tree", "root": "root",
}
# the stall's and the shipped cache's words (their own locale keys: stall.fw_<key>)
STALL_WORDS = {
    "stall_title": "When each request's tokens came", "whole": "whole prompt", "long": "long prompt",
    "time": "time since the start", "ttft": "TTFT",
    "largest_gap": "largest gap", "gap": "gap before", "ms": "ms", "s": "s",
    "ship_title": "Time to ship one request's cache", "seconds": "seconds (log scale)",
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
                     "line": {"color": COLORS["focus"], "dash": "dash", "width": 2}, "hoverinfo": "skip"})
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
    for mode, color in (("hash", COLORS["bar"]), ("radix", COLORS["focus"])):
        ys = [h if i < n else None for i, h in enumerate(trace.hits(mode))]
        data.append({"type": "bar", "x": xs, "y": ys, "name": w[f"hits_{mode}"], "marker": {"color": color},
                     "text": ys, "textposition": "outside",
                     "hovertemplate": f"{w[f'hits_{mode}']}<br>%{{x}}: %{{y}}<extra></extra>"})
    top = max(len(p) for p in trace.prompts)
    layout = theme.layout(title if title is not None else w["hits_title"], 320, barmode="group",
                          yaxis={"range": [0, top * 1.15], "nticks": 4})   # the title names the axis:
    # no axis title to cut where a projector's fitted step leaves the side chart short
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
    for matched, color in ((False, COLORS["prefill"]), (True, COLORS["focus"])):
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


MS_BELOW_S = 2.0        # a stall run whose last token came within this many seconds is written in ms


def stall_end_s(run: StallRun) -> float:
    """When the run's last token came (seconds from its start)."""
    return max((r.token_s[-1] for st in run.settings for r in st.requests), default=0.0)


def stall_in_ms(run: StallRun) -> bool:
    """The stall view's unit, for its chart and its notice alike: ms when the run's last token came
    within MS_BELOW_S seconds, else s."""
    return stall_end_s(run) < MS_BELOW_S


def stall_spec(run: StallRun, title: str | None = None, words: Mapping[str, str] | None = None,
               decimal: Callable[[float, int], str] | None = None) -> dict:
    """One strip per setting (whole prompts, then each budget), one row per request: a dot at the
    measured end of the pass that chose each of its tokens, a dotted line at the long prompt's
    arrival and a dashed one from there to its first token (its TTFT). A whole prompt's pass shows
    as a hole in every running request's dots; a budget spreads it into small ones. The strip's
    heading names its largest gap among the running requests and the long prompt's TTFT.
    ``decimal(x, digits)`` writes a number of the headings (the page's language; English by default)."""
    w = theme.words({**WORDS, **STALL_WORDS}, words)
    end = stall_end_s(run)
    scale, unit = (1e3, w["ms"]) if stall_in_ms(run) else (1.0, w["s"])

    write = decimal or (lambda x, d: f"{x:,.{d}f}")

    def num(x: float) -> str:
        return write(x * scale, 1) if scale > 1 or x < 10 else write(x, 0)

    n = len(run.settings)
    gap_px, row_px = 26, 20                  # a projector's 720 px: three strips of four rows fit
    rows = max(len(st.requests) for st in run.settings)
    band = rows * row_px
    plot = n * band + (n - 1) * gap_px
    layout = theme.layout(title if title is not None else w["stall_title"], plot + 92, top=62)
    layout["margin"] = {**layout["margin"], "b": 30}
    layout["showlegend"] = False
    data: list[dict] = []
    shapes: list[dict] = []
    notes: list[dict] = []
    for i, st in enumerate(run.settings):
        top = 1 - i * (band + gap_px) / plot
        dom = [max(0.0, top - band / plot), top]
        ax = "" if i == 0 else str(i + 1)
        yname, xname = f"y{ax}", f"x{ax}"
        labels = [f"{w['long'] if r.long else w['request'] + ' ' + str(r.id)}" for r in st.requests]
        layout[f"yaxis{ax}"] = {"domain": dom, "anchor": xname, "type": "category", "categoryorder": "array",
                                "categoryarray": labels[::-1], "tickfont": {"size": 13}, "fixedrange": True}
        layout[f"xaxis{ax}"] = {"anchor": yname, "range": [0, end * scale * 1.03], "tickfont": dict(theme.FONT),
                                "showticklabels": i == n - 1, "fixedrange": True,
                                "ticksuffix": f" {unit}", **({"matches": "x"} if i else {})}
        long = st.long
        for r, label in zip(st.requests, labels):
            color = COLORS["prefill"] if r.long else COLORS["decode"]
            gaps = [None, *[g * scale for g in r.gaps_s]]     # numbers: plotly writes them in the page's language
            data.append({"type": "scatter", "x": [t * scale for t in r.token_s], "y": [label] * len(r.token_s),
                         "xaxis": xname, "yaxis": yname, "mode": "markers",
                         "marker": {"size": 10, "color": color, "line": {"color": "#FFFFFF", "width": 1}},
                         "customdata": gaps,
                         "hovertemplate": f"{label}<br>{w['time']}: %{{x:.1f}} {unit}<br>"
                                          f"{w['gap']}: %{{customdata:.1f}} {unit}<extra></extra>"})
        data.append({"type": "scatter", "x": [long.arrival_s * scale, long.token_s[0] * scale],
                     "y": [labels[-1]] * 2, "xaxis": xname, "yaxis": yname, "mode": "lines",
                     "line": {"color": COLORS["prefill"], "dash": "dash", "width": 2}, "hoverinfo": "skip"})
        shapes.append({"type": "line", "xref": xname, "yref": f"{yname} domain", "x0": long.arrival_s * scale,
                       "x1": long.arrival_s * scale, "y0": 0, "y1": 1,
                       "line": {"color": COLORS["focus"], "dash": "dot", "width": 2}})
        name = w["whole"] if st.chunk_budget is None else f"{w['budget']} {st.chunk_budget}"
        notes.append({"xref": "paper", "yref": "paper", "x": 0, "y": top, "yanchor": "bottom", "xanchor": "left",
                      "showarrow": False, "font": {"size": 14},
                      "text": f"<b>{name}</b>: {w['largest_gap']} {num(st.short_max_gap_s)} {unit} · "
                              f"{w['long']} {w['ttft']} {num(long.ttft_s)} {unit}"})
    layout["shapes"] = shapes
    layout["annotations"] = notes
    return {"data": data, "layout": layout}


def disagg_spec(rows: Sequence[tuple[str, str, float]], title: str | None = None,
                words: Mapping[str, str] | None = None) -> dict:
    """Seconds to ship one request's cache: ``rows`` are (model, link, seconds), one horizontal bar
    per link, grouped by model, on a log axis (a socket here and NVLink differ by orders of magnitude)."""
    w = theme.words(STALL_WORDS, words)
    links = list(dict.fromkeys(link for _, link, _ in rows))
    data = []
    for i, name in enumerate(dict.fromkeys(m for m, _, _ in rows)):
        got = {link: sec for m, link, sec in rows if m == name}
        ys = [link for link in links if link in got]
        xs = [got[link] for link in ys]
        data.append({"type": "bar", "orientation": "h", "x": xs, "y": ys, "name": name,
                     "marker": {"color": theme.OKABE_ITO[i % len(theme.OKABE_ITO)]},
                     "hovertemplate": f"{name}<br>%{{y}}: %{{x:.3g}} s<extra></extra>"})
    layout = theme.layout(title if title is not None else w["ship_title"], 150 + 34 * len(links) * max(len(data), 1),
                          barmode="group", xaxis={"type": "log", "title": {"text": w["seconds"]}},
                          yaxis={"autorange": "reversed", "automargin": True})
    layout["legend"] = {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0, "font": dict(theme.FONT)}
    layout["margin"] = {**layout["margin"], "t": 90}
    return {"data": data, "layout": layout}


__all__ = ["STALL_WORDS", "WORDS", "budget_spec", "disagg_spec", "hits_spec", "stall_spec", "tree_spec"]
