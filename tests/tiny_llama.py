"""A tiny random Llama-shaped model in the Hub's directory layout, for fast engine tests.

Grouped-query attention (4 query heads sharing 2 K/V heads), rotary positions, tied embeddings,
2 layers of width 32, and a byte-level BPE tokenizer trained here on a few sentences with the
ChatML markers as special tokens and a ChatML chat template of its own (system prompt, role
markers, the assistant's turn opened), as SmolLM2's. ``save(directory)`` writes config.json,
model.safetensors and the tokenizer files: what ``from_pretrained`` reads from the Hub, so the same
directory also stands in for the Hub's SmolLM2 (``KVVIZ_SMOLLM2=directory``).
"""
from __future__ import annotations

from pathlib import Path

import torch

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
TEXT = ["Today the weather is so nice that we walk in the park.",
        "What is the capital of France? The capital of France is Paris.",
        "You are a helpful assistant. The sky is blue and the sun is warm.",
        "It is rainy in London, so we stay at home and read a book."] * 4
CHAT_TEMPLATE = (
    "{% for m in messages %}{% if loop.first and m['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a tiny test model<|im_end|>\\n' }}{% endif %}"
    "{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")


def tokenizer():
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(TEXT, vocab_size=400, min_frequency=1, special_tokens=SPECIAL, show_progress=False)
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, bos_token="<|im_start|>", eos_token="<|im_end|>",
                                  unk_token="<|endoftext|>", pad_token="<|im_end|>")
    tok.chat_template = CHAT_TEMPLATE
    return tok


# SmolLM2-135M's layout (30 layers, 9 query heads over 3 K/V heads) at a width of 36: the tiny model in
# SmolLM2's place for a page's paths, where an address names a layer or head of SmolLM2's
SMOLLM2_LAYOUT = {"num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3, "head_dim": 4,
                  "hidden_size": 36, "intermediate_size": 48}


def model(vocab_size: int, seed: int = 0, **layout):
    from transformers import LlamaConfig, LlamaForCausalLM

    shape = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 8, **layout}
    cfg = LlamaConfig(vocab_size=vocab_size, max_position_embeddings=512,
                      rope_parameters={"rope_type": "default", "rope_theta": 100_000.0}, tie_word_embeddings=True,
                      bos_token_id=1, eos_token_id=2, pad_token_id=2, **shape)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return LlamaForCausalLM(cfg).eval()


def save(directory: Path, **layout) -> Path:
    """The tiny model (``layout``: other sizes, e.g. ``SMOLLM2_LAYOUT``) and its tokenizer in ``directory``."""
    tok = tokenizer()
    net = model(len(tok), **layout)
    net.save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory
