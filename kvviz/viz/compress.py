"""Plotly figures of smaller caches: a kvviz.compress record in, a figure out (no streamlit).

- ``tradeoff_figure``: cache bytes per token against mean KL and against top-1 agreement, one
  labelled point per variant (an ``Evaluation``'s results);
- ``row_error_heatmap``: the quantization error of every cached row and K/V head (``RowErrors``);
- ``next_token_pair``: the full cache's and the variant's next-token distributions side by side;
- ``attention_sinks_figure``: one head's attention over the cached positions (cividis), the sink
  columns outlined and the weight on them written per query;
- ``key_channels_figure``: |k| of every key channel of one layer at every position of a text
  (kvviz.compress.KeyChannels), where outlier channels show as bright rows.

Colours are the project's (kvviz.viz.theme: COLORS, cividis for attention); every visible word can be
replaced through ``labels`` so a page can translate it. The three a stepper draws at every event have
a ``*_spec`` twin that returns plain plotly JSON (as in kvviz.viz.attention: about ten times cheaper); the
figure is ``go.Figure(spec)``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
import torch

from kvviz.compress import KeyChannels, RowErrors, StepComparison, VariantResult, key_positions, pass_event, sink_mass
from kvviz.viz import theme
from kvviz.viz.theme import ATTENTION_SCALE, COLORS, FONT, OKABE_ITO

KIND_COLORS = {"full": COLORS["focus"], "window": COLORS["prompt"], "quant": COLORS["pending"],
               "gqa": COLORS["processed"], "h2o": OKABE_ITO[3], "snapkv": OKABE_ITO[4], "pyramid": OKABE_ITO[4],
               "fp8": COLORS["pending"], "latent": "#555555"}
KIND_SYMBOLS = {"full": "star", "window": "circle", "quant": "diamond", "gqa": "square", "h2o": "triangle-up",
                "snapkv": "triangle-down", "pyramid": "pentagon", "fp8": "diamond-open", "latent": "hexagon"}
ERROR_SCALE = [[0.0, "#FFFFFF"], [1.0, COLORS["focus"]]]      # 0 = exact, vermillion = largest error
KL_FLOOR = 1e-7             # KL of exactly 0 is drawn here on the log axis (and said so on hover)

LABELS = {
    "tradeoff_title": "What each smaller cache costs", "bytes": "cache bytes per token",
    "kl": "mean KL(full ‖ variant), nats (log)", "top1": "top-1 agreement",
    "kinds": {"full": "full cache", "window": "window + sinks", "quant": "quantized", "gqa": "grouped K/V",
              "h2o": "H2O", "snapkv": "SnapKV", "pyramid": "PyramidKV", "fp8": "FP8", "latent": "latent (MLA)"},
    "exact": "exact (KL = 0)",
    "errors_title": "Quantization error of each cached row (layer {layer})", "row": "cached position",
    "error": "max |error|", "quantized": "quantized", "full_precision": "full precision", "evicted": "evicted",
    "dist_title": "Next token: full cache and {variant}", "full": "full cache", "prob": "probability",
    "kl_line": "KL = {kl:.4g} nats, top-1 {agree}", "agree": "agrees", "differs": "differs",
    "att_title": "Attention, layer {layer}, head {head}", "query": "query (new position)",
    "key": "key (cached position)", "weight": "weight", "sinks": "on sinks: {mass:.0%}",
    "channels_title": "|k| of every key channel, layer {layer}", "channel": "key channel (K/V head · dimension)",
    "position": "position in the text", "magnitude": "|k|",
}


def _labels(labels: Mapping | None) -> dict:
    out = theme.words(LABELS, labels)
    out["kinds"] = theme.words(LABELS["kinds"], (labels or {}).get("kinds"))
    return out


def tradeoff_figure(results: Sequence[VariantResult], labels: Mapping | None = None,
                    names: Sequence[str] | None = None) -> go.Figure:
    """Two panels sharing the x axis (cache bytes per token): mean KL (log axis; a KL of exactly 0 is
    drawn at KL_FLOOR) and top-1 agreement. One point per variant, labelled with ``names`` (default
    ``variant.label()``), coloured and shaped by kind; the legend lists the kinds."""
    w = _labels(labels)
    names = list(names) if names is not None else [r.variant.label() for r in results]
    fig = go.Figure()
    for kind in KIND_COLORS:
        idx = [i for i, r in enumerate(results) if r.variant.kind == kind]
        if not idx:
            continue
        x = [results[i].bytes_per_token for i in idx]
        kl = [results[i].kl_mean for i in idx]
        top = [results[i].top1_agreement for i in idx]
        text = [names[i] for i in idx]
        marker = dict(color=KIND_COLORS[kind], symbol=KIND_SYMBOLS[kind], size=13, line=dict(width=1, color="black"))
        hover_kl = [f"{names[i]}<br>{results[i].bytes_per_token:,.0f} B/token<br>"
                    + (w["exact"] if v == 0 else f"KL {v:.3g}") for i, v in zip(idx, kl)]
        fig.add_trace(go.Scatter(x=x, y=[max(v, KL_FLOOR) for v in kl], mode="markers+text", text=text,
                                 textposition="top center", textfont=dict(size=11), marker=marker,
                                 name=w["kinds"][kind], legendgroup=kind, customdata=hover_kl,
                                 hovertemplate="%{customdata}<extra></extra>", xaxis="x", yaxis="y"))
        fig.add_trace(go.Scatter(x=x, y=top, mode="markers+text", text=text, textposition="bottom center",
                                 textfont=dict(size=11), marker=marker, name=w["kinds"][kind], legendgroup=kind,
                                 showlegend=False, xaxis="x2", yaxis="y2",
                                 hovertemplate="%{text}<br>%{x:,.0f} B/token<br>top-1 %{y:.1%}<extra></extra>"))
    kls = [max(r.kl_mean, KL_FLOOR) for r in results] or [1.0]
    lo, hi = math.floor(math.log10(min(kls))), math.ceil(math.log10(max(kls)) + 0.3)
    tick = dict(tickfont=FONT)
    fig.update_layout(
        xaxis=dict(domain=[0.0, 0.47], anchor="y", title=w["bytes"], rangemode="tozero", **tick),
        yaxis=dict(anchor="x", type="log", range=[lo, hi], title=w["kl"], exponentformat="power", **tick),
        xaxis2=dict(domain=[0.53, 1.0], anchor="y2", title=w["bytes"], rangemode="tozero", **tick),
        yaxis2=dict(anchor="x2", range=[min(0.0, min((r.top1_agreement for r in results), default=0)) , 1.08],
                    title=w["top1"], tickformat=".0%", **tick),
        legend=dict(orientation="h", y=-0.2))
    return theme.style(fig, w["tradeoff_title"], height=560)


def row_error_heatmap_spec(errors: RowErrors, layer: int = 0, labels: Mapping | None = None) -> dict:
    """Rows (cached positions) × K and V of every K/V head: the largest |dequantized − original| of
    the row. Full-precision rows are 0 (white); evicted rows are blank. Hover says which it is.
    ``layer`` only names the layer in the title. Plain plotly JSON (``row_error_heatmap``: a figure)."""
    w = _labels(labels)
    heads = errors.key_error.shape[1]
    cols = [f"K h{h + 1}" for h in range(heads)] + [f"V h{h + 1}" for h in range(heads)]
    z_t = torch.cat([errors.key_error, errors.value_error], dim=1)            # [rows, 2·heads]
    z = [[None if math.isnan(v) else v for v in row] for row in z_t.tolist()]
    state = [w["evicted"] if e else w["quantized"] if q else w["full_precision"]
             for q, e in zip(errors.quantized, errors.evicted)]
    rows = [f"{p}:{t}" for p, t in zip(errors.positions, errors.tokens)]
    finite = [v for row in z for v in row if v is not None]
    trace = {"type": "heatmap", "z": z, "x": cols, "y": rows, "zmin": 0.0,
             "zmax": max(finite) if finite and max(finite) > 0 else 1.0, "colorscale": ERROR_SCALE,
             "xgap": 1, "ygap": 1, "customdata": [[s] * len(cols) for s in state],
             "colorbar": {"title": {"text": w["error"]}},
             "hovertemplate": (f"{w['row']} %{{y}}<br>%{{x}}<br>{w['error']} %{{z:.3g}}<br>"
                               "%{customdata}<extra></extra>")}
    return {"data": [trace], "layout": theme.layout(
        w["errors_title"].format(layer=layer), max(300, 120 + 18 * len(rows)),
        xaxis={"side": "top", "automargin": True},
        yaxis={"autorange": "reversed", "title": {"text": w["row"]}, "type": "category", "automargin": True},
        margin={"l": 10, "r": 10, "t": 80, "b": 10})}           # the top tick labels below the title


def row_error_heatmap(*args, **kwargs) -> go.Figure:
    """``row_error_heatmap_spec`` as a figure (same arguments)."""
    return go.Figure(row_error_heatmap_spec(*args, **kwargs))


def next_token_pair_spec(cmp: StepComparison, event_index: int, k: int = 8, labels: Mapping | None = None,
                         variant_name: str | None = None) -> dict:
    """The next-token distributions of the full cache and of the variant at ``event_index`` (a
    choose event, or the pass before one), as grouped bars over the tokens in either top ``k``;
    the title line gives KL and whether the top-1 tokens agree. Plain plotly JSON
    (``next_token_pair``: a figure)."""
    w = _labels(labels)
    full_ev, var_ev = cmp.full.events[event_index], cmp.compressed.events[event_index]
    p = torch.softmax(full_ev.logits.double(), -1)
    q = torch.softmax(var_ev.logits.double(), -1)
    top = sorted(set(p.topk(min(k, p.numel())).indices.tolist()) | set(q.topk(min(k, q.numel())).indices.tolist()),
                 key=lambda i: -float(p[i]))
    tokens = [cmp.logit_tokens[i] for i in top]
    name = variant_name or cmp.variant.label()
    data = []
    for probs, label, color in ((p, w["full"], COLORS["prompt"]), (q, name, COLORS["pending"])):
        vals = [float(probs[i]) for i in top]
        data.append({"type": "bar", "x": tokens, "y": vals, "name": label, "marker": {"color": color},
                     "text": [f"{v:.2f}" for v in vals], "textposition": "outside", "textfont": {"size": 13},
                     "hovertemplate": f"{label}<br>%{{x}}: p = %{{y:.4f}}<extra></extra>"})
    score = cmp.score_at(event_index if full_ev.phase == "choose" else event_index + 1)
    title = w["dist_title"].format(variant=name)
    if score is not None:
        line = w["kl_line"].format(kl=score.kl, agree=w["agree"] if score.agree else w["differs"])
        title += "<br><sup>" + line + "</sup>"
    return {"data": data, "layout": theme.layout(
        title, 400, xaxis={"type": "category"}, yaxis={"title": {"text": w["prob"]}, "range": [0, 1.15]},
        barmode="group", margin={"l": 10, "r": 10, "t": 70, "b": 10},
        # inside the plot, top right: the bars are sorted by the full cache's probability (the
        # smallest at the right) and the axis reaches 1.15, so the corner is free at any height
        legend={"orientation": "v", "x": 0.99, "xanchor": "right", "y": 0.99, "yanchor": "top"})}


def next_token_pair(*args, **kwargs) -> go.Figure:
    """``next_token_pair_spec`` as a figure (same arguments)."""
    return go.Figure(next_token_pair_spec(*args, **kwargs))


def attention_sinks_spec(cmp: StepComparison, event_index: int, layer: int = 0, head: int = 0,
                         compressed: bool = True, labels: Mapping | None = None) -> dict:
    """One head's attention in the pass ``event_index`` shows (queries × the key positions it read),
    cividis; keys a query may not read (future, or evicted by the window) are blank. For a window
    variant with sinks the sink columns are outlined and each query's weight on them is written at
    the right (a single query's, in a decode pass, under the title), in place of the colour bar
    while the cells carry their values. ``layer`` and ``head`` are 0-based (numbered from 1 in the
    title). Plain plotly JSON (``attention_sinks_figure``: a figure)."""
    w = _labels(labels)
    run = cmp.compressed if compressed else cmp.full
    ev = pass_event(run, event_index)
    att = ev.record.attention[layer, head]                                     # [N, T]  # type: ignore[union-attr]
    keys = key_positions(ev)
    seq = ev.sequence
    v = cmp.variant
    sinks = (v.sinks or 0) if (compressed and v.kind == "window") else 0
    window = v.window if (compressed and v.kind == "window") else None
    weights = att.tolist()
    z, text = [], []
    for i, q in enumerate(ev.positions):
        row, trow = [], []
        for j, kpos in enumerate(keys):
            visible = kpos <= q and (window is None or kpos < sinks or kpos > q - window)
            row.append(weights[i][j] if visible else None)
            trow.append(f"{weights[i][j]:.2f}" if visible and len(keys) <= 16 else "")
        z.append(row)
        text.append(trow)
    trace = {"type": "heatmap", "z": z, "x": [f"{p}:{seq[p]}" for p in keys],
             "y": [f"{p}:{seq[p]}" for p in ev.positions],
             "zmin": 0.0, "zmax": 1.0, "colorscale": ATTENTION_SCALE, "text": text, "texttemplate": "%{text}",
             "textfont": {"size": 12},
             "xgap": 2, "ygap": 2, "colorbar": {"title": {"text": w["weight"]}},
             "hovertemplate": f"{w['query']} %{{y}}<br>{w['key']} %{{x}}<br>{w['weight']} %{{z:.4f}}<extra></extra>"}
    layout = theme.layout(w["att_title"].format(layer=layer + 1, head=head + 1), max(260, 140 + 40 * len(ev.positions)),
                          xaxis={"title": {"text": w["key"]}, "side": "bottom", "type": "category", "automargin": True},
                          yaxis={"autorange": "reversed", "title": {"text": w["query"]}, "type": "category",
                            "automargin": True})
    sink_cols = [j for j, p in enumerate(keys) if p < sinks]
    if sink_cols and len(ev.positions) == 1:      # one query (a decode): its weight on the sinks in the title
        layout["shapes"] = [{"type": "rect", "x0": min(sink_cols) - 0.5, "x1": max(sink_cols) + 0.5, "y0": -0.5,
                             "y1": 0.5, "line": {"color": COLORS["focus"], "width": 3}, "xref": "x", "yref": "y"}]
        layout["title"]["text"] += "<br><sup>" + w["sinks"].format(mass=sink_mass(ev, layer, head, sinks)[0]) + "</sup>"
        layout["margin"]["t"] = 70
    elif sink_cols:
        layout["shapes"] = [{"type": "rect", "x0": min(sink_cols) - 0.5, "x1": max(sink_cols) + 0.5, "y0": -0.5,
                             "y1": len(ev.positions) - 0.5, "line": {"color": COLORS["focus"], "width": 3},
                             "xref": "x", "yref": "y"}]
        layout["annotations"] = [{"x": 1.0, "xref": "paper", "xanchor": "left", "y": i, "yref": "y", "showarrow": False,
                                  "text": w["sinks"].format(mass=mass), "font": {"size": 13, "color": COLORS["focus"]}}
                                 for i, mass in enumerate(sink_mass(ev, layer, head, sinks))]
        layout["margin"]["r"] = 130                    # room at the right for the masses
        if len(keys) <= 16:
            trace["showscale"] = False       # the cells carry their values; a colour bar would sit on the masses
        else:
            trace["colorbar"]["x"] = 1.16    # no values in the cells: the colour bar, beyond the masses
    return {"data": [trace], "layout": layout}


def attention_sinks_figure(*args, **kwargs) -> go.Figure:
    """``attention_sinks_spec`` as a figure (same arguments)."""
    return go.Figure(attention_sinks_spec(*args, **kwargs))


def key_channels_figure(keys: KeyChannels, labels: Mapping | None = None) -> go.Figure:
    """Channels (rows, grouped by K/V head: "K/V 1 · 0" … ) × positions (columns): |k| of the keys the
    cache holds (after the rotation). A channel much larger than the rest is a bright row: a group of
    one token's channels must span it, a group of one channel's positions need not (KIVI)."""
    w = _labels(labels)
    n_ch, n_pos = keys.magnitude.shape
    rows = [f"K/V {c // keys.head_dim + 1} · {c % keys.head_dim}" for c in range(n_ch)]
    cols = [f"{i}:{tok}" for i, tok in enumerate(keys.tokens)]
    fig = go.Figure(go.Heatmap(
        z=keys.magnitude.tolist(), x=cols, y=rows, colorscale=ATTENTION_SCALE, zmin=0.0,
        colorbar=dict(title=dict(text=w["magnitude"])),
        hovertemplate=f"%{{y}}<br>{w['position']} %{{x}}<br>{w['magnitude']} %{{z:.3g}}<extra></extra>"))
    ticks = [rows[c] for c in range(0, n_ch, keys.head_dim // 4)]
    fig.update_layout(
        xaxis=dict(title=w["position"], type="category", showticklabels=n_pos <= 40, tickfont=FONT),
        yaxis=dict(title=w["channel"], type="category", autorange="reversed", tickvals=ticks, tickfont=FONT),
        meta=dict(raster=True))     # read as one image: bright rows, labelled every 16th channel
    return theme.style(fig, w["channels_title"].format(layer=keys.layer + 1), height=max(420, 3 * n_ch + 120))


# ---- eviction by score and the latent cache -------------------------------------------------------

EVICT_LABELS = {"evict_title": "Layer {layer}: rows kept and evicted after position {position}",
                "head": "K/V head", "position": "position in the text", "score": "score", "evicted": "evicted",
                "drift_title": "KL(full ‖ policy) at every step", "kl": "KL, nats", "step": "position",
                "first_diff": "top-1 first differs", "latent_title": "Latent cache: elements per token and layer",
                "rank": "rank", "elements": "elements per token and layer", "full_kv": "full K and V",
                "drift": "mean KL (right axis)",
                "remains_title": "Layer {layer}: the attention that remains at position {position}",
                "query_head": "query head", "weight": "weight"}


def eviction_figure(step, layer: int, tokens: Sequence[str] | None = None, labels: Mapping | None = None,
                    height: int = 300, position_ticks: int | None = None) -> go.Figure:
    """One layer after one step (kvviz.compress.trace.TraceStep): K/V heads × positions, each kept
    row coloured by its score (the attention scale; hover and text give the number), each evicted row grey with
    the score that decided its eviction; positions never reached are blank. ``position_ticks``: the
    positions labelled by number only, at most that many (``_greyed_rows``)."""
    w = theme.words(EVICT_LABELS, labels)
    n = step.position + 1
    heads = len(step.kept[layer])
    z = [[None] * n for _ in range(heads)]
    grey = [[None] * n for _ in range(heads)]
    text = [[""] * n for _ in range(heads)]
    for h in range(heads):
        scores = (step.kept_scores[layer][h] if step.kept_scores else ()) or [1.0] * len(step.kept[layer][h])
        for pos, sc in zip(step.kept[layer][h], scores):
            z[h][pos], text[h][pos] = sc, f"{sc:.3g}"
        for pos, sc in (step.gone[layer][h] if step.gone else ()):
            grey[h][pos], text[h][pos] = 1, f"{w['evicted']}: {sc:.3g}"
    return _greyed_rows(n, z, grey, text, [f"{w['head']} {h + 1}" for h in range(heads)], tokens, w["score"], {},
                        w["position"], w["evict_title"].format(layer=layer + 1, position=step.position), height,
                        position_ticks)


def remaining_attention_figure(step, layer: int, group: int, tokens: Sequence[str] | None = None,
                               labels: Mapping | None = None, height: int = 300,
                               position_ticks: int | None = None) -> go.Figure:
    """The attention that remains: in ``layer``, each query head's weights at ``step``'s pass over the
    rows its K/V head still held (``TraceStep.attention_over``; ``group`` query heads per K/V head);
    a position evicted earlier is grey, one never held blank. The weights sum to 1 over what is
    left: what the full cache gave the evicted rows went to the kept ones."""
    w = theme.words(EVICT_LABELS, labels)
    n = step.position + 1
    heads = 0 if step.attention is None else int(step.attention.shape[1])
    z = [[None] * n for _ in range(heads)]
    grey = [[None] * n for _ in range(heads)]
    text = [[""] * n for _ in range(heads)]
    for h in range(heads):
        for pos, _ in (step.gone[layer][h // group] if step.gone else ()):
            grey[h][pos], text[h][pos] = 1, w["evicted"]
        for pos, weight in step.attention_over(layer, h, group).items():
            z[h][pos], text[h][pos], grey[h][pos] = weight, f"{weight:.3f}", None
    return _greyed_rows(n, z, grey, text, [f"{w['query_head']} {h + 1}" for h in range(heads)], tokens, w["weight"],
                        {"zmin": 0}, w["position"], w["remains_title"].format(layer=layer + 1, position=step.position),
                        height, position_ticks)


def _greyed_rows(n: int, z: list, grey: list, text: list, y: list[str], tokens: Sequence[str] | None, value: str,
                 scale: dict, position: str, title: str, height: int, position_ticks: int | None = None) -> go.Figure:
    """Heads × ``n`` positions: ``z`` on the attention scale (``value`` its name, ``scale`` its bounds) over
    ``grey`` cells (evicted), ``text`` on hover; positions labelled with their tokens up to 40, or with
    ``position_ticks`` by number only, every k-th one (a narrow presenter column: upright labels that
    do not touch)."""
    x = list(range(n))
    ticks = [f"{i}<br>{tokens[i]}" if tokens and i < len(tokens) else str(i) for i in x]
    if position_ticks:
        every = max(1, -(-n // position_ticks))
        ticks = [str(i) for i in x]
        x_axis = dict(tickmode="array", tickvals=x[::every], ticktext=ticks[::every], tickangle=0)
    else:
        x_axis = dict(tickvals=x if len(x) <= 40 else None, ticktext=ticks if len(x) <= 40 else None)
    fig = go.Figure()
    fig.add_trace(go.Heatmap(z=grey, x=x, y=y, colorscale=[[0, COLORS["removed"]], [1, COLORS["removed"]]],
                             showscale=False, text=text, hovertemplate="%{y}, %{x}: %{text}<extra></extra>",
                             xgap=1, ygap=1))
    # a short presenter figure: the colour bar's title beside it, so that the bar keeps the plot's height
    bar = dict(title=dict(text=value, side="right")) if position_ticks else dict(title=value)
    fig.add_trace(go.Heatmap(z=z, x=x, y=y, colorscale=ATTENTION_SCALE, **scale, colorbar=bar,
                             text=text, hovertemplate="%{y}, %{x}: " + value + " %{text}<extra></extra>",
                             xgap=1, ygap=1))
    fig.update_layout(xaxis=dict(title=position, **x_axis), yaxis=dict(autorange="reversed"))
    return theme.style(fig, title, height=height)


def drift_figure(steps: Sequence, labels: Mapping | None = None, current: int | None = None,
                 height: int = 260, compact: bool = False) -> go.Figure:
    """KL at every step, the steps where the top-1 token differs marked, the first one named.
    ``compact``: for a short figure (presenter mode's narrow column), the legend above the plot and
    at most three ticks on the log axis, so that they do not touch."""
    w = theme.words(EVICT_LABELS, labels)
    x = [s.position for s in steps]
    fig = go.Figure(go.Scatter(x=x, y=[max(s.kl, KL_FLOOR) for s in steps], mode="lines+markers",
                               line=dict(color=COLORS["prompt"]), name=w["kl"],
                               hovertemplate="%{x}: KL %{y:.3g}<extra></extra>"))
    off = [s for s in steps if not s.agree]
    if off:
        fig.add_trace(go.Scatter(x=[s.position for s in off], y=[max(s.kl, KL_FLOOR) for s in off], mode="markers",
                                 marker=dict(color=COLORS["focus"], size=11, symbol="x"), name=w["first_diff"]))
        fig.add_vline(x=off[0].position, line=dict(color=COLORS["focus"], dash="dot"))
    if current is not None:
        fig.add_vline(x=current, line=dict(color="#555555", width=1))
    decades = math.log10(max(s.kl for s in steps) + KL_FLOOR) - math.log10(max(min(s.kl for s in steps), KL_FLOOR))
    fig.update_layout(xaxis=dict(title=w["step"]), yaxis=dict(title=w["kl"], type="log", exponentformat="power",
                                                             **(dict(dtick=max(1, math.ceil(decades / 2)))
                                                                if compact else {})),
                      legend=dict(theme.LEGEND_ABOVE) if compact else dict(orientation="h", y=-0.3))
    return theme.style(fig, w["drift_title"], height=height)


def latent_figure(ranks: Sequence[int], full_kv: int, kls: Sequence[float], labels: Mapping | None = None,
                  height: int = 320, current: int | None = None) -> go.Figure:
    """Elements per token and layer against the rank (the latent, the full K and V) and the measured
    mean KL at each rank (right axis, log); ``current``: the chosen rank, a grey vertical line."""
    w = theme.words(EVICT_LABELS, labels)
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=list(ranks), y=list(ranks), mode="lines+markers", name=w["elements"],
                             line=dict(color=COLORS["prompt"])))
    fig.add_trace(go.Scatter(x=[min(ranks), max(ranks)], y=[full_kv, full_kv], mode="lines", name=w["full_kv"],
                             line=dict(color=COLORS["focus"], dash="dash")))
    fig.add_trace(go.Scatter(x=list(ranks), y=[max(k, KL_FLOOR) for k in kls], mode="lines+markers", name=w["drift"],
                             yaxis="y2", line=dict(color=COLORS["processed"])))
    fig.update_layout(xaxis=dict(title=w["rank"]), yaxis=dict(title=w["elements"], rangemode="tozero"),
                      yaxis2=dict(overlaying="y", side="right", type="log", exponentformat="power", title="KL"),
                      legend=dict(orientation="h", y=-0.3))
    if current is not None:
        fig.add_vline(x=current, line=dict(color="#555555", width=1))
    return theme.style(fig, w["latent_title"], height=height)
