"""What the smaller caches need from a model beyond the protocol's fast path; the only module of
kvviz.compress that knows the two adapters (the tiny GPT's kvviz.models.gpt.adapter.GPTModel and
kvviz.models.hf.HFCausalLM). Private to kvviz.compress (nothing outside it imports this).

- ``next_logits(model, ids, cache, start)``: the next-token logits after ``ids`` at positions
  ``start``.., with ``cache``: the protocol's fast path (``CausalLM.logits``, no per-head records);
  an evicting cache that scores by attention: ``forward`` and ``cache.observe(attention)``.
- ``rope_inv_freq(model)``: per layer the rotary frequencies a window at cache positions re-rotates
  keys with and a latent cache turns them back with (None without rotary positions: the tiny GPT
  learns absolute positions).
- ``kv_projections(model)``: per layer the K and V projections stacked, ``[D, C]`` and their bias
  ``[D]`` (K rows then V rows, heads side by side), which a latent cache factors (kvviz.compress.latent);
  a model whose keys pass a per-head norm before the cache (Gemma 3) has its K rows scaled by the
  norm's gain (``_norm_gain``).
- ``pooled_model(model, kv_heads)``: the same kind of model with its K/V heads mean-pooled
  (kvviz.models.grouped: one pooling; the per-architecture part is only where the K/V rows live).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache

import torch

from kvviz.cache import Cache
from kvviz.models.gpt import GPT, GPTModel, TinyGPT, to_grouped
from kvviz.models.grouped import pooled_network
from kvviz.models.hf import HFCausalLM


@torch.inference_mode()
def next_logits(model, ids: Sequence[int], cache: Cache, start: int,
                on_record: Callable[[object], None] | None = None) -> torch.Tensor:
    """[V] float32: the logits that choose the token after ``ids`` (see the module doc). A cache
    that scores rows by attention (``needs_attention``: kvviz.cache.scored) runs the recording
    ``forward`` and is handed the pass's weights afterwards; ``on_record(record)`` sees the pass
    first, while the cache still holds every row the pass read (kvviz.compress.trace)."""
    if getattr(cache, "needs_attention", False):
        record = model.forward(list(ids), cache, start)
        if on_record is not None:
            on_record(record)
        cache.observe(record.attention)
        return record.logits[-1].float()
    return model.logits(list(ids), cache, start, keep=1)[-1].float()


def rope_inv_freq(model) -> list[torch.Tensor] | None:
    """Per layer the [d/2] rotary frequencies (Gemma 3's sliding and global layers rotate with
    different bases), or None for a model without rotary positions."""
    get = getattr(model, "rope_inv_freq", None)
    if get is None or get() is None:
        return None
    return [get(i) for i in range(model.n_layers)]


def kv_projections(model) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Per layer (W [2·H_kv·d, C], b [2·H_kv·d]) in float64: [k; v] = W x + b (keys before RoPE)."""
    out = []
    if isinstance(model, GPTModel):
        cfg = model.network.config
        q, kv = cfg.n_head * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        for block in model.network.transformer.h:
            lin = block.attn.c_attn
            out.append((lin.weight[q:q + 2 * kv].double(), lin.bias[q:q + 2 * kv].double()))
        return out
    if isinstance(model, HFCausalLM):
        for layer in model.model.model.layers:
            k, v = layer.self_attn.k_proj, layer.self_attn.v_proj
            gain = _norm_gain(getattr(layer.self_attn, "k_norm", None), model.head_dim, k.out_features)
            w = torch.cat([gain[:, None] * k.weight.double(), v.weight.double()])
            b = torch.cat([torch.zeros(k.out_features) if k.bias is None else gain * k.bias.double(),
                           torch.zeros(v.out_features) if v.bias is None else v.bias]).double()
            out.append((w.detach(), b.detach()))
        return out
    raise TypeError(f"no K/V projections known for {type(model).__name__}")


def _norm_gain(norm, head_dim: int, width: int) -> torch.Tensor:
    """[width] the per-channel gain of a per-head key norm (Gemma 3, Qwen3: RMSNorm after k_proj,
    before the rotation), 1 without one. The cache receives normed keys: each head's key divided by
    its RMS (a scalar: the direction stays) times the gain, so with one K/V head they lie in the
    range of diag(gain)·W_K, whose SVD is then the right basis (with several heads, a close one)."""
    if not isinstance(norm, torch.nn.Module):
        return torch.ones(width, dtype=torch.float64)
    with torch.no_grad():
        ones = torch.ones(1, head_dim, dtype=next(norm.parameters()).dtype)
        gain = norm(ones)[0].double()                 # RMS of ones is 1: what is left is the gain
    return gain.repeat(width // head_dim)


@lru_cache(maxsize=8)
def _pooled_network(network: torch.nn.Module, kv_heads: int) -> torch.nn.Module:
    """Built once per process per network and count (read-only afterwards, like the model itself)."""
    return to_grouped(network, kv_heads) if isinstance(network, GPT) else pooled_network(network, kv_heads)


def pooled_model(model, kv_heads: int):
    """``model`` with ``kv_heads`` mean-pooled K/V heads, as a kvviz model of the same kind."""
    if isinstance(model, GPTModel):
        tiny = model.tiny
        return GPTModel(TinyGPT(_pooled_network(model.network, kv_heads), tiny.tokenizer, tiny.trained, tiny.meta))
    if isinstance(model, HFCausalLM):
        return _pooled_hf(model.model, model.tokenizer, model.name, model.limits, kv_heads)
    raise TypeError(f"cannot pool the K/V heads of {type(model).__name__}")


@lru_cache(maxsize=4)
def _pooled_hf(network: torch.nn.Module, tokenizer, name: str, limits, kv_heads: int) -> HFCausalLM:
    """The pooled transformers model behind the protocol, once per process (its vocabulary and
    hooks' lookups take ~0.1 s to build)."""
    return HFCausalLM(_pooled_network(network, kv_heads), tokenizer, name=name, limits=limits)
