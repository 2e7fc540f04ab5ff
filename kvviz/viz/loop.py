"""The loop's figures (kvviz.decoding.one_word, kvviz.decoding.whole_run): two next-token
distributions side by side, and a run's attention as one matrix that gains a row per decode pass.
Plain data in, a figure out; words come in through ``labels``."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from kvviz.decoding.whole_run import WholeRun
from kvviz.viz import theme
from kvviz.viz.theme import ATTENTION_SCALE, COLORS, OKABE_ITO


def next_token_bars(dists: Mapping[str, Sequence[tuple[str, float, str]]], labels: Mapping[str, str]) -> go.Figure:
    """One panel per prompt (its name the panel's title): its most likely next tokens as horizontal
    bars, the most likely at the top, each as (token, probability, the probability as the page writes
    it). A token both panels list is drawn in the same colour."""
    shared = set.intersection(*(set(row[0] for row in d) for d in dists.values()))
    fig = make_subplots(rows=1, cols=len(dists), subplot_titles=list(dists), horizontal_spacing=0.12)
    for c, (name, rows) in enumerate(dists.items(), start=1):
        toks = [row[0] for row in rows]
        fig.add_trace(go.Bar(x=[row[1] for row in rows], y=toks, orientation="h", name=name, showlegend=False,
                             marker_color=[OKABE_ITO[0] if tok in shared else OKABE_ITO[1] for tok in toks],
                             text=[row[2] for row in rows], textposition="outside", cliponaxis=False,
                             hovertemplate=labels["hover"] + "<extra></extra>"), row=1, col=c)
        fig.update_yaxes(autorange="reversed", type="category", row=1, col=c)
        top = max((row[1] for row in rows), default=0.0)
        # room for the labels right of the longest bar inside the plot (outside it they ran into the title)
        fig.update_xaxes(title=labels["x"], tickformat=".0%", range=[0, top * 1.35 or 1], row=1, col=c)
    return theme.style(fig, labels["title"], height=140 + 34 * max(len(r) for r in dists.values()))


def whole_run_figure(w: WholeRun, rows: int, labels: Mapping[str, str]) -> go.Figure:
    """The first ``rows`` rows of the matrix (the passes run so far): row p over the key columns
    0..p, the future blank. A line under the prompt's rows (the prefill), the newest row outlined,
    and the columns it reads bracketed as the cached K/V."""
    T = len(w.tokens)
    rows = max(1, min(rows, T))
    names = [f"{i}: {theme.plain(tok)}" for i, tok in enumerate(w.tokens)]
    z = [[float(w.weights[p, j]) if j <= p else None for j in range(T)] for p in range(rows)]
    fig = go.Figure(go.Heatmap(z=z, x=names, y=names[:rows], zmin=0.0, zmax=1.0, colorscale=ATTENTION_SCALE,
                               colorbar={"title": {"text": labels["weight"]}}, xgap=1, ygap=1,
                               hovertemplate=labels["hover"] + "<extra></extra>"))
    shapes = []
    if rows > w.prompt_len:
        shapes.append(dict(type="line", xref="x", yref="y", x0=-0.5, x1=T - 0.5, y0=w.prompt_len - 0.5,
                           y1=w.prompt_len - 0.5, line=dict(color=COLORS["focus"], width=3, dash="dash")))
    last = rows - 1
    shapes.append(dict(type="rect", xref="x", yref="y", x0=-0.5, x1=last + 0.5, y0=last - 0.5, y1=last + 0.5,
                       line=dict(color=COLORS["focus"], width=3)))
    fig.update_layout(shapes=shapes)
    fig.add_annotation(x=last / 2, y=-0.5, xref="x", yref="y", text=labels["cached"], showarrow=False,
                       yanchor="bottom", font=dict(size=15))
    fig.update_xaxes(title=labels["x"], tickangle=-45, side="bottom")
    fig.update_yaxes(title=labels["y"], autorange="reversed")
    return theme.style(fig, labels["title"], height=min(720, max(320, 160 + 22 * rows)))
