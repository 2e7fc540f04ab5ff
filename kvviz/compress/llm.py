"""Smaller caches on the real model, SmolLM2-135M-Instruct (rotary positions, 9 query heads sharing 3
K/V heads, 30 layers): the same variants and the same records as the tiny GPT's evaluation
(``VariantResult``, ``Evaluation``), measured on the held-out text (kvviz.compress.text).

The procedure (``evaluate_llm``): the text's first ``prefill`` tokens are one prefill pass (exact for
every variant: nothing is evicted or quantized before it ends, and a pass reads its own new rows as
computed), then every later token is one decode step, teacher-forced on the text, through
transformers' own forward with the variant's cache (``past_key_values``). At every position from the
last prefill position on, KL(full ‖ variant) of the next-token distributions and whether the top-1
tokens agree; the full cache runs the same way, so a lossless variant scores exactly 0. The grouped
variant is the pooled model (kvviz.models.grouped) with the full cache.

``key_channels``: the magnitude of every key channel of one layer over the text (the keys as the
cache holds them, after the rotation), where KIVI's outlier channels show or do not.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kvviz.cache import Cache, DynamicCache
from kvviz.compress.evaluation import Evaluation, HeldOutPrompt, VariantResult, kl_divergence
from kvviz.compress.text import held_out_ids
from kvviz.compress.variants import Variant
from kvviz.limits import LLM_COMPRESS_MAX_VARIANTS, LimitError, check_int
from kvviz.models.grouped import kv_head_options, pooled_network

if TYPE_CHECKING:
    from kvviz.models.hf import HFCausalLM

Progress = Callable[[int, int], None]      # (steps done, steps in all)

DEFAULT_TOKENS = 96         # the page's and the CLI's text length (80 decode steps per variant)
DEFAULT_PREFILL = 16        # tokens prefilled before the decode steps


def llm_variants(window: int = 32, sinks: int = 4, group_size: int = 32) -> list[Variant]:
    """What the page's trade-off compares on SmolLM2: the window with sinks at their own positions and
    at cache positions (and without sinks), int4 and int2 keys per channel and per token (no
    residual: every row but the newest group is codes), and one pooled K/V head."""
    out = [Variant.of("full"), Variant.of("window", window=window, sinks=0)]
    out += [Variant.of("window", window=window, sinks=sinks, positions=p) for p in ("own", "cache")]
    out += [Variant.of("quant", bits=b, group_size=group_size, key_axis=a, residual=0)
            for b in (4, 2) for a in ("channel", "token")]
    out += [Variant.of("gqa", kv_heads=1)]
    return out


def check_variant(variant: Variant, n_kv_heads: int) -> None:
    """Refuse what the real model cannot run: K/V heads that do not divide its own."""
    if variant.kind == "gqa" and variant.kv_heads not in kv_head_options(n_kv_heads):
        raise LimitError(f"K/V heads must divide the model's {n_kv_heads}; choose one of "
                         f"{', '.join(map(str, kv_head_options(n_kv_heads)))}.")


@functools.lru_cache(maxsize=2)
def _pooled(net, kv_heads: int):
    return pooled_network(net, kv_heads)


def variant_network(net: torch.nn.Module, variant: Variant) -> torch.nn.Module:
    """The transformers model a variant runs: ``net``, or its pooled twin (built once per process)."""
    if variant.kind != "gqa":
        return net
    n_kv = net.config.num_key_value_heads
    return net if variant.kv_heads == n_kv else _pooled(net, variant.kv_heads)


def variant_cache(model: HFCausalLM, variant: Variant) -> Cache:
    """An empty cache of ``variant`` for ``model`` (an HFCausalLM: its rotary frequencies re-rotate
    a window's keys at cache positions)."""
    inv = model.rope_inv_freq() if variant.kind == "window" and variant.positions == "cache" else None
    return variant.make_cache(model.n_layers, inv)


@torch.inference_mode()
def run_text(net: torch.nn.Module, ids: Sequence[int], cache: Cache, prefill: int,
             step: Callable[[], None] | None = None) -> torch.Tensor:
    """``ids[:prefill]`` in one pass, then each later token in its own pass (teacher forcing), with
    ``cache`` through transformers' forward (absolute ``position_ids``). Returns the next-token
    logits ``[len(ids) − prefill + 1, V]`` at positions prefill − 1 .. len(ids) − 1 (float32)."""
    ids = list(ids)
    out = net(input_ids=torch.tensor([ids[:prefill]]), position_ids=torch.arange(prefill).unsqueeze(0),
              past_key_values=cache, use_cache=True, logits_to_keep=1)
    rows = [out.logits[0, -1].float()]
    for pos in range(prefill, len(ids)):
        out = net(input_ids=torch.tensor([[ids[pos]]]), position_ids=torch.tensor([[pos]]),
                  past_key_values=cache, use_cache=True)
        rows.append(out.logits[0, -1].float())
        if step:
            step()
    return torch.stack(rows)


def evaluate_llm(model: HFCausalLM, variants: Sequence[Variant], tokens: int = DEFAULT_TOKENS,
                 prefill: int = DEFAULT_PREFILL, progress: Progress | None = None, threads: int = 1) -> Evaluation:
    """Every variant against the full cache on the held-out text's first ``tokens`` tokens (see the
    module doc). ``model``: an HFCausalLM (SmolLM2). One ``prompt`` in the records: the text; its
    ``new_tokens`` the positions scored per variant (tokens − prefill + 1, the last one's next token
    not in the text is scored too)."""
    variants = list(variants)
    check_int("Variants", len(variants), 1, LLM_COMPRESS_MAX_VARIANTS)
    ids = held_out_ids(model.tokenizer, tokens)
    prefill = check_int("Prefill tokens", prefill, 1, len(ids))
    threads = check_int("Threads", threads, 1, 64)
    for v in variants:
        check_variant(v, model.n_kv_heads)
        if v.kind == "window" and prefill > v.window + v.sinks:
            raise LimitError(f"The prefill of {prefill} tokens must fit the window ({v.window} + {v.sinks} sinks).")
    steps = len(ids) - prefill
    runs = sum(v.kind != "full" for v in variants) + 1          # the full cache runs once, as the reference
    total, done = steps * runs, 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        reference = DynamicCache(model.n_layers)
        full = run_text(model.model, ids, reference, prefill, tick)
        results = []
        for v in variants:
            if v.kind == "full":
                cache, logits = reference, full
            else:
                cache = variant_cache(model, v)
                logits = run_text(variant_network(model.model, v), ids, cache, prefill, tick)
            kl = tuple(kl_divergence(full, logits).tolist())
            agree = tuple(bool(a) for a in (logits.argmax(-1) == full.argmax(-1)).tolist())
            results.append(VariantResult(v, (kl,), (agree,), (cache.nbytes(),), (len(ids),)))
    finally:
        torch.set_num_threads(before)
    toks = tuple(model.tokens(ids))
    return Evaluation((HeldOutPrompt(toks, tuple(ids), 0),), (tuple(ids[prefill:]),), len(full), 0, tuple(results), ())


# ---- key outliers --------------------------------------------------------------------------------

@dataclass(frozen=True)
class KeyChannels:
    """|k| of every key channel of one layer at every position of a text (the rotated keys the cache
    holds), ``magnitude`` [kv_heads · head_dim, positions]; ``labels`` name the channels "K/V h · d"."""

    layer: int                      # 0-based
    tokens: tuple[str, ...]
    magnitude: torch.Tensor         # [channels, positions]
    head_dim: int

    @property
    def channel_mean(self) -> torch.Tensor:
        """Mean |k| of each channel over the positions, [channels]."""
        return self.magnitude.mean(-1)

    def outlier_ratio(self) -> float:
        """The largest channel's mean |k| over the median channel's: far above 1, a few channels
        dominate (what per-channel key quantization is for)."""
        m = self.channel_mean
        return float(m.max() / m.median().clamp(min=1e-12))

    def top_channels(self, n: int = 3) -> list[tuple[int, int, float]]:
        """The ``n`` channels of largest mean |k|: (K/V head, dimension, mean |k|), 0-based."""
        m = self.channel_mean
        idx = torch.argsort(m, descending=True)[:n].tolist()
        return [(i // self.head_dim, i % self.head_dim, float(m[i])) for i in idx]

    def spread(self) -> tuple[float, float]:
        """Mean over positions of (max |k| − min |k| across the row's channels) and mean over channels
        of the same across positions: what one per-token and one per-channel group must span."""
        per_token = (self.magnitude.amax(0) - self.magnitude.amin(0)).mean()
        per_channel = (self.magnitude.amax(1) - self.magnitude.amin(1)).mean()
        return float(per_token), float(per_channel)


@torch.inference_mode()
def all_key_channels(model: HFCausalLM, ids: Sequence[int]) -> tuple[KeyChannels, ...]:
    """One prefill of ``ids`` with the full cache; every layer's cached keys as |k| per channel."""
    cache = DynamicCache(model.n_layers)
    model.model(input_ids=torch.tensor([list(ids)]), past_key_values=cache, use_cache=True, logits_to_keep=1)
    tokens = tuple(model.tokens(ids))
    out = []
    for layer in range(model.n_layers):
        k = cache.layers[layer].keys[0].float()                               # [kv_heads, N, d]
        mag = k.abs().permute(0, 2, 1).reshape(-1, k.shape[1])                # [kv_heads · d, N]
        out.append(KeyChannels(layer, tokens, mag.contiguous(), k.shape[-1]))
    return tuple(out)


def key_channels(model: HFCausalLM, ids: Sequence[int], layer: int) -> KeyChannels:
    """Layer ``layer``'s key channels over ``ids`` (``all_key_channels``, one layer)."""
    layer = check_int("Layer", layer, 0, model.n_layers - 1)
    return all_key_channels(model, ids)[layer]
