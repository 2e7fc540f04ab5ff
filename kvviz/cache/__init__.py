"""Every kind of KV cache kvviz runs, after Hugging Face's ``cache_utils`` (one module per kind).

- ``base``: ``CacheLayer`` and ``Cache``, the interface every kind implements.
- ``dense``: ``DynamicCache`` (grows by concatenation; the stepper's) and ``StaticCache``
  (preallocated, written in place; the fast loops').
- ``block_pool``: the paged cache's ``BlockPool`` (free list, reference counts, prefix-cache names),
  bookkeeping without torch.
- ``paged``: ``PagedCache``, block tables over one pool shared by several sequences (vLLM's
  PagedAttention); kvviz.serving schedules requests on it.
- ``hybrid``: ``DynamicSlidingWindowLayer``, a sliding-attention layer's cache as transformers keeps
  it (the last window − 1 positions), for models that mix sliding and global layers (Gemma 3).
- ``window`` and ``quantized``: the smaller caches, ``SlidingWindowCache`` (attention sinks plus a
  sliding window) and ``QuantizedCache`` (KIVI-style codes with a full-precision residual).
"""
from kvviz.cache.base import KV, Cache, CacheLayer, storage_bytes
from kvviz.cache.block_pool import BlockEvent, BlockPool, PoolExhausted, block_hash
from kvviz.cache.dense import DynamicCache, DynamicLayer, StaticCache, StaticLayer
from kvviz.cache.fp8 import Fp8Cache, Fp8Layer
from kvviz.cache.hybrid import DynamicSlidingWindowLayer, layer_windows
from kvviz.cache.paged import PagedCache, PagedLayer
from kvviz.cache.quantized import QuantizedCache, QuantizedLayer, QuantizedRows, quantize
from kvviz.cache.scored import H2OCache, PyramidKVCache, ScoredCache, SnapKVCache, pyramid_budgets
from kvviz.cache.window import SlidingWindowCache, SlidingWindowLayer

__all__ = ["KV", "BlockEvent", "BlockPool", "Cache", "CacheLayer", "DynamicCache", "DynamicLayer",
           "DynamicSlidingWindowLayer", "PagedCache", "PagedLayer", "PoolExhausted", "QuantizedCache",
           "QuantizedLayer", "QuantizedRows", "SlidingWindowCache", "SlidingWindowLayer", "StaticCache", "StaticLayer",
           "block_hash", "layer_windows", "quantize", "storage_bytes"]
__all__ += ["H2OCache", "PyramidKVCache", "ScoredCache", "SnapKVCache", "pyramid_budgets"]
__all__ += ["Fp8Cache", "Fp8Layer"]
