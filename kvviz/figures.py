"""Plotly figure builders: plain data from a step record in, a figure out (no streamlit).

One visual language for every page: a colour-blind-safe sequential scale for attention (cividis)
and fixed colours for prompt / processed / pending tokens and for prefill / decode rows
(Okabe-Ito palette).

The builders the stepper draws in the browser each have a ``*_spec`` twin that returns the figure as
plain plotly JSON (``{"data": [...], "layout": {...}}``) without building a validated
``go.Figure`` (about ten times cheaper); the builder itself is ``go.Figure(spec)``, so both always
agree and plotly validates every spec whenever the builder runs (tests do).
"""
from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
import torch

ATTENTION_SCALE = "Cividis"
COLORS = {
    "prompt": "#0072B2",      # blue
    "processed": "#009E73",   # green
    "pending": "#E69F00",     # orange
    "prefill": "#0072B2",
    "decode": "#009E73",
    "removed": "#BBBBBB",
    "bar": "#56B4E9",
    "chosen": "#D55E00",      # vermillion
}
FONT = dict(size=16)

# Words drawn inside figures; pages pass their translation (kvviz.ui.charts.figure_words).
WORDS = {"query": "query", "key": "key", "weight": "weight", "logit": "logit",
         "query_axis": "query (new position)", "key_axis": "key (cached position)"}


def _words(words: dict[str, str] | None) -> dict[str, str]:
    return {**WORDS, **(words or {})}


def _layout(title: str, height: int, xaxis: dict | None = None, yaxis: dict | None = None, **extra) -> dict:
    """``_base_layout`` as plain JSON for one x and one y axis."""
    return {"title": {"text": title, "font": {"size": 18}}, "height": height,
            "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": dict(FONT),
            "xaxis": {"tickfont": dict(FONT), **(xaxis or {})}, "yaxis": {"tickfont": dict(FONT), **(yaxis or {})},
            **extra}


def _base_layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(title=dict(text=title, font=dict(size=18)), height=height,
                      margin=dict(l=10, r=10, t=50, b=10), font=FONT)
    fig.update_xaxes(tickfont=FONT)
    fig.update_yaxes(tickfont=FONT)
    return fig


def _masked_cells(weights: torch.Tensor, digits: int = 3,
                  allowed: torch.Tensor | None = None) -> tuple[list[list[float | None]], list[list[str]]]:
    """weights [N queries, T keys], the queries being the last N positions: z with future keys
    blanked (None) and the cell texts. ``allowed`` [N, T] (optional) replaces the causal triangle,
    e.g. for a batch whose padding columns are masked too."""
    n, t = weights.shape
    z = weights.tolist()
    first_q = t - n  # absolute position of the first query
    text = []
    for i in range(n):
        row = []
        for j in range(t):
            if (j > first_q + i) if allowed is None else not bool(allowed[i, j]):
                z[i][j] = None  # future key: masked
                row.append("")
            else:
                row.append(f"{z[i][j]:.{digits}f}")
        text.append(row)
    return z, text


def attention_heatmap_spec(weights: torch.Tensor, query_labels: Sequence[str], key_labels: Sequence[str],
                           title: str, zmax: float = 1.0, show_scale: bool = True,
                           allowed: torch.Tensor | None = None, words: dict[str, str] | None = None,
                           show_values: bool | None = None) -> dict:
    """weights: [N queries, T keys] after the causal mask; masked cells (exact 0 above the diagonal)
    are left blank so the triangle of the causal mask is visible (``allowed``: see _masked_cells).
    ``words``: translations of WORDS. Cell values are printed when ``show_values`` (default: only
    while they fit, up to 16 keys); hovering always shows them."""
    w = _words(words)
    n, t = weights.shape
    z, text = _masked_cells(weights, allowed=allowed)
    if not (t <= 16 if show_values is None else show_values):
        text = [["" for _ in row] for row in text]
    trace = {"type": "heatmap", "z": z, "x": list(key_labels), "y": list(query_labels), "zmin": 0.0, "zmax": zmax,
             "colorscale": ATTENTION_SCALE, "showscale": show_scale, "text": text, "texttemplate": "%{text}",
             "textfont": {"size": 15}, "xgap": 2, "ygap": 2,
             "hovertemplate": f"{w['query']} %{{y}}<br>{w['key']} %{{x}}<br>{w['weight']} %{{z:.4f}}<extra></extra>",
             "colorbar": {"title": {"text": w["weight"]}}}
    return {"data": [trace], "layout": _layout(
        title, max(260, 140 + 45 * n), xaxis={"title": {"text": w["key_axis"]}, "side": "bottom"},
        yaxis={"autorange": "reversed", "title": {"text": w["query_axis"]}})}


