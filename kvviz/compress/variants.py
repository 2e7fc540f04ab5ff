"""Smaller caches (docs/design.md §5), each a ``Variant`` of the full cache of any kvviz model (the
trained tiny GPT, a transformers causal LM such as SmolLM2):

- ``window``: attention sinks plus a sliding window (kvviz.cache.SlidingWindowCache), the kept keys
  at their own positions or re-rotated to their positions in the cache (``positions``, rotary models);
- ``quant``: KIVI-style int8 / int4 / int2 codes with a full-precision residual (kvviz.cache.QuantizedCache);
- ``gqa``: K/V heads mean-pooled in groups (kvviz.models.grouped), with the full cache;
- ``h2o``, ``snapkv``, ``pyramid``: eviction by attention score (kvviz.cache.scored), ``budget``
  rows per layer and K/V head (H2O: ``recent`` of them the newest; SnapKV and PyramidKV: an
  observation window ``obs_window`` and a pooling ``kernel``; PyramidKV's ``budget`` is the mean of
  its per-layer budgets);
- ``fp8``: E4M3 codes with a per-tensor or per-token ``scale`` (kvviz.cache.Fp8Cache);
- ``latent``: one low-rank latent per token and layer from the SVD of the K and V projections
  (kvviz.compress.latent, kvviz.cache.LatentCache), ``rank`` a number or "full".

``variant_model(model, variant)`` and ``variant_cache(model, variant)`` are what a variant runs: the
model or its pooled conversion, and an empty cache of its kind. What they cost is measured in
kvviz.compress.evaluation (held-out prompts or text) and kvviz.compress.steps (one prompt, event by
event).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import Cache, DynamicCache, QuantizedCache, SlidingWindowCache
from kvviz.cache.fp8 import SCALES, Fp8Cache
from kvviz.cache.scored import MAX_BUDGET, MAX_KERNEL, MAX_OBS_WINDOW, H2OCache, PyramidKVCache, SnapKVCache
from kvviz.cache.window import POSITIONS
from kvviz.compress._protocol import pooled_model, rope_inv_freq
from kvviz.compress.latent import check_rank, latent_cache
from kvviz.limits import (
    MAX_CACHE_SINKS,
    MAX_CACHE_WINDOW,
    MAX_QUANT_GROUP_SIZE,
    MAX_QUANT_RESIDUAL,
    QUANT_BITS,
    LimitError,
    check_int,
)
from kvviz.models.grouped import check_kv_heads

KINDS = ("full", "window", "quant", "gqa", "h2o", "snapkv", "pyramid", "fp8", "latent")
EVICTING = ("h2o", "snapkv", "pyramid")
KEY_AXES = ("channel", "token")
# each kind's settings and their defaults (the CLI's too)
SETTINGS = {"full": {}, "window": {"window": 16, "sinks": 4, "positions": "own"},
            "quant": {"bits": 8, "group_size": 32, "key_axis": "channel", "residual": 0},
            "gqa": {"kv_heads": 1}, "h2o": {"budget": 32, "recent": 16},
            "snapkv": {"budget": 32, "obs_window": 8, "kernel": 5, "hold": False},
            "pyramid": {"budget": 32, "obs_window": 8, "kernel": 5, "hold": False}, "fp8": {"scale": "tensor"},
            "latent": {"rank": "full"}}
FIELDS = ("window", "sinks", "bits", "group_size", "key_axis", "residual", "kv_heads", "positions", "budget",
          "recent", "obs_window", "kernel", "scale", "rank", "hold")


@dataclass(frozen=True)
class Variant:
    """One cache configuration. Build with ``Variant.of(kind, **settings)`` (missing settings take
    the defaults of ``SETTINGS``); settings of another kind are refused."""

    kind: str = "full"
    window: int | None = None
    sinks: int | None = None
    bits: int | None = None
    group_size: int | None = None
    key_axis: str | None = None
    residual: int | None = None
    kv_heads: int | None = None
    positions: str | None = None
    budget: int | None = None
    recent: int | None = None
    obs_window: int | None = None
    kernel: int | None = None
    scale: str | None = None
    rank: int | str | None = None
    hold: bool | None = None

    @classmethod
    def of(cls, kind: str, **settings) -> Variant:
        if kind not in KINDS:
            raise LimitError(f"Unknown cache kind {kind!r}; choose one of {', '.join(KINDS)}.")
        given = {k: v for k, v in settings.items() if v is not None}
        stray = sorted(set(given) - set(SETTINGS[kind]))
        if stray:
            names = ", ".join(s.replace("_", " ") for s in stray)
            raise LimitError(f"The {kind} cache has no setting {names}.")
        if kind == "h2o" and "recent" not in given and isinstance(given.get("budget"), int):
            given["recent"] = given["budget"] // 2        # H2O's split: half heavy hitters, half recent
        return cls(kind, **{**SETTINGS[kind], **given})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise LimitError(f"Unknown cache kind {self.kind!r}; choose one of {', '.join(KINDS)}.")
        wanted = SETTINGS[self.kind]
        for name in FIELDS:
            if (getattr(self, name) is None) != (name not in wanted):
                raise LimitError(f"The {self.kind} cache {'needs' if name in wanted else 'has no'} "
                                 f"setting {name.replace('_', ' ')}.")
        checks = {"window": ("Window", 1, MAX_CACHE_WINDOW), "sinks": ("Sink tokens", 0, MAX_CACHE_SINKS),
                  "group_size": ("Group size", 1, MAX_QUANT_GROUP_SIZE),
                  "residual": ("Residual window", 0, MAX_QUANT_RESIDUAL), "kv_heads": ("K/V heads", 1, 1024),
                  "budget": ("Budget", 1, MAX_BUDGET), "recent": ("Recent positions", 0, MAX_BUDGET),
                  "obs_window": ("Observation window", 1, MAX_OBS_WINDOW), "kernel": ("Pooling kernel", 1, MAX_KERNEL)}
        for name, (label, low, high) in checks.items():
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_int(label, getattr(self, name), low, high))
        if self.bits is not None and (isinstance(self.bits, bool) or self.bits not in QUANT_BITS):
            raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {self.bits!r}.")
        if self.key_axis is not None and self.key_axis not in KEY_AXES:
            raise LimitError(f"Key axis must be 'channel' or 'token', got {self.key_axis!r}.")
        if self.positions is not None and self.positions not in POSITIONS:
            raise LimitError(f"Key positions must be 'own' or 'cache', got {self.positions!r}.")
        if self.recent is not None and self.recent > self.budget:                  # type: ignore[operator]
            raise LimitError(f"Recent positions ({self.recent}) cannot exceed the budget ({self.budget}).")
        if self.hold is not None and not isinstance(self.hold, bool):
            raise LimitError(f"Hold must be true or false, got {self.hold!r}.")
        if self.rank is not None and self.rank != "full":
            object.__setattr__(self, "rank", check_int("Rank", self.rank, 1, 4096))
        if self.scale is not None and self.scale not in SCALES:
            raise LimitError(f"The FP8 scale must be 'tensor' or 'token', got {self.scale!r}.")
        if self.kernel is not None and self.kernel % 2 == 0:
            raise LimitError(f"The pooling kernel must be odd, got {self.kernel}.")

    def settings(self) -> dict:
        """This kind's settings (JSON-ready)."""
        return {name: getattr(self, name) for name in SETTINGS[self.kind]}

    def label(self) -> str:
        """A short English name, e.g. "window 16 + 4 sinks", "int4 K per channel, G 32, residual 16"."""
        if self.kind == "window":
            return (f"window {self.window}" + (f" + {self.sinks} sinks" if self.sinks else "")
                    + (", cache positions" if self.positions == "cache" else ""))
        if self.kind == "quant":
            return (f"int{self.bits} K per {self.key_axis}, G {self.group_size}"
                    + (f", residual {self.residual}" if self.residual else ""))
        if self.kind == "gqa":
            return f"{self.kv_heads} K/V head" + ("s" if self.kv_heads != 1 else "")
        if self.kind == "h2o":
            return f"H2O {self.budget} ({self.recent} recent)"
        if self.kind == "latent":
            return f"latent rank {self.rank}"
        if self.kind == "fp8":
            return f"FP8 E4M3, scale per {self.scale}"
        if self.kind in ("snapkv", "pyramid"):
            return (f"{'SnapKV' if self.kind == 'snapkv' else 'PyramidKV'} {self.budget} (window {self.obs_window})"
                    + (", held" if self.hold else ""))
        return "full cache"

    def lossless_for(self, positions: int, n_kv_heads: int, n_layers: int = 1,
                     windows: Sequence[int | None] | None = None) -> bool:
        """Whether this variant must give exactly the full cache's logits on a text of ``positions``
        positions with a model of ``n_kv_heads`` K/V heads: the full cache; a window that, with
        its sinks, covers every position (nothing is ever evicted); a residual window that covers every position
        (nothing is ever quantized); as many K/V heads as the model (the weights are copied); an
        evicting cache whose every layer's budget covers every position (``n_layers``: PyramidKV's
        budgets depend on the depth; ``windows``: a model's sliding layers, whose full cache holds
        only the window's last ``window − 1`` positions and whose budget is capped there)."""
        if self.kind == "window":
            return self.window + self.sinks >= positions                      # type: ignore[operator]
        if self.kind == "quant":
            return self.residual >= positions                                # type: ignore[operator]
        if self.kind == "gqa":
            return self.kv_heads == n_kv_heads
        if self.kind == "latent":
            return False                               # full rank: equal within rounding, not bit for bit
        if self.kind == "fp8":
            return positions <= 1                      # the prefill reads its own rows as computed
        if self.kind in EVICTING:
            ws = windows or [None] * n_layers
            return all(b >= (positions if w is None else min(positions, w - 1))
                       for b, w in zip(self.make_cache(n_layers, windows=ws).budgets(), ws))
        return True

    def make_cache(self, n_layers: int, inv_freq: torch.Tensor | None = None,
                   windows: Sequence[int | None] | None = None) -> Cache:
        """An empty cache of this kind (``inv_freq``: the model's rotary frequencies, which a
        window with cache positions needs to re-rotate its keys; ``windows``: per layer the model's
        sliding window or None, within which an evicting policy chooses, kvviz.cache.scored)."""
        if self.kind == "window":
            return SlidingWindowCache(n_layers, self.window, self.sinks, self.positions,  # type: ignore[arg-type]
                                      inv_freq)
        if self.kind == "quant":
            return QuantizedCache(n_layers, self.bits, self.group_size, self.key_axis, self.residual)  # type: ignore[arg-type]
        if self.kind == "fp8":
            return Fp8Cache(n_layers, self.scale)  # type: ignore[arg-type]
        if self.kind == "h2o":
            return H2OCache(n_layers, self.budget, self.recent, windows)  # type: ignore[arg-type]
        if self.kind == "snapkv":
            return SnapKVCache(n_layers, self.budget, self.obs_window, self.kernel, self.hold,  # type: ignore[arg-type]
                               windows=windows)
        if self.kind == "pyramid":
            return PyramidKVCache(n_layers, self.budget, self.obs_window, self.kernel, self.hold,  # type: ignore[arg-type]
                                  windows=windows)
        return DynamicCache(n_layers, windows)        # the model's own: a sliding layer keeps its window


