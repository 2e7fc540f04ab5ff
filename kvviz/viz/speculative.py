"""Plotly builders for speculative decoding: a round record (kvviz.speculative.records.SpeculativeRound) or a speed-up
measurement (kvviz.speculative.SpeedMeasurement) in, a figure out (no streamlit). The builders a
stepping page calls for every event (``proposals_spec``, ``position_spec``, ``cache_spec``) return
plain plotly JSON, which is fast; their ``*_figure`` twins wrap it in a ``go.Figure``.

Colours: the draft's q in the "pending" orange (it only proposes), the target's p in the "prompt"
blue; accepted green, rejected vermillion, untested and removed grey (kvviz.viz.theme.COLORS). Every
visible word comes in through ``labels`` (English defaults in LABELS) so pages can translate.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import plotly.graph_objects as go

from kvviz.cost import speculative_speedup
from kvviz.speculative import SpeedMeasurement
from kvviz.speculative.measure import SelfSpeedMeasurement
from kvviz.speculative.records import CacheRowState, Speculation, SpeculativeRound
from kvviz.viz import theme
from kvviz.viz.theme import COLORS, FONT

DRAFT_COLOR = COLORS["pending"]
TARGET_COLOR = COLORS["prompt"]
RESIDUAL_COLOR = COLORS["focus"]
STATUS_COLOR = {True: COLORS["processed"], False: COLORS["focus"], None: COLORS["removed"]}
CACHE_COLOR = {"cached": COLORS["bar"], "kept": COLORS["processed"], "removed": COLORS["removed"]}
U_COLOR = "#000000"
MARK = {True: "✓", False: "✗", None: "–"}       # a proposal's verdict: accepted, rejected, not tested
UNTESTED_Y = 0.08        # an untested proposal's empty marker, just above the test row's baseline

LABELS = {
    "draft": "draft q(x)", "target": "target p(x)", "probability": "probability",
    "accept_probability": "min(1, p/q)", "u": "u (uniform draw)", "accepted": "accepted",
    "rejected": "rejected", "untested": "not tested", "no_proposals": "no proposals: a plain step",
    "residual": "residual norm(max(0, p − q))", "residual_short": "residual", "proposed": "proposed", "drawn": "drawn",
    "expected": "expected (α = {a:.2f}, c = {c:.2f})", "expected_measured": "expected, measured α and c",
    "expected_verify": "expected with the verification pass's measured cost", "measured": "measured",
    "plain": "plain decoding", "gamma": "γ (draft tokens per round)", "speedup": "speed-up (×)",
    "target_cache": "target cache", "draft_cache": "draft cache", "position": "position",
    "cached": "cached before", "kept": "written, kept", "removed": "written, removed",
}
SELF_LABELS = {   # the self-drafting builders' own words (with LABELS': prompt lookup, early exit)
    "draft_row": "draft", "target_row": "target's greedy token", "verified": "verified position",
    "target_token": "the target's own token", "round": "round", "tokens": "tokens",
    "rejected_tokens": "proposed, rejected", "accepted_tokens": "proposed, accepted",
    "acceptance_rate": "acceptance rate", "prompt-lookup": "prompt lookup", "early-exit": "early exit",
    "no_draft": "no draft: a plain step", "unused": "computed, thrown away",
}
ALL_LABELS = {**LABELS, **SELF_LABELS}


def proposal_labels(round_: SpeculativeRound, vocab: Sequence[str]) -> list[str]:
    """x labels of a round's proposals: "1 · sunny", "2 · and", …"""
    return [f"{i + 1} · {vocab[pr.token]}" for i, pr in enumerate(round_.proposals)]


