"""Key outliers: the magnitude of every key channel of one layer over a text (the keys as the cache
holds them, after a rotary model's rotation), where KIVI's outlier channels show or do not. Any
kvviz model: one prefill with the full cache, the cached keys read per layer."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import DynamicCache
from kvviz.compress._protocol import next_logits
from kvviz.limits import check_int


@dataclass(frozen=True)
class KeyChannels:
    """|k| of every key channel of one layer at every position of a text (the rotated keys the cache
    holds), ``magnitude`` [kv_heads · head_dim, positions]; ``labels`` name the channels "K/V h · d"."""

    layer: int                      # 0-based
    tokens: tuple[str, ...]
    magnitude: torch.Tensor         # [channels, positions]
    head_dim: int

    @property
    def channel_mean(self) -> torch.Tensor:
        """Mean |k| of each channel over the positions, [channels]."""
        return self.magnitude.mean(-1)

    def outlier_ratio(self) -> float:
        """The largest channel's mean |k| over the median channel's: far above 1, a few channels
        dominate (what per-channel key quantization is for)."""
        m = self.channel_mean
        return float(m.max() / m.median().clamp(min=1e-12))

    def top_channels(self, n: int = 3) -> list[tuple[int, int, float]]:
        """The ``n`` channels of largest mean |k|: (K/V head, dimension, mean |k|), 0-based."""
        m = self.channel_mean
        idx = torch.argsort(m, descending=True)[:n].tolist()
        return [(i // self.head_dim, i % self.head_dim, float(m[i])) for i in idx]

    def spread(self) -> tuple[float, float]:
        """Mean over positions of (max |k| − min |k| across the row's channels) and mean over channels
        of the same across positions: what one per-token and one per-channel group must span."""
        per_token = (self.magnitude.amax(0) - self.magnitude.amin(0)).mean()
        per_channel = (self.magnitude.amax(1) - self.magnitude.amin(1)).mean()
        return float(per_token), float(per_channel)


@torch.inference_mode()
def all_key_channels(model, ids: Sequence[int]) -> tuple[KeyChannels, ...]:
    """One prefill of ``ids`` with the full cache; every layer's cached keys as |k| per channel."""
    cache = DynamicCache(model.n_layers)
    next_logits(model, ids, cache, 0)
    tokens = tuple(model.vocab[int(i)] for i in ids)
    out = []
    for layer in range(model.n_layers):
        k = cache.layers[layer].keys[0].float()                               # [kv_heads, N, d]
        mag = k.abs().permute(0, 2, 1).reshape(-1, k.shape[1])                # [kv_heads · d, N]
        out.append(KeyChannels(layer, tokens, mag.contiguous(), k.shape[-1]))
    return tuple(out)


def key_channels(model, ids: Sequence[int], layer: int) -> KeyChannels:
    """Layer ``layer``'s key channels over ``ids`` (``all_key_channels``, one layer)."""
    layer = check_int("Layer", layer, 0, model.n_layers - 1)
    return all_key_channels(model, ids)[layer]