def variant_model(model, variant: Variant):
    """The kvviz model ``variant`` runs: ``model`` itself, or for fewer K/V heads than it has its
    mean-pooled conversion (built once per process). A count that does not divide the model's K/V
    heads is refused here, before any work."""
    if variant.kind == "latent":
        check_rank(model, variant.rank)               # refuse a rank past the projections' before any work
    if variant.kind != "gqa":
        return model
    n_kv = model.cost_config.n_kv_heads
    kv_heads = check_kv_heads(variant.kv_heads, n_kv)
    return model if kv_heads == n_kv else pooled_model(model, kv_heads)


def variant_cache(model, variant: Variant) -> Cache:
    """An empty cache of ``variant`` for ``model`` (a window at cache positions re-rotates its keys
    with the model's rotary frequencies; a model without them is refused)."""
    if variant.kind == "latent":
        return latent_cache(model, variant.rank)
    rotary = variant.kind == "window" and variant.positions == "cache"
    return variant.make_cache(model.n_layers, rope_inv_freq(model) if rotary else None, model_windows(model))


def model_windows(model) -> list[int | None]:
    """Per layer the model's sliding window, None for a global layer (its ``layout``; the tiny GPT
    and SmolLM2: every layer global)."""
    layout = getattr(model, "layout", None) or ()
    return [layer.window if layer.attention == "sliding" else None for layer in layout] or [None] * model.n_layers


