"""What inference costs: KV-cache memory, FLOPs with and without the cache, weights, model presets.

Everything here is exact integer arithmetic on a model's shape (DESIGN.md §1.3):

- cache memory = 2 (K and V) · layers · KV heads · head size · bytes per value · tokens · batch;
  with one KV head per query head (multi-head attention) KV heads · head size = d, the seeds' 2·L·T·d.
- FLOPs count a multiply-add as 2 and include only the matrix products: the linear layers
  (Q/K/V and output projections, the MLP, the readout to the vocabulary) and attention
  (Q·Kᵀ and weights·V, 4 · head size FLOPs per query head per visible (query, key) pair).
  Norms, softmax, activations and biases are left out: they are a few percent at most.

Formulas come in closed form (``generation_flops``) and as a count over the passes a run actually
made (``count_flops``), so a page can show the two agreeing.

Speculative decoding's expectations (Leviathan et al. 2023) are here too: tokens per target pass
and the wall-time improvement from the acceptance rate α, the proposals per round γ and the cost
ratio c of a draft pass to a target pass.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Sequence

from kvviz.limits import (MAX_CACHE_SINKS, MAX_CACHE_WINDOW, MAX_COST_BATCH, MAX_COST_GEN_TOKENS,
                          MAX_COST_HEAD_DIM, MAX_COST_HEADS, MAX_COST_LAYERS, MAX_COST_TOKENS, MAX_COST_VOCAB,
                          MAX_COST_WIDTH, MAX_QUANT_GROUP_SIZE, MAX_SPEC_FORMULA_GAMMA, QUANT_BITS, LimitError,
                          check_float, check_int)

# Bits per stored value. fp8/int4 caches also keep small per-block scales, ignored here
# (``quantized_cache_bytes`` counts them for kvviz's own quantized cache).
DTYPE_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int4": 4}

# Common accelerator memory sizes (GB = 10⁹ bytes) drawn as horizontal lines.
ACCELERATOR_GB = (24, 40, 80)


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
    # V when it differs from K (the weather seed: one scalar value per token, shared by the heads);
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

# The small GPT shape of DESIGN.md §4 (4 layers, 4 heads, n_embd 128, character vocabulary 65),
# GPT-2 style: what kvviz's measurements and benchmarks run.
TINY_GPT = gpt2_layout("Tiny GPT shape", 4, 4, 128, 65, 1024, source="DESIGN.md §4")


def _trained_tiny_gpt() -> ModelConfig:
    """The GPT kvviz ships (kvviz/data/tiny_gpt.json records the config it was trained with)."""
    path = Path(__file__).resolve().parent / "data" / "tiny_gpt.json"
    c = json.loads(path.read_text(encoding="utf-8"))["config"]
    return gpt2_layout("kvviz tiny GPT (trained)", c["n_layer"], c["n_head"], c["n_embd"], c["vocab_size"],
                       c["block_size"], c.get("n_kv_head"), source="kvviz/data/tiny_gpt.json")


TRAINED_TINY_GPT = _trained_tiny_gpt()

ABC_CONFIG = ModelConfig(
    # The A/B/C miniature (DESIGN.md §1.1): Q = K = V = the 2-d token vector, no projections, no
    # MLP; the readout [h1, h0, -h0-h1] is a fixed 2 × 3 matrix.
    "A/B/C miniature", n_layers=1, n_heads=1, n_kv_heads=1, head_dim=2, d_model=2, d_ff=0, vocab=3,
    mlp="none", qkv_proj=False, out_proj=False, norm="none", norms_per_layer=0, max_context=64,
    source="DESIGN.md §1.1")

WEATHER_CONFIG = ModelConfig(
    # "Today weather is so" (DESIGN.md §1.2): four hand-made heads with Q = ones(64) and ±1 keys of
    # 64 values, one scalar value per token shared by the heads, no projections, no MLP; the
    # readout W_vocab is 4 head contexts × 3 words.
    "Today weather is so", n_layers=1, n_heads=4, n_kv_heads=4, head_dim=64, d_model=4, d_ff=0, vocab=3,
    mlp="none", qkv_proj=False, out_proj=False, norm="none", norms_per_layer=0, max_context=64,
    v_heads=1, v_head_dim=1, source="DESIGN.md §1.2")

# The presets of the Cost page's calculators (what a user picks from)
PRESETS: dict[str, ModelConfig] = {
    "gpt2": GPT2_SMALL, "llama3-8b": LLAMA3_8B, "mistral-7b": MISTRAL_7B, "qwen2.5-7b": QWEN25_7B,
    "falcon-7b": FALCON_7B, "llama3.1-70b": LLAMA31_70B, "tiny": TINY_GPT, "abc": ABC_CONFIG,
}

# Every named shape kvviz computes with, each defined once: the presets, the GPT kvviz ships and
# the hand-made weather heads. Models carry theirs as ``cost_config``.
SHAPES: dict[str, ModelConfig] = {**PRESETS, "tiny-gpt": TRAINED_TINY_GPT, "weather": WEATHER_CONFIG}


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


# --- memory -------------------------------------------------------------------------------------

def cache_bytes_per_token(cfg: ModelConfig, dtype: str = "fp16") -> int:
    """K and V of one token in every layer: 2 · L · KV heads · head size · bits / 8 (always whole;
    with a V narrower than K, L · (K width + V width) · bits / 8)."""
    return cfg.n_layers * cfg.kv_width * DTYPE_BITS[check_dtype(dtype)] // 8


def cache_bytes(cfg: ModelConfig, tokens: object, batch: object = 1, dtype: str = "fp16") -> int:
    """The whole cache of ``batch`` sequences of ``tokens`` tokens each."""
    t = check_int("Tokens", tokens, 1, MAX_COST_TOKENS)
    b = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    return cache_bytes_per_token(cfg, dtype) * t * b


def window_cache_bytes(cfg: ModelConfig, tokens: object, window: object, sinks: object = 0,
                       batch: object = 1, dtype: str = "fp16") -> int:
    """A sliding-window cache with attention sinks after ``tokens`` tokens: it holds at most
    sinks + window positions (kvviz.cache.SlidingWindowCache)."""
    t = check_int("Tokens", tokens, 1, MAX_COST_TOKENS)
    w = check_int("Window", window, 1, MAX_CACHE_WINDOW)
    s = check_int("Sink tokens", sinks, 0, MAX_CACHE_SINKS)
    return cache_bytes(cfg, min(t, w + s), batch, dtype)


def quantized_rows(tokens: int, group_size: int, key_axis: str, residual: int) -> int:
    """Of ``tokens`` cached positions, how many a KIVI-style cache holds as codes: those older than
    the last ``residual``; with per-channel keys only whole groups of ``group_size`` positions."""
    over = max(0, tokens - residual)
    return over if key_axis == "token" else over - over % group_size


def quantized_cache_bytes(cfg: ModelConfig, tokens: object, bits: object, group_size: object,
                          key_axis: str = "channel", residual: object = 0, batch: object = 1,
                          dtype: str = "fp32") -> int:
    """Bytes of a quantized cache (kvviz.cache.QuantizedCache) after ``tokens`` tokens, per layer
    and sequence (D = head size, G = group size, q quantized rows, f = tokens − q full-precision ones,
    e = bytes of ``dtype``, the type of the scales, zero points and full-precision rows):

    - codes: q · heads · ⌈D · bits / 8⌉ for K and for V (int4: two codes per byte);
    - a scale and a zero point per group: values per token, ⌈D / G⌉ groups per row and head;
      keys per token the same, or per channel (one group per channel per G rows): q / G · D;
    - full precision: f · heads · D for K and for V.
    """
    t = check_int("Tokens", tokens, 1, MAX_COST_TOKENS)
    if isinstance(bits, bool) or bits not in QUANT_BITS:
        raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {bits!r}.")
    g = check_int("Group size", group_size, 1, MAX_QUANT_GROUP_SIZE)
    if key_axis not in ("channel", "token"):
        raise LimitError(f"Key axis must be 'channel' or 'token', got {key_axis!r}.")
    r = check_int("Residual window", residual, 0, MAX_COST_TOKENS)
    b = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    if DTYPE_BITS[check_dtype(dtype)] % 8:
        raise LimitError(f"Scales and full-precision rows need whole bytes; {dtype} has {DTYPE_BITS[dtype]} bits.")
    e = DTYPE_BITS[dtype] // 8
    k_heads, k_dim = cfg.n_kv_heads, cfg.head_dim
    v_heads = k_heads if cfg.v_heads is None else cfg.v_heads
    v_dim = k_dim if cfg.v_head_dim is None else cfg.v_head_dim
    q = quantized_rows(t, g, key_axis, r)
    f = t - q
    codes = q * (k_heads * -(-k_dim * int(bits) // 8) + v_heads * -(-v_dim * int(bits) // 8))
    k_groups = q * k_heads * -(-k_dim // g) if key_axis == "token" else q // g * k_heads * k_dim
    v_groups = q * v_heads * -(-v_dim // g)
    scales = 2 * (k_groups + v_groups) * e                  # a scale and a zero point per group
    full = f * (k_heads * k_dim + v_heads * v_dim) * e
    return cfg.n_layers * b * (codes + scales + full)


@dataclass(frozen=True)
class MemoryReport:
    """One calculator result, with the same cache under multi-head and multi-query attention."""

    kind: str                 # "MHA" | "GQA" | "MQA"
    bytes_per_token: int
    total: int                # bytes for tokens × batch
    mha_total: int            # if every query head had its own K/V head
    mqa_total: int            # if all query heads shared one K/V head
    tokens: int
    batch: int
    dtype: str

    @property
    def saving_vs_mha(self) -> float:
        """How many times smaller than the multi-head cache (1.0 for multi-head itself)."""
        return self.mha_total / self.total


def memory_report(cfg: ModelConfig, tokens: object, batch: object, dtype: str) -> MemoryReport:
    total = cache_bytes(cfg, tokens, batch, dtype)
    mha = cache_bytes(replace(cfg, n_kv_heads=cfg.n_heads), tokens, batch, dtype)
    mqa = cache_bytes(replace(cfg, n_kv_heads=1), tokens, batch, dtype)
    return MemoryReport(cfg.attention_kind, cache_bytes_per_token(cfg, dtype), total, mha, mqa,
                        int(tokens), int(batch), dtype)  # type: ignore[arg-type]


def kv_sharing(cfg: ModelConfig, tokens: object, batch: object, dtype: str,
               max_bars: int = 8) -> list[tuple[int, str, int]]:
    """The same cache for every valid number of K/V heads (the divisors of the query heads), as
    (KV heads, kind, bytes), from one shared K/V head to one per query head. With many divisors
    a spread of them is kept, always including 1, the chosen count and all heads."""
    divisors = [k for k in range(1, cfg.n_heads + 1) if cfg.n_heads % k == 0]
    if len(divisors) > max_bars:
        step = (len(divisors) - 1) / (max_bars - 1)
        keep = {divisors[round(i * step)] for i in range(max_bars)} | {cfg.n_kv_heads}
        divisors = sorted(keep)
    return [(k, attention_kind(cfg.n_heads, k), cache_bytes(replace(cfg, n_kv_heads=k), tokens, batch, dtype))
            for k in divisors]


def context_grid(max_tokens: int, points: int = 40) -> list[int]:
    """Context lengths from 1 to ``max_tokens``, evenly spaced on a log axis (distinct integers)."""
    max_tokens = check_int("Tokens", max_tokens, 1, MAX_COST_TOKENS)
    if max_tokens == 1:
        return [1]
    grid = {round(math.exp(math.log(max_tokens) * i / (points - 1))) for i in range(points)}
    return sorted(grid | {1, max_tokens})


def tokens_that_fit(cfg: ModelConfig, memory_bytes: int, batch: int, dtype: str) -> int:
    """The longest context whose cache (for ``batch`` sequences) fits in ``memory_bytes``."""
    return max(0, memory_bytes // (cache_bytes_per_token(cfg, dtype) * batch))


# --- parameters ---------------------------------------------------------------------------------

def param_count(cfg: ModelConfig) -> int:
    """Parameters of the whole model (embeddings, blocks, final norm, readout)."""
    d, h, kv, hd, f = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim, cfg.d_ff
    norm = {"layernorm": 2 * d, "rmsnorm": d, "none": 0}[cfg.norm]
    per_layer = cfg.norms_per_layer * norm
    if cfg.qkv_proj:
        per_layer += d * (h + 2 * kv) * hd + (h + 2 * kv) * hd * cfg.qkv_bias
    if cfg.out_proj:
        per_layer += h * hd * d + d * cfg.out_bias
    n_mlp = {"gelu": 2, "gated": 3, "none": 0}[cfg.mlp]
    per_layer += n_mlp * d * f
    if cfg.mlp_bias and n_mlp:
        per_layer += (n_mlp - 1) * f + d
    embed = cfg.vocab * d + cfg.learned_positions * d
    readout = 0 if cfg.tied_embeddings else cfg.vocab * d
    final_norm = norm if cfg.norm != "none" else 0
    return embed + cfg.n_layers * per_layer + final_norm + readout


def weight_bytes(cfg: ModelConfig, dtype: str = "fp16") -> int:
    return param_count(cfg) * DTYPE_BITS[check_dtype(dtype)] // 8


# --- FLOPs --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Flops:
    """FLOPs split as in the seed's table: projections + MLP (incl. readout) and attention."""

    linear: int
    attention: int

    @property
    def total(self) -> int:
        return self.linear + self.attention

    def __add__(self, other: "Flops") -> "Flops":
        return Flops(self.linear + other.linear, self.attention + other.attention)

    def scaled(self, k: int) -> "Flops":
        return Flops(self.linear * k, self.attention * k)


