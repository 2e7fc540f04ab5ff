"""Smaller caches and what they cost, measured on the trained tiny GPT's logits (DESIGN.md §5).

Three ways to shrink the KV cache, each a ``Variant`` of the full cache:

- ``window``: attention sinks plus a sliding window (kvviz.cache.SlidingWindowCache);
- ``quant``: KIVI-style int8 / int4 codes with a full-precision residual (kvviz.cache.QuantizedCache);
- ``gqa``: K/V heads mean-pooled in groups (kvviz.models.gpt.to_grouped), with the full cache.

**Evaluation** (``evaluate``; the CLI and every page share it): held-out prompts (``held_out_prompts``:
``COMPRESS_PROMPT_TOKENS`` tokens from the start of a sentence in the tail of the training corpus that
no training batch read, picked with a seeded ``random.Random``); the full-cache model generates
greedily; each variant runs teacher-forced on the same text, and at every generated position we record
KL(full ‖ variant) of the next-token distributions and whether the variant's top-1 token is the full
model's. Per variant: mean KL, top-1 agreement and cache bytes per token (``nbytes()`` of the cache
object at the end of each run over the positions it processed, averaged over the prompts). Same seed,
same numbers.

**Stepping** (``compare_steps``): one prompt through the stepper twice, the full cache greedily and the
variant teacher-forced on the same tokens (``Forced``), event by event, with KL and top-1 agreement at
every choice; ``key_positions``, ``sink_mass`` and ``row_errors`` read the records a page draws.

The CLI's ``compress`` command lives here too (``add_command``).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Sequence

import torch

from kvviz.cache import Cache, DynamicCache, QuantizedCache, SlidingWindowCache
from kvviz.generation import Event, Run, run_generation
from kvviz.limits import (COMPRESS_MAX_NEW_TOKENS, COMPRESS_MAX_PROMPTS, COMPRESS_MAX_VARIANTS,
                          COMPRESS_PROMPT_TOKENS, MAX_CACHE_SINKS, MAX_CACHE_WINDOW, MAX_QUANT_GROUP_SIZE,
                          MAX_QUANT_RESIDUAL, MAX_SEED, QUANT_BITS, LimitError, check_int)
from kvviz.models.gpt import GPT, GPTModel, TinyGPT, load_tiny_gpt, to_grouped
from kvviz.models.gpt.corpus import corpus_tokens
from kvviz.models.gpt.train import split_train_val
from kvviz.sampling import Choice

KINDS = ("full", "window", "quant", "gqa")
KEY_AXES = ("channel", "token")
# each kind's settings and their defaults (the CLI's too)
SETTINGS = {"full": {}, "window": {"window": 16, "sinks": 4},
            "quant": {"bits": 8, "group_size": 32, "key_axis": "channel", "residual": 0},
            "gqa": {"kv_heads": 1}}


# --- variants ---------------------------------------------------------------------------------

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

    @classmethod
    def of(cls, kind: str, **settings) -> "Variant":
        if kind not in KINDS:
            raise LimitError(f"Unknown cache kind {kind!r}; choose one of {', '.join(KINDS)}.")
        given = {k: v for k, v in settings.items() if v is not None}
        stray = sorted(set(given) - set(SETTINGS[kind]))
        if stray:
            names = ", ".join(s.replace("_", " ") for s in stray)
            raise LimitError(f"The {kind} cache has no setting {names}.")
        return cls(kind, **{**SETTINGS[kind], **given})

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise LimitError(f"Unknown cache kind {self.kind!r}; choose one of {', '.join(KINDS)}.")
        wanted = SETTINGS[self.kind]
        for name in ("window", "sinks", "bits", "group_size", "key_axis", "residual", "kv_heads"):
            if (getattr(self, name) is None) != (name not in wanted):
                raise LimitError(f"The {self.kind} cache {'needs' if name in wanted else 'has no'} "
                                 f"setting {name.replace('_', ' ')}.")
        checks = {"window": ("Window", 1, MAX_CACHE_WINDOW), "sinks": ("Sink tokens", 0, MAX_CACHE_SINKS),
                  "group_size": ("Group size", 1, MAX_QUANT_GROUP_SIZE),
                  "residual": ("Residual window", 0, MAX_QUANT_RESIDUAL), "kv_heads": ("K/V heads", 1, 1024)}
        for name, (label, low, high) in checks.items():
            if getattr(self, name) is not None:
                object.__setattr__(self, name, check_int(label, getattr(self, name), low, high))
        if self.bits is not None and (isinstance(self.bits, bool) or self.bits not in QUANT_BITS):
            raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {self.bits!r}.")
        if self.key_axis is not None and self.key_axis not in KEY_AXES:
            raise LimitError(f"Key axis must be 'channel' or 'token', got {self.key_axis!r}.")

    def settings(self) -> dict:
        """This kind's settings (JSON-ready)."""
        return {name: getattr(self, name) for name in SETTINGS[self.kind]}

    def label(self) -> str:
        """A short English name, e.g. "window 16 + 4 sinks", "int4 K per channel, G 32, residual 16"."""
        if self.kind == "window":
            return f"window {self.window}" + (f" + {self.sinks} sinks" if self.sinks else "")
        if self.kind == "quant":
            return (f"int{self.bits} K per {self.key_axis}, G {self.group_size}"
                    + (f", residual {self.residual}" if self.residual else ""))
        if self.kind == "gqa":
            return f"{self.kv_heads} K/V head" + ("s" if self.kv_heads != 1 else "")
        return "full cache"

    def lossless_for(self, positions: int, n_kv_heads: int) -> bool:
        """Whether this variant must give exactly the full cache's logits on a text of ``positions``
        positions with a model of ``n_kv_heads`` K/V heads: the full cache; a window that, with
        its sinks, covers every position (nothing is ever evicted); a residual window that covers every position
        (nothing is ever quantized); as many K/V heads as the model (the weights are copied)."""
        if self.kind == "window":
            return self.window + self.sinks >= positions                      # type: ignore[operator]
        if self.kind == "quant":
            return self.residual >= positions                                # type: ignore[operator]
        if self.kind == "gqa":
            return self.kv_heads == n_kv_heads
        return True

    def network(self, base: GPT) -> GPT:
        """The network this variant runs: ``base``, or its grouped conversion."""
        return base if self.kind != "gqa" else grouped_network(base, self.kv_heads)  # type: ignore[arg-type]

    def make_cache(self, n_layers: int) -> Cache:
        """An empty cache of this kind."""
        if self.kind == "window":
            return SlidingWindowCache(n_layers, self.window, self.sinks)  # type: ignore[arg-type]
        if self.kind == "quant":
            return QuantizedCache(n_layers, self.bits, self.group_size, self.key_axis, self.residual)  # type: ignore[arg-type]
        return DynamicCache(n_layers)


