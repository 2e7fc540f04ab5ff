"""Turn a run into plain data: the trace JSON and the cache table (the page downloads both)."""
from __future__ import annotations

import math

import pandas as pd
import torch

from kvviz.cache import CacheSnapshot
from kvviz.generation import Event, Run


def _round(x: torch.Tensor | float, nd: int = 6):
    """Nested lists of floats rounded for JSON; -inf/inf/nan become strings JSON can carry."""
    if isinstance(x, torch.Tensor):
        return _round(x.tolist(), nd)
    if isinstance(x, list):
        return [_round(v, nd) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return round(float(x), nd)


def event_dict(ev: Event, logit_tokens: list[str]) -> dict:
    """One event in the trace's JSON shape (see README, "Trace export")."""
    d = {
        "index": ev.index,
        "phase": ev.phase,
        "tokens": ev.tokens,
        "positions": ev.positions,
        "cache_len": ev.cache_len,
        "attention": None,
        "output": None,
        "logits": {t: _round(v) for t, v in zip(logit_tokens, ev.logits.tolist())},
        "chosen": ev.chosen,
        "pending": ev.pending,
        "kv_computed": ev.kv_computed,
        "kv_recompute": ev.kv_recompute,
        "recompute_max_abs_diff": None,
    }
    if ev.record is not None:
        att = ev.record.attention                    # [L, H, N, T]
        d["attention"] = _round(att[0] if att.shape[0] == 1 else att)
        d["output"] = _round(ev.record.output)       # [N, d_out]
        d["recompute_max_abs_diff"] = _round(ev.check.max_abs_diff, 9)  # type: ignore[union-attr]
        if ev.repaired:
            d["repaired"] = True
    if ev.choice is not None:
        d["rule"] = ev.choice.rule
        d["kept"] = [logit_tokens[i] for i in ev.choice.kept]
        d["probs"] = {t: _round(p) for t, p in zip(logit_tokens, ev.choice.probs)}
    return d


def run_dict(run: Run, logit_tokens: list[str]) -> dict:
    return {"model": run.model_name, "prompt": run.prompt, "rule": run.rule,
            "events": [event_dict(e, logit_tokens) for e in run.events]}


def _fmt_vec(vals: list[float], dims: int, max_items: int = 4) -> str:
    """``vals``: the first values of a vector of ``dims`` numbers (at least 3, or all of them)."""
    if dims > max_items:
        return "(" + ", ".join(f"{v:.4g}" for v in vals[:3]) + f", … ({dims} dims))"
    return "(" + ", ".join(f"{v:.4g}" for v in vals[:dims]) + ")"


def cache_table(cache: CacheSnapshot, head_labels: list[str] | None = None, layer: int = 0) -> pd.DataFrame:
    """One row per cached position: position, token, K and V per head, event and phase."""
    k, v = cache.keys[layer], cache.values[layer]     # [B, H, T, D]
    n_heads = 0 if k is None else k.shape[1]
    dims = 0 if k is None else k.shape[-1]
    # the few values shown, as Python lists once (indexing tensors cell by cell is slow): [H][T][≤4]
    k_head = [] if k is None else k[0, :, :, :4].tolist()
    v_head = [] if v is None else v[0, :, :, :4].tolist()
    rows = []
    for r in cache.rows:
        row = {"position": r.position, "token": r.token}
        for h in range(n_heads):
            label = (head_labels[h] if head_labels else f"head {h + 1}") if n_heads > 1 else ""
            suffix = f" ({label})" if label else ""
            row[f"k{suffix}"] = _fmt_vec(k_head[h][r.position], dims)
            row[f"v{suffix}"] = _fmt_vec(v_head[h][r.position], dims)
        row["event"] = r.event
        row["phase"] = r.phase
        if r.rewritten_at is not None:
            row["phase"] = f"{r.phase}, rewritten at event {r.rewritten_at}"
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