def proposals_spec(round_: SpeculativeRound, vocab: Sequence[str], title: str,
                   labels: Mapping[str, str] | None = None) -> dict:
    """The round's proposals side by side, as plain plotly JSON (a page draws many of them). Top: q(x)
    of the draft and p(x) of the target for each proposed token x. Bottom: the chance it is accepted,
    min(1, p/q), coloured accepted / rejected, with the uniform draw u as a diamond (accepted exactly
    when u lies below the bar; greedy has no u: accepted when p = 1, the target's argmax); a proposal
    not tested has no bar there, an empty marker labelled "not tested" (a bar would read as a verdict)."""
    w = theme.words(LABELS, labels)
    if not round_.proposals:
        hidden = dict(visible=False)
        return {"data": [], "layout": theme.layout(
            title, 200, ticks=False, top=60, legend=theme.LEGEND_ABOVE, xaxis=hidden, yaxis=hidden, annotations=[dict(
            text=w["no_proposals"], showarrow=False, font=dict(size=16), x=0.5, y=0.5, xref="paper", yref="paper")])}
    xs = proposal_labels(round_, vocab)
    props = round_.proposals
    verdict = {True: w["accepted"], False: w["rejected"], None: w["untested"]}
    status = [verdict[pr.accepted] for pr in props]
    data = [
        dict(type="bar", x=xs, y=[pr.q for pr in props], name=w["draft"], marker=dict(color=DRAFT_COLOR),
             text=[f"{pr.q:.2f}" for pr in props], textposition="outside", cliponaxis=False,
             hovertemplate="%{x}: q = %{y:.4f}<extra></extra>", xaxis="x", yaxis="y"),
        dict(type="bar", x=xs, y=[pr.p for pr in props], name=w["target"], marker=dict(color=TARGET_COLOR),
             text=[f"{pr.p:.2f}" for pr in props], textposition="outside", cliponaxis=False,
             hovertemplate="%{x}: p = %{y:.4f}<extra></extra>", xaxis="x", yaxis="y"),
        # an untested proposal has no bar (a grey bar of its min(1, p/q) read as a verdict): an empty
        # marker labelled "not tested" instead (the last trace)
        dict(type="bar", x=xs, y=[pr.acceptance_probability if pr.accepted is not None else None for pr in props],
             name=w["accept_probability"],
             marker=dict(color=[STATUS_COLOR[pr.accepted] for pr in props]),
             text=[f"{s} {MARK[pr.accepted]}" for s, pr in zip(status, props)],
             textposition="outside", cliponaxis=False, customdata=status, showlegend=False,
             hovertemplate="%{x}: min(1, p/q) = %{y:.4f}, %{customdata}<extra></extra>", xaxis="x2", yaxis="y2"),
    ]
    tested = [(x, pr.u) for x, pr in zip(xs, props) if pr.u is not None]
    if tested:
        data.append(dict(type="scatter", x=[x for x, _ in tested], y=[u for _, u in tested], mode="markers",
                         name=w["u"], marker=dict(symbol="diamond", size=14, color=U_COLOR,
                                                  line=dict(color="white", width=1)),
                         hovertemplate="%{x}: u = %{y:.4f}<extra></extra>", xaxis="x2", yaxis="y2"))
    untested = [x for x, pr in zip(xs, props) if pr.accepted is None]
    if untested:
        data.append(dict(type="scatter", x=untested, y=[UNTESTED_Y] * len(untested), mode="markers+text",
                         marker=dict(symbol="square-open", size=14, color=STATUS_COLOR[None], line=dict(width=2)),
                         # on two lines: side by side, German's "noch nicht getestet" ran into its neighbour's
                         text=[f"{'<br>'.join(w['untested'].rsplit(' ', 1))} {MARK[None]}"] * len(untested),
                         textposition="top center",
                         cliponaxis=False, showlegend=False, hovertemplate=f"%{{x}}: {w['untested']}<extra></extra>",
                         xaxis="x2", yaxis="y2"))
    ticks = dict(range=[0, 1.25], tickvals=[0, 0.5, 1], tickfont=FONT)
    # two rows sharing x (what make_subplots(rows=2, shared_xaxes=True, row_heights=[0.55, 0.45]) lays out)
    return {"data": data, "layout": theme.layout(
        title, 460, ticks=False, top=60, legend=theme.LEGEND_ABOVE, barmode="group", bargap=0.25,
        xaxis=dict(anchor="y", domain=[0.0, 1.0], matches="x2", showticklabels=False, type="category", tickfont=FONT),
        xaxis2=dict(anchor="y2", domain=[0.0, 1.0], type="category", tickfont=FONT),
        yaxis=dict(anchor="x", domain=[0.494, 1.0], title=dict(text=w["probability"]), **ticks),
        yaxis2=dict(anchor="x2", domain=[0.0, 0.414], title=dict(text=w["accept_probability"]), **ticks))}