@lru_cache(maxsize=8)
def grouped_network(base: GPT, kv_heads: int) -> GPT:
    """``to_grouped(base, kv_heads)``, built once per process (read-only, like the base model)."""
    return to_grouped(base, kv_heads)


def page_variants() -> list[Variant]:
    """The variants the page's trade-off plot and the benchmark compare: windows with and without
    sinks, int8/int4 × both key axes × without/with a residual window, and 1/2/4 K/V heads."""
    out = [Variant.of("full")]
    out += [Variant.of("window", window=w, sinks=s) for w in (8, 16, 32) for s in (0, 4)]
    out += [Variant.of("quant", bits=b, group_size=16, key_axis=a, residual=r)
            for b in (8, 4) for a in KEY_AXES for r in (0, 16)]
    out += [Variant.of("gqa", kv_heads=h) for h in (4, 2, 1)]
    return out


# --- held-out prompts -------------------------------------------------------------------------

@dataclass(frozen=True)
class HeldOutPrompt:
    """``tokens`` from the held-out tail of the training corpus, starting at ``offset`` in that tail
    (always the first token of a sentence)."""

    tokens: tuple[str, ...]
    ids: tuple[int, ...]
    offset: int


@lru_cache(maxsize=2)
def held_out_stream(sentences: int, seed: int) -> tuple[str, ...]:
    """The tail of the corpus stream that training never read (kvviz.models.gpt.train.split_train_val)."""
    return tuple(split_train_val(corpus_tokens(sentences, seed))[1])


