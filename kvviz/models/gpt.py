"""A tiny GPT in the nanoGPT shape, with a per-layer KV cache (DESIGN.md §1.3).

Learned token and position embeddings, pre-LayerNorm blocks (causal self-attention, MLP with the
tanh-approximated GELU that GPT-2 calls "gelu_new"), a final LayerNorm and an lm_head tied to the
token embedding. Parameter names follow GPT-2 (``transformer.wte``, ``transformer.h.N.attn.c_attn``,
…), so ``hf_state_dict`` only has to transpose four kinds of weights (GPT-2's Conv1D stores them
``[in, out]``, nn.Linear ``[out, in]``) for the same weights to load into
``transformers.GPT2LMHeadModel``.

Attention takes any cache with ``update(layer, k, v) -> (k_all, v_all)`` (kvviz's KVCache or the
preallocated cache of kvviz.gpt_generate) and ``start_pos``, the absolute position of the first new
token: prefill runs the prompt once, decode one token per step. ``GPTModel`` wraps the network in
kvviz's Model protocol so the stepper, the recompute check and the counters work on it.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from kvviz.cache import KVCache
from kvviz.cost import ModelConfig
from kvviz.gpt_corpus import WordTokenizer, vocabulary
from kvviz.limits import GPT_MAX_SWEEP_TOKENS, LimitError, check_int
from kvviz.models.base import PassRecord, causal_softmax

DATA = Path(__file__).resolve().parents[1] / "data"
CHECKPOINT = DATA / "tiny_gpt.pt"        # plain state_dict (nn.Linear layout, no tied lm_head copy)
CHECKPOINT_META = DATA / "tiny_gpt.json"  # config, vocabulary and how the weights were trained

# GPT-2's Conv1D weights are [in, out]; nn.Linear's are [out, in]
CONV1D_SUFFIXES = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 83
    block_size: int = 256     # learned positions: the model never sees more than this many tokens
    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    layer_norm_epsilon: float = 1e-5

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def check_positions(cfg: GPTConfig, start_pos: int, n: int) -> None:
    """Learned positions cannot slide: refuse positions at or past block_size."""
    if start_pos + n > cfg.block_size:
        raise LimitError(
            f"Positions {start_pos}..{start_pos + n - 1} do not fit: this GPT learned only "
            f"{cfg.block_size} positions (block_size). With a cache the text cannot be "
            f"cropped, so generation must stop here; without a cache the oldest tokens are dropped.")


def cost_config(cfg: GPTConfig, name: str = "kvviz tiny GPT (trained)") -> ModelConfig:
    """This network's shape for kvviz.cost (memory, parameters, FLOPs): GPT-2 layout, so biases
    everywhere, a 4× GELU MLP, learned positions and a tied lm_head."""
    return ModelConfig(
        name, n_layers=cfg.n_layer, n_heads=cfg.n_head, n_kv_heads=cfg.n_head, head_dim=cfg.head_dim,
        d_model=cfg.n_embd, d_ff=4 * cfg.n_embd, vocab=cfg.vocab_size, mlp="gelu",
        learned_positions=cfg.block_size, max_context=cfg.block_size, norm="layernorm",
        qkv_bias=True, out_bias=True, mlp_bias=True, tied_embeddings=True,
        source="kvviz/data/tiny_gpt.json (trained by kvviz/train_gpt.py)")


class LayerCache(Protocol):
    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append k, v ``[B, H, N, hs]`` to ``layer``; return the full ``[B, H, T, hs]``."""
        ...