def page_variants() -> list[Variant]:
    """The variants the tiny GPT's trade-off plot and the benchmark compare: windows with and without
    sinks, int8/int4 × both key axes × without/with a residual window, and 1/2/4 K/V heads."""
    out = [Variant.of("full")]
    out += [Variant.of("window", window=w, sinks=s) for w in (8, 16, 32) for s in (0, 4)]
    out += [Variant.of("quant", bits=b, group_size=16, key_axis=a, residual=r)
            for b in (8, 4) for a in KEY_AXES for r in (0, 16)]
    out += [Variant.of("gqa", kv_heads=h) for h in (4, 2, 1)]
    return out


def llm_variants(window: int = 32, sinks: int = 4, group_size: int = 32) -> list[Variant]:
    """What the trade-off compares on a real model (SmolLM2: rotary positions, 3 K/V heads): the
    window with sinks at their own positions and at cache positions (and without sinks), int4 and
    int2 keys per channel and per token (no residual: every row but the newest group is codes), and
    one pooled K/V head."""
    out = [Variant.of("full"), Variant.of("window", window=window, sinks=0)]
    out += [Variant.of("window", window=window, sinks=sinks, positions=p) for p in ("own", "cache")]
    out += [Variant.of("quant", bits=b, group_size=group_size, key_axis=a, residual=0)
            for b in (4, 2) for a in ("channel", "token")]
    out += [Variant.of("gqa", kv_heads=1)]
    return out
