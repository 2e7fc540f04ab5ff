"""Plotly figures of the cost page: plain numbers from kvviz.cost / batching / cost_measure in, a
figure out (no streamlit). Every visible word comes in through ``labels`` so pages can translate."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
import torch

from kvviz.cost.shapes import accelerator_bytes
from kvviz.viz import theme
from kvviz.viz.theme import COLORS, FONT, OKABE_ITO

# colours for series that are neither prompt/processed/pending: Okabe-Ito, then black
SERIES = [*OKABE_ITO, "#000000"]
ACCEL_COLOR = "#D55E00"
PAD_COLOR = "#DDDDDD"

L = Mapping[str, str]


def _hline(fig: go.Figure, y: float, text: str, color: str, dash: str, log_y: bool, right: bool = False,
           below: bool = False) -> None:
    """A horizontal line, labelled with ``text`` (none if empty) above it (``below``: under it). The
    label is placed by hand: plotly puts add_hline's own annotation at the raw value even on a log
    axis, i.e. far off the chart."""
    fig.add_hline(y=y, line=dict(color=color, dash=dash, width=2))
    if not text:
        return
    fig.add_annotation(x=1 if right else 0, xref="paper", xanchor="right" if right else "left",
                       y=math.log10(y) if log_y else y, yref="y", yanchor="top" if below else "bottom", text=text,
                       showarrow=False, font=dict(size=14, color=color), bgcolor="rgba(255,255,255,0.7)")


def human_bytes(n: float) -> str:
    """1,536 -> '1.54 kB' (decimal units, like accelerator memory sizes)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return f"{n / size:,.3g} {unit}" if n / size < 1000 else f"{n / size:,.0f} {unit}"
    return f"{n:,.0f} B"


def human_flops(n: float) -> str:
    for unit, size in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if abs(n) >= size:
            return f"{n / size:,.3g} {unit}"
    return f"{n:,.0f} FLOP"


def memory_vs_context(contexts: Sequence[int], series: Mapping[int, Sequence[int]],
                      accel_gb: Sequence[float], weights_bytes: int | None,
                      marker: tuple[int, int] | None, labels: L, compact: bool = False) -> go.Figure:
    """Cache bytes against context length, one line per batch size, log-log; horizontal lines at
    accelerator memory sizes (and at the weights' own size, which must fit beside the cache).

    series: batch size -> bytes for each context in ``contexts``; marker: (tokens, bytes).
    ``compact``: a chart drawn lower (presenter mode): one label for the accelerators' lines
    (``labels["accels"]``), the weights' under its line.
    """
    # floats: exact byte counts can exceed the 64-bit integers plotly's JSON encoder accepts
    fig = go.Figure()
    for i, (batch, ys) in enumerate(series.items()):
        fig.add_trace(go.Scatter(
            x=list(contexts), y=[float(y) for y in ys], mode="lines", name=labels["batch"].format(b=batch),
            line=dict(color=SERIES[i % len(SERIES)], width=3),
            customdata=[human_bytes(y) for y in ys],
            hovertemplate=labels["hover"] + "<extra>%{fullData.name}</extra>"))
    # the accelerators' lines lie within a decade (24, 40, 80 GiB): on a low chart (``compact``, presenter
    # mode) their labels would run into each other and into the weights' (an 8B model's 16 GB lie just
    # below the 24 GB line), so one label above the highest names them all, the weights' goes under its line
    for i, gb in enumerate(accel_gb):
        text = labels["accel"].format(gb=gb) if not compact else labels["accels"] if gb == max(accel_gb) else ""
        _hline(fig, float(accelerator_bytes(gb)), text, ACCEL_COLOR, "dash", True, right=i % 2 == 1 and not compact)
    if weights_bytes:
        _hline(fig, float(weights_bytes), labels["weights"], "#555555", "dot", True, below=compact)
    if marker is not None:
        fig.add_trace(go.Scatter(x=[marker[0]], y=[float(marker[1])], mode="markers", name=labels["you"],
                                 marker=dict(size=16, color=COLORS["focus"], symbol="star",
                                             line=dict(width=1, color="black")),
                                 hovertemplate=labels["hover_you"].format(size=human_bytes(marker[1]))
                                 + "<extra></extra>"))
    fig.update_xaxes(type="log", title=labels["x"])
    fig.update_yaxes(type="log", title=labels["y"], exponentformat="SI")
    fig.update_layout(legend=dict(orientation="h", y=-0.2))
    return theme.style(fig, labels["title"], height=520)


