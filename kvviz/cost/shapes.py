"""The shapes inference cost is computed from: ``ModelConfig``, the named presets (from each model's
config.json), and the checks every cost formula runs on its inputs.

Everything in kvviz.cost is exact integer arithmetic on a model's shape (docs/design.md §4).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from kvviz.limits import (
    MAX_COST_HEAD_DIM,
    MAX_COST_HEADS,
    MAX_COST_LAYERS,
    MAX_COST_VOCAB,
    MAX_COST_WIDTH,
    LimitError,
    check_int,
)

# Bits per stored value. fp8/int4 caches also keep small per-block scales, ignored here
# (``quantized_cache_bytes`` counts them for kvviz's own quantized cache).
DTYPE_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int4": 4}

# Common accelerator memory sizes drawn as horizontal lines, as the cards are sold: "24 GB", "40 GB",
# "80 GB" (RTX 4090 / A10, A100 40GB, A100 / H100 80GB). Their memory comes in powers of two, so a
# card's "GB" is a GiB, 2³⁰ bytes (7.4 % more than 10⁹; the driver reports a little less as free).
ACCELERATOR_GB = (24, 40, 80)
GIB = 2**30


def accelerator_bytes(gb: int) -> int:
    """The bytes of a card sold as ``gb`` "GB": ``gb`` GiB."""
    return gb * GIB


@dataclass(frozen=True)
class ModelConfig:
    """The shape of a decoder-only transformer, enough for memory, parameter and FLOP counts."""

    name: str
    n_layers: int
    n_heads: int            # query heads
    n_kv_heads: int         # = n_heads: multi-head; 1: multi-query; in between: grouped-query
    head_dim: int
    d_model: int
    d_ff: int               # MLP hidden width
    vocab: int
    mlp: str = "gelu"       # "gelu": up + down matrices; "gated": gate + up + down (SwiGLU); "none"
    qkv_proj: bool = True   # False for the toy models whose Q = K = V = the token vector
    out_proj: bool = True
    learned_positions: int = 0   # rows of a learned position table (GPT-2); 0 with rotary positions
    max_context: int = 0         # the longest context the model was configured for
    norm: str = "layernorm"      # "layernorm" (weight + bias) | "rmsnorm" (weight) | "none"
    norms_per_layer: int = 2
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    tied_embeddings: bool = False
    source: str = ""
    # V when it differs from K (the weather model, docs/design.md §2: one scalar value per token, shared by the heads);
    # None = as many V heads as K/V heads, each head_dim wide
    v_heads: int | None = None
    v_head_dim: int | None = None

    @property
    def attention_kind(self) -> str:
        return attention_kind(self.n_heads, self.n_kv_heads)

    @property
    def kv_width(self) -> int:
        """Values of K plus V one token stores per layer."""
        v_heads = self.n_kv_heads if self.v_heads is None else self.v_heads
        v_dim = self.head_dim if self.v_head_dim is None else self.v_head_dim
        return self.n_kv_heads * self.head_dim + v_heads * v_dim


def attention_kind(n_heads: int, n_kv_heads: int) -> str:
    """"MHA" (one K/V head per query head), "MQA" (one shared K/V head) or "GQA" (groups)."""
    if n_kv_heads == n_heads:
        return "MHA"
    return "MQA" if n_kv_heads == 1 else "GQA"


# --- presets ------------------------------------------------------------------------------------
# Numbers copied from each model's config.json on its Hugging Face hub page (the URL in `source`).

def gpt2_layout(name: str, n_layer: int, n_head: int, n_embd: int, vocab: int, block_size: int,
                n_kv_head: int | None = None, source: str = "") -> ModelConfig:
    """A GPT-2-style shape (kvviz's own GPT): biases everywhere, a 4× GELU MLP, two LayerNorms per
    block, learned positions and a readout tied to the token embedding."""
    return ModelConfig(
        name, n_layers=n_layer, n_heads=n_head, n_kv_heads=n_head if n_kv_head is None else n_kv_head,
        head_dim=n_embd // n_head, d_model=n_embd, d_ff=4 * n_embd, vocab=vocab, mlp="gelu",
        learned_positions=block_size, max_context=block_size, norm="layernorm", qkv_bias=True,
        out_bias=True, mlp_bias=True, tied_embeddings=True, source=source)


# https://huggingface.co/openai-community/gpt2/blob/main/config.json
# n_layer 12, n_head 12, n_embd 768, n_positions 1024, vocab_size 50257, MLP 4·n_embd
GPT2_SMALL = gpt2_layout("GPT-2 small", 12, 12, 768, 50257, 1024,
                         source="https://huggingface.co/openai-community/gpt2/blob/main/config.json")

LLAMA3_8B = ModelConfig(
    # https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json
    # num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8, hidden_size 4096,
    # intermediate_size 14336, vocab_size 128256, max_position_embeddings 8192, untied
    "Llama-3-8B", n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, d_model=4096, d_ff=14336,
    vocab=128256, mlp="gated", max_context=8192, norm="rmsnorm",
    source="https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json")

MISTRAL_7B = ModelConfig(
    # https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json
    # num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8, hidden_size 4096,
    # intermediate_size 14336, vocab_size 32000, max_position_embeddings 32768, untied
    "Mistral-7B-v0.1", n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, d_model=4096,
    d_ff=14336, vocab=32000, mlp="gated", max_context=32768, norm="rmsnorm",
    source="https://huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json")

QWEN25_7B = ModelConfig(
    # https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json
    # num_hidden_layers 28, num_attention_heads 28, num_key_value_heads 4, hidden_size 3584,
    # intermediate_size 18944, vocab_size 152064, max_position_embeddings 131072, untied,
    # biases on q/k/v only
    "Qwen2.5-7B", n_layers=28, n_heads=28, n_kv_heads=4, head_dim=128, d_model=3584, d_ff=18944,
    vocab=152064, mlp="gated", max_context=131072, norm="rmsnorm", qkv_bias=True,
    source="https://huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json")

FALCON_7B = ModelConfig(
    # https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json
    # n_layer 32, n_head 71, hidden_size 4544, multi_query true (one K/V head), parallel_attn true
    # (one LayerNorm per block), vocab_size 65024, MLP 4·hidden, tied embeddings; context 2048
    "Falcon-7B", n_layers=32, n_heads=71, n_kv_heads=1, head_dim=64, d_model=4544, d_ff=18176,
    vocab=65024, mlp="gelu", max_context=2048, norm="layernorm", norms_per_layer=1,
    tied_embeddings=True, source="https://huggingface.co/tiiuae/falcon-7b/blob/main/config.json")

LLAMA31_70B = ModelConfig(
    # https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json
    # num_hidden_layers 80, num_attention_heads 64, num_key_value_heads 8, hidden_size 8192,
    # intermediate_size 28672, vocab_size 128256, max_position_embeddings 131072, untied
    "Llama-3.1-70B", n_layers=80, n_heads=64, n_kv_heads=8, head_dim=128, d_model=8192,
    d_ff=28672, vocab=128256, mlp="gated", max_context=131072, norm="rmsnorm",
    source="https://huggingface.co/meta-llama/Llama-3.1-70B/blob/main/config.json")

# The small GPT shape of docs/design.md §4 (4 layers, 4 heads, n_embd 128, character vocabulary 65),
# GPT-2 style: what kvviz's measurements and benchmarks run.
TINY_GPT = gpt2_layout("Tiny GPT shape", 4, 4, 128, 65, 1024, source="docs/design.md §4")


def _trained_tiny_gpt() -> ModelConfig:
    """The GPT kvviz ships (kvviz/data/tiny_gpt.json records the config it was trained with)."""
    path = Path(__file__).resolve().parents[1] / "data" / "tiny_gpt.json"
    c = json.loads(path.read_text(encoding="utf-8"))["config"]
    return gpt2_layout("kvviz tiny GPT (trained)", c["n_layer"], c["n_head"], c["n_embd"], c["vocab_size"],
                       c["block_size"], c.get("n_kv_head"), source="kvviz/data/tiny_gpt.json")


TRAINED_TINY_GPT = _trained_tiny_gpt()

ABC_CONFIG = ModelConfig(
    # The A/B/C miniature (docs/design.md §1): Q = K = V = the 2-d token vector, no projections, no
    # MLP; the readout [h1, h0, -h0-h1] is a fixed 2 × 3 matrix.
    "A/B/C miniature", n_layers=1, n_heads=1, n_kv_heads=1, head_dim=2, d_model=2, d_ff=0, vocab=3,
    mlp="none", qkv_proj=False, out_proj=False, norm="none", norms_per_layer=0, max_context=64,
    source="docs/design.md §1")

WEATHER_CONFIG = ModelConfig(
    # "Today weather is so" (docs/design.md §2): four hand-made heads with Q = ones(64) and ±1 keys of
    # 64 values, one scalar value per token shared by the heads, no projections, no MLP; the
    # readout W_vocab is 4 head contexts × 3 words.
    "Today weather is so", n_layers=1, n_heads=4, n_kv_heads=4, head_dim=64, d_model=4, d_ff=0, vocab=3,
    mlp="none", qkv_proj=False, out_proj=False, norm="none", norms_per_layer=0, max_context=64,
    v_heads=1, v_head_dim=1, source="docs/design.md §2")

# The presets of the Cost page's calculators (what a user picks from)
PRESETS: dict[str, ModelConfig] = {
    "gpt2": GPT2_SMALL, "llama3-8b": LLAMA3_8B, "mistral-7b": MISTRAL_7B, "qwen2.5-7b": QWEN25_7B,
    "falcon-7b": FALCON_7B, "llama3.1-70b": LLAMA31_70B, "tiny": TINY_GPT, "abc": ABC_CONFIG,
}

# Every named shape kvviz computes with, each defined once: the presets, the GPT kvviz ships and
# the hand-made weather heads. Models carry theirs as ``cost_config``.
SMOLLM2_135M = ModelConfig(
    # https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/blob/main/config.json
    # num_hidden_layers 30, num_attention_heads 9, num_key_value_heads 3, hidden_size 576 (head 64),
    # intermediate_size 1536, vocab_size 49152, max_position_embeddings 8192, tied embeddings
    "SmolLM2-135M-Instruct", n_layers=30, n_heads=9, n_kv_heads=3, head_dim=64, d_model=576, d_ff=1536,
    vocab=49152, mlp="gated", max_context=8192, norm="rmsnorm", tied_embeddings=True,
    source="https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct/blob/main/config.json")

GEMMA3_270M = ModelConfig(
    # Gemma 3 270M as transformers loads its GGUF (docs/measured-gemma3.md): 18 layers, 4 query heads
    # over 1 K/V head of 256, width 640, gated GELU MLP 2048, vocabulary 262,144 (tied), four norms
    # per layer (the per-head q/k norms, 18 × 512 parameters, are not counted), 32,768 positions;
    # 15 of its layers slide over 512 positions (kvviz.cache.hybrid), which this shape does not say
    "Gemma 3 270M", n_layers=18, n_heads=4, n_kv_heads=1, head_dim=256, d_model=640, d_ff=2048,
    vocab=262_144, mlp="gated", max_context=32_768, norm="rmsnorm", norms_per_layer=4, tied_embeddings=True,
    source="https://huggingface.co/google/gemma-3-270m")

SHAPES: dict[str, ModelConfig] = {**PRESETS, "tiny-gpt": TRAINED_TINY_GPT, "weather": WEATHER_CONFIG,
                                  "smollm2": SMOLLM2_135M, "gemma3": GEMMA3_270M}


# --- multi-head latent attention (DeepSeek-V2/V3) -----------------------------------------------

@dataclass(frozen=True)
class MLAShape:
    """An MLA model's attention shape (config.json names in comments): per token and layer it caches
    one latent (``kv_lora_rank``) and one rotary key shared by the heads (``qk_rope_head_dim``);
    expanded, every head has a K of nope + rope and a V of ``v_head_dim``."""

    name: str
    n_layers: int            # num_hidden_layers
    n_heads: int             # num_attention_heads
    kv_lora_rank: int        # the latent c_KV
    qk_rope_head_dim: int    # the decoupled rotary key k_R
    qk_nope_head_dim: int    # each head's key part from the latent
    v_head_dim: int
    d_model: int
    source: str = ""

    @property
    def latent_elements(self) -> int:
        """Cached per token and layer: latent + rotary key (V3: 512 + 64 = 576)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def expanded_elements(self) -> int:
        """K and V of every head, per token and layer (V3: 128 × (192 + 128) = 40,960)."""
        return self.n_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim)


