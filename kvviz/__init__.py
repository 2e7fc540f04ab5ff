"""kvviz: a small, exact engine that makes LLM inference visible (prefill, decode, KV cache).

Import what you need from the submodules (``kvviz.decoding.stepper``, ``kvviz.models.abc``, ...); this
package file imports nothing, so the home page can load without torch. The engine never imports
streamlit; only ``kvviz.ui`` does.
"""