def kv_sharing_bars(names: Sequence[str], totals: Sequence[int], highlight: int, labels: L) -> go.Figure:
    """The same cache for several numbers of K/V heads; ``highlight`` is the chosen one."""
    colors = [COLORS["focus"] if i == highlight else COLORS["bar"] for i in range(len(names))]
    fig = go.Figure(go.Bar(x=list(names), y=[float(v) for v in totals], marker_color=colors,
                           text=[human_bytes(v) for v in totals], textposition="outside",
                           textfont=dict(size=15), cliponaxis=False, constraintext="none",
                           hovertemplate="%{x}: %{y:,} B<extra></extra>"))
    fig.update_yaxes(title=labels["y"], range=[0, float(max(totals)) * 1.25])
    # a value label is wider than its bar ("3.15 MB"): room beyond the first and last bars, so that
    # neither end's label is cut at the plot's edge
    fig.update_xaxes(title=labels["x"], type="category", range=[-0.9, len(names) - 0.1])
    return theme.style(fig, labels["title"], height=380)


def flops_vs_n(curve: Mapping[str, Sequence[int]], counted: Mapping[str, Sequence[int]] | None,
               labels: L) -> go.Figure:
    """Total FLOPs to generate N tokens, with and without the cache, split into projections + MLP
    and attention, log-log; counted values (from a run's passes) as markers on the lines."""
    n = list(curve["n"])
    fig = go.Figure()
    # floats: FLOP counts of long generations exceed the 64-bit integers plotly's JSON encoder accepts
    styles = {"uncached": dict(color=SERIES[5]), "cached": dict(color=SERIES[2])}
    for mode in ("uncached", "cached"):
        lin = [float(v) for v in curve[f"{mode}_linear"]]
        att = [float(v) for v in curve[f"{mode}_attention"]]
        total = [a + b for a, b in zip(lin, att)]
        fig.add_trace(go.Scatter(x=n, y=total, mode="lines", name=labels[f"{mode}_total"],
                                 line=dict(width=4, **styles[mode]),
                                 hovertemplate="N=%{x}: %{y:,} FLOP<extra>%{fullData.name}</extra>"))
        fig.add_trace(go.Scatter(x=n, y=[v if v > 0 else None for v in lin], mode="lines",
                                 name=labels[f"{mode}_linear"], line=dict(width=2, dash="dot", **styles[mode]),
                                 hovertemplate="N=%{x}: %{y:,} FLOP<extra>%{fullData.name}</extra>"))
        fig.add_trace(go.Scatter(x=n, y=[v if v > 0 else None for v in att], mode="lines",
                                 name=labels[f"{mode}_attention"], line=dict(width=2, dash="dash", **styles[mode]),
                                 hovertemplate="N=%{x}: %{y:,} FLOP<extra>%{fullData.name}</extra>"))
    if counted:
        for mode, symbol in (("uncached", "circle-open"), ("cached", "diamond-open")):
            fig.add_trace(go.Scatter(
                x=list(counted["n"]), y=[float(v) for v in counted[mode]], mode="markers",
                name=labels[f"{mode}_counted"],
                marker=dict(size=11, symbol=symbol, color="black", line=dict(width=2)),
                hovertemplate="N=%{x}: %{y:,} FLOP<extra>%{fullData.name}</extra>"))
    fig.update_xaxes(type="log", title=labels["x"])
    fig.update_yaxes(type="log", title=labels["y"], exponentformat="SI")
    fig.update_layout(legend=dict(orientation="h", y=-0.25))
    return theme.style(fig, labels["title"], height=520)


