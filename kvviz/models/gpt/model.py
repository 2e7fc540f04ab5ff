"""The GPT network, in the nanoGPT shape, with a KV cache (docs/design.md §3). The only copy of its arithmetic.

Learned token and position embeddings, pre-LayerNorm blocks (causal self-attention, MLP with the
tanh-approximated GELU that GPT-2 calls "gelu_new"), a final LayerNorm and an lm_head tied to the
token embedding. Parameter names follow GPT-2 (``transformer.wte``, ``transformer.h.N.attn.c_attn``,
…) so the same weights load into ``transformers.GPT2LMHeadModel`` (kvviz.models.gpt.weights).

Every caller runs this code: the stepper (with ``trace``, to show attention weights), batched
decoding (``positions`` and ``allowed``), the fast loops of kvviz.decoding.loops and the measurements. What
keeps a one-token decode step fast on a CPU: the layers call ``F.*`` on their own parameters (no
nn.Module call per Linear/LayerNorm), a cache that is written in place (kvviz.cache.StaticCache),
fused attention (``F.scaled_dot_product_attention``) whenever no weights are asked for, and the
readout as a ``[d, V]`` copy of the tied embedding: a one-row ``x @ W`` over ``[d, V]`` is much
faster on a CPU than ``x @ Wᵀ`` over ``[V, d]`` (≈ 8 vs 14 ms for GPT-2 small's head).

K/V heads: ``n_kv_head`` < ``n_head`` is grouped-query attention; each K/V head serves
n_head / n_kv_head query heads and the cache holds only the K/V heads.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from kvviz.cache import Cache
from kvviz.models.base import causal_allowed, masked_softmax
from kvviz.models.gpt.config import GPTConfig, check_positions


def _weights(module: nn.Module, collect) -> tuple:
    """The parameters (and submodules) ``module``'s forward uses, looked up once: each nn.Module
    attribute lookup costs about a microsecond, ~50 of them per decode step. ``GPT`` drops these
    tuples whenever its parameters may have been replaced (``_apply``, ``load_state_dict``)."""
    found = module.__dict__.get("_fast")
    if found is None:
        found = collect()
        module.__dict__["_fast"] = found
    return found


# what one attention layer computed, kept only when a caller asks for it (the stepper does):
# q [B, H, N, hs]; k, v [B, H_kv, N, hs] (the new rows); att [B, H, N, T]
LayerTrace = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Causal attention of new queries q [B, H, N, hs] (positions start_pos..) over keys/values
    [B, H, T, hs] (positions 0..T-1), weights not kept → [B, H, N, hs]."""
    N, T = q.shape[-2], k.shape[-2]
    if N == 1:      # one decode query at the last position sees every cached key: no mask needed
        return F.scaled_dot_product_attention(q, k, v)
    if T == N:      # a pass from position 0: the plain causal triangle
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_allowed(start_pos, N, T))


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, layer_idx: int) -> None:
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0 and cfg.n_head % cfg.kv_heads == 0
        self.layer_idx = layer_idx
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.kv_heads, cfg.head_dim
        # q of every head, then k and v of every K/V head, in one matrix
        self.c_attn = nn.Linear(cfg.n_embd, (cfg.n_head + 2 * cfg.kv_heads) * cfg.head_dim)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor, cache: Cache | None = None, start_pos: int = 0,
                allowed: torch.Tensor | None = None, trace: list[LayerTrace] | None = None) -> torch.Tensor:
        """x [B, N, C] at positions start_pos.. → [B, N, C]. ``allowed`` [B, N, T] (batched decoding)
        replaces the causal rule: which keys each new query may read."""
        B, N, C = x.shape
        H, KV, hs = self.n_head, self.n_kv_head, self.head_dim
        w_attn, b_attn, w_proj, b_proj = self.weights()
        qkv = F.linear(x, w_attn, b_attn).view(B, N, H + 2 * KV, hs).transpose(1, 2)   # [B, H + 2·KV, N, hs]
        q, k_new, v_new = qkv.split_with_sizes([H, KV, KV], dim=1)  # [B, H, N, hs], [B, KV, N, hs] × 2
        k, v = (k_new, v_new) if cache is None else cache.update(k_new, v_new, self.layer_idx)  # [B, KV, T, hs]
        if allowed is None and cache is not None and N > 1:
            allowed = cache.attention_mask(self.layer_idx, start_pos, N)   # [N, T], or None: causal
        if KV != H:                                                # every K/V head serves H / KV query heads
            k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
        if trace is None and allowed is None:
            y = fused_attention(q, k, v, start_pos)
        else:   # explicit weights: the stepper shows them, and a padding row must come out 0, not NaN
            if allowed is None:
                allowed = causal_allowed(start_pos, N, k.shape[-2])
            if allowed.dim() == 3:
                allowed = allowed.unsqueeze(1)                     # [B, 1, N, T]: the same for every head
            att = masked_softmax(q @ k.transpose(-2, -1) / math.sqrt(hs), allowed)   # [B, H, N, T]
            y = att @ v
            if trace is not None:
                trace.append((q, k_new, v_new, att))
        y = y.transpose(1, 2).reshape(B, N, C)                     # heads side by side again
        return F.linear(y, w_proj, b_proj)

    def weights(self) -> tuple[torch.Tensor, ...]:
        return _weights(self, lambda: (self.c_attn.weight, self.c_attn.bias, self.c_proj.weight, self.c_proj.bias))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w_fc, b_fc, w_proj, b_proj = _weights(
            self, lambda: (self.c_fc.weight, self.c_fc.bias, self.c_proj.weight, self.c_proj.bias))
        return F.linear(F.gelu(F.linear(x, w_fc, b_fc), approximate="tanh"), w_proj, b_proj)   # "gelu_new"


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, cfg: GPTConfig, layer_idx: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = CausalSelfAttention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)
        self.eps = cfg.layer_norm_epsilon

    def forward(self, x: torch.Tensor, cache: Cache | None = None, start_pos: int = 0,
                allowed: torch.Tensor | None = None, trace: list[LayerTrace] | None = None) -> torch.Tensor:
        w1, b1, w2, b2, attn, mlp = _weights(
            self, lambda: (self.ln_1.weight, self.ln_1.bias, self.ln_2.weight, self.ln_2.bias, self.attn, self.mlp))
        shape = (x.shape[-1],)
        x = x + attn.forward(F.layer_norm(x, shape, w1, b1, self.eps), cache, start_pos, allowed, trace)
        return x + mlp.forward(F.layer_norm(x, shape, w2, b2, self.eps))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.config = cfg
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            h=nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layer)),
            ln_f=nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight          # tied, as in GPT-2
        self._head: tuple[tuple[int, int], torch.Tensor] | None = None
        self.apply(self._init_weights)
        for name, p in self.named_parameters():                    # GPT-2: scaled residual projections
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def hidden(self, idx: torch.Tensor, cache: Cache | None = None, start_pos: int = 0,
               positions: torch.Tensor | None = None, allowed: torch.Tensor | None = None,
               trace: list[LayerTrace] | None = None) -> torch.Tensor:
        """idx [B, N] → final hidden states after ln_f [B, N, C].

        The new tokens sit at positions start_pos.. of every sequence, or, for batched decoding, at
        ``positions`` [B, N] (each sequence its own; padding -1) with ``allowed`` [B, N, T] saying
        which cached keys each new token may read (padding keys never)."""
        N = idx.shape[1]
        wpe = self.transformer.wpe.weight
        if positions is None:
            check_positions(self.config, start_pos, N)
            pos = wpe[start_pos:start_pos + N]                       # [N, C] a slice: cheaper than a lookup
        else:
            check_positions(self.config, int(positions.max()), 1)
            pos = F.embedding(positions.clamp(min=0), wpe)           # [B, N, C] padding reads row 0 (masked)
        x = F.embedding(idx, self.transformer.wte.weight) + pos     # [B, N, C]
        for block in self.transformer.h:
            x = block.forward(x, cache, start_pos, allowed, trace)
        ln_f = self.transformer.ln_f
        return F.layer_norm(x, (x.shape[-1],), ln_f.weight, ln_f.bias, ln_f.eps)

    def _apply(self, fn, recurse: bool = True):       # .to(), .half(), …: parameters may be new objects
        self._drop_fast_lookups()
        return super()._apply(fn, recurse)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        self._drop_fast_lookups()
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _drop_fast_lookups(self) -> None:
        self._head = None
        for m in self.modules():
            m.__dict__.pop("_fast", None)

    def head(self) -> torch.Tensor:
        """The readout as ``[C, V]``: a copy of the tied embedding, rebuilt when the weights change."""
        w = self.transformer.wte.weight
        stamp = (w._version, w.data_ptr())
        if self._head is None or self._head[0] != stamp:
            self._head = (stamp, w.detach().t().contiguous())
        return self._head[1]

    def readout(self, x: torch.Tensor) -> torch.Tensor:
        """Hidden states [..., C] → logits [..., V]. Training goes through the tied weight itself
        (its gradient must flow); inference uses the ``[C, V]`` copy."""
        if torch.is_grad_enabled() and self.transformer.wte.weight.requires_grad:
            return F.linear(x, self.transformer.wte.weight)
        return x @ self.head()

    def forward(self, idx: torch.Tensor, cache: Cache | None = None, start_pos: int = 0,
                last_only: bool = False) -> torch.Tensor:
        """idx [B, N] → logits [B, N, V] (or [B, V] with ``last_only``, all generation needs)."""
        x = self.hidden(idx, cache, start_pos)
        return self.readout(x[:, -1] if last_only else x)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())     # the tied matrix counted once


def random_gpt(cfg: GPTConfig, seed: int = 0) -> GPT:
    """GPT-2-style initial weights from ``seed`` (without touching the global random state)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPT(cfg).eval()