def held_out_prompts(n: int, seed: int = 0, tiny: TinyGPT | None = None,
                     length: int = COMPRESS_PROMPT_TOKENS) -> list[HeldOutPrompt]:
    """``n`` prompts of ``length`` tokens, each from the start of a different held-out sentence,
    chosen with ``random.Random(seed)``. The corpus is regenerated with the sentences and seed the
    checkpoint records (kvviz/data/tiny_gpt.json)."""
    n = check_int("Prompts", n, 1, COMPRESS_MAX_PROMPTS)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    tiny = tiny or load_tiny_gpt()
    training = tiny.meta.get("training", {})
    stream = held_out_stream(int(training.get("corpus_sentences", 30_000)), int(training.get("seed", 0)))
    starts = [i for i in range(1, len(stream) - length + 1) if stream[i - 1] in (".", "!")]
    picked = random.Random(seed).sample(starts, n)
    index = tiny.tokenizer.index
    return [HeldOutPrompt(stream[i:i + length], tuple(index[t] for t in stream[i:i + length]), i) for i in picked]


# --- the evaluation ---------------------------------------------------------------------------

@torch.inference_mode()
def run_cache(network: GPT, prompt: Sequence[int], new_tokens: int, cache: Cache,
              forced: Sequence[int] | None = None) -> tuple[list[int], torch.Tensor]:
    """Prefill ``prompt`` into ``cache``, then decode one token per step: greedily, or the tokens
    ``forced`` (teacher forcing). Returns the tokens and the next-token logits [new_tokens, V] that
    chose (or would have chosen) each; the last token is never processed, as in generation."""
    logits = network(torch.tensor([list(prompt)]), cache, 0, last_only=True)[0]
    rows, tokens = [], []
    pos = len(prompt)
    for step in range(new_tokens):
        rows.append(logits)
        tokens.append(int(torch.argmax(logits)) if forced is None else int(forced[step]))
        if step + 1 < new_tokens:
            logits = network(torch.tensor([[tokens[-1]]]), cache, pos, last_only=True)[0]
            pos += 1
    return tokens, torch.stack(rows)


def kl_divergence(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) in nats of the softmax distributions, over the last axis (float64; rounding below
    zero is clipped to 0)."""
    p, q = torch.log_softmax(p_logits.double(), -1), torch.log_softmax(q_logits.double(), -1)
    return (p.exp() * (p - q)).sum(-1).clamp(min=0.0)


@dataclass(frozen=True)
class VariantResult:
    """One variant over every prompt: per prompt and generated position the KL(full ‖ variant) and
    top-1 agreement, and per prompt the cache's bytes at the end and the positions it processed."""

    variant: Variant
    kl: tuple[tuple[float, ...], ...]           # [prompt][position]
    agree: tuple[tuple[bool, ...], ...]         # [prompt][position]
    cache_bytes: tuple[int, ...]                # [prompt] nbytes() of the cache after the run
    cached_positions: tuple[int, ...]           # [prompt] positions processed (prompt + new − 1)

    @property
    def prompts(self) -> int:
        return len(self.kl)

    @property
    def positions(self) -> int:
        return sum(len(row) for row in self.kl)

    @property
    def kl_mean(self) -> float:
        return sum(sum(row) for row in self.kl) / self.positions

    @property
    def top1_agreement(self) -> float:
        return sum(sum(row) for row in self.agree) / self.positions

    @property
    def bytes_per_token(self) -> float:
        """Bytes of the cache per position it processed, at the end of each run, averaged over prompts."""
        return sum(b / t for b, t in zip(self.cache_bytes, self.cached_positions)) / self.prompts

    def as_dict(self) -> dict:
        """The CLI's JSON: kind, settings, bytes_per_token, kl_mean, top1_agreement, prompts, positions."""
        return {"kind": self.variant.kind, "settings": self.variant.settings(),
                "bytes_per_token": round(self.bytes_per_token, 3), "kl_mean": round(self.kl_mean, 8),
                "top1_agreement": round(self.top1_agreement, 6), "prompts": self.prompts,
                "positions": self.positions}


@dataclass(frozen=True)
class Evaluation:
    """The held-out prompts, what the full cache generated from them, and every variant's result."""

    prompts: tuple[HeldOutPrompt, ...]
    generated: tuple[tuple[int, ...], ...]      # [prompt] the full cache's greedy tokens
    new_tokens: int
    seed: int
    results: tuple[VariantResult, ...]
    vocab: tuple[str, ...] = field(repr=False, default=())

    def result(self, variant: Variant) -> VariantResult:
        return next(r for r in self.results if r.variant == variant)


Progress = Callable[[int, int], None]      # (runs done, runs in all), e.g. a page's progress bar