def proposals_figure(round_: SpeculativeRound, vocab: Sequence[str], title: str,
                     labels: Mapping[str, str] | None = None) -> go.Figure:
    """``proposals_spec`` as a figure (same arguments)."""
    return go.Figure(proposals_spec(round_, vocab, title, labels))


def position_tokens(round_: SpeculativeRound, i: int, top: int = 10) -> list[int]:
    """The tokens worth drawing at position i: the largest of p_i, q_i (and the residual there), the
    proposed and the emitted token always among them; ordered by p_i, then q_i."""
    p = round_.p[i]
    q = round_.q[i] if i < round_.gamma else p
    score = (p + q) if round_.residual is None or i != round_.rejected_at else (p + q + round_.residual)
    best = score.topk(min(top, score.numel()))
    chosen = {t for t, v in zip(best.indices.tolist(), best.values.tolist()) if v > 1e-3}   # no empty bars
    if i < round_.gamma:
        chosen.add(round_.proposals[i].token)
    if i == (round_.rejected_at if round_.rejected_at is not None else round_.gamma):
        chosen.add(round_.emitted[-1])
    return sorted(chosen, key=lambda t: (-float(p[t]), -float(q[t]), t))


def position_spec(round_: SpeculativeRound, i: int, vocab: Sequence[str], title: str, top: int = 10,
                  labels: Mapping[str, str] | None = None) -> dict:
    """The whole distributions at proposal position i (0..γ−1), or at the bonus position γ, as plain
    plotly JSON: the draft's q_i and the target's p_i over the most likely tokens; at the first
    rejection also the residual norm(max(0, p_i − q_i)) the correction is drawn from. The proposed
    token and the drawn token (correction or bonus) are marked."""
    w = theme.words(LABELS, labels)
    if not 0 <= i <= round_.gamma:
        raise ValueError(f"position {i} is outside 0..{round_.gamma}")
    toks = position_tokens(round_, i, top)
    xs = [vocab[t] for t in toks]
    traces = []
    if i < round_.gamma:
        traces.append(dict(type="bar", x=xs, y=[float(round_.q[i, t]) for t in toks], name=w["draft"],
                           marker=dict(color=DRAFT_COLOR), hovertemplate="%{x}: q = %{y:.4f}<extra></extra>"))
    traces.append(dict(type="bar", x=xs, y=[float(round_.p[i, t]) for t in toks], name=w["target"],
                       marker=dict(color=TARGET_COLOR), hovertemplate="%{x}: p = %{y:.4f}<extra></extra>"))
    if round_.residual is not None and i == round_.rejected_at:
        # hatched in white over its colour ("overlay": plotly's default "replace" drew the white hatch alone,
        # on nothing: the bar was invisible on a light page)
        hatch = dict(shape="/", fgcolor="white", fillmode="overlay")
        traces.append(dict(type="bar", x=xs, y=[float(round_.residual[t]) for t in toks], name=w["residual"],
                           marker=dict(color=RESIDUAL_COLOR, pattern=hatch),
                           hovertemplate=f"%{{x}}: {w['residual_short']} = %{{y:.4f}}<extra></extra>"))
    notes = []         # x as the category's index: plotly places a note by index on a category axis
    if i < round_.gamma:
        notes.append(dict(x=toks.index(round_.proposals[i].token), y=1.12, text=f"▼ {w['proposed']}",
                          showarrow=False, font=dict(size=14, color=DRAFT_COLOR)))
    if i == (round_.rejected_at if round_.rejected_at is not None else round_.gamma):
        notes.append(dict(x=toks.index(round_.emitted[-1]), y=1.22, text=f"▼ {w['drawn']}", showarrow=False,
                          font=dict(size=14, color=RESIDUAL_COLOR if i < round_.gamma else TARGET_COLOR)))
    return {"data": traces, "layout": theme.layout(
        title, 360, ticks=False, top=60, legend=theme.LEGEND_ABOVE, barmode="group", bargap=0.2, annotations=notes,
        xaxis=dict(type="category", tickfont=FONT),
        # three ticks, as the proposals' strip: presenter mode fits this chart to the 90 px a numeric axis
        # is given there (plotly_view.js needHeight), where five labels touched each other
        yaxis=dict(title=dict(text=w["probability"]), range=[0, 1.3], tickvals=[0, 0.5, 1.0], tickfont=FONT))}