def attention_heatmap(*args, **kwargs) -> go.Figure:
    """``attention_heatmap_spec`` as a figure (same arguments)."""
    return go.Figure(attention_heatmap_spec(*args, **kwargs))


def logits_bar_spec(logits: Sequence[float], tokens: Sequence[str], chosen: int | None,
                    title: str, kept: Sequence[int] | None = None) -> dict:
    """Bars of logits; the chosen token highlighted, tokens outside ``kept`` greyed."""
    colors = []
    for i in range(len(tokens)):
        if kept is not None and i not in kept:
            colors.append(COLORS["removed"])
        elif i == chosen:
            colors.append(COLORS["chosen"])
        else:
            colors.append(COLORS["bar"])
    logits = [float(v) for v in logits]
    lo, hi = min(0.0, min(logits)), max(0.0, max(logits))
    pad = 0.2 * (hi - lo or 1.0)
    trace = {"type": "bar", "x": list(tokens), "y": logits, "marker": {"color": colors},
             "text": [f"{v:.3f}" for v in logits], "textposition": "outside", "textfont": {"size": 15},
             "cliponaxis": False,     # a short chart (presenter mode) keeps the top bar's number whole
             "hovertemplate": "%{x}: logit %{y:.4f}<extra></extra>"}
    return {"data": [trace], "layout": _layout(
        title, 340, yaxis={"title": {"text": "logit"}, "range": [lo - pad, hi + pad], "zeroline": True})}


def logits_bar(*args, **kwargs) -> go.Figure:
    """``logits_bar_spec`` as a figure (same arguments)."""
    return go.Figure(logits_bar_spec(*args, **kwargs))


def attention_heads_spec(weights: torch.Tensor, query_labels: Sequence[str], key_labels: Sequence[str],
                         head_titles: Sequence[str], title: str, max_text_keys: int = 5,
                         words: dict[str, str] | None = None) -> dict:
    """One heatmap per head, side by side, on one shared colour scale (0..1).

    weights: [H, N queries, T keys] after the causal mask; future keys are left blank, as in
    ``attention_heatmap``. Cell texts are drawn while there are at most ``max_text_keys`` keys
    (beyond that they would overlap); the exact weight is always on hover.

    The subplot layout is written out (x axes side by side, y axes sharing the first one):
    make_subplots plus per-axis updates cost several times more.
    """
    w = _words(words)
    h, n, t = weights.shape
    gap = 0.025
    width = (1.0 - gap * (h - 1)) / h
    traces, layout = [], {}
    annotations = []
    for i in range(h):
        z, text = _masked_cells(weights[i], digits=2)    # narrow panels: 0.50, exact value on hover
        show_text = t <= max_text_keys                   # else no texts at all: less to send
        sfx = "" if i == 0 else str(i + 1)
        trace = {"type": "heatmap", "z": z, "x": list(key_labels), "y": list(query_labels), "coloraxis": "coloraxis",
                 "name": head_titles[i], "textfont": {"size": 13}, "xgap": 2, "ygap": 2,
                 "xaxis": f"x{sfx}", "yaxis": f"y{sfx}",
                 "hovertemplate": (f"{head_titles[i]}<br>{w['query']} %{{y}}<br>{w['key']} %{{x}}<br>"
                                   f"{w['weight']} %{{z:.4g}}<extra></extra>")}
        if show_text:
            trace.update(text=text, texttemplate="%{text}")
        traces.append(trace)
        x0 = i * (width + gap)
        # narrow panels: slanted labels while few, upright beyond (slanted ones would run into the
        # neighbouring panel)
        layout[f"xaxis{sfx}"] = {"domain": [x0, x0 + width], "anchor": f"y{sfx}", "tickangle": -40 if t <= 4 else -90,
                                 "automargin": True, "tickfont": {"size": 13}}
        layout[f"yaxis{sfx}"] = {"anchor": f"x{sfx}", "autorange": "reversed", "tickfont": {"size": 13},
                                 **({"title": {"text": w["query"]}} if i == 0 else {"matches": "y", "showticklabels": False})}
        annotations.append({"text": head_titles[i], "x": x0 + width / 2, "y": 1.0, "xref": "paper", "yref": "paper",
                            "xanchor": "center", "yanchor": "bottom", "showarrow": False, "font": {"size": 15}})
    return {"data": traces, "layout": {
        **layout, "annotations": annotations,
        "coloraxis": {"colorscale": ATTENTION_SCALE, "cmin": 0.0, "cmax": 1.0,
                      "colorbar": {"title": {"text": w["weight"]}, "thickness": 14}},
        "title": {"text": title, "font": {"size": 18}}, "height": max(250, 170 + 42 * n),
        "margin": {"l": 10, "r": 10, "t": 50, "b": 10}, "font": dict(FONT)}}


