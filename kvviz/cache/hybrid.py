"""A hybrid cache: sliding-window layers beside global ones, as transformers' ``DynamicCache(config=...)``.

Models such as Gemma 2 and 3, Mistral's and gpt-oss mix layers that attend to the last
``sliding_window`` positions with layers that attend to everything. transformers 5.23 gives the
sliding layers a ``DynamicSlidingWindowLayer``: a pass attends over what the layer held plus the
whole pass (the model's own sliding mask picks each query's band), then the layer keeps only the
last ``sliding_window − 1`` positions, the most a later query can still read besides itself.
``DynamicSlidingWindowLayer`` here is kvviz's layer of that kind (the same rows returned, so the
same logits), freeing what it drops: its bytes stop growing at the window while a global layer's
grow with the text. After T positions, float32: 2 · kv_heads · head_dim · 4 ·
(n_global · T + n_sliding · min(T, window − 1)) bytes.

Unlike kvviz's ``SlidingWindowCache`` (StreamingLLM's sinks and window, kvviz.cache.window), whose
window the cache itself imposes, here the model's config sets the window and the model's attention
masks it: a prompt longer than the window is one pass.

``layer_windows(config)`` reads which layers slide (transformers' own rule,
``get_layer_types_and_kwargs``); ``DynamicCache(n_layers, windows)`` (kvviz.cache.dense) builds the
layers.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.cache.base import KV, CacheLayer
from kvviz.limits import LimitError


class DynamicSlidingWindowLayer(CacheLayer):
    """A sliding-attention layer's cache: returns the held rows plus the whole pass, then keeps the
    last ``sliding_window − 1`` positions (copied, so the dropped rows' storage is freed).

    ``get_seq_length`` counts every position processed (transformers' ``cumulative_length``);
    ``held_positions`` lists the rows still held."""

    is_sliding = True               # transformers builds this layer's sliding mask from its sizes

    def __init__(self, sliding_window: int) -> None:
        if int(sliding_window) < 2:
            raise LimitError(f"A sliding window must hold at least 2 positions, got {sliding_window}.")
        self.sliding_window = int(sliding_window)
        self.keys = self.values = None
        self.seen = 0                  # positions processed: the next one's index

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        if self.keys is None:
            full_k, full_v = key.detach().clone(), value.detach().clone()
        else:
            full_k = torch.cat([self.keys, key.detach()], dim=-2)
            full_v = torch.cat([self.values, value.detach()], dim=-2)
        self.seen += key.shape[-2]
        keep = self.sliding_window - 1
        if full_k.shape[-2] > keep:    # a copy: a slice would keep every row's storage alive
            self.keys, self.values = full_k[..., -keep:, :].clone(), full_v[..., -keep:, :].clone()
        else:
            self.keys, self.values = full_k, full_v
        return full_k, full_v

    def get_seq_length(self) -> int:
        return self.seen

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        """(kv_length, kv_offset) of the rows the next update returns: the held ones from position
        ``kv_offset`` on, plus the pass (transformers' DynamicSlidingWindowLayer's rule)."""
        offset = max(self.seen - self.sliding_window + 1, 0)
        return self.seen - offset + query_length, offset

    def get_max_length(self) -> int:
        return self.sliding_window

    def crop(self, max_length: int) -> None:
        """Keep the first ``max_length`` positions; only possible while every row a later query
        reads is still held (before the layer dropped any, or back within what it holds)."""
        m = max(0, int(max_length))
        if m >= self.seen:
            return
        first = self.seen - (0 if self.keys is None else self.keys.shape[-2])     # oldest held position
        if first > 0 and m - (self.sliding_window - 1) < first:
            raise LimitError(f"This sliding layer no longer holds the positions before {first}: it cannot go back "
                             f"to {m} positions.")
        drop = self.seen - m
        self.keys = self.keys[..., :-drop, :].clone()
        self.values = self.values[..., :-drop, :].clone()
        self.seen = m

    def reset(self) -> None:
        self.keys = self.values = None
        self.seen = 0

    def kv(self) -> KV | None:
        return None if self.keys is None else (self.keys, self.values)

    def held_positions(self) -> list[int]:
        held = 0 if self.keys is None else self.keys.shape[-2]
        return list(range(self.seen - held, self.seen))


def layer_windows(config) -> list[int | None]:
    """Per layer of a transformers ``config``: its sliding window, or None for a global layer (the
    layer kinds transformers' ``DynamicCache(config=config)`` builds)."""
    from transformers.cache_utils import get_layer_types_and_kwargs

    text = config.get_text_config(decoder=True)
    types, kwargs = get_layer_types_and_kwargs(text)
    return [kw.get("sliding_window") if t == "sliding_attention" else None for t, kw in zip(types, kwargs)]


@dataclass(frozen=True)
class FarReach:
    """What one query reads beyond the sliding windows: ``weights`` [L, H], each head's attention on
    positions 0..``edge`` (the ones no sliding layer sees any more: 0 on those layers, by their mask),
    ``first`` [L, H] the part of it on position 0 (the start token, where many heads park their
    weight), and for each head the ``k`` positions in 1..edge it weighs most (``top``, ``top_weight``
    [L, H, k], most first)."""

    query: int                     # the query's position
    edge: int                      # the last position beyond every window (−1: none yet)
    weights: torch.Tensor          # [L, H]
    first: torch.Tensor            # [L, H]
    top: torch.Tensor              # [L, H, k]
    top_weight: torch.Tensor       # [L, H, k]


def far_reach(row: torch.Tensor, query: int, windows: Sequence[int | None], k: int = 3) -> FarReach:
    """``row`` [L, H, T]: the attention of the query at position ``query`` over positions 0..T − 1 in
    every layer and head (a record's ``attention[:, :, -1]``); the positions beyond every sliding
    window are those at a distance of at least the smallest window."""
    sliding = [w for w in windows if w is not None]
    edge = query - min(sliding) if sliding else -1
    L, H, _ = row.shape
    if edge < 0:
        zeros = torch.zeros(L, H)
        return FarReach(query, edge, zeros, zeros, torch.zeros(L, H, 0, dtype=torch.long), torch.zeros(L, H, 0))
    far = row[..., :edge + 1].float()                                      # [L, H, edge + 1]
    best = far[..., 1:].topk(min(k, edge), dim=-1) if edge > 0 else None
    top = best.indices + 1 if best is not None else torch.zeros(L, H, 0, dtype=torch.long)
    return FarReach(query, edge, far.sum(-1), far[..., 0], top,
                    best.values if best is not None else torch.zeros(L, H, 0))
