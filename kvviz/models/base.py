"""The protocol every kvviz model follows, the records of a forward pass, and attention masks.

A model is anything with ``forward(token_ids, cache, start_pos) -> PassRecord`` plus what the
pages and the CLI need to use it without knowing which model it is: ``tokenize(text)``, its
``limits`` and its ``cost_config`` (the shape kvviz.cost computes with). Models that can run
several sequences in one pass add ``forward_batch`` (kvviz.decoding.batching).

A network that generates (the tiny GPT, any transformers causal LM) also has the fast path the
loops, speculative decoding and the measurements run (``logits``: the same arithmetic as
``forward``, nothing recorded), ``new_cache(kind)`` for a fresh cache of each kind, its per-layer
``layout`` (``LayerLayout``: full or sliding attention, heads, head size, positions), its end tokens
and the positions it can address. The hand-made A/B/C and weather models have ``forward`` only.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from kvviz.cache import Cache, DynamicCache, QuantizedCache, SlidingWindowCache, StaticCache
from kvviz.cache.fp8 import Fp8Cache
from kvviz.cache.scored import H2OCache, PyramidKVCache, SnapKVCache
from kvviz.cost import ModelConfig
from kvviz.limits import (
    LONG_KEEP_LOGITS,
    LONG_KEEP_ROWS,
    LONG_MAP_SIDE,
    MAX_NEW_TOKENS,
    MAX_PAGED_SLOTS,
    MAX_PROMPT_CHARS,
    MAX_PROMPT_TOKENS,
    MAX_SERVE_NEW_TOKENS,
    MAX_SERVE_REQUESTS,
    LimitError,
    check_int,
)

# How far logits of one text computed two ways whose sums run in another order may differ: a kept
# slice of a pass against the whole pass, a batch against a solo run, a cached step against a
# recomputation. float32 ones differ by ≈ 1e-8 to 1e-5 (BLAS picks another kernel for another shape,
# and which one depends on the processor, so whether they are bit-equal is a property of one
# machine); every check a page shows accepts |Δ| ≤ FLOAT32_TOLERANCE. A real error (another row,
# another position, a stale cache row) is ≈ 1e-2 or more. Only the same computation (the same
# function on the same shapes and inputs) is compared exactly (docs/testing.md, "Exact or close").
FLOAT32_TOLERANCE = 1e-4
FLOAT64_TOLERANCE = 1e-9


@dataclass(frozen=True)
class PassRecord:
    """What one forward pass computed for its *new* positions.

    Shapes (L layers, H heads, H_kv K/V heads, N new positions, T total visible positions):
      q          [L, H, N, d_q]
      k, v       [L, H_kv, N, d_k] / [L, H_v, N, d_v]   (the rows this pass computed)
      attention  [L, H, N, T]   after the causal mask and softmax
      output     [N, d_out]     the model's readout before the vocabulary projection
      logits     [N, V_out]     over ``model.logit_tokens``
    """

    positions: list[int]
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    attention: torch.Tensor
    output: torch.Tensor
    logits: torch.Tensor


@dataclass(frozen=True)
class Keep:
    """What a recording pass keeps of a long text (``forward(..., keep=Keep(...))``, a transformers
    model: kvviz.models.hf), so a run holds what its views draw and not 18 × 4 maps of T × T plus
    262,144 logits per position. A pass of at most ``rows`` positions is recorded in full; a longer
    one keeps:

    - attention, q: the last ``rows`` query rows (``record.attention`` [L, H, rows, T]: the newest
      query's row is still ``[:, :, -1]``), and the whole map average-pooled to at most
      ``map_side`` × ``map_side`` cells (``record.attention_map``, each cell the mean of a block of
      ``record.map_block`` query rows × key columns; ``map_side`` 0: none);
    - logits and output: the last ``logits`` positions (``logits_to_keep``: the vocabulary projection
      runs on those rows only).

    ``rows`` equals ``map_side`` by default: a pass short enough to be drawn whole is recorded whole.
    """

    rows: int = LONG_KEEP_ROWS
    map_side: int = LONG_MAP_SIDE
    logits: int = LONG_KEEP_LOGITS


@dataclass(frozen=True)
class BatchPassRecord:
    """One batched pass. B sequences, L layers, H heads, N new columns, T columns in all.

      positions  [B, N]           absolute position of each new column's token (-1 for padding)
      q          [B, L, H, N, d]
      k, v       [B, L, H, N, d]  the columns this pass appended to the cache
      attention  [B, L, H, N, T]  after the padding and causal masks (rows of padding are all 0)
      output     [B, N, d_out]
      logits     [B, N, V_out]
    """

    positions: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    attention: torch.Tensor
    output: torch.Tensor
    logits: torch.Tensor


@dataclass(frozen=True)
class ModelLimits:
    """Caps a model enforces on one run (kvviz.limits holds the numbers)."""

    max_prompt_tokens: int = MAX_PROMPT_TOKENS
    max_new_tokens: int = MAX_NEW_TOKENS
    max_prompt_chars: int = MAX_PROMPT_CHARS
    serve_requests: int = MAX_SERVE_REQUESTS        # serving (kvviz.serving): requests in one stream
    serve_new_tokens: int = MAX_SERVE_NEW_TOKENS    # tokens one served request generates
    serve_slots: int = MAX_PAGED_SLOTS              # positions (blocks × block size) of one run's pool

    def check_text(self, text: str) -> str:
        """A typed prompt, or a LimitError if it is empty or too long in characters."""
        if not (text or "").strip():
            raise LimitError("The prompt is empty: type a message or some text.")
        if len(text) > self.max_prompt_chars:
            raise LimitError(f"The prompt is {len(text):,} characters long; the limit is {self.max_prompt_chars:,}.")
        return text

    def check_request(self, text: str, new_tokens: object) -> int:
        """What needs no tokenizer: the text (``check_text``) and the number of new tokens, returned."""
        self.check_text(text)
        return check_int("New tokens", new_tokens, 1, self.max_new_tokens)

    def check_serve_pool(self, requests: int, block_size: int, num_blocks: int) -> None:
        """A served run's size on this model (kvviz.serving): the requests and the pool's positions,
        or a LimitError (a real model's pool and solo runs cost far more than the tiny GPT's)."""
        check_int("Requests", requests, 1, self.serve_requests)
        slots = int(block_size) * int(num_blocks)
        if slots > self.serve_slots:
            raise LimitError(f"{num_blocks} blocks of {block_size} positions make {slots:,} positions; "
                             f"the limit for this model is {self.serve_slots:,}.")


class UnknownTokenError(LimitError):
    """A prompt word that is not in the model's vocabulary; ``tokens`` lists them (once each)."""

    def __init__(self, tokens: Sequence[str], vocab: Sequence[str]) -> None:
        self.tokens = list(dict.fromkeys(tokens))
        shown = " ".join(vocab) if len(vocab) <= 20 else f"{len(vocab)} words"
        super().__init__(f"Unknown token(s) {', '.join(repr(u) for u in self.tokens)}; the vocabulary is {shown}.")


@dataclass(frozen=True)
class LayerLayout:
    """What one attention layer looks like, as the caches and the cost pages need it.

    ``attention`` is "full" (every earlier position) or "sliding" (the last ``window`` positions,
    the query's own included); ``positions`` is "learned" (an embedding per position, added once
    before the first layer), "rotary" (queries and keys rotated by position, base ``rope_theta``)
    or "none"."""

    n_heads: int                      # query heads
    n_kv_heads: int                   # K/V heads (fewer: grouped-query attention)
    head_dim: int
    attention: str = "full"           # "full" or "sliding"
    window: int | None = None         # sliding: positions a query reads
    positions: str = "learned"        # "learned", "rotary" or "none"
    rope_theta: float | None = None   # rotary: the base θ of the frequencies θ^(−2i/d)

    def __post_init__(self) -> None:
        if self.attention not in ("full", "sliding"):
            raise ValueError(f"attention must be 'full' or 'sliding', not {self.attention!r}")
        if (self.attention == "sliding") != (self.window is not None):
            raise ValueError("a sliding layer has a window, a full layer none")
        if self.positions not in ("learned", "rotary", "none"):
            raise ValueError(f"positions must be 'learned', 'rotary' or 'none', not {self.positions!r}")


CACHE_KINDS = ("dense", "static", "window", "quantized", "h2o", "snapkv", "pyramid", "fp8")


def new_cache(layout: Sequence[LayerLayout], kind: str = "dense", **options) -> Cache:
    """A fresh, empty cache of ``kind`` for a network of ``layout`` (one entry per layer):

    - "dense": kvviz.cache.DynamicCache (grows; the stepper's; a sliding layer keeps its window);
    - "static": StaticCache, preallocated, ``max_length`` positions (the fast loops');
    - "window": SlidingWindowCache, ``window`` and optional ``sinks``, ``positions`` (its options);
    - "quantized": QuantizedCache, ``bits``, ``group_size``, ``key_axis``, ``residual``;
    - "h2o", "snapkv", "pyramid": eviction by attention score (kvviz.cache.scored), ``budget`` rows
      per layer and K/V head (H2O: ``recent``; SnapKV, PyramidKV: ``window``, ``kernel``); on a
      sliding-attention layer only among the rows its window reaches; run them with ``forward`` and
      ``cache.observe(record.attention)`` after each pass;
    - "fp8": Fp8Cache, E4M3 codes with a ``scale`` per "tensor" or per "token".

    The paged cache is made by kvviz.serving (it shares one pool between sequences)."""
    n = len(layout)
    if kind == "dense":      # sliding-attention layers keep their window (kvviz.cache.hybrid), as transformers'
        windows = [layer.window if layer.attention == "sliding" else None for layer in layout]
        return DynamicCache(n, windows, **options)
    if kind == "static":
        return StaticCache(n, **options)
    if kind == "window":
        return SlidingWindowCache(n, **options)
    if kind == "quantized":
        return QuantizedCache(n, **options)
    if kind == "fp8":
        return Fp8Cache(n, **options)
    if kind in ("h2o", "snapkv", "pyramid"):    # a sliding layer chooses only inside its window (kvviz.cache.scored)
        windows = [layer.window if layer.attention == "sliding" else None for layer in layout]
        return {"h2o": H2OCache, "snapkv": SnapKVCache, "pyramid": PyramidKVCache}[kind](n, windows=windows, **options)
    raise ValueError(f"unknown cache kind {kind!r}; kinds: {', '.join(CACHE_KINDS)}")


class Model(Protocol):
    """One protocol for every kvviz model: the toy models, the tiny GPT and transformers causal LMs.

    The toy models have the members down to ``forward``; a network that generates has them all
    (the tiny GPT's adapter kvviz.models.gpt.GPTModel, kvviz.models.hf.HFCausalLM)."""

    name: str
    vocab: list[str]          # tokens that may appear in the input
    logit_tokens: list[str]   # tokens the logits are over (a subset of vocab, same order as logits)
    n_layers: int
    n_heads: int
    output_labels: list[str]  # names of the output components (e.g. h0, h1 or head 1..4)
    limits: ModelLimits
    cost_config: ModelConfig

    def tokenize(self, text: str) -> list[str]:
        """Prompt text → tokens of ``vocab``; raises UnknownTokenError (or LimitError) otherwise."""
        ...

    def forward(self, token_ids: Sequence[int], cache: Cache | None, start_pos: int) -> PassRecord:
        """Run ``token_ids`` (positions start_pos..) against ``cache``; store their K/V in it."""
        ...


class CausalLM(Model, Protocol):
    """A network that generates: the Model protocol plus the fast path every loop runs.

    ``tokenizer`` and ``chat_template`` are None when the model has none (the tiny GPT has no chat
    template); ``end_tokens`` are the tokens that end a text (none for the tiny GPT);
    ``max_positions`` the positions it can address at all (learned positions), None when unbounded."""

    layout: tuple[LayerLayout, ...]
    tokenizer: object | None
    chat_template: str | None
    end_tokens: frozenset[str]
    max_positions: int | None

    def logits(self, token_ids: Sequence[int] | torch.Tensor, cache: Cache | None, start_pos: int,
               keep: int = 0) -> torch.Tensor:
        """``forward``'s logits without its records: [N, V] float32 of the N new positions (the last
        ``keep`` of them when keep > 0), their K/V stored in ``cache`` (None: no cache)."""
        ...

    def new_cache(self, kind: str = "dense", **options) -> Cache:
        """A fresh, empty cache of ``kind`` for this network (``new_cache`` in kvviz.models.base)."""
        ...

    def kv_projections(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (W [2·H_kv·d, C], b [2·H_kv·d]) in float64: [k; v] = W x + b, the K rows then the
        V rows, heads side by side, keys before any rotation (a latent cache factors them,
        kvviz.compress.latent). Only the network knows where its K/V rows live."""
        ...

    def with_kv_heads(self, kv_heads: int) -> CausalLM:
        """This network with its K/V heads mean-pooled to ``kv_heads`` (a divisor of its K/V heads),
        as a model of the same kind (the smaller caches' grouped-query variant, kvviz.compress)."""
        ...

    # Optional, for early exit (kvviz.speculative.early_exit): the network cut after its first layers.
    # def exit_logits(self, token_ids: Sequence[int], cache: Cache, exit_layer: int) -> torch.Tensor:
    #     """``token_ids`` after the cache's positions through the first ``exit_layer`` layers (their
    #     rows appended to those layers of ``cache``), the final norm and the readout → logits [V]."""


# --- masks ------------------------------------------------------------------------------------

def causal_allowed(start_pos: int, n_new: int, n_keys: int) -> torch.Tensor:
    """[N, T] True where the new query i (absolute position start_pos + i) may read key j (position j)."""
    q_pos = torch.arange(start_pos, start_pos + n_new).unsqueeze(1)   # [N, 1]
    return torch.arange(n_keys).unsqueeze(0) <= q_pos                  # [N, T]


def masked_softmax(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis of ``scores`` [..., N, T] where ``allowed`` (broadcastable);
    a row with no allowed key (a padding query) becomes all zeros instead of NaN."""
    att = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.nan_to_num(att, nan=0.0)


def causal_softmax(scores: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Mask future keys and softmax over the last axis; scores [..., N, T], query i at start_pos + i."""
    return masked_softmax(scores, causal_allowed(start_pos, scores.shape[-2], scores.shape[-1]))


def allowed_keys(key_mask: torch.Tensor, n_new: int) -> torch.Tensor:
    """Batched decoding: [B, N, T] True where new column i may read key column j, i.e. j holds a
    real token of that sequence (``key_mask`` [B, T]) and is not in the future. The N new columns
    are the last N of T."""
    t = key_mask.shape[1]
    q_col = torch.arange(t - n_new, t).unsqueeze(1)          # [N, 1]
    causal = torch.arange(t).unsqueeze(0) <= q_col           # [N, T]
    return causal.unsqueeze(0) & key_mask.unsqueeze(1)       # [B, N, T]


# --- prompts ----------------------------------------------------------------------------------

def encode(model: Model, tokens: Sequence[str]) -> list[int]:
    """Token strings to ids; raises UnknownTokenError naming every unknown token."""
    unknown = [t for t in tokens if t not in model.vocab]
    if unknown:
        raise UnknownTokenError(unknown, model.vocab)
    return [model.vocab.index(t) for t in tokens]


def split_prompt(text: str, max_chars: int = MAX_PROMPT_CHARS) -> list[str]:
    """Whitespace- or comma-separated prompt text to token strings; raises LimitError when too long."""
    if len(text) > max_chars:
        raise LimitError(f"The prompt is {len(text):,} characters long; the limit is {max_chars:,}.")
    return text.replace(",", " ").split()


def tokenize_by_vocab(text: str, vocab: Sequence[str], max_chars: int = MAX_PROMPT_CHARS) -> list[str]:
    """The toy models' tokenizer: split on spaces and commas, match each word to ``vocab`` ignoring
    case ("a" → "A", "today" → "Today"); unknown words raise UnknownTokenError."""
    by_lower = {tok.lower(): tok for tok in vocab}
    words = split_prompt(text, max_chars)
    tokens = [w if w in vocab else by_lower.get(w.lower(), w) for w in words]
    unknown = [t for t in tokens if t not in vocab]
    if unknown:
        raise UnknownTokenError(unknown, vocab)
    return tokens
