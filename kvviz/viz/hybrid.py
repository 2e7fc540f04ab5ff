"""A hybrid cache (sliding-window and global layers) on a run's own numbers: each layer's rows held
as the text grows, and the cache's bytes against the formula and an all-global cache. Pure:
numbers in, plotly JSON out (the page reads them from the engine's records)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from kvviz.viz import theme

WORDS = {"x": "positions processed", "y": "rows held", "global": "global layers", "sliding": "sliding layers",
         "layer": "layer", "measured": "measured", "formula": "formula", "all_global": "every layer global",
         "bytes": "bytes", "head": "head", "far": "weight beyond the windows"}


def _positions_axis(title: str) -> dict:
    """Positions from 0, whole numbers only (a short run's axis would otherwise tick at 8.5)."""
    return {"title": {"text": title}, "tickfont": dict(theme.FONT), "rangemode": "tozero", "tickformat": ",d"}


def cache_lengths_spec(positions: Sequence[int], lengths: Sequence[Sequence[int]], windows: Sequence[int | None],
                       title: str, words: Mapping[str, str] | None = None) -> dict:
    """One line per layer: the rows its cache holds after each event (``lengths[event][layer]``)
    against the positions processed; global layers in one colour, sliding ones in another, each
    kind named once in the legend (a sliding layer's line goes flat at its window − 1)."""
    w = theme.words(WORDS, words)
    data, named = [], set()
    for i, window in enumerate(windows):
        kind = "global" if window is None else "sliding"
        data.append({"type": "scatter", "x": list(positions), "y": [int(row[i]) for row in lengths],
                     "mode": "lines+markers", "name": w[kind], "legendgroup": kind, "showlegend": kind not in named,
                     "line": {"color": theme.OKABE_ITO[0 if window is None else 1],
                              "width": 3 if window is None else 1.5, "dash": "solid" if window is None else "dot"},
                     "marker": {"size": 5},
                     "hovertemplate": f"{w['layer']} {i + 1} ({w[kind]}): %{{y}} / %{{x}}<extra></extra>"})
        named.add(kind)
    layout = theme.layout(title, 380, legend=dict(theme.LEGEND_ABOVE), top=80,
                          xaxis=_positions_axis(w["x"]),
                          yaxis={"title": {"text": w["y"]}, "tickfont": dict(theme.FONT), "rangemode": "tozero"})
    return {"data": data, "layout": layout}


def cache_bytes_spec(positions: Sequence[int], measured: Sequence[int], formula: Sequence[int],
                     all_global: Sequence[int], title: str, words: Mapping[str, str] | None = None) -> dict:
    """The cache's bytes after each event: measured on the tensors (markers), the hybrid formula
    (a line under them) and the all-global cache of the same shape (dashed)."""
    w = theme.words(WORDS, words)
    x = list(positions)
    data = [
        {"type": "scatter", "x": x, "y": list(all_global), "mode": "lines", "name": w["all_global"],
         "line": {"color": theme.OKABE_ITO[5], "dash": "dash", "width": 2},
         "hovertemplate": f"{w['all_global']}: %{{y:,}} B<extra></extra>"},
        {"type": "scatter", "x": x, "y": list(formula), "mode": "lines", "name": w["formula"],
         "line": {"color": theme.OKABE_ITO[0], "width": 3},
         "hovertemplate": f"{w['formula']}: %{{y:,}} B<extra></extra>"},
        {"type": "scatter", "x": x, "y": list(measured), "mode": "markers", "name": w["measured"],
         "marker": {"color": theme.OKABE_ITO[1], "size": 8, "symbol": "circle-open"},
         "hovertemplate": f"{w['measured']}: %{{y:,}} B<extra></extra>"},
    ]
    layout = theme.layout(title, 380, legend=dict(theme.LEGEND_ABOVE), top=80,
                          xaxis=_positions_axis(w["x"]),
                          yaxis={"title": {"text": w["bytes"]}, "tickfont": dict(theme.FONT), "rangemode": "tozero"})
    return {"data": data, "layout": layout}


def far_weights_spec(weights: Sequence[Sequence[float]], windows: Sequence[int | None], title: str,
                     words: Mapping[str, str] | None = None) -> dict:
    """``weights[layer][head]``: the newest query's attention on the positions beyond every sliding
    window (kvviz.cache.hybrid.far_reach), one marker per head over its layer, global layers in one
    colour and sliding ones (0: their mask hides those positions) in another."""
    w = theme.words(WORDS, words)
    data = []
    for kind in ("global", "sliding"):
        xs, ys, heads = [], [], []
        for i, (row, window) in enumerate(zip(weights, windows)):
            if (window is None) == (kind == "global"):
                xs += [i + 1] * len(row)
                ys += [float(v) for v in row]
                heads += list(range(1, len(row) + 1))
        if xs:
            data.append({"type": "scatter", "x": xs, "y": ys, "customdata": heads, "mode": "markers",
                         "name": w[kind], "marker": {"color": theme.OKABE_ITO[0 if kind == "global" else 1],
                                                     "size": 12 if kind == "global" else 8,
                                                     "symbol": "circle" if kind == "global" else "diamond-open"},
                         "hovertemplate": f"{w['layer']} %{{x}}, {w['head']} %{{customdata}}: "
                                          "%{y:.3f}<extra></extra>"})
    layout = theme.layout(title, 360, legend=dict(theme.LEGEND_ABOVE), top=80,
                          xaxis={"title": {"text": w["layer"]}, "tickfont": dict(theme.FONT), "dtick": 1},
                          yaxis={"title": {"text": w["far"]}, "tickfont": dict(theme.FONT), "rangemode": "tozero"})
    return {"data": data, "layout": layout}


def far_weights(*args, **kwargs) -> go.Figure:
    """``far_weights_spec`` as a figure."""
    return go.Figure(far_weights_spec(*args, **kwargs))


def cache_lengths(*args, **kwargs) -> go.Figure:
    """``cache_lengths_spec`` as a figure."""
    return go.Figure(cache_lengths_spec(*args, **kwargs))


def cache_bytes(*args, **kwargs) -> go.Figure:
    """``cache_bytes_spec`` as a figure."""
    return go.Figure(cache_bytes_spec(*args, **kwargs))
