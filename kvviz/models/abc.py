"""The A/B/C miniature model (docs/design.md §1).

Three tokens with 2-d vectors; Q = K = V = the token's vector; one layer, one head, no positions,
attention scale 1/sqrt(2). From h = (h0, h1) the logits over [A, B, C] are [h1, h0, -h0-h1].
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from kvviz.cache import Cache
from kvviz.cost import ABC_CONFIG
from kvviz.models.base import (
    BatchPassRecord,
    ModelLimits,
    PassRecord,
    allowed_keys,
    causal_softmax,
    masked_softmax,
    tokenize_by_vocab,
)

VECTORS = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)  # [3, 2]


class ABCModel:
    name = "abc"
    vocab = ["A", "B", "C"]
    logit_tokens = ["A", "B", "C"]
    n_layers = 1
    n_heads = 1
    output_labels = ["h0", "h1"]
    limits = ModelLimits()
    cost_config = ABC_CONFIG

    def tokenize(self, text: str) -> list[str]:
        """"A B", "a,b" → ["A", "B"]; anything but A, B, C raises UnknownTokenError."""
        return tokenize_by_vocab(text, self.vocab, self.limits.max_prompt_chars)

    def forward(self, token_ids: Sequence[int], cache: Cache | None, start_pos: int) -> PassRecord:
        x = VECTORS[list(token_ids)]                    # [N, 2]
        q = k = v = x.view(1, 1, -1, 2)                 # [batch=1, heads=1, N, 2]
        if cache is not None:
            k_all, v_all = cache.update(k, v, 0)        # [1, 1, T, 2]
        else:
            k_all, v_all = k, v
        scores = q @ k_all.transpose(-2, -1) / math.sqrt(2.0)   # [1, 1, N, T]
        att = causal_softmax(scores, start_pos)
        h = (att @ v_all)[0, 0]                          # [N, 2]
        logits = torch.stack([h[:, 1], h[:, 0], -h[:, 0] - h[:, 1]], dim=-1)  # [N, 3]
        return PassRecord(
            positions=list(range(start_pos, start_pos + len(token_ids))),
            q=q, k=k, v=v,                               # [L=1, H=1, N, 2] (batch axis doubles as L)
            attention=att,                               # [L=1, H=1, N, T]
            output=h, logits=logits,
        )

    def forward_batch(self, token_ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor,
                      cache: Cache) -> BatchPassRecord:
        """B sequences at once (kvviz.decoding.batching): token_ids, positions [B, N]; key_mask [B, T].
        No positions in this model, so ``positions`` only marks padding (-1)."""
        x = VECTORS[token_ids]                           # [B, N, 2]
        q = k = v = x.unsqueeze(1)                       # [B, heads=1, N, 2]
        k_all, v_all = cache.update(k, v, 0)             # [B, 1, T, 2]
        scores = q @ k_all.transpose(-2, -1) / math.sqrt(2.0)           # [B, 1, N, T]
        att = masked_softmax(scores, allowed_keys(key_mask, token_ids.shape[1]).unsqueeze(1))
        h = (att @ v_all)[:, 0]                          # [B, N, 2]
        logits = torch.stack([h[..., 1], h[..., 0], -h[..., 0] - h[..., 1]], dim=-1)  # [B, N, 3]
        return BatchPassRecord(positions=positions, q=q.unsqueeze(1), k=k.unsqueeze(1),
                               v=v.unsqueeze(1), attention=att.unsqueeze(1), output=h, logits=logits)
