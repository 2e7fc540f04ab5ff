"""Turn a run into plain data: the trace JSON and the cache table (the page downloads both)."""
from __future__ import annotations

import math

import pandas as pd
import torch

from kvviz.decoding.stepper import CacheSnapshot, Event, Run


def _round(x: torch.Tensor | float, nd: int = 6):
    """Nested lists of floats rounded for JSON; -inf/inf/nan become strings JSON can carry."""
    if isinstance(x, torch.Tensor):
        return _round(x.tolist(), nd)
    if isinstance(x, list):
        return [_round(v, nd) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return round(float(x), nd)


# A vocabulary larger than this (SmolLM2: 49,152 tokens) has its TOP_LOGITS largest logits and
# probabilities in each event, most likely first, instead of all of them (≈ 2.5 MB per event).
LOGITS_IN_FULL = 1_000
TOP_LOGITS = 20


def _top(values: list[float], n: int) -> list[int]:
    return sorted(range(len(values)), key=lambda i: -values[i])[:n]


def event_dict(ev: Event, logit_tokens: list[str]) -> dict:
    """One event in the trace's JSON shape (see README, "Trace export"); with a vocabulary of more
    than LOGITS_IN_FULL tokens, ``logits`` and ``probs`` hold the tokens of the TOP_LOGITS largest
    logits (most likely first), ``kept`` those of them the rule kept, and ``kept_count`` how many it
    kept in all."""
    values = ev.logits.tolist()
    shown = range(len(values)) if len(logit_tokens) <= LOGITS_IN_FULL else _top(values, TOP_LOGITS)
    d = {
        "index": ev.index,
        "phase": ev.phase,
        "tokens": ev.tokens,
        "positions": ev.positions,
        "cache_len": ev.cache_len,
        "attention": None,
        "output": None,
        "logits": {logit_tokens[i]: _round(values[i]) for i in shown},
        "chosen": ev.chosen,
        "pending": ev.pending,
        "kv_computed": ev.kv_computed,
        "kv_recompute": ev.kv_recompute,
        "recompute_max_abs_diff": None,
    }
    if ev.record is not None:
        att = ev.record.attention                    # [L, H, N, T]
        if getattr(ev.record, "attention_map", None) is not None:
            # a long pass recorded with Keep (kvviz.models.base): the newest query's row only, and its position
            att = att[:, :, -1:]
            d["attention_positions"] = ev.positions[-1:]
        d["attention"] = _round(att[0] if att.shape[0] == 1 else att)
        d["output"] = _round(ev.record.output)       # [N, d_out]
        d["recompute_max_abs_diff"] = _round(ev.check.max_abs_diff, 9)  # type: ignore[union-attr]
        if ev.repaired:
            d["repaired"] = True
    if ev.choice is not None:
        c = ev.choice
        d["rule"] = c.rule
        if len(logit_tokens) <= LOGITS_IN_FULL:
            d["kept"] = [logit_tokens[i] for i in c.kept]
            d["probs"] = {t: _round(p) for t, p in zip(logit_tokens, c.probs)}
        else:
            kept = set(c.kept)                        # the same tokens as "logits" (the rule keeps the top ones)
            d["kept"] = [logit_tokens[i] for i in shown if i in kept]
            d["kept_count"] = len(c.kept)
            d["probs"] = {logit_tokens[i]: _round(c.probs[i]) for i in shown}
    return d


def run_dict(run: Run, logit_tokens: list[str]) -> dict:
    return {"model": run.model_name, "prompt": run.prompt, "rule": run.rule, "seed": run.seed,
            "events": [event_dict(e, logit_tokens) for e in run.events]}


def _fmt_vec(vals: list[float], dims: int, constant: bool = False, max_items: int = 4) -> str:
    """``vals``: the first values of a vector of ``dims`` numbers (at least 3, or all of them);
    ``constant``: every entry equals the first (e.g. the weather heads' ±1 keys)."""
    if dims > max_items and constant:
        return f"({vals[0]:+.4g} × {dims})"
    if dims > max_items:
        return "(" + ", ".join(f"{v:.4g}" for v in vals[:3]) + f", … ({dims} dims))"
    return "(" + ", ".join(f"{v:.4g}" for v in vals[:dims]) + ")"


def kv_column(kind: str, head: int, n_heads: int, head_labels: list[str] | None = None) -> str:
    """Column name of the cache table for ``kind`` ("k" or "v") of ``head``: "k", "k (head 2)", ..."""
    if n_heads <= 1:
        return kind
    return f"{kind} ({head_labels[head] if head_labels else f'head {head + 1}'})"


def _shown(t: torch.Tensor | None) -> tuple[list, list, int]:
    """[H][T][≤4] first values and [H][T] "constant row" flags as Python lists, computed once
    (indexing tensors cell by cell is slow), and the row length."""
    if t is None:
        return [], [], 0
    rows = t[0]                                                    # [H, T, D]
    return rows[:, :, :4].tolist(), (rows == rows[:, :, :1]).all(-1).tolist(), rows.shape[-1]


def cache_table(cache: CacheSnapshot, head_labels: list[str] | None = None, layer: int = 0,
                position_base: int = 0) -> pd.DataFrame:
    """One row per cached position: position, token, K and V per head, event and phase. A row a
    sliding window evicted shows "—" for K and V; evicted and quantized rows say so in the phase.

    K and V may have different head counts (V shared by all heads gives one "v" column).
    ``position_base`` = 1 numbers positions from 1, as docs/design.md §2 does.
    """
    k, v = cache.keys[layer], cache.values[layer]     # [B, H_k, T, D_k], [B, H_v, T, D_v]
    shown = {"k": _shown(k), "v": _shown(v)}
    k_heads = 0 if k is None else k.shape[1]
    v_heads = 0 if v is None else v.shape[1]
    # k, v per head side by side; when V is shared by the heads, all keys first, then the value(s)
    order = ([(kind, h) for h in range(k_heads) for kind in "kv"] if k_heads == v_heads
             else [("k", h) for h in range(k_heads)] + [("v", h) for h in range(v_heads)])
    held = {r.position: i for i, r in enumerate(cache.held_rows)}   # position -> row of the K/V tensors
    rows = []
    for r in cache.rows:
        row = {"position": r.position + position_base, "token": r.token}
        i = held.get(r.position)
        for kind, h in order:
            vals, const, dims = shown[kind]
            n = k_heads if kind == "k" else v_heads
            row[kv_column(kind, h, n, head_labels)] = "—" if i is None else _fmt_vec(vals[h][i], dims, const[h][i])
        row["event"] = r.event
        row["phase"] = r.phase
        if r.rewritten_at is not None:
            row["phase"] = f"{r.phase}, rewritten at event {r.rewritten_at}"
        if r.quantized_at is not None:
            row["phase"] += f", quantized at event {r.quantized_at}"
        if r.evicted_at is not None:
            row["phase"] += f", evicted at event {r.evicted_at}"
        rows.append(row)
    return pd.DataFrame(rows)


def cache_shapes(cache: CacheSnapshot) -> pd.DataFrame:
    """One row per layer: the K and V tensor shapes ``[batch, heads, seq, head_dim]`` and their bytes."""
    rows = []
    for layer, (k, v) in enumerate(zip(cache.keys, cache.values)):
        shape = "—" if k is None else "[" + ", ".join(str(n) for n in k.shape) + "]"
        nbytes = sum(t.numel() * t.element_size() for t in (k, v) if t is not None)
        rows.append({"layer": layer + 1, "K shape": shape, "V shape": shape, "bytes (K + V)": nbytes})
    return pd.DataFrame(rows)
