"""Attention figures of the stepper and the pages: one pass's weights as a heatmap, every head side by
side, every layer and head at once (the model view), and the causal mask. Plain data in, a figure
out (no streamlit).

The builders the stepper draws in the browser each have a ``*_spec`` twin that returns the figure as
plain plotly JSON (``{"data": [...], "layout": {...}}``) without building a validated
``go.Figure`` (about ten times cheaper); the builder itself is ``go.Figure(spec)``, so both always
agree and plotly validates every spec whenever the builder runs (tests do).
"""
from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
import torch

from kvviz.viz import theme
from kvviz.viz.theme import ATTENTION_SCALE, COLORS, FONT, WORDS


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
                           show_values: bool | None = None, row_px: int = 45, outline_row: int | None = None,
                           position_ticks: int | None = None) -> dict:
    """weights: [N queries, T keys] after the causal mask; masked cells (exact 0 above the diagonal)
    are left blank so the triangle of the causal mask is visible (``allowed``: see _masked_cells).
    ``words``: translations of WORDS. Cell values are printed when ``show_values`` (default: only
    while they fit, up to 16 keys); hovering always shows them. ``row_px``: height per query row;
    ``outline_row``: a row (0-based) drawn outlined, the one a page points to. ``position_ticks``:
    the key axis labelled by position only, at most that many labels (every k-th key): short upright
    ticks instead of slanted "position:token" ones, for a page whose token strip names the positions
    (hovering still names the token)."""
    w = theme.words(WORDS, words)
    n, t = weights.shape
    z, text = _masked_cells(weights, allowed=allowed)
    trace = {"type": "heatmap", "z": z, "x": list(key_labels), "y": list(query_labels), "zmin": 0.0, "zmax": zmax,
             "colorscale": ATTENTION_SCALE, "showscale": show_scale,
             "hovertemplate": f"{w['query']} %{{y}}<br>{w['key']} %{{x}}<br>{w['weight']} %{{z:.4f}}<extra></extra>",
             "colorbar": {"title": {"text": w["weight"]}}}
    if t <= 16 if show_values is None else show_values:
        trace.update(text=text, texttemplate="%{text}", textfont={"size": 15}, xgap=2, ygap=2)
    # a map too large for values in its cells is drawn without texts or gaps: plotly draws it 2-4×
    # faster then (SmolLM2's prompt of 37 tokens: a step press waits for several such maps)
    extra = {}
    if outline_row is not None:
        extra["shapes"] = [{"type": "rect", "xref": "x", "yref": "y", "x0": -0.5, "x1": t - 0.5,
                            "y0": outline_row - 0.5, "y1": outline_row + 0.5,
                            "line": {"color": COLORS["focus"], "width": 3}, "layer": "above"}]
    xaxis = {"title": {"text": w["key_axis"]}, "side": "bottom"}
    if position_ticks:
        every = -(-t // position_ticks)                    # ceil: at most position_ticks labels
        xaxis.update(tickmode="array", tickvals=list(key_labels)[::every],
                     ticktext=[str(i) for i in range(0, t, every)], tickangle=0)
    return {"data": [trace], "layout": theme.layout(
        title, max(260, 140 + row_px * n), xaxis=xaxis,
        yaxis={"autorange": "reversed", "title": {"text": w["query_axis"]}}, **extra)}


def attention_heatmap(*args, **kwargs) -> go.Figure:
    """``attention_heatmap_spec`` as a figure (same arguments)."""
    return go.Figure(attention_heatmap_spec(*args, **kwargs))


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
    w = theme.words(WORDS, words)
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
        shared = {"title": {"text": w["query"]}} if i == 0 else {"matches": "y", "showticklabels": False}
        layout[f"yaxis{sfx}"] = {"anchor": f"x{sfx}", "autorange": "reversed", "tickfont": {"size": 13}, **shared}
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
    w = theme.words(WORDS, words)
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
                       "line": {"color": COLORS["focus"], "width": 3}, "layer": "above"})
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


def head_grid_spec(values: torch.Tensor, title: str, selected: tuple[int, int] | None = None,
                   layer_word: str = "layer", head_word: str = "head", value_word: str = "weight",
                   digits: int = 2) -> dict:
    """One number per layer and head as one heatmap, layers top to bottom, heads left to right, on
    the attention colour scale (0..1); ``selected`` (layer, head), 0-based, outlined. A model view
    for many heads (SmolLM2's 270), one trace to draw: cell (layer, head) is the 1 × 1 tile at
    x = head + 1, y = layer + 1 (numbered from 1, as the selectboxes are) that a viewer maps a click
    back to (see ``attention_model_view_spec``).

    values: [L, H]."""
    n_layers, n_heads = values.shape
    z = torch.round(values.double(), decimals=digits).tolist()
    # no gaps between the cells: with them plotly draws the map about twice as slowly
    trace = {"type": "heatmap", "z": z, "x0": 1, "y0": 1, "coloraxis": "coloraxis",
             "hovertemplate": f"{layer_word} %{{y}}, {head_word} %{{x}}<br>{value_word} %{{z}}<extra></extra>"}
    shapes = []
    if selected is not None:
        layer, head = selected
        shapes.append({"type": "rect", "xref": "x", "yref": "y", "x0": head + 0.5, "x1": head + 1.5,
                       "y0": layer + 0.5, "y1": layer + 1.5, "line": {"color": COLORS["focus"], "width": 3},
                       "layer": "above"})
    every = 1 if n_layers <= 12 else 5
    return {"data": [trace], "layout": {
        "xaxis": {"tickvals": list(range(1, n_heads + 1)), "title": {"text": head_word},
                  "range": [0.5, n_heads + 0.5]},
        "yaxis": {"tickvals": [1] + list(range(every, n_layers + 1, every))[1 if every == 1 else 0:],
                  "title": {"text": layer_word}, "range": [n_layers + 0.5, 0.5]},
        "shapes": shapes,
        "coloraxis": {"colorscale": ATTENTION_SCALE, "cmin": 0.0, "cmax": 1.0,
                      "colorbar": {"title": {"text": value_word}, "thickness": 12}},
        "title": {"text": title, "font": {"size": 16}}, "height": 150 + 16 * n_layers,
        "margin": {"l": 60, "r": 10, "t": 50, "b": 50}, "font": {"size": 13}}}


def attention_model_view(*args, **kwargs) -> go.Figure:
    """``attention_model_view_spec`` as a figure (same arguments)."""
    return go.Figure(attention_model_view_spec(*args, **kwargs))


def causal_mask_figure(labels: Sequence[str], title: str, allowed_text: str = "✓",
                       masked_text: str = "−∞", words: dict[str, str] | None = None) -> go.Figure:
    """The causal mask of a prompt: query i (row) may read key j (column) only when j <= i.

    Masked cells carry the score they get before softmax (−∞), so they get weight 0.
    """
    w = theme.words(WORDS, words)
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
    return theme.style(fig, title, height=max(240, 120 + 40 * n))