def block_flops_per_token(cfg: ModelConfig) -> int:
    """The layers' matrix products for one position, regardless of the context: 2 · (weights used)."""
    d, h, kv, hd = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    per_layer = 0
    if cfg.qkv_proj:
        per_layer += 2 * d * (h + 2 * kv) * hd
    if cfg.out_proj:
        per_layer += 2 * h * hd * d
    per_layer += 2 * {"gelu": 2, "gated": 3, "none": 0}[cfg.mlp] * d * cfg.d_ff
    return cfg.n_layers * per_layer


def readout_flops(cfg: ModelConfig) -> int:
    """The readout to the vocabulary of one position: 2 · d · V."""
    return 2 * cfg.d_model * cfg.vocab


def linear_flops_per_token(cfg: ModelConfig) -> int:
    """Everything but attention for one position, its readout included."""
    return block_flops_per_token(cfg) + readout_flops(cfg)


def attention_flops_per_pair(cfg: ModelConfig) -> int:
    """One (query, visible key) pair in every layer and query head: Q·K (2·hd) and weight·V (2·hd;
    2 · V width when V is narrower)."""
    v_dim = cfg.head_dim if cfg.v_head_dim is None else cfg.v_head_dim
    return 2 * cfg.n_layers * cfg.n_heads * (cfg.head_dim + v_dim)


def _tri(m: int) -> int:       # 1 + 2 + … + m: pairs a causal pass over positions 0..m-1 reads
    return m * (m + 1) // 2


def _tet(m: int) -> int:       # _tri(1) + … + _tri(m)
    return m * (m + 1) * (m + 2) // 6


def pass_flops(cfg: ModelConfig, n_new: int, start: int, last_only: bool = False) -> Flops:
    """One pass over positions start..start+n_new-1 with positions 0..start-1 already cached.

    ``last_only``: logits only for the last position (the generation loops need no more; the
    stepper computes them for every new position)."""
    pairs = _tri(start + n_new) - _tri(start)     # query at position p reads p + 1 keys
    readouts = 1 if last_only else n_new
    return Flops(n_new * block_flops_per_token(cfg) + readouts * readout_flops(cfg),
                 pairs * attention_flops_per_pair(cfg))


def loop_flops(cfg: ModelConfig, prompt_len: int, new_tokens: int, cached: bool) -> Flops:
    """What kvviz.loops computes to generate ``new_tokens`` after a ``prompt_len`` prompt, logits of
    the last position only. With the cache: a prefill, then one position per further token.
    Without: every step reruns the text, cropped to the model's learned positions."""
    p = check_int("Prompt length", prompt_len, 1, MAX_COST_GEN_TOKENS)
    n = check_int("New tokens", new_tokens, 1, MAX_COST_GEN_TOKENS)
    if cached:
        total = pass_flops(cfg, p, 0, last_only=True)
        for t in range(1, n):
            total = total + pass_flops(cfg, 1, p + t - 1, last_only=True)
        return total
    window = cfg.learned_positions or cfg.max_context or p + n
    total = Flops(0, 0)
    for t in range(n):
        total = total + pass_flops(cfg, min(p + t, window), 0, last_only=True)
    return total


def step_flops(cfg: ModelConfig, context: int, cached: bool) -> Flops:
    """The pass that processes the token at position ``context - 1``: one new position with the
    cache, the whole prefix of ``context`` positions again without it."""
    context = check_int("Context", context, 1, 2 * MAX_COST_GEN_TOKENS)   # prompt + generated
    return pass_flops(cfg, 1, context - 1) if cached else pass_flops(cfg, context, 0)


def generation_flops(cfg: ModelConfig, prompt_len: int, new_tokens: int, cached: bool) -> Flops:
    """Closed form for the stepper's schedule: a prefill of the prompt, then one pass per further
    token (``new_tokens`` passes in all; the last chosen token is never processed).

    With the cache the passes process prompt_len + new_tokens - 1 positions once each; without
    it, pass k reruns the whole prefix of prompt_len + k positions:
      linear    P+N-1 tokens            vs  N·P + N(N-1)/2 tokens         (O(N d²) vs O(N² d²))
      attention tri(P+N-1) pairs        vs  tet(P+N-1) - tet(P-1) pairs   (O(N² d) vs O(N³ d))
    """
    p = check_int("Prompt length", prompt_len, 1, MAX_COST_GEN_TOKENS)
    n = check_int("New tokens", new_tokens, 1, MAX_COST_GEN_TOKENS)
    lin, att = linear_flops_per_token(cfg), attention_flops_per_pair(cfg)
    if cached:
        return Flops((p + n - 1) * lin, _tri(p + n - 1) * att)
    return Flops((n * p + n * (n - 1) // 2) * lin, (_tet(p + n - 1) - _tet(p - 1)) * att)


def flops_curve(cfg: ModelConfig, prompt_len: int, ns: Iterable[int]) -> dict[str, list[int]]:
    """Total FLOPs against N, with and without the cache, split (for a log-scale plot)."""
    out: dict[str, list[int]] = {"n": [], "cached_linear": [], "cached_attention": [],
                                 "uncached_linear": [], "uncached_attention": []}
    for n in ns:
        c, u = generation_flops(cfg, prompt_len, n, True), generation_flops(cfg, prompt_len, n, False)
        out["n"].append(int(n))
        out["cached_linear"].append(c.linear)
        out["cached_attention"].append(c.attention)
        out["uncached_linear"].append(u.linear)
        out["uncached_attention"].append(u.attention)
    return out


@dataclass(frozen=True)
class FlopCount:
    """FLOPs summed over a run's passes: what the stepper ran with the cache, and what its
    recompute checks ran (the whole prefix again, as a run without a cache does)."""

    cached: Flops
    uncached: Flops
    passes: int
    per_pass: list[tuple[str, int, int, Flops]]   # (phase, new positions, visible pairs, FLOPs)


def _visible_pairs(positions: Sequence[int], n_keys: int) -> int:
    """Count (query, key) pairs the causal mask leaves open: keys 0..min(p, T-1) for query p."""
    return sum(min(p + 1, n_keys) for p in positions)


def count_flops(events: Sequence, cfg: ModelConfig) -> FlopCount:
    """Walk a run's pass events and count their FLOPs from the records' own shapes.

    Each pass record holds q ``[L, H, N, hd]`` and attention ``[L, H, N, T]``: the layers, heads,
    head size, new positions and visible keys are read from the tensors (and checked against
    ``cfg``, which supplies the widths the records don't show: d_model, d_ff, vocabulary).
    """
    lin, att = linear_flops_per_token(cfg), attention_flops_per_pair(cfg)
    cached = uncached = Flops(0, 0)
    per_pass = []
    for ev in events:
        rec = getattr(ev, "record", None)
        if rec is None:
            continue
        n_layers, n_heads, n_new, hd = rec.q.shape
        n_keys = rec.attention.shape[-1]
        if (n_layers, n_heads, hd) != (cfg.n_layers, cfg.n_heads, cfg.head_dim):
            raise ValueError(f"pass record shape {tuple(rec.q.shape)} does not match {cfg.name} "
                             f"({cfg.n_layers} layers, {cfg.n_heads} heads, head size {cfg.head_dim})")
        pairs = _visible_pairs(rec.positions, n_keys)
        f = Flops(n_new * lin, pairs * att)
        cached = cached + f
        prefix = rec.positions[-1] + 1                     # the recompute check reran 0..last
        uncached = uncached + Flops(prefix * lin, _visible_pairs(range(prefix), prefix) * att)
        per_pass.append((ev.phase, n_new, pairs, f))
    return FlopCount(cached, uncached, len(per_pass), per_pass)


# --- arithmetic intensity and transfers ----------------------------------------------------------

@dataclass(frozen=True)
class Intensity:
    """FLOPs of one pass over the bytes it must move (weights once, plus the cache it reads/writes)."""

    flops: int
    bytes_moved: int

    @property
    def flops_per_byte(self) -> float:
        return self.flops / self.bytes_moved


def prefill_intensity(cfg: ModelConfig, prompt_len: int, batch: int, dtype: str = "fp16") -> Intensity:
    """A prefill of ``batch`` prompts of ``prompt_len`` tokens: read the weights, write the cache."""
    prompt_len = check_int("Prompt length", prompt_len, 1, MAX_COST_TOKENS)
    batch = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    f = pass_flops(cfg, prompt_len, 0).scaled(batch).total
    moved = weight_bytes(cfg, dtype) + batch * prompt_len * cache_bytes_per_token(cfg, dtype)
    return Intensity(f, moved)


def decode_intensity(cfg: ModelConfig, context: int, batch: int, dtype: str = "fp16") -> Intensity:
    """One decode step for ``batch`` sequences at ``context`` tokens: read the weights and every
    sequence's cache, compute one new position each."""
    context = check_int("Context", context, 1, MAX_COST_TOKENS)
    batch = check_int("Batch size", batch, 1, MAX_COST_BATCH)
    f = pass_flops(cfg, 1, context - 1).scaled(batch).total
    moved = weight_bytes(cfg, dtype) + batch * context * cache_bytes_per_token(cfg, dtype)
    return Intensity(f, moved)


def decode_intensity_limit(cfg: ModelConfig, context: int, dtype: str = "fp16") -> float:
    """What decode intensity tends to as the batch grows: each sequence's own FLOPs over its own
    cache bytes (the shared weights stop mattering)."""
    context = check_int("Context", context, 1, MAX_COST_TOKENS)
    return pass_flops(cfg, 1, context - 1).total / (context * cache_bytes_per_token(cfg, dtype))


@dataclass(frozen=True)
class Transfer:
    """Sending a prefilled cache from a prefill machine to a decode machine."""

    bytes: int
    seconds: float
    per_layer_bytes: int


def cache_transfer(cfg: ModelConfig, prompt_len: object, batch: object, dtype: str,
                   link_gbit_s: object) -> Transfer:
    """Bytes of the prompt's cache and the time to send it over a link of ``link_gbit_s`` Gbit/s."""
    try:
        speed = float(link_gbit_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LimitError(f"Link speed must be a number, got {link_gbit_s!r}.") from None
    if not math.isfinite(speed) or not 0.001 <= speed <= 1_000_000:
        raise LimitError(f"Link speed must be between 0.001 and 1,000,000 Gbit/s, got {link_gbit_s}.")
    total = cache_bytes(cfg, prompt_len, batch, dtype)
    return Transfer(total, total * 8 / (speed * 1e9), total // cfg.n_layers)


def decode_step_floor(cfg: ModelConfig, context: int, batch: int, dtype: str,
                      bandwidth_tb_s: object) -> float:
    """Seconds one decode step needs at least just to read the weights and every sequence's cache
    once at ``bandwidth_tb_s`` TB/s (the memory-bound floor; arithmetic is ignored)."""
    try:
        bw = float(bandwidth_tb_s)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LimitError(f"Memory bandwidth must be a number, got {bandwidth_tb_s!r}.") from None
    if not math.isfinite(bw) or not 0.001 <= bw <= 1_000:
        raise LimitError(f"Memory bandwidth must be between 0.001 and 1,000 TB/s, got {bandwidth_tb_s}.")
    moved = weight_bytes(cfg, dtype) + cache_bytes(cfg, context, batch, dtype)
    return moved / (bw * 1e12)


# ---------------------------------------------------------------- speculative decoding

def _spec_inputs(alpha: object, gamma: object) -> tuple[float, int]:
    return (check_float("Acceptance rate α", alpha, 0.0, 1.0),
            check_int("γ (draft tokens per round)", gamma, 0, MAX_SPEC_FORMULA_GAMMA))


def speculative_tokens_per_pass(alpha: object, gamma: object) -> float:
    """Expected tokens one target pass yields when each of γ proposals is accepted with probability α
    (independently) until the first rejection, which the target replaces, or all γ and the target's
    own next token (Leviathan et al. 2023, Eq. 1):

        1 + α + α² + … + α^γ = (1 − α^(γ+1)) / (1 − α),   γ + 1 at α = 1, 1 at α = 0.
    """
    a, g = _spec_inputs(alpha, gamma)
    return float(g + 1) if a == 1.0 else (1.0 - a ** (g + 1)) / (1.0 - a)


def speculative_speedup(alpha: object, gamma: object, c: object, verify_cost: object = 1.0) -> float:
    """Expected wall-time improvement of speculative over plain decoding (Leviathan et al. 2023,
    Theorem 3.8): tokens per target pass over the time of a round in target decode passes,

        (1 − α^(γ+1)) / ((1 − α)(γ·c + v)),

    c = time of a draft pass / time of a target decode pass, v = ``verify_cost`` = time of the target's
    pass over γ + 1 positions / time of a one-position pass. The paper takes v = 1 (an accelerator reads
    the weights once, however many positions; the extra arithmetic is free); on a CPU v > 1 and grows
    with γ, which is why the measured speed-up falls short of the v = 1 formula. The round's bookkeeping
    (draws, the acceptance test) is left out.
    """
    a, g = _spec_inputs(alpha, gamma)
    c = check_float("Cost ratio c", c, 0.0, 1_000.0)
    v = check_float("Verification cost v", verify_cost, 0.0, 1_000.0)
    if g * c + v <= 0:
        raise LimitError("A round must cost something: γ·c + v is 0.")
    return speculative_tokens_per_pass(a, g) / (g * c + v)


def best_gamma(alpha: object, c: object, max_gamma: int = 16) -> int:
    """The γ in 1..max_gamma with the largest expected improvement (v = 1). Speculation pays at all
    (some improvement > 1) exactly when α > c (Leviathan et al. 2023, Corollary 3.9)."""
    g_max = check_int("Largest γ", max_gamma, 1, MAX_SPEC_FORMULA_GAMMA)
    return max(range(1, g_max + 1), key=lambda g: (speculative_speedup(alpha, g, c), -g))