def padded_cache_grid(slots: Sequence[Sequence[str | None]], key_mask: torch.Tensor,
                      prompt_cols: Sequence[int], new_cols: Sequence[int],
                      pending: Sequence[str | None], seq_labels: Sequence[str], labels: L) -> go.Figure:
    """The batch's cache as a grid: one row per sequence, one column per cache column.

    Grey = padding (mask 0), blue = prompt, green = generated; the columns this pass appended are
    outlined; pending (chosen, not yet processed) tokens sit in a dashed column after the cache.
    key_mask: [B, T]; prompt_cols[b]: first column after sequence b's prompt.
    """
    b_n, t_n = key_mask.shape
    cat = {"pad": 0, "prompt": 1, "processed": 2}
    z, text, hover = [], [], []
    for b in range(b_n):
        zr, tr, hr = [], [], []
        for c in range(t_n):
            tok = slots[b][c]
            kind = "pad" if tok is None else ("prompt" if c < prompt_cols[b] else "processed")
            zr.append(cat[kind])
            tr.append(labels["pad"] if tok is None else tok)
            hr.append(labels["hover_" + kind].format(col=c, mask=int(key_mask[b, c])))
        z.append(zr)
        text.append(tr)
        hover.append(hr)
    scale = [[0, PAD_COLOR], [0.33, PAD_COLOR], [0.34, COLORS["prompt"]], [0.66, COLORS["prompt"]],
             [0.67, COLORS["processed"]], [1, COLORS["processed"]]]
    x = [str(c) for c in range(t_n)]
    fig = go.Figure(go.Heatmap(z=z, x=x, y=list(seq_labels), zmin=0, zmax=2, colorscale=scale,
                               showscale=False, text=text, texttemplate="%{text}",
                               textfont=dict(size=18, color="white"), xgap=3, ygap=3,
                               customdata=hover, hovertemplate="%{customdata}<extra>%{y}</extra>"))
    for c in new_cols:
        fig.add_shape(type="rect", x0=c - 0.5, x1=c + 0.5, y0=-0.5, y1=b_n - 0.5,
                      line=dict(color=COLORS["pending"], width=4))
    if any(p is not None for p in pending):
        fig.add_trace(go.Scatter(
            x=[labels["next"]] * b_n, y=list(seq_labels), mode="text",
            text=[p or "" for p in pending], textfont=dict(size=18, color=COLORS["pending"]),
            hovertemplate=labels["hover_pending"] + "<extra>%{y}</extra>", showlegend=False))
        fig.add_shape(type="rect", xref="x", x0=t_n - 0.5, x1=t_n + 0.5, y0=-0.5, y1=b_n - 0.5,
                      line=dict(color=COLORS["pending"], width=2, dash="dash"))
    has_pending = any(p is not None for p in pending)
    fig.update_xaxes(title=labels["x"], type="category", categoryorder="array",
                     categoryarray=x + ([labels["next"]] if has_pending else []))
    fig.update_yaxes(autorange="reversed")
    return theme.style(fig, labels["title"], height=150 + 60 * b_n)


def step_time_vs_batch(batches: Sequence[int], ms: Sequence[float], tok_s: Sequence[float],
                       labels: L) -> go.Figure:
    """Decode step time (bars) and tokens per second (line, right axis) against batch size."""
    x = [str(b) for b in batches]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=x, y=list(ms), name=labels["ms"], marker_color=COLORS["bar"],
                         text=[f"{v:.2f}" for v in ms], textposition="outside", textfont=dict(size=14),
                         hovertemplate="batch %{x}: %{y:.3f} ms<extra></extra>"))
    fig.add_trace(go.Scatter(x=x, y=list(tok_s), name=labels["tok_s"], yaxis="y2", mode="lines+markers",
                             line=dict(color=COLORS["focus"], width=3), marker=dict(size=10),
                             hovertemplate="batch %{x}: %{y:,.0f} tok/s<extra></extra>"))
    fig.update_layout(yaxis=dict(title=labels["ms"], range=[0, max(ms) * 1.3]),
                      yaxis2=dict(title=labels["tok_s"], overlaying="y", side="right", rangemode="tozero",
                                  tickfont=FONT),
                      legend=dict(orientation="h", y=-0.2))
    fig.update_xaxes(title=labels["x"], type="category")
    return theme.style(fig, labels["title"], height=420)


def line_chart(x: Sequence[float], ys: Mapping[str, Sequence[float]], labels: L,
               log_x: bool = False, log_y: bool = False, hlines: Mapping[str, float] | None = None,
               markers: bool = True) -> go.Figure:
    """Several named series over one x axis (context sweep, TTFT vs TPOT, intensity)."""
    fig = go.Figure()
    for i, (name, y) in enumerate(ys.items()):
        fig.add_trace(go.Scatter(x=list(x), y=list(y), name=name, mode="lines+markers" if markers else "lines",
                                 line=dict(color=SERIES[i % len(SERIES)], width=3), marker=dict(size=9),
                                 hovertemplate="%{x}: %{y:,.4g}<extra>%{fullData.name}</extra>"))
    for name, y in (hlines or {}).items():
        _hline(fig, y, name, ACCEL_COLOR, "dash", log_y)
    fig.update_xaxes(title=labels["x"], type="log" if log_x else "linear")
    fig.update_yaxes(title=labels["y"], type="log" if log_y else "linear", rangemode="tozero",
                     exponentformat="SI")
    fig.update_layout(legend=dict(orientation="h", y=-0.22))
    return theme.style(fig, labels["title"], height=420)