def attention_heads_figure(*args, **kwargs) -> go.Figure:
    """``attention_heads_spec`` as a figure (same arguments)."""
    return go.Figure(attention_heads_spec(*args, **kwargs))


def attention_model_view_spec(weights: torch.Tensor, title: str, selected: tuple[int, int] | None = None,
                              layer_word: str = "layer", head_word: str = "head",
                              words: dict[str, str] | None = None, digits: int = 2) -> dict:
    """Every layer and head of one pass at once, as small multiples (what BertViz calls the model
    view): layers top to bottom, heads left to right, each a heatmap [N queries, T keys] on the
    large heatmap's colour scale (0..1, one colour axis), future keys blank; ``selected`` (layer,
    head), 0-based, outlined.

    weights: [L, H, N, T]. Trace i = layer · H + head is one tile, placed on one shared pair of
    hidden axes by its ``x0``/``y0`` (a tile spans x0 - 0.5 .. x0 + T - 0.5 and y0 - 0.5 ..
    y0 + N - 0.5), so a viewer can map a click back to its layer and head: one subplot instead of
    L · H draws several times faster and its spec is a third of the size. Thumbnails carry no tick
    labels and no cell texts; hovering gives layer, head and weight (``digits`` decimals: a
    thumbnail shows colour, not digits).
    """
    w = _words(words)
    n_layers, n_heads, n, t = weights.shape
    gap_x, gap_y = max(1, -(-t // 6)), max(1, -(-n // 4))       # blank cells between tiles
    # rounded, future keys (j > first query + i) blank: one tensor operation, not L·H·N·T formats
    future = torch.arange(t)[None, :] > torch.arange(t - n, t)[:, None]                  # [N, T]
    rounded = torch.where(future, torch.nan, torch.round(weights.double(), decimals=digits)).tolist()
    z = [[[[None if v != v else v for v in row] for row in tile] for tile in heads] for heads in rounded]
    traces, annotations = [], []
    for layer in range(n_layers):
        y0 = layer * (n + gap_y)
        annotations.append({"text": f"{layer_word} {layer + 1}", "x": 0.0, "y": y0 + (n - 1) / 2, "xref": "paper",
                            "yref": "y", "xanchor": "right", "showarrow": False, "xshift": -4})
        for head in range(n_heads):
            x0 = head * (t + gap_x)
            traces.append({
                "type": "heatmap", "z": z[layer][head],
                "x0": x0, "y0": y0, "coloraxis": "coloraxis",      # no gaps inside a tile: a few pixels a cell
                "hovertemplate": (f"{layer_word} {layer + 1}, {head_word} {head + 1}<br>"
                                  f"{w['weight']} %{{z}}<extra></extra>")})
            if layer == 0:
                annotations.append({"text": f"{head_word} {head + 1}", "x": x0 + (t - 1) / 2, "y": 1.0,
                                    "xref": "x", "yref": "paper", "yanchor": "bottom", "showarrow": False})
    shapes = []
    if selected is not None:
        layer, head = selected
        x0, y0 = head * (t + gap_x), layer * (n + gap_y)
        pad_x, pad_y = gap_x * 0.4, gap_y * 0.4
        shapes.append({"type": "rect", "xref": "x", "yref": "y", "x0": x0 - 0.5 - pad_x, "x1": x0 + t - 0.5 + pad_x,
                       "y0": y0 - 0.5 - pad_y, "y1": y0 + n - 0.5 + pad_y,
                       "line": {"color": COLORS["chosen"], "width": 3}, "layer": "above"})
    width, height = n_heads * (t + gap_x) - gap_x, n_layers * (n + gap_y) - gap_y
    row_px = max(26, min(70, 14 * n))          # a decode step's single query: a strip; a prefill: squares
    return {"data": traces, "layout": {
        "xaxis": {"visible": False, "range": [-0.5 - gap_x / 2, width - 0.5 + gap_x / 2]},
        "yaxis": {"visible": False, "range": [height - 0.5 + gap_y / 2, -0.5 - gap_y / 2]},    # layer 1 on top
        "annotations": annotations, "shapes": shapes,
        "coloraxis": {"colorscale": ATTENTION_SCALE, "cmin": 0.0, "cmax": 1.0,
                      "colorbar": {"title": {"text": w["weight"]}, "thickness": 12}},
        "title": {"text": title, "font": {"size": 16}}, "height": 70 + n_layers * row_px,
        "margin": {"l": 75, "r": 10, "t": 55, "b": 5}, "font": {"size": 13}}}


def attention_model_view(*args, **kwargs) -> go.Figure:
    """``attention_model_view_spec`` as a figure (same arguments)."""
    return go.Figure(attention_model_view_spec(*args, **kwargs))


def causal_mask_figure(labels: Sequence[str], title: str, allowed_text: str = "✓",
                       masked_text: str = "−∞", words: dict[str, str] | None = None) -> go.Figure:
    """The causal mask of a prompt: query i (row) may read key j (column) only when j <= i.

    Masked cells carry the score they get before softmax (−∞), so they get weight 0.
    """
    w = _words(words)
    n = len(labels)
    z = [[1 if j <= i else 0 for j in range(n)] for i in range(n)]
    text = [[allowed_text if j <= i else masked_text for j in range(n)] for i in range(n)]
    fig = go.Figure(go.Heatmap(
        z=z, x=list(labels), y=list(labels), zmin=0, zmax=1, showscale=False,
        colorscale=[[0.0, "#E4E4E4"], [0.5, "#E4E4E4"], [0.5, COLORS["prompt"]], [1.0, COLORS["prompt"]]],
        text=text, texttemplate="%{text}" if n <= 12 else None, textfont=dict(size=15),
        xgap=2, ygap=2, hovertemplate=f"{w['query']} %{{y}}<br>{w['key']} %{{x}}<br>%{{text}}<extra></extra>",
    ))
    fig.update_yaxes(autorange="reversed", title=w["query"])
    fig.update_xaxes(title=w["key"], side="bottom")
    return _base_layout(fig, title, height=max(240, 120 + 40 * n))


def top_probs_bar_spec(probs: Sequence[float], tokens: Sequence[str], chosen: int | None, title: str,
                       k: int = 10, axis_title: str = "probability") -> dict:
    """Horizontal bars of the ``k`` most probable tokens (largest on top); the chosen one highlighted
    even when it is outside the top k (then it is added as an extra bar)."""
    probs = [float(p) for p in probs]
    order = sorted(range(len(probs)), key=lambda i: -probs[i])[:k]
    if chosen is not None and chosen not in order:
        order.append(chosen)
    order = order[::-1]                                          # plotly draws the first bar at the bottom
    colors = [COLORS["chosen"] if i == chosen else COLORS["bar"] for i in order]
    trace = {"type": "bar", "y": [tokens[i] for i in order], "x": [probs[i] for i in order], "orientation": "h",
             "marker": {"color": colors}, "text": [f"{probs[i]:.3f}" for i in order], "textposition": "outside",
             "textfont": {"size": 15}, "hovertemplate": "%{y}: p = %{x:.4f}<extra></extra>"}
    top = max(probs[i] for i in order) if order else 1.0
    # room right of the longest bar for its value (past 1 when a bar is near 1; no tick there)
    xaxis = {"title": {"text": axis_title}, "range": [0, top * 1.3 or 1.0]}
    if top * 1.3 > 1:
        xaxis["tickvals"] = [0, 0.2, 0.4, 0.6, 0.8, 1]
    return {"data": [trace], "layout": _layout(title, 120 + 30 * len(order), xaxis=xaxis, yaxis={"type": "category"})}


def top_probs_bar(*args, **kwargs) -> go.Figure:
    """``top_probs_bar_spec`` as a figure (same arguments)."""
    return go.Figure(top_probs_bar_spec(*args, **kwargs))


def speedup_chart(ns: Sequence[int], series: dict[str, Sequence[float]], title: str,
                  x_title: str, y_title: str) -> go.Figure:
    """Lines over N on a log y axis, one per named series (e.g. measured speed-up, FLOP ratio)."""
    palette = [COLORS["chosen"], COLORS["prompt"], COLORS["processed"], COLORS["pending"]]
    dashes = ["solid", "dash", "dot", "dashdot"]
    places = ["top center", "bottom center", "top center", "bottom center"]   # neighbours label apart
    fig = go.Figure()
    for i, (name, ys) in enumerate(series.items()):
        fig.add_trace(go.Scatter(
            x=list(ns), y=list(ys), name=name, mode="lines+markers+text",
            line=dict(color=palette[i % 4], dash=dashes[i % 4], width=3), marker=dict(size=9),
            text=[f"{y:.1f}×" for y in ys], textposition=places[i % 4], textfont=dict(size=13, color=palette[i % 4]),
            hovertemplate=f"{name}<br>N = %{{x}}: %{{y:.2f}}×<extra></extra>",
        ))
    fig.update_xaxes(title=x_title, type="log", tickvals=list(ns), ticktext=[str(n) for n in ns])
    ticks = [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000]
    fig.update_yaxes(title=y_title, type="log", tickvals=ticks, ticktext=[f"{v:g}×" for v in ticks])
    fig.update_layout(legend=dict(orientation="h", yanchor="bottom", y=1.0, x=0))
    return _base_layout(fig, title, height=440)
