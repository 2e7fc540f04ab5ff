"""Rotary positions (RoPE) of one cached key: its dimension pairs before and after the rotation, and
the angle each pair turns by at the key's position. Pure: numbers in, plotly JSON out."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go

from kvviz.viz import theme

WORDS = {"before": "before the rotation", "after": "after (cached)", "pair": "pair", "angle": "angle (radians)",
         "x": "dimension i", "y": "dimension i + d/2"}


def rope_pairs_spec(before: Sequence[float], after: Sequence[float], angles: Sequence[float], title: str,
                    words: Mapping[str, str] | None = None) -> dict:
    """Left: every dimension pair (i, i + d/2) of a key as a point, before the rotation (hollow)
    and after it (filled), joined by a line: each pair keeps its length and turns by its own angle.
    Right: that angle per pair, position · θ^(−2i/d), on a log axis (the first pairs turn fast, the
    last barely; at position 0 nothing turns and the axis is linear).

    before, after: [d] (the key before and after ``apply_rotary_pos_emb``); angles: [d/2]."""
    w = theme.words(WORDS, words)
    half = len(before) // 2
    xb, yb = list(before[:half]), list(before[half:])
    xa, ya = list(after[:half]), list(after[half:])
    line_x, line_y = [], []
    for i in range(half):
        line_x += [xb[i], xa[i], None]
        line_y += [yb[i], ya[i], None]
    pairs = [f"{w['pair']} {i + 1}" for i in range(half)]
    data = [
        {"type": "scatter", "x": line_x, "y": line_y, "mode": "lines", "line": {"color": "#BBBBBB", "width": 1},
         "hoverinfo": "skip", "showlegend": False, "xaxis": "x", "yaxis": "y"},
        {"type": "scatter", "x": xb, "y": yb, "mode": "markers", "name": w["before"], "text": pairs,
         "marker": {"symbol": "circle-open", "size": 9, "color": theme.COLORS["prompt"]},
         "hovertemplate": "%{text}: (%{x:.3f}, %{y:.3f})<extra></extra>", "xaxis": "x", "yaxis": "y"},
        {"type": "scatter", "x": xa, "y": ya, "mode": "markers", "name": w["after"], "text": pairs,
         "marker": {"size": 8, "color": theme.COLORS["focus"]},
         "hovertemplate": "%{text}: (%{x:.3f}, %{y:.3f})<extra></extra>", "xaxis": "x", "yaxis": "y"},
        {"type": "bar", "x": list(range(1, half + 1)), "y": [float(a) for a in angles], "name": w["angle"],
         "marker": {"color": theme.COLORS["bar"]}, "showlegend": False, "xaxis": "x2", "yaxis": "y2",
         "hovertemplate": f"{w['pair']} %{{x}}: %{{y:.4g}}<extra></extra>"},
    ]
    turning = any(float(a) > 0 for a in angles)
    layout = theme.layout(title, 430, ticks=False, legend=dict(theme.LEGEND_ABOVE), top=80,
                          xaxis={"domain": [0, 0.45], "title": {"text": w["x"]}, "tickfont": dict(theme.FONT),
                                 "zeroline": True},
                          yaxis={"title": {"text": w["y"]}, "tickfont": dict(theme.FONT), "zeroline": True,
                                 "scaleanchor": "x"})
    layout["xaxis2"] = {"domain": [0.58, 1], "title": {"text": w["pair"]}, "tickfont": dict(theme.FONT), "anchor": "y2"}
    layout["yaxis2"] = {"title": {"text": w["angle"]}, "tickfont": dict(theme.FONT), "anchor": "x2",
                        "type": "log" if turning else "linear"}
    return {"data": data, "layout": layout}


def rope_pairs(*args, **kwargs) -> go.Figure:
    """``rope_pairs_spec`` as a figure (same arguments)."""
    return go.Figure(rope_pairs_spec(*args, **kwargs))
