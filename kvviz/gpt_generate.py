"""Lean generation loops for the tiny GPT: without a cache (``generate``) and with one (``generate_cached``).

``generate`` is the seed's loop: at every step it runs the whole text, cropped to the last
``block_size`` tokens, through the model and keeps only the last position's logits.
``generate_cached`` runs the prompt once (prefill) into a preallocated cache, then one token per
step at ``start_pos`` (decode); past ``block_size`` it stops with a LimitError, since learned
positions cannot slide. Both choose with the same rule and a generator seeded the same way, so the
same seed gives the same tokens (DESIGN.md §1.3).

These loops skip everything the stepper records (attention weights, snapshots): they exist to be
timed and compared.
"""
from __future__ import annotations

import time
import weakref
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F

from kvviz.limits import LimitError
from kvviz.models.gpt import GPT, LayerCache, causal_attention, check_positions
from kvviz.sampling import Greedy, Sampler, SelectionRule, top_k_filter, top_p_filter


class LeanGPT:
    """``GPT.forward(idx, cache, start_pos, last_only=True)`` as plain function calls on the model's
    own parameter tensors (shared, read-only). What goes is the nn.Module call machinery, ~45 calls
    per step, which on a CPU costs about a third of a one-token decode step. The blocks compute the
    same numbers bit for bit (tested). One layout differs: the output layer keeps a transposed copy of
    the tied embedding, ``[d, V]`` (GPT-2's Conv1D layout), because a one-row ``x @ Wᵀ`` over a
    ``[V, d]`` matrix is much slower on a CPU than ``x @ W`` over ``[d, V]`` (≈ 14 vs 8 ms for
    GPT-2 small's 50,257 × 768 head); its logits agree to float32 rounding."""

    def __init__(self, model: GPT) -> None:
        t = model.transformer
        self.config = model.config
        self.wte, self.wpe = t.wte.weight, t.wpe.weight
        self.head = t.wte.weight.detach().t().contiguous()                               # [C, V]
        self.eps = model.config.layer_norm_epsilon
        self.blocks = [(b.ln_1.weight, b.ln_1.bias, b.attn.c_attn.weight, b.attn.c_attn.bias,
                        b.attn.c_proj.weight, b.attn.c_proj.bias, b.ln_2.weight, b.ln_2.bias,
                        b.mlp.c_fc.weight, b.mlp.c_fc.bias, b.mlp.c_proj.weight, b.mlp.c_proj.bias)
                       for b in t.h]
        self.ln_f = (t.ln_f.weight, t.ln_f.bias)

    def __call__(self, idx: torch.Tensor, cache: LayerCache | None = None, start_pos: int = 0) -> torch.Tensor:
        """idx [B, N] → logits of the last position [B, V]."""
        c = self.config
        B, N = idx.shape
        check_positions(c, start_pos, N)
        C, H, hs, eps = c.n_embd, c.n_head, c.head_dim, self.eps
        # activations stay 2-D [B·N, C]: a linear on 2-D input is one addmm, no reshapes around it
        x = (F.embedding(idx, self.wte) + self.wpe[start_pos:start_pos + N]).view(B * N, C)
        for i, (l1w, l1b, aw, ab, pw, pb, l2w, l2b, fw, fb, mw, mb) in enumerate(self.blocks):
            h = F.layer_norm(x, (C,), l1w, l1b, eps)
            q, k, v = F.linear(h, aw, ab).view(B, N, 3, H, hs).permute(2, 0, 3, 1, 4).unbind(0)  # [B, H, N, hs]
            if cache is not None:
                k, v = cache.update(i, k, v)                                             # [B, H, T, hs]
            if N == 1:   # a decode step: the one query may read every cached key, no mask
                y = F.scaled_dot_product_attention(q, k, v)
            else:
                y = causal_attention(q, k, v, start_pos)
            x = x + F.linear(y.transpose(1, 2).reshape(B * N, C), pw, pb)
            h = F.gelu(F.linear(F.layer_norm(x, (C,), l2w, l2b, eps), fw, fb), approximate="tanh")
            x = x + F.linear(h, mw, mb)
        x = F.layer_norm(x.view(B, N, C)[:, -1], (C,), *self.ln_f, eps)                  # [B, C]
        return x @ self.head                                                             # [B, V]


_LEAN: "weakref.WeakKeyDictionary[GPT, tuple[int, LeanGPT]]" = weakref.WeakKeyDictionary()


def lean_gpt(model: GPT) -> LeanGPT:
    """The LeanGPT of ``model``, built once (the head copy is 154 MB at GPT-2 small) and rebuilt if
    the weights were changed in place since (their version counter moved)."""
    version = model.transformer.wte.weight._version
    hit = _LEAN.get(model)
    if hit is None or hit[0] != version:
        hit = (version, LeanGPT(model))
        _LEAN[model] = hit
    return hit[1]


class StaticKVCache:
    """Preallocated K and V per layer, ``[B, H, max_len, hs]`` each; ``update`` writes the new rows in
    place and returns views ``[B, H, T, hs]`` of the filled part. Nothing is reallocated per step,
    and the rows are copies, not views of the fused qkv output (which would keep Q alive too)."""

    def __init__(self, model: GPT, max_len: int, batch: int = 1) -> None:
        c = model.config
        dtype = model.transformer.wte.weight.dtype
        shape = (batch, c.n_head, max_len, c.head_dim)
        self.k = [torch.zeros(shape, dtype=dtype) for _ in range(c.n_layer)]
        self.v = [torch.zeros(shape, dtype=dtype) for _ in range(c.n_layer)]
        self.max_len = max_len
        self.lengths = [0] * c.n_layer

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        start = self.lengths[layer]
        end = start + k.shape[2]
        if end > self.max_len:
            raise LimitError(f"The cache holds {self.max_len} positions; position {end - 1} does not fit.")
        k_all, v_all = self.k[layer], self.v[layer]
        k_all.narrow(2, start, end - start).copy_(k)       # narrow: a view, cheaper than [:, :, a:b]
        v_all.narrow(2, start, end - start).copy_(v)
        self.lengths[layer] = end
        return k_all.narrow(2, 0, end), v_all.narrow(2, 0, end)

    def __len__(self) -> int:
        return self.lengths[0]

    def nbytes(self) -> int:
        """Bytes of memory the cache really holds (its storages), not a formula."""
        return storage_bytes(self.k + self.v)


