"""The long tail's figure: cumulative probability against rank, one line per context, with where a
fixed top-k and each context's top-p set end (kvviz.decoding.tail). Words come in through ``labels``."""
from __future__ import annotations

import math
from collections.abc import Mapping

import plotly.graph_objects as go

from kvviz.decoding.tail import Tail
from kvviz.viz import theme
from kvviz.viz.theme import OKABE_ITO


def cumulative_chart(tails: Mapping[str, Tail], labels: Mapping[str, str], max_rank: int = 5_000) -> go.Figure:
    """x: rank (log scale, 1 = most likely), y: the mass of the tokens up to that rank. A marker on each
    line where its top-p set ends; a dashed vertical line at k (the same for every context)."""
    fig = go.Figure()
    k = next(iter(tails.values())).k
    for i, (name, tail) in enumerate(tails.items()):
        n = min(max_rank, tail.vocab)
        ys = tail.probs[tail.order[:n]].cumsum(0).tolist()
        color = OKABE_ITO[i % len(OKABE_ITO)]
        fig.add_trace(go.Scatter(x=list(range(1, n + 1)), y=ys, mode="lines", name=name,
                                 line=dict(color=color, width=3),
                                 hovertemplate=labels["hover"] + "<extra>%{fullData.name}</extra>"))
        fig.add_trace(go.Scatter(x=[tail.top_p_size], y=[tail.mass(tail.top_p_size)], mode="markers",
                                 marker=dict(color=color, size=12, symbol="diamond"), showlegend=False,
                                 name=labels["top_p"], hovertemplate=labels["top_p"] + ": %{x}<extra></extra>"))
    fig.add_vline(x=k, line=dict(color="#555555", dash="dash", width=2))
    # a log axis places annotations by log10 of the value (as kvviz/viz/cost.py's lines)
    fig.add_annotation(x=math.log10(k), xref="x", y=1.0, yref="y", text=labels["k"], showarrow=False,
                       xanchor="left", yanchor="bottom", font=dict(size=14, color="#555555"))
    fig.update_xaxes(title=labels["x"], type="log")
    fig.update_yaxes(title=labels["y"], range=[0, 1.05])
    return theme.style(fig, labels["title"], height=380)