def position_figure(round_: SpeculativeRound, i: int, vocab: Sequence[str], title: str, top: int = 10,
                    labels: Mapping[str, str] | None = None) -> go.Figure:
    """``position_spec`` as a figure (same arguments)."""
    return go.Figure(position_spec(round_, i, vocab, title, top, labels))


def residual_figure(round_: SpeculativeRound, vocab: Sequence[str], title: str, top: int = 10,
                    labels: Mapping[str, str] | None = None) -> go.Figure:
    """p, q and the residual at the round's first rejection (``position_figure`` there)."""
    if round_.rejected_at is None:
        raise ValueError("every proposal of this round was accepted: there is no residual")
    return position_figure(round_, round_.rejected_at, vocab, title, top, labels)


def cache_spec(target_rows: Sequence[CacheRowState], draft_rows: Sequence[CacheRowState], vocab: Sequence[str],
               title: str, window: int = 14, labels: Mapping[str, str] | None = None) -> dict:
    """Both caches of a round (``Speculation.cache_rows``), one strip each, the last ``window``
    positions, as plain plotly JSON: rows there before the round, rows written and kept, and rows
    written for rejected proposals, struck out — the ones the rollback (``crop``) removes. No
    ``draft_rows`` (prompt lookup has no draft cache): the target's strip alone."""
    w = theme.words(LABELS, labels)
    last = max([r.position for r in (*target_rows, *draft_rows)], default=-1)
    first = max(0, last - window + 1)
    positions = list(range(first, last + 1))
    codes = {"cached": 0, "kept": 1, "removed": 2}
    z, text, hover = [], [], []
    strips = [(w["draft_cache"], draft_rows)] if draft_rows else []      # prompt lookup: no draft cache
    strips.append((w["target_cache"], target_rows))
    for _, rows in strips:                             # draft at the bottom, target on top
        by_pos = {r.position: r for r in rows}
        z.append([codes[by_pos[p].status] if p in by_pos else None for p in positions])
        text.append([("<s>{}</s>" if by_pos[p].status == "removed" else "{}").format(vocab[by_pos[p].token])
                     if p in by_pos else "" for p in positions])
        hover.append([f"{p}: {vocab[by_pos[p].token]} ({w[by_pos[p].status]})" if p in by_pos else ""
                      for p in positions])
    scale = [[0.0, CACHE_COLOR["cached"]], [0.333, CACHE_COLOR["cached"]], [0.334, CACHE_COLOR["kept"]],
             [0.666, CACHE_COLOR["kept"]], [0.667, CACHE_COLOR["removed"]], [1.0, CACHE_COLOR["removed"]]]
    data = [dict(type="heatmap", z=z, x=[str(p) for p in positions], y=[name for name, _ in strips],
                 zmin=0, zmax=2, colorscale=scale, showscale=False, text=text, texttemplate="%{text}",
                 textfont=dict(size=14), customdata=hover, xgap=3, ygap=6,
                 hovertemplate="%{customdata}<extra></extra>")]
    for name in ("cached", "kept", "removed"):        # a legend for the three fates
        data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=w[name],
                         marker=dict(symbol="square", size=14, color=CACHE_COLOR[name])))
    return {"data": data, "layout": theme.layout(
        title, 240 if len(strips) == 2 else 190, ticks=False, top=60, legend=theme.LEGEND_ABOVE,
        xaxis=dict(title=dict(text=w["position"]), type="category", tickfont=FONT),
        yaxis=dict(tickfont=FONT), plot_bgcolor="white")}


def cache_figure(target_rows: Sequence[CacheRowState], draft_rows: Sequence[CacheRowState], vocab: Sequence[str],
                 title: str, window: int = 14, labels: Mapping[str, str] | None = None) -> go.Figure:
    """``cache_spec`` as a figure (same arguments)."""
    return go.Figure(cache_spec(target_rows, draft_rows, vocab, title, window, labels))


