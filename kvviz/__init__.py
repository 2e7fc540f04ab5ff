"""kvviz: a small, exact engine that makes LLM inference visible (prefill, decode, KV cache).

The engine never imports streamlit; only ``kvviz.ui`` does.
"""
from kvviz.cache import CacheRow, KVCache
from kvviz.generation import Event, Run, run_generation
from kvviz.models.base import Model, PassRecord

__all__ = ["CacheRow", "KVCache", "Event", "Run", "run_generation", "Model", "PassRecord"]