def disaggregated_diagram(labels: L, n_prefill: int = 2, n_decode: int = 3) -> go.Figure:
    """Prefill machines on the left hand each prompt's KV cache over a link to decode machines on
    the right; requests come in on the left, tokens stream out on the right."""
    fig = go.Figure()

    def box(x0: float, y0: float, x1: float, y1: float, color: str, text: str) -> None:
        fig.add_shape(type="rect", x0=x0, y0=y0, x1=x1, y1=y1, line=dict(color=color, width=3),
                      fillcolor=color + "22", layer="below")
        fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2, text=text, showarrow=False,
                           font=dict(size=14, color="#222222"))

    def arrow(x0: float, y0: float, x1: float, y1: float, color: str, text: str = "", width: int = 3) -> None:
        fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                           showarrow=True, arrowhead=3, arrowsize=1.2, arrowwidth=width, arrowcolor=color,
                           text="")
        if text:
            fig.add_annotation(x=(x0 + x1) / 2, y=(y0 + y1) / 2 + 0.42, text=text, showarrow=False,
                               font=dict(size=15, color=color), bgcolor="rgba(255,255,255,0.85)")

    top = max(n_prefill, n_decode)
    box(0, -0.2, 1.5, top + 0.2, "#888888", labels["requests"])
    for i in range(n_prefill):
        y = top - (i + 0.5) * top / n_prefill
        box(2.3, y - 0.4, 5.3, y + 0.4, COLORS["prefill"], labels["prefill"].format(i=i + 1))
        arrow(1.5, top / 2, 2.3, y, "#888888")
    for j in range(n_decode):
        y = top - (j + 0.5) * top / n_decode
        box(8.3, y - 0.4, 11.3, y + 0.4, COLORS["decode"], labels["decode"].format(i=j + 1))
        arrow(11.3, y, 12.1, y, COLORS["decode"])
    arrow(5.3, top / 2, 8.3, top / 2, COLORS["focus"], labels["transfer"], width=5)
    fig.add_annotation(x=12.2, y=top / 2, text=labels["tokens"], showarrow=False, xanchor="left",
                       font=dict(size=14, color="#222222"))
    fig.update_xaxes(visible=False, range=[-0.2, 13.6], fixedrange=True)
    fig.update_yaxes(visible=False, range=[-0.6, top + 0.6], fixedrange=True)
    fig.update_layout(showlegend=False, plot_bgcolor="rgba(0,0,0,0)")
    return theme.style(fig, labels["title"], height=420)


def grouped_logits(logits: Sequence[Sequence[float]], tokens: Sequence[str] | Sequence[Sequence[str]],
                   chosen: Sequence[int | None], seq_labels: Sequence[str], title: str, y_label: str) -> go.Figure:
    """Logits of several sequences on one axis grouped by sequence (a two-level category axis);
    each sequence's chosen token in the same colour as on the one-sequence pages. ``tokens`` names
    the bars: one list for every sequence, or a list per sequence (each its own top tokens)."""
    per_seq = bool(tokens) and not isinstance(tokens[0], str)
    outer, inner, ys, colors, text = [], [], [], [], []
    for b, row in enumerate(logits):
        names = tokens[b] if per_seq else tokens
        for i, v in enumerate(row):
            outer.append(seq_labels[b])
            inner.append(names[i])
            ys.append(v)
            colors.append(COLORS["focus"] if i == chosen[b] else COLORS["bar"])
            text.append(f"{v:.3f}")
    fig = go.Figure(go.Bar(x=[outer, inner], y=ys, marker_color=colors, text=text, textposition="outside",
                           textfont=dict(size=14), hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    lo, hi = min(0.0, min(ys)), max(0.0, max(ys))
    pad = 0.25 * (hi - lo or 1.0)
    fig.update_yaxes(title=y_label, range=[lo - pad, hi + pad], zeroline=True)
    return theme.style(fig, title, height=400)


def speedup_chart(ns: Sequence[int], series: dict[str, Sequence[float]], title: str,
                  x_title: str, y_title: str) -> go.Figure:
    """Lines over N on a log y axis, one per named series (e.g. measured speed-up, FLOP ratio)."""
    palette = [COLORS["focus"], COLORS["prompt"], COLORS["processed"], COLORS["pending"]]
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
    return theme.style(fig, title, height=440)
