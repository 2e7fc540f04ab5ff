"""Why a cached pass differs from recomputing: which outputs differ, and which cached rows went stale.

The stepper's recompute check says *that* a cached pass differs (max |Δ|). ``diagnose`` says *where*
and *why*: it recomputes the whole processed prefix without a cache and compares

- each output component of the pass's last position (for the weather model: one context per head),
- every cached K and V row with the row a recompute computes now. A row that differs was computed
  before later tokens existed and would be computed differently today: its K/V depend on later
  tokens, which an append-only cache cannot follow. A cache is exact only when the K/V of position j
  depend on tokens <= j.

Works for any model that follows the protocol; the stepper records are not changed.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch

from kvviz.decoding.stepper import Event
from kvviz.models.base import Model, encode

TOLERANCE = 1e-6


@dataclass(frozen=True)
class OutputDiff:
    """One output component of the last new position: cached pass vs recompute."""

    component: int
    label: str
    cached: float
    recomputed: float

    @property
    def abs_diff(self) -> float:
        return abs(self.cached - self.recomputed)


@dataclass(frozen=True)
class StaleRow:
    """A cached K or V row that a recompute computes differently now."""

    layer: int
    head: int
    position: int            # 0-based absolute position
    token: str
    kind: str                # "key" or "value"
    computed_at: int         # event index whose pass wrote the cached row
    cached: torch.Tensor     # [d] what the cache holds
    recomputed: torch.Tensor  # [d] what recomputing the prefix gives now

    @property
    def max_abs_diff(self) -> float:
        return float((self.cached - self.recomputed).abs().max())


@dataclass(frozen=True)
class Diagnosis:
    event: int
    position: int                        # the last new position of the pass
    outputs: list[OutputDiff]            # every output component of that position
    stale: list[StaleRow]                # cached rows that differ from a recompute
    recomputed_attention: torch.Tensor   # [L, H, T] attention of that position when recomputed

    def differing(self, tol: float = TOLERANCE) -> list[OutputDiff]:
        return [d for d in self.outputs if d.abs_diff > tol]

    @property
    def exact(self) -> bool:
        return not self.differing() and not self.stale

    def explain(self, tol: float = TOLERANCE) -> list[str]:
        """The finding in plain English (the page words it in the user's language)."""
        lines = [f"{d.label} differs by {d.abs_diff:.4g}: cached pass {d.cached:.4g}, recomputed {d.recomputed:.4g}."
                 for d in self.differing(tol)]
        lines += [f"The cached {r.kind} of 0-based position {r.position} ({r.token}) in head {r.head + 1}, written in "
                  f"event {r.computed_at}, differs from the one a recompute gives now (max |Δ| "
                  f"{r.max_abs_diff:.4g}): it depends on tokens after position {r.position}, which an "
                  f"append-only cache never revisits." for r in self.stale]
        return lines


def _compare_rows(kind: str, cached: torch.Tensor, fresh: torch.Tensor, layer: int, ev: Event,
                  tol: float) -> list[StaleRow]:
    """cached: [H_c, T, d] from the cache; fresh: [H_f, T, d] from the recompute (H_c == H_f)."""
    out = []
    diff = (cached - fresh).abs().amax(dim=-1)          # [H, T]
    for head, pos in (diff > tol).nonzero().tolist():
        row = ev.cache.rows[pos]
        out.append(StaleRow(layer, head, pos, row.token, kind, row.event,
                            cached[head, pos].clone(), fresh[head, pos].clone()))
    return out


def diagnose(model: Model, ev: Event, tol: float = TOLERANCE) -> Diagnosis | None:
    """Compare a pass event with recomputing its whole prefix; None for choose events.

    ``model`` must be the model (with the same settings) that produced the run.
    """
    if ev.record is None or ev.check is None:
        return None
    processed = ev.sequence[:ev.cache_len]
    full = model.forward(encode(model, processed), None, 0)    # k, v: [L, H, T, d]
    cached_out, fresh_out = ev.record.output[-1], ev.check.output[-1]          # [d_out]
    outputs = [OutputDiff(i, label, float(cached_out[i]), float(fresh_out[i]))
               for i, label in enumerate(model.output_labels)]
    stale: list[StaleRow] = []
    for layer in range(model.n_layers):
        keys, values = ev.cache.keys[layer], ev.cache.values[layer]            # [B=1, H, T, d]
        stale += _compare_rows("key", keys[0], full.k[layer], layer, ev, tol)  # type: ignore[index]
        stale += _compare_rows("value", values[0], full.v[layer], layer, ev, tol)  # type: ignore[index]
    return Diagnosis(ev.index, ev.positions[-1], outputs, stale, full.attention[:, :, -1, :].clone())


def comparison_table(diag: Diagnosis, labels: list[str] | None = None, digits: int = 4) -> pd.DataFrame:
    """Cached vs recomputed output of the last new position, one row per component."""
    return pd.DataFrame({
        "output": labels or [d.label for d in diag.outputs],
        "cached pass": [round(d.cached, digits) for d in diag.outputs],
        "recomputed": [round(d.recomputed, digits) for d in diag.outputs],
        "|Δ|": [round(d.abs_diff, digits) for d in diag.outputs],
    })