def evaluate(variants: Sequence[Variant], prompts: int = 8, new_tokens: int = 32, seed: int = 0,
             tiny: TinyGPT | None = None, progress: Progress | None = None, threads: int = 1) -> Evaluation:
    """Every variant against the full cache on ``prompts`` held-out prompts (see the module doc).

    Runs on ``threads`` torch threads (restored afterwards): one by default, since on a shared
    2-core machine two threads waiting for each other made these one-token steps many times slower."""
    variants = list(variants)
    check_int("Variants", len(variants), 1, COMPRESS_MAX_VARIANTS)
    new_tokens = check_int("New tokens", new_tokens, 1, COMPRESS_MAX_NEW_TOKENS)
    threads = check_int("Threads", threads, 1, 64)
    tiny = tiny or load_tiny_gpt()
    for v in variants:
        v.network(tiny.model)                          # refuse a bad head count before any work
    chosen = held_out_prompts(prompts, seed, tiny)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        return _evaluate(variants, chosen, new_tokens, seed, tiny, progress)
    finally:
        torch.set_num_threads(before)


def _evaluate(variants: list[Variant], chosen: list[HeldOutPrompt], new_tokens: int, seed: int,
              tiny: TinyGPT, progress: Progress | None) -> Evaluation:
    base = tiny.model
    n_layers = base.config.n_layer
    total, done = len(chosen) * (len(variants) + 1), 0
    reference = []
    for p in chosen:                                   # the full cache generates greedily
        reference.append(run_cache(base, p.ids, new_tokens, DynamicCache(n_layers)))
        done += 1
        if progress:
            progress(done, total)
    results = []
    for v in variants:
        network = v.network(base)
        kl, agree, nbytes, cached = [], [], [], []
        for p, (tokens, full_logits) in zip(chosen, reference):
            cache = v.make_cache(n_layers)
            _, logits = run_cache(network, p.ids, new_tokens, cache, forced=tokens)
            kl.append(tuple(kl_divergence(full_logits, logits).tolist()))
            agree.append(tuple(bool(a) for a in (logits.argmax(-1) == torch.tensor(tokens)).tolist()))
            nbytes.append(cache.nbytes())
            cached.append(len(p.ids) + new_tokens - 1)
            done += 1
            if progress:
                progress(done, total)
        results.append(VariantResult(v, tuple(kl), tuple(agree), tuple(nbytes), tuple(cached)))
    return Evaluation(tuple(chosen), tuple(tuple(t) for t, _ in reference), new_tokens, seed, tuple(results),
                      tuple(tiny.tokenizer.vocab))


# --- stepping through one prompt --------------------------------------------------------------

