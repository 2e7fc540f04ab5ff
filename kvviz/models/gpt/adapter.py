"""The tiny GPT behind kvviz's Model protocol, so the stepper, batching, the recompute check and
the counters run on it like on the toy models."""
from __future__ import annotations

from collections.abc import Sequence

import torch

from kvviz.cache import Cache
from kvviz.limits import GPT_MAX_NEW_TOKENS, GPT_MAX_PROMPT_TOKENS, MAX_PROMPT_CHARS, LimitError
from kvviz.models.base import BatchPassRecord, ModelLimits, PassRecord, allowed_keys
from kvviz.models.gpt.config import cost_config
from kvviz.models.gpt.model import GPT, LayerTrace
from kvviz.models.gpt.weights import TinyGPT, load_tiny_gpt

LIMITS = ModelLimits(GPT_MAX_PROMPT_TOKENS, GPT_MAX_NEW_TOKENS, MAX_PROMPT_CHARS)


class GPTModel:
    """A GPT (the shipped tiny one by default) with per-layer, per-head q/k/v and attention records."""

    name = "gpt"
    limits = LIMITS

    def __init__(self, tiny: TinyGPT | None = None) -> None:
        self.tiny = tiny or load_tiny_gpt()
        self.network: GPT = self.tiny.model          # the one network the fast loops run too
        self.tokenizer = self.tiny.tokenizer
        cfg = self.network.config
        self.config = cfg
        self.vocab = self.tokenizer.vocab
        self.logit_tokens = self.vocab
        self.n_layers, self.n_heads = cfg.n_layer, cfg.n_head
        self.output_labels = [f"x{i}" for i in range(cfg.n_embd)]   # final hidden state (after ln_f)
        self.cost_config = cost_config(cfg)      # the shape kvviz.cost computes with

    def tokenize(self, text: str) -> list[str]:
        """Prompt text → tokens (word level); raises UnknownWordsError naming unknown words."""
        if len(text) > self.limits.max_prompt_chars:
            raise LimitError(f"The prompt is {len(text):,} characters long; the limit is "
                             f"{self.limits.max_prompt_chars:,}.")
        return self.tokenizer.tokenize(text)

    @torch.no_grad()
    def forward(self, token_ids: Sequence[int], cache: Cache | None, start_pos: int) -> PassRecord:
        idx = torch.tensor([list(token_ids)], dtype=torch.long)               # [1, N]
        trace: list[LayerTrace] = []
        x = self.network.hidden(idx, cache, start_pos, trace=trace)          # [1, N, C]
        q, k, v, att = (torch.stack([t[i][0] for t in trace]) for i in range(4))  # [L, H, N, ·]
        return PassRecord(positions=list(range(start_pos, start_pos + idx.shape[1])),
                          q=q, k=k, v=v, attention=att, output=x[0], logits=self.network.readout(x[0]))

    @torch.no_grad()
    def forward_batch(self, token_ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor,
                      cache: Cache) -> BatchPassRecord:
        """B sequences in one pass (kvviz.decoding.batching): token_ids, positions [B, N]; key_mask [B, T]."""
        trace: list[LayerTrace] = []
        allowed = allowed_keys(key_mask, token_ids.shape[1])                              # [B, N, T]
        x = self.network.hidden(token_ids, cache, positions=positions, allowed=allowed, trace=trace)
        q, k, v, att = (torch.stack([t[i] for t in trace], dim=1) for i in range(4))  # [B, L, H, N, ·]
        return BatchPassRecord(positions=positions, q=q, k=k, v=v, attention=att, output=x,
                               logits=self.network.readout(x))