DEEPSEEK_V3 = MLAShape("DeepSeek-V3", n_layers=61, n_heads=128, kv_lora_rank=512, qk_rope_head_dim=64,
                       qk_nope_head_dim=128, v_head_dim=128, d_model=7168,
                       source="https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json")
DEEPSEEK_V2 = MLAShape("DeepSeek-V2", n_layers=60, n_heads=128, kv_lora_rank=512, qk_rope_head_dim=64,
                       qk_nope_head_dim=128, v_head_dim=128, d_model=5120,
                       source="https://huggingface.co/deepseek-ai/DeepSeek-V2/blob/main/config.json")
MLA_SHAPES = {"deepseek-v3": DEEPSEEK_V3, "deepseek-v2": DEEPSEEK_V2}


def mla_cache_config(shape: MLAShape) -> ModelConfig:
    """MLA as grouped-query attention with one wide group: a single K/V "head" of latent + rotary
    elements that serves every query head as key, and whose latent part serves as value too (no V
    of its own: v_heads 0). The memory formulas then count MLA's cache."""
    return ModelConfig(f"{shape.name} (latent)", shape.n_layers, shape.n_heads, 1, shape.latent_elements,
                       shape.d_model, 0, 0, mlp="none", v_heads=0, v_head_dim=0, source=shape.source)


