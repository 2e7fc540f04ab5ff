"""Grouped K/V heads for a trained GPT (Ainslie et al., "GQA", EMNLP 2023): the conversion of a
multi-head checkpoint by mean-pooling the K and V projections of each group of heads, with the one
pooling every model uses (kvviz.models.grouped.pool_heads) applied to the GPT's fused ``c_attn``.

``to_grouped(model, n_kv_heads)`` keeps every query head and the rest of the weights, and replaces the
K/V heads of each group by their mean (no uptraining here: the paper then trains ≈ 5 % more; without
it the loss is visible, which is what the page shows). The network runs grouped-query attention with
``n_kv_head`` set (kvviz.models.gpt.model: K/V head g serves query heads g·r … g·r + r − 1, r =
n_head / n_kv_head), so the cache holds ``n_kv_heads`` heads and shrinks by n_head / n_kv_heads.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from kvviz.models.gpt.model import GPT
from kvviz.models.gpt.weights import load_gpt, plain_state_dict
from kvviz.models.grouped import check_kv_heads, pool_heads


def to_grouped(model: GPT, n_kv_heads: int) -> GPT:
    """A new GPT whose K/V heads are the means of ``model``'s K/V heads in groups (query heads kept).

    ``n_kv_heads`` must divide the model's K/V heads (1 = multi-query). With ``n_kv_heads`` equal to
    them the weights are copied unchanged, so the logits are exactly the model's."""
    n = check_kv_heads(n_kv_heads, model.config.kv_heads)
    with torch.inference_mode(False), torch.no_grad():   # ordinary tensors even when called under inference_mode
        return _pooled(model, n)


def _pooled(model: GPT, n: int) -> GPT:
    cfg = model.config
    old, hs = cfg.kv_heads, cfg.head_dim
    sd = plain_state_dict(model)                      # copies
    q_rows = cfg.n_head * hs
    for i in range(cfg.n_layer):
        for kind in ("weight", "bias"):
            name = f"transformer.h.{i}.attn.c_attn.{kind}"
            w = sd[name]                                          # [(H + 2·KV_old)·hs, C] or [(H + 2·KV_old)·hs]
            q, k, v = w.split([q_rows, old * hs, old * hs], dim=0)
            sd[name] = torch.cat([q, pool_heads(k, old, n, hs), pool_heads(v, old, n, hs)], dim=0)
    grouped = load_gpt(sd, replace(cfg, n_kv_head=n))
    grouped.requires_grad_(model.transformer.wte.weight.requires_grad)
    grouped.head()                     # the readout copy, built before the model is shared
    return grouped
