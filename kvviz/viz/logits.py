"""Bar charts of one choice: the logits a step produced and the most probable next tokens (``*_spec``
twins as in kvviz.viz.attention).

``chosen`` is the token a choose event picked, drawn in the "choice" colour (docs/colours.md); a
prefill or decode pass has chosen nothing yet, so its callers pass None and no bar is marked (the
tallest bar says which token is most likely without a colour)."""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvviz.viz import theme
from kvviz.viz.theme import COLORS


def logits_bar_spec(logits: Sequence[float], tokens: Sequence[str], chosen: int | None,
                    title: str, kept: Sequence[int] | None = None) -> dict:
    """Bars of logits; the chosen token (a choose event's, else None) in the choice colour, tokens
    outside ``kept`` greyed."""
    colors = []
    for i in range(len(tokens)):
        if kept is not None and i not in kept:
            colors.append(COLORS["removed"])
        elif i == chosen:
            colors.append(COLORS["choice"])
        else:
            colors.append(COLORS["bar"])
    logits = [float(v) for v in logits]
    lo, hi = min(0.0, min(logits)), max(0.0, max(logits))
    pad = 0.2 * (hi - lo or 1.0)
    trace = {"type": "bar", "x": list(tokens), "y": logits, "marker": {"color": colors},
             "text": [f"{v:.3f}" for v in logits], "textposition": "outside", "textfont": {"size": 15},
             "cliponaxis": False,     # a short chart (presenter mode) keeps the top bar's number whole
             "hovertemplate": "%{x}: logit %{y:.4f}<extra></extra>"}
    return {"data": [trace], "layout": theme.layout(
        # at most 4 ticks: presenter mode fits this chart to 90 px of plot, where plotly's own 5 touched
        title, 340, yaxis={"title": {"text": "logit"}, "range": [lo - pad, hi + pad], "zeroline": True, "nticks": 4})}


def logits_bar(*args, **kwargs) -> go.Figure:
    """``logits_bar_spec`` as a figure (same arguments)."""
    return go.Figure(logits_bar_spec(*args, **kwargs))


def top_probs_bar_spec(probs: Sequence[float], tokens: Sequence[str], chosen: int | None, title: str,
                       k: int = 10, axis_title: str = "probability") -> dict:
    """Horizontal bars of the ``k`` most probable tokens (largest on top); the chosen one (a choose
    event's, else None) in the choice colour even when it is outside the top k (then it is added as
    an extra bar)."""
    probs = [float(p) for p in probs]
    order = sorted(range(len(probs)), key=lambda i: -probs[i])[:k]
    if chosen is not None and chosen not in order:
        order.append(chosen)
    order = order[::-1]                                          # plotly draws the first bar at the bottom
    colors = [COLORS["choice"] if i == chosen else COLORS["bar"] for i in order]
    trace = {"type": "bar", "y": [tokens[i] for i in order], "x": [probs[i] for i in order], "orientation": "h",
             "marker": {"color": colors}, "text": [f"{probs[i]:.3f}" for i in order], "textposition": "outside",
             "textfont": {"size": 15}, "hovertemplate": "%{y}: p = %{x:.4f}<extra></extra>"}
    top = max(probs[i] for i in order) if order else 1.0
    # room right of the longest bar for its value (past 1 when a bar is near 1; no tick there)
    xaxis = {"title": {"text": axis_title}, "range": [0, top * 1.3 or 1.0]}
    if top * 1.3 > 1:
        xaxis["tickvals"] = [0, 0.2, 0.4, 0.6, 0.8, 1]
    layout = theme.layout(title, 120 + 30 * len(order), xaxis=xaxis, yaxis={"type": "category"})
    return {"data": [trace], "layout": layout}


def top_probs_bar(*args, **kwargs) -> go.Figure:
    """``top_probs_bar_spec`` as a figure (same arguments)."""
    return go.Figure(top_probs_bar_spec(*args, **kwargs))