class Forced:
    """Teacher forcing as a selection rule: picks the given token ids in order, whatever the logits
    (one object per run: it counts its choices). ``probs`` of its Choice is one-hot: nothing is drawn."""

    def __init__(self, ids: Sequence[int]) -> None:
        self.ids = tuple(int(i) for i in ids)
        self._next = 0

    def draw(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> int:
        if self._next >= len(self.ids):
            raise LimitError("Teacher forcing ran out of tokens.")
        self._next += 1
        return self.ids[self._next - 1]

    def choose(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> Choice:
        i = self.draw(logits, generator)
        probs = [0.0] * logits.shape[-1]
        probs[i] = 1.0
        return Choice(i, probs, [i], self.describe())

    def describe(self) -> dict:
        return {"name": "forced", "tokens": len(self.ids)}

    def settings(self) -> dict:
        return {"forced": self.ids}


@dataclass(frozen=True)
class StepScore:
    """At one choose event: the full and the variant's next-token logits compared."""

    event: int              # index of the choose event (the same in both runs)
    position: int           # position of the token being chosen
    kl: float               # KL(full ‖ variant), nats
    agree: bool             # the variant's top-1 token is the full cache's (greedy) choice
    full_top1: str
    variant_top1: str


@dataclass(frozen=True)
class StepComparison:
    """One prompt stepped with the full cache (greedy) and with a variant (teacher-forced on the
    same tokens). The two runs have the same events (prefill, choose, decode, …) at the same
    indices and positions; ``scores`` has one entry per choose event."""

    variant: Variant
    full: Run
    compressed: Run
    scores: tuple[StepScore, ...]
    logit_tokens: tuple[str, ...]

    def score_at(self, event_index: int) -> StepScore | None:
        """The score of the last choice at or before ``event_index`` (None before the first)."""
        before = [s for s in self.scores if s.event <= event_index]
        return before[-1] if before else None

    def scored_event(self, event_index: int) -> int:
        """The choose event whose distributions an event shows: itself, or the choice after a pass."""
        return event_index if self.full.events[event_index].phase == "choose" else event_index + 1

    def mean_until(self, event_index: int) -> tuple[float, float, int]:
        """Mean KL, top-1 agreement and the number of choices scored at or before ``event_index``."""
        before = [s for s in self.scores if s.event <= event_index]
        if not before:
            return 0.0, 1.0, 0
        return sum(s.kl for s in before) / len(before), sum(s.agree for s in before) / len(before), len(before)

    def logits_equal(self, event_index: int) -> bool:
        """The variant's next-token logits at ``event_index`` are exactly the full cache's (``torch.equal``)."""
        return torch.equal(self.full.events[event_index].logits, self.compressed.events[event_index].logits)

    def first_difference(self) -> int | None:
        """The first event whose logits are not exactly the full cache's (None: equal everywhere)."""
        return next((i for i in range(len(self.full.events)) if not self.logits_equal(i)), None)

    @property
    def positions(self) -> int:
        """Positions the runs processed (the prompt and every generated token but the last)."""
        return self.full.events[-1].cache_len


def variant_model(variant: Variant, tiny: TinyGPT | None = None) -> GPTModel:
    """The Model-protocol GPT a variant runs through the stepper (its own network for gqa)."""
    tiny = tiny or load_tiny_gpt()
    if variant.kind != "gqa":
        return GPTModel(tiny)
    return GPTModel(TinyGPT(variant.network(tiny.model), tiny.tokenizer, tiny.trained, tiny.meta))


def compare_steps(variant: Variant, prompt: Sequence[str], new_tokens: int,
                  tiny: TinyGPT | None = None) -> StepComparison:
    """Step ``prompt`` (tokens of the tiny GPT) with the full cache and with ``variant``; the
    stepper's caps apply (kvviz.models.gpt.adapter.LIMITS)."""
    tiny = tiny or load_tiny_gpt()
    full_model = GPTModel(tiny)
    full = run_generation(full_model, prompt, new_tokens)
    model = variant_model(variant, tiny)
    chosen = [model.vocab.index(e.chosen) for e in full.events if e.phase == "choose"]  # type: ignore[arg-type]
    compressed = run_generation(model, prompt, new_tokens, rule=Forced(chosen),
                                cache=variant.make_cache(model.n_layers))
    vocab = model.logit_tokens
    scores = []
    for a, b in zip(full.events, compressed.events):
        if a.phase == "choose":
            scores.append(StepScore(a.index, a.positions[0], float(kl_divergence(a.logits, b.logits)),
                                    int(b.logits.argmax()) == int(a.logits.argmax()),
                                    vocab[int(a.logits.argmax())], vocab[int(b.logits.argmax())]))
    return StepComparison(variant, full, compressed, tuple(scores), tuple(vocab))


def pass_event(run: Run, event_index: int) -> Event:
    """The pass an event shows: itself, or for a choose event the pass before it."""
    ev = run.events[event_index]
    return ev if ev.record is not None else run.events[event_index - 1]


def key_positions(event: Event) -> list[int]:
    """Absolute positions of the key columns of a pass event's attention record ``[L, H, N, T]``:
    a decode pass reads the rows held after it (a window reads fewer than all); a prefill from
    position 0 reads columns 0..T−1 (the window's mask then hides some per query)."""
    if event.record is None:
        raise ValueError("a choose event runs no attention; use pass_event")
    n_keys = event.record.attention.shape[-1]
    if len(event.positions) == 1:
        return [r.position for r in event.cache.held_rows]
    if event.positions[0] == 0:
        return list(range(n_keys))
    raise ValueError("key positions of a multi-token pass after position 0 are not recorded")


def sink_mass(event: Event, layer: int, head: int, sinks: int) -> list[float]:
    """Per query of a pass event: the attention weight on the sink tokens (positions < ``sinks``)."""
    att = event.record.attention[layer, head]                      # [N, T]  # type: ignore[union-attr]
    cols = [i for i, p in enumerate(key_positions(event)) if p < sinks]
    return att[:, cols].sum(-1).tolist() if cols else [0.0] * att.shape[0]


@dataclass(frozen=True)
class RowErrors:
    """Each cached row of one layer after an event: how far the K/V attention reads are from the
    K/V the model computed (max |difference| over the head's dimensions, per K/V head)."""

    positions: tuple[int, ...]
    tokens: tuple[str, ...]
    key_error: torch.Tensor       # [rows, kv_heads]; NaN for a row no longer held (evicted)
    value_error: torch.Tensor     # [rows, kv_heads]
    quantized: tuple[bool, ...]   # row stored as codes (else full precision, or evicted)
    evicted: tuple[bool, ...]


def row_errors(run: Run, event_index: int, layer: int = 0) -> RowErrors:
    """The quantization error of every row of ``layer`` after ``event_index``: the snapshot's K/V
    (dequantized, what attention reads) against the rows in the pass records of the events that
    computed them. Full-precision rows come out 0; evicted rows NaN."""
    snap = run.events[event_index].cache
    keys, values = snap.keys[layer], snap.values[layer]
    held = {r.position: i for i, r in enumerate(snap.held_rows)}
    heads = run.events[0].record.k.shape[1]                                    # type: ignore[union-attr]
    k_err = torch.full((len(snap.rows), heads), float("nan"))
    v_err = torch.full((len(snap.rows), heads), float("nan"))
    for j, r in enumerate(snap.rows):
        i = held.get(r.position)
        if i is None or keys is None or values is None:
            continue
        rec = run.events[r.event].record
        n = r.position - rec.positions[0]                                     # type: ignore[union-attr]
        k_err[j] = (keys[0, :, i] - rec.k[layer, :, n]).abs().amax(-1)       # type: ignore[union-attr]
        v_err[j] = (values[0, :, i] - rec.v[layer, :, n]).abs().amax(-1)     # type: ignore[union-attr]
    return RowErrors(tuple(r.position for r in snap.rows), tuple(r.token for r in snap.rows), k_err, v_err,
                     tuple(r.quantized_at is not None and r.evicted_at is None for r in snap.rows),
                     tuple(r.evicted_at is not None for r in snap.rows))


# --- command line -----------------------------------------------------------------------------

def add_command(sub: argparse._SubParsersAction) -> None:
    """Register ``python -m kvviz compress`` on the CLI's subparsers (kvviz.__main__)."""
    c = sub.add_parser("compress", help="mean KL and top-1 agreement of a smaller cache against the full one",
                       description="Run a smaller cache on held-out prompts of the tiny GPT and print JSON: "
                                   "kind, settings, bytes_per_token, kl_mean, top1_agreement, prompts, positions.")
    c.add_argument("--kind", required=True, choices=KINDS)
    c.add_argument("--window", type=int, help=f"window: recent positions kept (default 16, ≤ {MAX_CACHE_WINDOW})")
    c.add_argument("--sinks", type=int, help=f"window: first positions kept (default 4, ≤ {MAX_CACHE_SINKS})")
    c.add_argument("--bits", type=int, help="quant: 8 or 4 (default 8)")
    c.add_argument("--group-size", type=int, help=f"quant: values per scale (default 32, ≤ {MAX_QUANT_GROUP_SIZE})")
    c.add_argument("--key-axis", choices=KEY_AXES, help="quant: keys per channel (KIVI, default) or per token")
    c.add_argument("--residual", type=int, help=f"quant: newest positions in full precision (default 0, ≤ {MAX_QUANT_RESIDUAL})")
    c.add_argument("--kv-heads", type=int, help="gqa: K/V heads after mean-pooling (default 1; must divide 4)")
    c.add_argument("--prompts", type=int, default=8, help=f"held-out prompts (1..{COMPRESS_MAX_PROMPTS}, default 8)")
    c.add_argument("--new-tokens", type=int, default=32,
                   help=f"tokens the full cache generates per prompt (1..{COMPRESS_MAX_NEW_TOKENS}, default 32)")
    c.add_argument("--seed", type=int, default=0, help=f"picks the prompts (0..{MAX_SEED}, default 0)")
    c.set_defaults(run=lambda a: _main(a, c))


def _main(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        variant = Variant.of(a.kind, window=a.window, sinks=a.sinks, bits=a.bits, group_size=a.group_size,
                             key_axis=a.key_axis, residual=a.residual, kv_heads=a.kv_heads)
        result = evaluate([variant], a.prompts, a.new_tokens, a.seed).results[0]
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(result.as_dict(), sys.stdout, indent=1)
    print()
    return 0