# what one attention layer computed, kept only when a caller asks for it (the stepper does)
LayerTrace = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]  # q, k, v [B,H,N,hs]; att [B,H,N,T]


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Fused attention of new queries q [B, H, N, hs] (positions start_pos..) over keys/values
    [B, H, T, hs] (positions 0..T-1) with the causal mask → [B, H, N, hs]."""
    N, T = q.shape[2], k.shape[2]
    if N == 1:
        # one decode query at the last position sees every cached key: no mask needed
        return F.scaled_dot_product_attention(q, k, v)
    if T == N:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # several new queries after a cached past: query i (position start_pos + i) sees keys ≤ it
    allowed = torch.arange(T).unsqueeze(0) <= torch.arange(start_pos, start_pos + N).unsqueeze(1)  # [N, T]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, layer_idx: int) -> None:
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0
        self.layer_idx = layer_idx
        self.n_head, self.head_dim = cfg.n_head, cfg.head_dim
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)   # q, k, v of every head at once
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None, start_pos: int = 0,
                trace: list[LayerTrace] | None = None, allowed: torch.Tensor | None = None) -> torch.Tensor:
        """``allowed`` [B, N, T] (batched decoding): which keys each new query may read; it replaces
        the causal mask of ``start_pos`` so padded sequences of a batch never read padding."""
        B, N, C = x.shape                                          # N new positions
        qkv = self.c_attn(x).view(B, N, 3, self.n_head, self.head_dim)  # q, k, v of every head at once
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)             # each [B, H, N, hs]
        if cache is not None:
            k_all, v_all = cache.update(self.layer_idx, k, v)      # [B, H, T, hs], T = start_pos + N
        else:
            k_all, v_all = k, v
        if trace is not None or allowed is not None:
            # explicit weights, so the stepper can show them
            scores = q @ k_all.transpose(-2, -1) / math.sqrt(self.head_dim)   # [B, H, N, T]
            if allowed is None:
                att = causal_softmax(scores, start_pos)
            else:
                from kvviz.batching import masked_softmax   # (kvviz.batching imports the stepper)
                att = masked_softmax(scores, allowed.unsqueeze(1))           # padding rows: all 0
            y = att @ v_all                                                  # [B, H, N, hs]
            if trace is not None:
                trace.append((q, k, v, att))
        else:
            y = causal_attention(q, k_all, v_all, start_pos)
        y = y.transpose(1, 2).reshape(B, N, C)                     # heads side by side again
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.gelu = nn.GELU(approximate="tanh")                  # GPT-2's "gelu_new"
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x))."""

    def __init__(self, cfg: GPTConfig, layer_idx: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = CausalSelfAttention(cfg, layer_idx)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, cache: LayerCache | None = None, start_pos: int = 0,
                trace: list[LayerTrace] | None = None, allowed: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache, start_pos, trace, allowed)
        return x + self.mlp(self.ln_2(x))


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

    def hidden(self, idx: torch.Tensor, cache: LayerCache | None = None, start_pos: int = 0,
               trace: list[LayerTrace] | None = None) -> torch.Tensor:
        """idx [B, N] at positions start_pos.. → final hidden states after ln_f [B, N, C]."""
        N = idx.shape[1]
        check_positions(self.config, start_pos, N)
        # position rows start_pos.. of the learned table (a slice: cheaper than an index lookup)
        x = self.transformer.wte(idx) + self.transformer.wpe.weight[start_pos:start_pos + N]   # [B, N, C]
        for block in self.transformer.h:
            x = block(x, cache, start_pos, trace)
        return self.transformer.ln_f(x)

    def hidden_batch(self, idx: torch.Tensor, positions: torch.Tensor, allowed: torch.Tensor,
                     cache: LayerCache, trace: list[LayerTrace] | None = None) -> torch.Tensor:
        """Batched decoding: idx, positions [B, N] (each sequence its own positions; padding -1),
        allowed [B, N, T] → hidden states [B, N, C]. Padding rows come out finite but meaningless."""
        check_positions(self.config, int(positions.max()), 1)
        # a padding slot still needs some position row: 0 (its K/V is masked out anyway)
        x = self.transformer.wte(idx) + self.transformer.wpe(positions.clamp(min=0))   # [B, N, C]
        for block in self.transformer.h:
            x = block(x, cache, 0, trace, allowed)
        return self.transformer.ln_f(x)

    def forward(self, idx: torch.Tensor, cache: LayerCache | None = None, start_pos: int = 0,
                last_only: bool = False) -> torch.Tensor:
        """idx [B, N] → logits [B, N, V] (or [B, 1, V] with ``last_only``, all generation needs)."""
        x = self.hidden(idx, cache, start_pos)
        if last_only:
            x = x[:, -1:, :]
        return self.lm_head(x)

    def n_params(self) -> int:
        return sum(p.numel() for p in self.parameters())     # the tied matrix counted once


def random_gpt(cfg: GPTConfig, seed: int = 0) -> GPT:
    """GPT-2-style initial weights from ``seed`` (without touching the global random state)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return GPT(cfg).eval()


def plain_state_dict(model: GPT) -> dict[str, torch.Tensor]:
    """The checkpoint's content: every parameter under its GPT-2 name, the tied lm_head left out."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}


def weights_sha256(sd: dict[str, torch.Tensor]) -> str:
    """A hash of the weights themselves (names, shapes, bytes), for checking a retrained checkpoint:
    the file's own hash differs between two saves of the same tensors (torch.save writes a random id)."""
    h = hashlib.sha256()
    for k in sorted(sd):
        t = sd[k].detach().contiguous().cpu()
        h.update(f"{k}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def hf_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our plain state_dict → the layout of transformers' GPT2LMHeadModel (Conv1D weights transposed)."""
    out = {k: (v.t().contiguous() if k.endswith(CONV1D_SUFFIXES) else v) for k, v in sd.items()}
    out["lm_head.weight"] = sd["transformer.wte.weight"]
    return out


def from_hf_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' GPT2LMHeadModel state_dict → our plain layout (the inverse of hf_state_dict)."""
    return {k: (v.t().contiguous() if k.endswith(CONV1D_SUFFIXES) else v) for k, v in sd.items()
            if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))}


