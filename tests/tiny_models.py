"""Tiny random transformers causal LMs of several architectures, saved in the Hub's layout, for the
"any model a host names" tests (tests/test_any_model.py).

Each is a transformers config with random weights (seeded), 2-4 layers of width 32, sharing the
byte-level BPE tokenizer of tests/tiny_llama.py (≈ 400 tokens), written with ``save_pretrained``:

- ``llama``: grouped-query attention (4 query heads over 2 K/V heads), rotary positions;
- ``qwen2``: biases on the q/k/v projections;
- ``gpt2``: learned position embeddings, one fused QKV projection (``c_attn``);
- ``gemma3``: hybrid, three sliding-attention layers (window 8) and one global layer, one K/V head,
  q/k norms, two rotary bases;
- ``mamba`` (a state-space model: no attention, no K/V) and ``mlp_layers`` (a Llama config whose
  ``layer_types`` name a linear-attention layer), which kvviz refuses with a LimitError.
"""
from __future__ import annotations

from pathlib import Path

import torch

from tests import tiny_llama

SLIDING_WINDOW = 8


def config(kind: str, vocab_size: int):
    import transformers as tf

    common = {"vocab_size": vocab_size, "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2}
    if kind == "llama":
        return tf.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
                              tie_word_embeddings=True, **common)
    if kind == "qwen2":
        return tf.Qwen2Config(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                              num_key_value_heads=2, max_position_embeddings=256, **common)
    if kind == "gpt2":
        return tf.GPT2Config(n_embd=32, n_layer=2, n_head=4, n_positions=256, **common)
    if kind == "gemma3":
        return tf.Gemma3TextConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=4, num_attention_heads=4,
                                   num_key_value_heads=1, head_dim=16, query_pre_attn_scalar=16,
                                   sliding_window=SLIDING_WINDOW, max_position_embeddings=256,
                                   layer_types=["sliding_attention"] * 3 + ["full_attention"], **common)
    if kind == "mamba":
        return tf.MambaConfig(hidden_size=32, state_size=4, num_hidden_layers=2, **common)
    if kind == "mlp_layers":
        cfg = config("llama", vocab_size)
        cfg.layer_types = ["full_attention", "linear_attention"]
        return cfg
    raise ValueError(kind)


def model(kind: str, vocab_size: int, seed: int = 0):
    from transformers import AutoModelForCausalLM

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return AutoModelForCausalLM.from_config(config(kind, vocab_size)).eval()


def save(kind: str, directory: Path) -> Path:
    """The model ``kind`` and the tokenizer in ``directory`` (a config only for the refused kinds)."""
    tok = tiny_llama.tokenizer()
    if kind == "mlp_layers":
        config(kind, len(tok)).save_pretrained(directory)
    else:
        model(kind, len(tok)).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory
