"""The GPT's shape, and its translation to and from kvviz.cost's ModelConfig."""
from __future__ import annotations

from dataclasses import dataclass

from kvviz.cost import ModelConfig, gpt2_layout
from kvviz.limits import LimitError


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 83
    block_size: int = 256     # learned positions: the model never sees more than this many tokens
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    layer_norm_epsilon: float = 1e-5
    n_kv_head: int | None = None   # K/V heads; None = n_head (multi-head). Fewer: grouped-query attention

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head

    @property
    def kv_heads(self) -> int:
        return self.n_head if self.n_kv_head is None else self.n_kv_head


def draft_config(vocab_size: int, block_size: int = 256) -> GPTConfig:
    """The draft model's shape for speculative decoding (kvviz.speculative.decoding.speculative_generate): the tiny
    GPT's tokenizer and positions, but 1 layer of width 64 (2 heads of 32) instead of 4 of 128."""
    return GPTConfig(vocab_size=vocab_size, block_size=block_size, n_layer=1, n_head=2, n_embd=64)


def check_positions(cfg: GPTConfig, start_pos: int, n: int) -> None:
    """Learned positions cannot slide: refuse positions at or past block_size."""
    if start_pos + n > cfg.block_size:
        raise LimitError(
            f"Positions {start_pos}..{start_pos + n - 1} do not fit: this GPT learned only "
            f"{cfg.block_size} positions (block_size). With a cache the text cannot be "
            f"cropped, so generation must stop here; without a cache the oldest tokens are dropped.")


def cost_config(cfg: GPTConfig, name: str = "kvviz tiny GPT (trained)",
                source: str = "kvviz/data/tiny_gpt.json") -> ModelConfig:
    """This network's shape for kvviz.cost (memory, parameters, FLOPs): GPT-2 layout."""
    return gpt2_layout(name, cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.vocab_size, cfg.block_size,
                       cfg.n_kv_head, source=source)


def gpt_config(cfg: ModelConfig) -> GPTConfig:
    """A kvviz.cost shape as this GPT (the inverse of ``cost_config``): GPT-2 layout only (GELU MLP of
    width 4d, LayerNorm, biases, learned positions, tied readout); anything else has no GPT to run."""
    if (cfg.mlp != "gelu" or cfg.n_heads * cfg.head_dim != cfg.d_model
            or cfg.d_ff != 4 * cfg.d_model or cfg.norm != "layernorm" or cfg.norms_per_layer != 2
            or not (cfg.qkv_proj and cfg.out_proj and cfg.qkv_bias and cfg.out_bias and cfg.mlp_bias)
            or not cfg.tied_embeddings or not cfg.learned_positions):
        raise ValueError(f"{cfg.name} is not a GPT-2-style shape")
    return GPTConfig(vocab_size=cfg.vocab, block_size=cfg.learned_positions, n_layer=cfg.n_layers,
                     n_head=cfg.n_heads, n_embd=cfg.d_model,
                     n_kv_head=None if cfg.n_kv_heads == cfg.n_heads else cfg.n_kv_heads)
