"""An append-only KV cache whose rows remember when they were computed.

Layout follows Hugging Face's cache objects: per layer one K and one V tensor of shape
``[batch, heads, seq, head_dim]``; ``update(layer, k, v)`` appends and returns the full K/V.
Beside the tensors it keeps one ``CacheRow`` per position (token, event, phase) for display.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class CacheRow:
    """Bookkeeping for one cached position (the tensors live in KVCache.keys/values)."""

    position: int
    token: str
    event: int        # index of the stepper event whose pass computed this row
    phase: str        # "prefill" or "decode"
    rewritten_at: int | None = None  # event index if the row was overwritten later (never in a real cache)


class KVCache:
    """Per-layer K/V tensors ``[batch, heads, seq, head_dim]`` plus per-position rows."""

    def __init__(self, n_layers: int) -> None:
        self.n_layers = n_layers
        self.keys: list[torch.Tensor | None] = [None] * n_layers
        self.values: list[torch.Tensor | None] = [None] * n_layers
        self.rows: list[CacheRow] = []
        # Tag the stepper sets before a pass so appended rows know their origin.
        self.current_event = 0
        self.current_phase = "prefill"

    def __len__(self) -> int:
        return len(self.rows)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new K/V ``[batch, heads, new, head_dim]`` to ``layer``; return the full K/V.

        The new rows are copied (``clone``): storing views of a fused projection would keep the
        query alive too and inflate memory (DESIGN.md §4).
        """
        k, v = k.detach().clone(), v.detach().clone()
        old_k, old_v = self.keys[layer], self.values[layer]
        self.keys[layer] = k if old_k is None else torch.cat([old_k, k], dim=2)
        self.values[layer] = v if old_v is None else torch.cat([old_v, v], dim=2)
        return self.keys[layer], self.values[layer]  # type: ignore[return-value]

    def seq_len(self, layer: int = 0) -> int:
        k = self.keys[layer]
        return 0 if k is None else k.shape[2]

    def add_rows(self, tokens: list[str], start_pos: int) -> None:
        """Record bookkeeping rows for positions start_pos.. after a pass appended them."""
        for i, tok in enumerate(tokens):
            self.rows.append(CacheRow(start_pos + i, tok, self.current_event, self.current_phase))

    def rewrite(self, layer: int, position: int, head: int, k_row: torch.Tensor, event: int) -> None:
        """Overwrite one cached key (the seed's manual repair; a real cache never does this)."""
        keys = self.keys[layer].clone()  # type: ignore[union-attr]
        keys[:, head, position] = k_row
        self.keys[layer] = keys
        row = self.rows[position]
        self.rows[position] = CacheRow(row.position, row.token, row.event, row.phase, rewritten_at=event)

    def nbytes(self) -> int:
        """Bytes held by the K and V tensors of every layer."""
        total = 0
        for t in (*self.keys, *self.values):
            if t is not None:
                total += t.numel() * t.element_size()
        return total

    def snapshot(self) -> "CacheSnapshot":
        """An immutable view of the cache as it is now (tensors are never modified in place)."""
        return CacheSnapshot(tuple(self.keys), tuple(self.values), tuple(self.rows))


@dataclass(frozen=True)
class CacheSnapshot:
    """What the cache held after one event: tensors per layer ``[batch, heads, seq, head_dim]``."""

    keys: tuple[torch.Tensor | None, ...]
    values: tuple[torch.Tensor | None, ...]
    rows: tuple[CacheRow, ...]

    def __len__(self) -> int:
        return len(self.rows)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values) if t is not None)