def storage_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one storage counted once)."""
    seen: dict[int, int] = {}
    for t in tensors:
        s = t.untyped_storage()
        seen[s.data_ptr()] = s.nbytes()
    return sum(seen.values())


@dataclass(frozen=True)
class Generation:
    """What one generation loop produced."""

    prompt: list[int]
    tokens: list[int]                 # the new token ids, in order
    logits: torch.Tensor | None       # [N, V] the logits each choice used (None if not kept)
    seconds: float                    # wall time of the loop (prefill included)
    cache_bytes: int | None = None    # measured bytes of the cache (cached path only)
    cached: bool = False


def _fast_sampler(rule: SelectionRule | None) -> tuple[str, Sampler | None]:
    """How to choose quickly with the same result as ``rule.choose``: "greedy", "sample" or "rule"."""
    if rule is None or type(rule) is Greedy:
        return "greedy", None
    if type(rule) is Sampler and set(rule.describe()) <= {"name", "temperature", "top_k", "top_p"}:
        return ("greedy", None) if rule.temperature == 0 else ("sample", rule)
    return "rule", None   # anything else: ask the rule itself (exact, slower)


def choose_next(logits: torch.Tensor, rule: SelectionRule | None, generator: torch.Generator) -> int:
    """The id chosen from ``logits`` [V]: the same draw as ``rule.choose(logits, generator).index``
    (same filters in float64, same multinomial on the same generator), without building the
    per-token lists the stepper needs."""
    how, s = _fast_sampler(rule)
    if how == "greedy":
        return int(torch.argmax(logits))
    if how == "rule":
        return rule.choose(logits, generator).index  # type: ignore[union-attr]
    x = logits.detach().to(torch.float64) / s.temperature     # [V]
    if s.top_k is not None:
        x = top_k_filter(x, s.top_k)
    if s.top_p is not None:
        x = top_p_filter(x, s.top_p)
    return int(torch.multinomial(torch.softmax(x, dim=-1), 1, generator=generator))


def _prompt_tensor(idx: Sequence[int] | torch.Tensor, model: GPT, max_new_tokens: int) -> torch.Tensor:
    ids = torch.as_tensor(idx, dtype=torch.long).reshape(1, -1)            # [1, P]
    if ids.shape[1] == 0:
        raise LimitError("The prompt is empty: give at least one token.")
    if max_new_tokens < 1:
        raise LimitError(f"New tokens must be at least 1, got {max_new_tokens}.")
    if int(ids.max()) >= model.config.vocab_size or int(ids.min()) < 0:
        raise LimitError("A token id is outside the vocabulary.")
    return ids


@torch.inference_mode()
def generate(model: GPT, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
             rule: SelectionRule | None = None, seed: int = 0, keep_logits: bool = True) -> Generation:
    """No cache: every step reruns the text, cropped to the last block_size tokens."""
    ids = _prompt_tensor(idx, model, max_new_tokens)
    generator = torch.Generator().manual_seed(int(seed))
    block = model.config.block_size
    lean = lean_gpt(model)
    kept: list[torch.Tensor] = []
    t0 = time.perf_counter()
    for _ in range(max_new_tokens):
        logits = lean(ids[:, -block:])[0]                                  # [V] of the last position
        nxt = choose_next(logits, rule, generator)
        if keep_logits:
            kept.append(logits)
        ids = torch.cat([ids, torch.tensor([[nxt]])], dim=1)              # [1, P + t + 1]
    seconds = time.perf_counter() - t0
    new = ids[0, -max_new_tokens:].tolist()
    return Generation(ids[0, :-max_new_tokens].tolist(), new, torch.stack(kept) if kept else None, seconds)


def max_cached_new_tokens(model: GPT, prompt_len: int) -> int:
    """The most tokens ``generate_cached`` can produce: the last chosen token is never processed, so
    the cache needs prompt_len + new − 1 ≤ block_size positions."""
    return model.config.block_size - prompt_len + 1


@torch.inference_mode()
def generate_cached(model: GPT, idx: Sequence[int] | torch.Tensor, max_new_tokens: int,
                    rule: SelectionRule | None = None, seed: int = 0, keep_logits: bool = True) -> Generation:
    """Prefill once, then decode one token per step with ``start_pos``; same draws as ``generate``."""
    ids = _prompt_tensor(idx, model, max_new_tokens)
    prompt_len = ids.shape[1]
    limit = max_cached_new_tokens(model, prompt_len)
    if max_new_tokens > limit:
        raise LimitError(
            f"With the cache this GPT can generate at most {limit} tokens after a {prompt_len}-token "
            f"prompt: its {model.config.block_size} learned positions (block_size) cannot slide. "
            f"Without the cache, generate crops the oldest tokens instead.")
    generator = torch.Generator().manual_seed(int(seed))
    cache = StaticKVCache(model, prompt_len + max_new_tokens - 1)
    lean = lean_gpt(model)
    kept: list[torch.Tensor] = []
    new: list[int] = []
    t0 = time.perf_counter()
    logits = lean(ids, cache, 0)[0]                                       # prefill: [V]
    pos = prompt_len
    for step in range(max_new_tokens):
        nxt = choose_next(logits, rule, generator)
        if keep_logits:
            kept.append(logits)
        new.append(nxt)
        if step + 1 < max_new_tokens:                                     # the last choice stays pending
            logits = lean(torch.tensor([[nxt]]), cache, pos)[0]                # decode: [V]
            pos += 1
    seconds = time.perf_counter() - t0
    return Generation(ids[0].tolist(), new, torch.stack(kept) if kept else None, seconds,
                      cache_bytes=cache.nbytes(), cached=True)


@dataclass(frozen=True)
class Comparison:
    """The two loops side by side for the same prompt, rule and seed."""

    uncached: Generation
    cached: Generation
    identical: bool                  # same tokens
    first_difference: int | None     # index of the first differing new token
    max_abs_logit_diff: float        # over the steps both loops shared (up to the first difference)


def compare(model: GPT, idx: Sequence[int], max_new_tokens: int, rule: SelectionRule | None = None,
            seed: int = 0) -> Comparison:
    """Run ``generate`` and ``generate_cached`` with the same seed and compare tokens and logits."""
    a = generate(model, idx, max_new_tokens, rule, seed)
    b = generate_cached(model, idx, max_new_tokens, rule, seed)
    diff = next((i for i, (x, y) in enumerate(zip(a.tokens, b.tokens)) if x != y), None)
    upto = len(a.tokens) if diff is None else diff + 1    # logits of step i+1 differ trivially after a split
    delta = float((a.logits[:upto] - b.logits[:upto]).abs().max())  # type: ignore[index]
    return Comparison(a, b, diff is None, diff, delta)


def next_token_probs(logits: torch.Tensor) -> list[float]:
    """The model's next-token distribution: softmax of the logits [V] (before any sampling filter)."""
    return torch.softmax(logits.detach().to(torch.float64), dim=-1).tolist()
