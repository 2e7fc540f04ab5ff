"""The tiny GPT behind kvviz's model protocol (kvviz.models.base.CausalLM), so the stepper, batching,
the recompute check, the counters, the fast loops and speculative decoding run on it like on any
model."""
from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import torch
import torch.nn.functional as F

from kvviz.cache import Cache
from kvviz.limits import GPT_MAX_NEW_TOKENS, GPT_MAX_PROMPT_TOKENS, MAX_PROMPT_CHARS, LimitError
from kvviz.models.base import BatchPassRecord, LayerLayout, ModelLimits, PassRecord, allowed_keys, new_cache
from kvviz.models.gpt.config import GPTConfig, check_positions, cost_config
from kvviz.models.gpt.grouped import to_grouped
from kvviz.models.gpt.model import GPT, LayerTrace
from kvviz.models.gpt.weights import TinyGPT, load_tiny_gpt

LIMITS = ModelLimits(GPT_MAX_PROMPT_TOKENS, GPT_MAX_NEW_TOKENS, MAX_PROMPT_CHARS)


def layout(cfg: GPTConfig) -> tuple[LayerLayout, ...]:
    """Every layer full attention over learned positions (added once, before the first layer)."""
    return (LayerLayout(cfg.n_head, cfg.kv_heads, cfg.head_dim, "full", None, "learned"),) * cfg.n_layer


class GPTModel:
    """A GPT (the shipped tiny one by default) with per-layer, per-head q/k/v and attention records.

    Built from a ``TinyGPT`` (network and tokenizer) or from a bare ``GPT`` network (a draft model,
    seeded random weights): then its tokens are the ids written out ("0", "1", …) and it has no
    tokenizer."""

    name = "gpt"
    limits = LIMITS
    chat_template = None                        # a word-level model: no chat turns
    end_tokens: frozenset[str] = frozenset()    # it was trained without an end token

    def __init__(self, tiny: TinyGPT | GPT | None = None) -> None:
        if isinstance(tiny, GPT):
            self.tiny = None
            self.network: GPT = tiny
            self.tokenizer = None
            self.vocab = [str(i) for i in range(tiny.config.vocab_size)]
        else:
            self.tiny = tiny or load_tiny_gpt()
            self.network = self.tiny.model          # the one network the fast loops run too
            self.tokenizer = self.tiny.tokenizer
            self.vocab = self.tokenizer.vocab
        cfg = self.network.config
        self.config = cfg
        self.model = self.network                 # the nn.Module, under HFCausalLM's name for it
        self.logit_tokens = self.vocab
        self.n_layers, self.n_heads = cfg.n_layer, cfg.n_head
        self.output_labels = [f"x{i}" for i in range(cfg.n_embd)]   # final hidden state (after ln_f)
        self.cost_config = cost_config(cfg)      # the shape kvviz.cost computes with
        self.layout = layout(cfg)
        self.max_positions: int | None = cfg.block_size   # learned positions cannot slide

    def kv_projections(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (W [2·H_kv·d, C], b [2·H_kv·d]) in float64: [k; v] = W x + b, the K and V rows
        of ``c_attn`` (a latent cache factors them, kvviz.compress.latent)."""
        cfg = self.config
        q, kv = cfg.n_head * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        return [(block.attn.c_attn.weight[q:q + 2 * kv].double(), block.attn.c_attn.bias[q:q + 2 * kv].double())
                for block in self.network.transformer.h]

    def with_kv_heads(self, kv_heads: int) -> GPTModel:
        """This model with its K/V heads mean-pooled to ``kv_heads`` (kvviz.models.gpt.grouped; the
        pooled network built once per process per network and count, read-only afterwards)."""
        net = _grouped(self.network, kv_heads)
        if self.tiny is None:
            return GPTModel(net)
        return GPTModel(TinyGPT(net, self.tiny.tokenizer, self.tiny.trained, self.tiny.meta))

    def tokenize(self, text: str) -> list[str]:
        """Prompt text → tokens (word level); raises UnknownWordsError naming unknown words."""
        if len(text) > self.limits.max_prompt_chars:
            raise LimitError(f"The prompt is {len(text):,} characters long; the limit is "
                             f"{self.limits.max_prompt_chars:,}.")
        if self.tokenizer is None:
            raise LimitError("This GPT has no tokenizer: give token ids.")
        return self.tokenizer.tokenize(text)

    @torch.inference_mode()
    def logits(self, token_ids: Sequence[int] | torch.Tensor, cache: Cache | None, start_pos: int,
               keep: int = 0) -> torch.Tensor:
        """The fast path: the same network as ``forward`` with fused attention and nothing recorded
        → logits [N, V] (the last ``keep`` positions when keep > 0; the readout runs on those only)."""
        idx = torch.as_tensor(token_ids, dtype=torch.long).reshape(1, -1)          # [1, N]
        x = self.network.hidden(idx, cache, start_pos)[0]                          # [N, C]
        return self.network.readout(x[-keep:] if keep else x)                      # [N or keep, V]

    def new_cache(self, kind: str = "dense", **options) -> Cache:
        """A fresh cache of ``kind`` for this network (kvviz.models.base.new_cache)."""
        return new_cache(self.layout, kind, **options)

    @torch.inference_mode()
    def exit_logits(self, token_ids: Sequence[int], cache: Cache, exit_layer: int) -> torch.Tensor:
        """The network cut after its first ``exit_layer`` blocks (early exit, kvviz.speculative.early_exit):
        ``token_ids`` at the positions after the cache's, through those blocks (their rows appended to
        those layers of ``cache``), ln_f and the readout → the logits of the last position [V]."""
        net = self.network
        start = cache.get_seq_length()
        idx = torch.as_tensor(list(token_ids), dtype=torch.long).unsqueeze(0)          # [1, N]
        check_positions(self.config, start, idx.shape[1])
        wpe = net.transformer.wpe.weight[start:start + idx.shape[1]]
        x = F.embedding(idx, net.transformer.wte.weight) + wpe                           # [1, N, C]
        for block in net.transformer.h[:exit_layer]:
            x = block.forward(x, cache, start)
        ln_f = net.transformer.ln_f
        return net.readout(F.layer_norm(x[0, -1], (x.shape[-1],), ln_f.weight, ln_f.bias, ln_f.eps))

    @torch.no_grad()
    def forward(self, token_ids: Sequence[int], cache: Cache | None, start_pos: int) -> PassRecord:
        idx = torch.tensor([list(token_ids)], dtype=torch.long)               # [1, N]
        trace: list[LayerTrace] = []
        x = self.network.hidden(idx, cache, start_pos, trace=trace)          # [1, N, C]
        q, k, v = (torch.stack([t[i][0] for t in trace]) for i in range(3))  # [L, H, N, ·]
        width = max(t[3].shape[-1] for t in trace)   # layers of a PyramidKV cache hold different counts:
        att = torch.stack([F.pad(t[3][0], (0, width - t[3].shape[-1])) for t in trace])  # right-padded with 0
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


@lru_cache(maxsize=8)
def _grouped(network: GPT, kv_heads: int) -> GPT:
    return to_grouped(network, kv_heads)
