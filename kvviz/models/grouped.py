"""Fewer K/V heads for a transformers Llama-family model by mean pooling (Ainslie et al., GQA 2023:
the checkpoint conversion before uptraining), the real model's twin of kvviz.models.gpt.to_grouped.

``pooled_network(net, kv_heads)`` returns a new model whose ``k_proj`` / ``v_proj`` of every layer
are the means of the original K/V heads' rows in groups of ``n_kv_heads / kv_heads`` (SmolLM2: its 3
K/V heads → 1, so all 9 query heads read one K/V head). No uptraining: what it costs is the honest
price of the conversion alone. Every other weight is the original tensor, shared (read-only), so
the copy costs only the new projections; the original model is never modified.
"""
from __future__ import annotations

import copy

import torch

from kvviz.limits import LimitError, check_int


def kv_head_options(n_kv_heads: int) -> list[int]:
    """K/V head counts a conversion accepts: the divisors of ``n_kv_heads``, most first."""
    return [h for h in range(n_kv_heads, 0, -1) if n_kv_heads % h == 0]


def _attention_modules(net: torch.nn.Module) -> list:
    layers = getattr(getattr(net, "model", None), "layers", None)
    mods = [getattr(layer, "self_attn", None) for layer in layers or []]
    if not mods or not all(m is not None and hasattr(m, "k_proj") and hasattr(m, "v_proj") for m in mods):
        raise LimitError("Pooling K/V heads needs a Llama-family model (model.layers[i].self_attn.k_proj / v_proj).")
    return mods


def pool_rows(weight: torch.Tensor, n_kv: int, kv_heads: int, head_dim: int) -> torch.Tensor:
    """A K or V projection's weight ``[n_kv · d, in]`` (or bias ``[n_kv · d]``) → ``[kv_heads · d, …]``:
    the mean of each group of ``n_kv / kv_heads`` consecutive heads (the heads the query groups of
    transformers' ``repeat_kv`` would then share)."""
    group = n_kv // kv_heads
    rows = weight.reshape(kv_heads, group, head_dim, *weight.shape[1:])
    return rows.mean(dim=1).reshape(kv_heads * head_dim, *weight.shape[1:]).contiguous()


@torch.no_grad()
def pooled_network(net: torch.nn.Module, kv_heads: int) -> torch.nn.Module:
    """``net`` (a LlamaForCausalLM, eval mode) with its K/V heads mean-pooled to ``kv_heads`` (a
    divisor of its K/V heads). Shares every weight but the K/V projections with ``net``."""
    cfg = net.config
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    kv_heads = check_int("K/V heads", kv_heads, 1, n_kv)
    if n_kv % kv_heads:
        raise LimitError(f"K/V heads must divide the model's {n_kv}; choose one of "
                         f"{', '.join(map(str, kv_head_options(n_kv)))}.")
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
    mods = _attention_modules(net)
    projections = {id(p) for m in mods for lin in (m.k_proj, m.v_proj) for p in lin.parameters()}
    # deepcopy with every other parameter in the memo: the copy shares those tensors
    memo = {id(p): p for p in net.parameters() if id(p) not in projections}
    out = copy.deepcopy(net, memo)
    out.config.num_key_value_heads = kv_heads
    for m in _attention_modules(out):
        for name in ("k_proj", "v_proj"):
            old = getattr(m, name)
            new = torch.nn.Linear(old.in_features, kv_heads * head_dim, bias=old.bias is not None,
                                  dtype=old.weight.dtype)
            new.weight.copy_(pool_rows(old.weight, n_kv, kv_heads, head_dim))
            if old.bias is not None:
                new.bias.copy_(pool_rows(old.bias, n_kv, kv_heads, head_dim))
            setattr(m, name, new)
        m.num_key_value_groups = n_heads // kv_heads
        if hasattr(m.config, "num_key_value_heads"):
            m.config.num_key_value_heads = kv_heads
    return out.eval()
