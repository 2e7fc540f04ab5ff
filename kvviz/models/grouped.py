"""Fewer K/V heads by mean pooling (Ainslie et al., "GQA", EMNLP 2023: the conversion of a
checkpoint before uptraining), one implementation for every model:

- ``pool_heads(rows, n_kv, kv_heads, head_dim)``: a K or V projection's rows (weight or bias) → the
  mean of each group of ``n_kv / kv_heads`` consecutive K/V heads (the heads the query heads of a
  group then share, as transformers' ``repeat_kv`` and kvviz.models.gpt.model order them);
- ``check_kv_heads(kv_heads, n_kv)``: the one refusal of a count that does not divide the model's;
- ``pooled_network(net, kv_heads)``: a transformers Llama-family model (``k_proj`` / ``v_proj`` of
  every layer) with its K/V heads pooled. The tiny GPT's fused ``c_attn`` goes through the same
  ``pool_heads`` in kvviz.models.gpt.grouped.to_grouped.

No uptraining: what it costs is the honest price of the conversion alone. SmolLM2's 3 K/V heads → 1
means all 9 query heads read one K/V head; the cache shrinks by n_kv / kv_heads.
"""
from __future__ import annotations

import copy

import torch

from kvviz.limits import LimitError, check_int


def kv_head_options(n_kv_heads: int) -> list[int]:
    """K/V head counts a conversion accepts: the divisors of ``n_kv_heads``, most first."""
    return [h for h in range(n_kv_heads, 0, -1) if n_kv_heads % h == 0]


def check_kv_heads(kv_heads: object, n_kv_heads: int) -> int:
    """``kv_heads`` as an int if it divides the model's ``n_kv_heads`` (every new K/V head is the
    mean of the same number of old ones), else a LimitError that names the choices."""
    n = check_int("K/V heads", kv_heads, 1, n_kv_heads)
    if n_kv_heads % n:
        raise LimitError(f"K/V heads ({n}) must divide the model's {n_kv_heads} K/V heads: every new K/V head is "
                         f"the mean of the same number of old ones; choose one of "
                         f"{', '.join(map(str, kv_head_options(n_kv_heads)))}.")
    return n


def pool_heads(rows: torch.Tensor, n_kv: int, kv_heads: int, head_dim: int) -> torch.Tensor:
    """A K or V projection's weight ``[n_kv · d, in]`` (or bias ``[n_kv · d]``) → ``[kv_heads · d, …]``:
    the mean of each group of ``n_kv / kv_heads`` consecutive heads (a group of one is copied)."""
    group = n_kv // kv_heads
    out = rows.reshape(kv_heads, group, head_dim, *rows.shape[1:])       # [kv_heads, group, d, …]
    return out.mean(dim=1).reshape(kv_heads * head_dim, *rows.shape[1:]).contiguous()


def _attention_modules(net: torch.nn.Module) -> list:
    layers = getattr(getattr(net, "model", None), "layers", None)
    mods = [getattr(layer, "self_attn", None) for layer in layers or []]
    if not mods or not all(m is not None and hasattr(m, "k_proj") and hasattr(m, "v_proj") for m in mods):
        raise LimitError("Pooling K/V heads needs a Llama-family model (model.layers[i].self_attn.k_proj / v_proj).")
    return mods


@torch.no_grad()
def pooled_network(net: torch.nn.Module, kv_heads: int) -> torch.nn.Module:
    """``net`` (a LlamaForCausalLM, eval mode) with its K/V heads mean-pooled to ``kv_heads`` (a
    divisor of its K/V heads). Shares every weight but the K/V projections with ``net``, which is
    never modified."""
    cfg = net.config
    n_heads = cfg.num_attention_heads
    n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
    kv_heads = check_kv_heads(kv_heads, n_kv)
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
            new.weight.copy_(pool_heads(old.weight, n_kv, kv_heads, head_dim))
            if old.bias is not None:
                new.bias.copy_(pool_heads(old.bias, n_kv, kv_heads, head_dim))
            setattr(m, name, new)
        m.num_key_value_groups = n_heads // kv_heads
        if hasattr(m.config, "num_key_value_heads"):
            m.config.num_key_value_heads = kv_heads
    return out.eval()