def speedup_figure(gammas: Sequence[int], title: str, alpha: float | None = None, c: float | None = None,
                   measurement: SpeedMeasurement | None = None,
                   labels: Mapping[str, str] | None = None) -> go.Figure:
    """Speed-up over plain decoding against γ: the expected improvement (1 − α^(γ+1)) / ((1 − α)(γc + 1))
    for a given α and c (kvviz.cost.speculative_speedup), and, from a measurement, the same formula
    with the α and c measured per γ, the formula with the verification pass's measured cost, and the
    measured speed-up. A line at 1 is plain decoding."""
    w = theme.words(LABELS, labels)
    gammas = list(gammas)
    traces = []
    if alpha is not None and c is not None:
        traces.append(go.Scatter(x=gammas, y=[speculative_speedup(alpha, g, c) for g in gammas], mode="lines+markers",
                                 name=w["expected"].format(a=alpha, c=c), line=dict(color=TARGET_COLOR, width=3),
                                 hovertemplate="γ = %{x}: %{y:.2f}×<extra></extra>"))
    if measurement is not None:
        pts = measurement.points
        xs = [p.gamma for p in pts]
        traces.append(go.Scatter(x=xs, y=[p.expected for p in pts], mode="lines+markers", name=w["expected_measured"],
                                 line=dict(color=TARGET_COLOR, dash="dash", width=2),
                                 customdata=[[p.acceptance_rate, measurement.c] for p in pts],
                                 hovertemplate="γ = %{x}: %{y:.2f}× (α = %{customdata[0]:.2f}, "
                                               "c = %{customdata[1]:.2f})<extra></extra>"))
        traces.append(go.Scatter(x=xs, y=[p.expected_with_verify for p in pts], mode="lines+markers",
                                 name=w["expected_verify"], line=dict(color=DRAFT_COLOR, dash="dot", width=2),
                                 customdata=[p.verify_ms / measurement.target_ms for p in pts],
                                 hovertemplate="γ = %{x}: %{y:.2f}× (v = %{customdata:.2f})<extra></extra>"))
        traces.append(go.Scatter(x=xs, y=[p.measured for p in pts], mode="markers", name=w["measured"],
                                 marker=dict(symbol="diamond", size=14, color=RESIDUAL_COLOR),
                                 customdata=[[p.speculative_tps, p.plain_tps] for p in pts],
                                 hovertemplate="γ = %{x}: %{y:.2f}× (%{customdata[0]:,.0f} vs "
                                               "%{customdata[1]:,.0f} tok/s)<extra></extra>"))
    ys = [y for t in traces for y in t.y if y is not None] or [1.0]
    fig = go.Figure(traces, theme.layout(
        title, 440, ticks=False, top=60,
        legend=dict(orientation="h", y=-0.2, yanchor="top", x=0, xanchor="left", font=FONT),
        margin=dict(l=10, r=10, t=50, b=10), xaxis=dict(title=w["gamma"], tickvals=gammas, tickfont=FONT),
        yaxis=dict(title=w["speedup"], range=[0, max(1.2, max(ys) * 1.15)], tickfont=FONT)))
    fig.add_hline(y=1.0, line=dict(color="#666666", dash="dash", width=1))
    fig.add_annotation(x=1, xref="paper", xanchor="right", y=1.0, yanchor="bottom", text=w["plain"],
                       showarrow=False, font=dict(size=13, color="#666666"))
    return fig


# ---- self-drafting on a transformers model: prompt lookup and early exit --------------------------------