def to_transformers(model: GPT):
    """The same weights in ``transformers.GPT2LMHeadModel`` (tests and benchmarks only: transformers
    is a development dependency, imported here and nowhere else)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    hf_cfg = GPT2Config(vocab_size=c.vocab_size, n_positions=c.block_size, n_embd=c.n_embd, n_layer=c.n_layer,
                        n_head=c.n_head, n_inner=4 * c.n_embd, activation_function="gelu_new",
                        layer_norm_epsilon=c.layer_norm_epsilon, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                        tie_word_embeddings=True)
    hf = GPT2LMHeadModel(hf_cfg)
    hf.load_state_dict(hf_state_dict(plain_state_dict(model)), strict=True)
    return hf.eval()


def load_gpt(sd: dict[str, torch.Tensor], cfg: GPTConfig) -> GPT:
    model = GPT(cfg)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise ValueError(f"checkpoint does not fit the config: missing {missing}, unexpected {unexpected}")
    return model.eval()


@dataclass(frozen=True)
class TinyGPT:
    """The shipped model, read-only: network, tokenizer, and where the weights came from."""

    model: GPT
    tokenizer: WordTokenizer
    trained: bool          # False: the checkpoint was missing and seeded random weights stand in
    meta: dict


@lru_cache(maxsize=2)
def load_tiny_gpt(path: str | None = None, fallback_seed: int = 0) -> TinyGPT:
    """The trained checkpoint (kvviz/data/tiny_gpt.pt + .json); seeded random weights if it is missing.

    Cached per process and frozen (requires_grad off): callers share it and must not modify it.
    """
    ckpt = Path(path) if path else CHECKPOINT
    meta_path = ckpt.with_suffix(".json")
    if ckpt.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        cfg = GPTConfig(**meta["config"])
        model = load_gpt(torch.load(ckpt, map_location="cpu", weights_only=True), cfg)
        vocab, trained = meta["vocab"], True
    else:
        vocab = vocabulary()
        cfg = GPTConfig(vocab_size=len(vocab))
        model, trained = random_gpt(cfg, fallback_seed), False
        meta = {"config": asdict(cfg), "vocab": vocab, "fallback_seed": fallback_seed}
    model.requires_grad_(False)
    return TinyGPT(model, WordTokenizer(vocab), trained, meta)


class GPTModel:
    """The tiny GPT behind kvviz's Model protocol (per-layer, per-head q/k/v and attention)."""

    name = "gpt"

    def __init__(self, tiny: TinyGPT | None = None) -> None:
        self.tiny = tiny or load_tiny_gpt()
        self.gpt = self.tiny.model
        self.tokenizer = self.tiny.tokenizer
        cfg = self.gpt.config
        self.config = cfg
        self.vocab = self.tokenizer.vocab
        self.logit_tokens = self.vocab
        self.n_layers, self.n_heads = cfg.n_layer, cfg.n_head
        self.output_labels = [f"x{i}" for i in range(cfg.n_embd)]   # final hidden state (after ln_f)
        self.cost_config = cost_config(cfg)     # for kvviz.cost: FLOPs counted from this model's passes

    def tokenize(self, text: str) -> list[str]:
        """Prompt text → tokens (word level); raises a ValueError naming unknown words."""
        return self.tokenizer.tokenize(text)

    def fast_generate(self, prompt: Sequence[str], new_tokens: int, rule=None, seed: int = 0,
                      cache: bool = True):
        """The lean loops of kvviz.gpt_generate on prompt tokens: ``generate_cached`` or, with
        ``cache=False``, the recomputing ``generate``. Returns their Generation (token ids)."""
        from kvviz.gpt_generate import generate, generate_cached   # (that module imports this one)

        ids = [self.tokenizer.index[t] for t in self.tokenizer.tokenize(" ".join(prompt))]
        n = check_int("New tokens", new_tokens, 1, GPT_MAX_SWEEP_TOKENS)
        return (generate_cached if cache else generate)(self.gpt, ids, n, rule, seed)

    @torch.no_grad()
    def forward(self, token_ids: Sequence[int], cache: KVCache | None, start_pos: int) -> PassRecord:
        idx = torch.tensor([list(token_ids)], dtype=torch.long)          # [1, N]
        trace: list[LayerTrace] = []
        x = self.gpt.hidden(idx, cache, start_pos, trace)                # [1, N, C]
        logits = self.gpt.lm_head(x)                                     # [1, N, V]
        q, k, v, att = (torch.stack([t[i][0] for t in trace]) for i in range(4))  # [L, H, N, ·]
        return PassRecord(positions=list(range(start_pos, start_pos + idx.shape[1])),
                          q=q, k=k, v=v, attention=att, output=x[0], logits=logits[0])

    @torch.no_grad()
    def forward_batch(self, token_ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor,
                      cache: KVCache):
        """B sequences in one pass (kvviz.batching): token_ids, positions [B, N]; key_mask [B, T]."""
        from kvviz.batching import BatchPassRecord, allowed_keys

        trace: list[LayerTrace] = []
        allowed = allowed_keys(key_mask, token_ids.shape[1])                     # [B, N, T]
        x = self.gpt.hidden_batch(token_ids, positions, allowed, cache, trace)  # [B, N, C]
        q, k, v, att = (torch.stack([t[i] for t in trace], dim=1) for i in range(4))  # [B, L, H, N, ·]
        return BatchPassRecord(positions=positions, q=q, k=k, v=v, attention=att, output=x,
                               logits=self.gpt.lm_head(x))