def mla_expanded_config(shape: MLAShape) -> ModelConfig:
    """The same model's K and V expanded per head (multi-head attention with K wider than V)."""
    return ModelConfig(f"{shape.name} (expanded K/V)", shape.n_layers, shape.n_heads, shape.n_heads,
                       shape.qk_nope_head_dim + shape.qk_rope_head_dim, shape.d_model, 0, 0, mlp="none",
                       v_heads=shape.n_heads, v_head_dim=shape.v_head_dim, source=shape.source)


def config_of(model: object) -> ModelConfig:
    """The cost shape of a model (its ``cost_config``, part of the model protocol)."""
    cfg = getattr(model, "cost_config", None)
    if cfg is None:
        raise ValueError(f"no cost configuration for model {getattr(model, 'name', model)!r}")
    return cfg


# --- validation ---------------------------------------------------------------------------------

def check_dtype(dtype: str) -> str:
    if dtype not in DTYPE_BITS:
        raise LimitError(f"Unknown data type {dtype!r}; choose one of {', '.join(DTYPE_BITS)}.")
    return dtype


def check_heads(n_heads: object, n_kv_heads: object) -> tuple[int, int]:
    h = check_int("Attention heads", n_heads, 1, MAX_COST_HEADS)
    kv = check_int("KV heads", n_kv_heads, 1, MAX_COST_HEADS)
    if kv > h:
        raise LimitError(f"KV heads ({kv}) cannot exceed attention heads ({h}): each K/V head "
                         "serves one or more query heads.")
    if h % kv:
        raise LimitError(f"Attention heads ({h}) must be divisible by KV heads ({kv}): every K/V head "
                         "serves the same number of query heads.")
    return h, kv


def cache_config(n_layers: object, n_heads: object, n_kv_heads: object, head_dim: object,
                 name: str = "Custom") -> ModelConfig:
    """A validated shape for the memory calculator (only the fields the cache depends on)."""
    layers = check_int("Layers", n_layers, 1, MAX_COST_LAYERS)
    h, kv = check_heads(n_heads, n_kv_heads)
    hd = check_int("Head size", head_dim, 1, MAX_COST_HEAD_DIM)
    return ModelConfig(name, layers, h, kv, hd, d_model=h * hd, d_ff=0, vocab=0, mlp="none")


def check_config(cfg: ModelConfig) -> ModelConfig:
    """Validate every field of a full shape (presets pass; user-built ones may not)."""
    cache_config(cfg.n_layers, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim)
    check_int("Model width", cfg.d_model, 1, MAX_COST_WIDTH)
    check_int("MLP width", cfg.d_ff, 0, MAX_COST_WIDTH)
    check_int("Vocabulary", cfg.vocab, 0, MAX_COST_VOCAB)
    if cfg.mlp not in ("gelu", "gated", "none"):
        raise LimitError(f"Unknown MLP kind {cfg.mlp!r}.")
    return cfg
