"""What the smaller caches need from a model beyond the protocol's fast path, asked of the model
itself (no adapter is named here: the tiny GPT's kvviz.models.gpt.adapter.GPTModel and
kvviz.models.hf.HFCausalLM both answer ``kv_projections()`` and ``with_kv_heads(n)``). Private to
kvviz.compress (nothing outside it imports this).

- ``next_logits(model, ids, cache, start)``: the next-token logits after ``ids`` at positions
  ``start``.., with ``cache``: the protocol's fast path (``CausalLM.logits``, no per-head records);
  an evicting cache that scores by attention: ``forward`` and ``cache.observe(attention)``.
- ``rope_inv_freq(model)``: per layer the rotary frequencies a window at cache positions re-rotates
  keys with and a latent cache turns them back with (None without rotary positions: the tiny GPT
  learns absolute positions).
- ``kv_projections(model)``: per layer the K and V projections stacked, ``[D, C]`` and their bias
  ``[D]`` (K rows then V rows, heads side by side), which a latent cache factors (kvviz.compress.latent);
  a model whose keys pass a per-head norm before the cache (Gemma 3) has its K rows scaled by the
  norm's gain (kvviz.models.hf).
- ``pooled_model(model, kv_heads)``: the same kind of model with its K/V heads mean-pooled
  (kvviz.models.grouped: one pooling; the per-architecture part is only where the K/V rows live,
  which each adapter knows).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from kvviz.cache import Cache


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
    """Per layer (W [2·H_kv·d, C], b [2·H_kv·d]) in float64: [k; v] = W x + b (keys before RoPE);
    the model says where its K/V rows live (``model.kv_projections()``)."""
    return model.kv_projections()


def pooled_model(model, kv_heads: int):
    """``model`` with ``kv_heads`` mean-pooled K/V heads, as a kvviz model of the same kind
    (``model.with_kv_heads``: kvviz.models.grouped's one pooling, the rows where the model keeps them)."""
    return model.with_kv_heads(kv_heads)