def verify_spec(round_: SpeculativeRound, vocab: Sequence[str], title: str, labels: Mapping[str, str] | None = None,
                pretty: Callable[[str], str] | None = None) -> dict:
    """The one verification pass of a self-drafted round as plain plotly JSON: one column per verified
    position (the last fed one and every draft position), the draft's token above the target's greedy
    token there. A draft token is accepted while it equals the target's (green), the first that does
    not is rejected (vermillion) and the rest are not tested (grey); the target's token after the
    accepted ones is its own (blue), the rest of its row is thrown away. ``pretty``: token → shown
    text (default the token itself)."""
    w = theme.words(ALL_LABELS, labels)
    show = pretty or (lambda tok: tok)
    n = len(round_.draft)
    first = round_.start + len(round_.fed) - 1                # the last fed position's output predicts first+1
    xs = [str(first + 1 + i) for i in range(n + 1)]
    codes = {"accepted": 0, "rejected": 1, "untested": 2, "target": 3, "unused": 4}
    colour = {"accepted": COLORS["processed"], "rejected": COLORS["focus"], "untested": COLORS["removed"],
              "target": TARGET_COLOR, "unused": "#F2F2F2"}
    d_state = ["accepted" if i < round_.n_accepted else "rejected" if i == round_.n_accepted else "untested"
               for i in range(n)] + ["unused"]
    t_state = ["target" if i == round_.n_accepted else "accepted" if i < round_.n_accepted else "unused"
               for i in range(n + 1)]
    verdict = {"accepted": MARK[True], "rejected": MARK[False], "untested": MARK[None]}
    d_text = [f"{show(vocab[tok])} {verdict[d_state[i]]}" for i, tok in enumerate(round_.draft)] + [""]
    # the target's tokens after its own were computed and are thrown away: not drawn (the hover has them)
    t_text = [show(vocab[tok]) if s != "unused" else "" for tok, s in zip(round_.argmax, t_state)]
    name = {"accepted": w["accepted"], "rejected": w["rejected"], "untested": w["untested"],
            "target": w["target_token"], "unused": ""}
    keys = list(codes)
    scale = []
    for i, k in enumerate(keys):                            # a stepwise colour scale: one colour per code
        scale += [[i / len(keys), colour[k]], [(i + 1) / len(keys) - 1e-9 if i < len(keys) - 1 else 1.0, colour[k]]]
    z = [[codes[s] + 0.5 for s in d_state], [codes[s] + 0.5 for s in t_state]]
    hover = [[f"{x}: {tx} ({name[s]})" if tx else "" for x, tx, s in zip(xs, d_text, d_state)],
             [f"{x}: {show(vocab[tok])} ({name[s] or w['unused']})" for x, tok, s in zip(xs, round_.argmax, t_state)]]
    data = [dict(type="heatmap", z=z, x=xs, y=[w["draft_row"], w["target_row"]], zmin=0, zmax=len(keys),
                 colorscale=scale, showscale=False, text=[d_text, t_text], texttemplate="%{text}",
                 textfont=dict(size=15, color="white"), customdata=hover, xgap=3, ygap=6,
                 hovertemplate="%{customdata}<extra></extra>")]
    for k in ("accepted", "rejected", "untested", "target"):
        data.append(dict(type="scatter", x=[None], y=[None], mode="markers", name=name[k],
                         marker=dict(symbol="square", size=14, color=colour[k])))
    if not n:
        data[0]["text"][0] = [w["no_draft"]]
    return {"data": data, "layout": theme.layout(
        title, 230, ticks=False, top=70, legend=theme.LEGEND_ABOVE,
        xaxis=dict(title=dict(text=w["verified"]), type="category", tickfont=FONT),
        yaxis=dict(tickfont=FONT, autorange="reversed"), plot_bgcolor="white")}


def lookup_rounds_spec(run: Speculation, title: str, labels: Mapping[str, str] | None = None,
                       current: int | None = None) -> dict:
    """Every round of a self-drafted run as plain plotly JSON: stacked bars of the draft tokens the
    target accepted, the target's own token (one a round) and the rejected draft tokens; the round
    ``current`` outlined."""
    w = theme.words(ALL_LABELS, labels)
    xs = [str(r.index + 1) for r in run.rounds]
    acc = [r.n_accepted for r in run.rounds]
    rej = [len(r.draft) - r.n_accepted for r in run.rounds]
    data = [dict(type="bar", x=xs, y=acc, name=w["accepted_tokens"], marker=dict(color=COLORS["processed"]),
                 hovertemplate=f"{w['round']} %{{x}}: %{{y}} {w['accepted_tokens']}<extra></extra>"),
            dict(type="bar", x=xs, y=[1] * len(xs), name=w["target_token"], marker=dict(color=TARGET_COLOR),
                 hovertemplate=f"{w['round']} %{{x}}: {w['target_token']}<extra></extra>"),
            dict(type="bar", x=xs, y=rej, name=w["rejected_tokens"],
                 marker=dict(color=COLORS["removed"], pattern=dict(shape="/", fgcolor="white", fillmode="overlay")),
                 hovertemplate=f"{w['round']} %{{x}}: %{{y}} {w['rejected_tokens']}<extra></extra>")]
    shapes = []
    if current is not None and 0 <= current < len(xs):
        top = acc[current] + 1 + rej[current]
        shapes.append(dict(type="rect", xref="x", yref="y", x0=current - 0.45, x1=current + 0.45, y0=0, y1=top,
                           line=dict(color="#000000", width=3), fillcolor="rgba(0,0,0,0)"))
    return {"data": data, "layout": theme.layout(
        title, 300, ticks=False, top=70, legend=theme.LEGEND_ABOVE, barmode="stack", bargap=0.3, shapes=shapes,
        xaxis=dict(title=dict(text=w["round"]), type="category", tickfont=FONT),
        yaxis=dict(title=dict(text=w["tokens"]), tickfont=FONT, dtick=1 if max([a + 1 + b for a, b in zip(acc, rej)],
                                                                              default=1) <= 8 else None))}


