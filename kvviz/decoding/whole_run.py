"""A generation's attention as one matrix (docs/design.md §1.3): row p is what position p's query
read, over the positions 0..p; the prefill writes the prompt's rows in one pass, and every decode
pass adds one row at the bottom. The columns are the cached K/V every new row reads. A row, once
written, never changes: position p reads only positions ≤ p (the causal mask), so nothing written
later can alter it, and that is why keeping its K/V is exact. ``whole_run`` builds the matrix from
the stepper's events (kvviz.decoding.stepper: each pass's ``record.attention``) and, given the model,
measures it against one pass over the whole text without a cache.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kvviz.decoding.stepper import Run
from kvviz.models.base import Model, encode


@dataclass(frozen=True)
class WholeRun:
    """The matrix of one layer and head. ``T`` processed positions (the last chosen token is pending)."""

    layer: int
    head: int
    tokens: list[str]              # [T] the processed tokens, by position
    weights: torch.Tensor          # [T, T] float64, row p over positions 0..p; 0 above the diagonal
    pass_of_row: list[int]         # [T] 0: the prefill, i: the i-th decode pass
    prompt_len: int
    recompute_max_abs_diff: float | None = None   # against one pass without a cache (None: not measured)

    @property
    def passes(self) -> int:
        """Passes in the run: the prefill and each decode."""
        return max(self.pass_of_row) + 1

    def rows_after(self, passes: int) -> int:
        """Rows the matrix has once ``passes`` passes (the prefill counts as 1) have run."""
        return sum(1 for p in self.pass_of_row if p < passes)

    def row_sums(self) -> torch.Tensor:
        """Each row's weights add up to 1 (softmax over what it reads)."""
        return self.weights.sum(-1)


def whole_run(run: Run, layer: int, head: int, model: Model | None = None) -> WholeRun:
    """The attention of ``layer``/``head`` (0-based) over every pass of ``run``, as one matrix.

    ``model``: the run's model; when given, one pass over the processed text without a cache gives
    the same matrix to compare (``recompute_max_abs_diff``). A cache that evicts rows (a sliding
    window) has rows shorter than their position: refused (ValueError), this view shows a full cache."""
    passes = [e for e in run.events if e.record is not None]
    n_layers, n_heads = passes[0].record.attention.shape[:2]
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(f"Layer {layer + 1}, head {head + 1}: the model has {n_layers} layers of {n_heads} heads.")
    T = max(passes[-1].positions) + 1
    weights = torch.zeros(T, T, dtype=torch.float64)
    tokens: list[str] = [""] * T
    pass_of_row = [0] * T
    for i, e in enumerate(passes):
        att = e.record.attention[layer, head].to(torch.float64)       # [N, T_visible]
        if att.shape[-1] != max(e.positions) + 1:
            raise ValueError("The cache of this run drops rows: the whole-run view needs a full cache.")
        for row, (pos, tok) in enumerate(zip(e.positions, e.tokens)):
            weights[pos, :pos + 1] = att[row, :pos + 1]
            tokens[pos], pass_of_row[pos] = tok, i
    diff = None
    if model is not None:
        full = model.forward(encode(model, tokens), None, 0).attention[layer, head].to(torch.float64)   # [T, T]
        diff = float((full.tril() - weights).abs().max())
    return WholeRun(layer, head, tokens, weights, pass_of_row, len(passes[0].positions), diff)
