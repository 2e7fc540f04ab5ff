"""Plotly builders for the sampling page: the stages of ``Sampler.stages`` in, figures out (no streamlit).

Every stage chart uses the same token order (most likely first at the input) and the same 0..1
probability axis, so moving from one chart to the next shows probability mass moving: kept tokens
are blue with a dark outline and a dashed box around the kept set; removed tokens are grey, drawn at
the probability they had just before they were removed.
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from kvviz.decoding.sampling import Stage
from kvviz.viz import theme
from kvviz.viz.theme import COLORS, FONT, OKABE_ITO

OUTLINE = "#0B3954"      # dark blue outline of kept bars and of the kept-set box
THRESHOLD = OKABE_ITO[3]  # reddish purple: the top-p line and the mass-before diamonds
MAX_LABELLED = 16        # bars with a number printed above them; more tokens: numbers on hover only


def display_order(stages: Sequence[Stage]) -> list[int]:
    """Token indices by descending input logit (ties by index, as the engine breaks them)."""
    first = stages[0].logits
    return sorted(range(len(first)), key=lambda i: -first[i])


def removed_heights(stages: Sequence[Stage]) -> list[list[float]]:
    """For every stage, each token's probability just before it was removed (0 if never possible).

    [stages][V]; entries of kept tokens are unused.
    """
    n = len(stages[0].probs)
    last = list(stages[0].probs)
    out = []
    for s in stages:
        for i in range(n):
            if i in s.kept:
                last[i] = s.probs[i]
        out.append(list(last))
    return out


def stage_bars(stage: Stage, ghost: Sequence[float], tokens: Sequence[str], order: Sequence[int],
               title: str, labels: dict[str, str], threshold: float | None = None, height: int = 330,
               digits: int = 3, axis_title: bool = True) -> go.Figure:
    """One stage: kept tokens blue and outlined, removed ones grey at ``ghost`` height.

    ``labels``: texts for "kept", "removed", "kept_set", "mass_before", "threshold" and the y "axis"
    (translated by the caller). ``threshold``: draw top-p's mass before each token and a line at p.
    ``height``: the figure's, in px; ``digits``: of the values printed above the bars (hover: 4);
    ``axis_title``: False leaves the y axis's title out (charts side by side on one scale: the first
    one's says it).
    """
    kept = set(stage.kept)
    xs = [tokens[i] for i in order]
    numbers = len(order) <= MAX_LABELLED      # beyond that, values only on hover (labels would overlap)
    traces = [
        go.Bar(x=xs, y=[stage.probs[i] if i in kept else None for i in order], name=labels["kept"],
               marker=dict(color=COLORS["bar"], line=dict(color=OUTLINE, width=2)),
               text=[f"{stage.probs[i]:.{digits}f}" if i in kept and numbers else "" for i in order],
               textposition="outside",
               textfont=dict(size=14), cliponaxis=False,
               hovertemplate="%{x}: p = %{y:.4f}<extra></extra>"),
        go.Bar(x=xs, y=[None if i in kept else ghost[i] for i in order], name=labels["removed"],
               marker=dict(color=COLORS["removed"], pattern=dict(shape="/", fgcolor="#888888")),
               text=["" if i in kept else "✕" for i in order], textposition="outside", textfont=dict(size=14),
               cliponaxis=False,
               hovertemplate="%{x}: " + labels["removed"] + " (p was %{y:.4f})<extra></extra>"),
    ]
    shapes, notes = [], []
    n_kept = len(kept)
    if n_kept and sorted(order.index(i) for i in kept) == list(range(n_kept)):
        # the kept set is a prefix of the order (always so for these filters): one dashed box around it
        top = min(1.15, max(stage.probs[i] for i in kept) + 0.13)
        shapes.append(dict(type="rect", x0=-0.45, x1=n_kept - 0.55, y0=0, y1=top,
                           line=dict(color=OUTLINE, width=2, dash="dash")))
        notes.append(dict(x=(n_kept - 1) / 2, y=top, text=labels["kept_set"], showarrow=False,
                          yanchor="bottom", font=dict(size=13, color=OUTLINE)))
    if threshold is not None and stage.mass_before is not None:
        # one diamond per token at the mass of the tokens before it: at or above the p line → dropped
        traces.append(go.Scatter(
            x=xs, y=[stage.mass_before[i] for i in order], mode="markers", name=labels["mass_before"],
            marker=dict(symbol="diamond", size=11, color=THRESHOLD, line=dict(color="white", width=1)),
            hovertemplate="%{x}: " + labels["mass_before"] + " %{y:.4f}<extra></extra>"))
        shapes.append(dict(type="line", xref="paper", x0=0, x1=1, y0=threshold, y1=threshold,
                           line=dict(color=THRESHOLD, dash="dot", width=2)))
        notes.append(dict(xref="paper", x=1, y=threshold, text=labels["threshold"], showarrow=False,
                          xanchor="right", yanchor="bottom", font=dict(size=13, color=THRESHOLD)))
    return go.Figure(traces, theme.layout(
        title, height, ticks=False, barmode="overlay", showlegend=False, bargap=0.25, shapes=shapes, annotations=notes,
        xaxis=dict(type="category", tickfont=FONT),
        yaxis=dict(title=labels.get("axis", "p") if axis_title else "", range=[0, 1.3],
                   tickvals=[0, 0.25, 0.5, 0.75, 1.0], tickfont=FONT)))


def draws_histogram(counts: Sequence[int], probs: Sequence[float], tokens: Sequence[str],
                    order: Sequence[int], title: str, labels: dict[str, str]) -> go.Figure:
    """Observed frequency of ``counts`` beside the expected probabilities, tokens in ``order``.

    ``labels``: "observed" and "expected" legend names, the y "axis" title.
    """
    n = sum(counts) or 1
    xs = [tokens[i] for i in order]
    numbers = len(order) <= MAX_LABELLED
    traces = [
        go.Bar(x=xs, y=[counts[i] / n for i in order], name=labels["observed"], marker_color=COLORS["focus"],
               text=[f"{counts[i]:,}" if numbers else "" for i in order], textposition="outside",
               textfont=dict(size=13),
               cliponaxis=False, customdata=[counts[i] for i in order],
               hovertemplate=f"%{{x}}: %{{customdata:,}} {labels.get('draws', 'draws')} (%{{y:.4f}})<extra></extra>"),
        go.Bar(x=xs, y=[probs[i] for i in order], name=labels["expected"],
               marker=dict(color="rgba(0,0,0,0)", line=dict(color=OUTLINE, width=2)),
               hovertemplate="%{x}: p = %{y:.4f}<extra></extra>"),
    ]
    return go.Figure(traces, theme.layout(
        title, 360, ticks=False, barmode="group", legend=theme.LEGEND_ABOVE,
        xaxis=dict(type="category", tickfont=FONT),
        yaxis=dict(title=labels.get("axis", "frequency"), range=[0, 1.15], tickfont=FONT)))