def acceptance_spec(rows: Sequence[tuple[str, str, float | None]], title: str,
                    labels: Mapping[str, str] | None = None) -> dict:
    """Acceptance rates as grouped bars, plain plotly JSON: ``rows`` are (case label, method, rate),
    one bar group per case, one colour per method ("prompt-lookup", "early-exit"); None (nothing was
    proposed) is drawn as 0 with a dash."""
    w = theme.words(ALL_LABELS, labels)
    colour = {"prompt-lookup": TARGET_COLOR, "early-exit": DRAFT_COLOR}
    data = []
    for method in dict.fromkeys(m for _, m, _ in rows):
        mine = [(case, rate) for case, m, rate in rows if m == method]
        data.append(dict(type="bar", x=[c for c, _ in mine], y=[r or 0.0 for _, r in mine], name=w[method],
                         marker=dict(color=colour.get(method, COLORS["bar"])),
                         text=["–" if r is None else f"{r:.0%}" for _, r in mine], textposition="outside",
                         cliponaxis=False, hovertemplate="%{x}: %{y:.1%}<extra>" + w[method] + "</extra>"))
    return {"data": data, "layout": theme.layout(
        title, 320, ticks=False, top=70, legend=theme.LEGEND_ABOVE, barmode="group", bargap=0.3,
        xaxis=dict(type="category", tickfont=FONT),
        yaxis=dict(title=dict(text=w["acceptance_rate"]), range=[0, 1.15], tickformat=".0%", tickfont=FONT))}


def self_speedup_spec(measurement: SelfSpeedMeasurement, cases: Mapping[str, str], title: str,
                      labels: Mapping[str, str] | None = None) -> dict:
    """The measured speed-up over plain greedy decoding per prompt (``cases``: name → label) and
    method, plain plotly JSON, with plain decoding's 1× as a dashed line."""
    w = theme.words(ALL_LABELS, labels)
    colour = {"prompt-lookup": TARGET_COLOR, "early-exit": DRAFT_COLOR}
    data = []
    for method in dict.fromkeys(p.method for p in measurement.points):
        pts = [p for p in measurement.points if p.method == method]
        data.append(dict(type="bar", x=[cases.get(p.prompt, p.prompt) for p in pts], y=[p.measured for p in pts],
                         name=w[method], marker=dict(color=colour.get(method, COLORS["bar"])),
                         text=[f"{p.measured:.2f}×" for p in pts], textposition="outside", cliponaxis=False,
                         hovertemplate="%{x}: %{y:.2f}×<extra>" + w[method] + "</extra>"))
    top = max([p.measured for p in measurement.points] + [1.0])
    return {"data": data, "layout": theme.layout(
        title, 340, ticks=False, top=70, legend=theme.LEGEND_ABOVE, barmode="group", bargap=0.3,
        shapes=[dict(type="line", xref="paper", x0=0, x1=1, yref="y", y0=1, y1=1,
                     line=dict(color="#666666", dash="dash", width=1))],
        annotations=[dict(x=1, xref="paper", xanchor="right", y=1, yanchor="bottom", text=w["plain"],
                          showarrow=False, font=dict(size=13, color="#666666"))],
        xaxis=dict(type="category", tickfont=FONT),
        yaxis=dict(title=dict(text=w["speedup"]), range=[0, top * 1.25], tickfont=FONT))}
