"""Batched decoding: several prompts of different lengths decoded together, one pass per step.

The prompts are **left-padded** to the longest one, so every sequence's newest token sits in the same
cache column and one decode pass appends one column for all of them. A key mask ``[B, T]`` (True =
a real token of that sequence) travels with the cache; attention only reads a key column that is
real *and* not in the future. Each sequence keeps its own positions (a padded sequence starts at
position 0 after its pads), so models with position embeddings see the same numbers as alone.

A model takes part by providing ``forward_batch`` (the ``BatchModel`` protocol below); the
per-sequence results then equal running each prompt alone, which ``compare_with_solo`` checks.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pandas as pd
import torch

from kvviz.cache import Cache, DynamicCache
from kvviz.decoding.sampling import Choice, Greedy, SelectionRule
from kvviz.decoding.stepper import CacheSnapshot, Run, run_generation
from kvviz.limits import MAX_BATCH_PROMPTS, LimitError, check_int
from kvviz.models.base import FLOAT32_TOLERANCE, FLOAT64_TOLERANCE, BatchPassRecord, ModelLimits, encode

PAD = "·"   # how a padding slot is shown


class BatchModel(Protocol):
    """A model that can run B sequences in one pass (the A/B/C model does; the GPT should)."""

    name: str
    vocab: list[str]
    logit_tokens: list[str]
    n_layers: int
    n_heads: int
    limits: ModelLimits

    def forward_batch(self, token_ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor,
                      cache: Cache) -> BatchPassRecord:
        """token_ids, positions: [B, N] (padding: any id, position -1); key_mask: [B, T] for every
        column after this pass (cached + new). Store the new K/V ``[B, H, N, d]`` in ``cache``
        layer by layer (``cache.update``) and attend with ``models.base.allowed_keys(key_mask, N)``."""
        ...


@dataclass(frozen=True)
class BatchEvent:
    """One step of a batched run; lists are per sequence (index b)."""

    index: int
    phase: str                          # "prefill" | "decode" | "choose"
    tokens: list[list[str]]             # pass: real tokens processed per sequence; choose: [chosen]
    positions: list[list[int]]          # their absolute positions per sequence
    sequences: list[list[str]]          # every token known per sequence after this event
    pending: list[str | None]           # chosen but not yet processed
    slots: list[list[str | None]]       # cache columns per sequence: token, or None for padding
    key_mask: torch.Tensor              # [B, T] True = real token in that column
    cache: CacheSnapshot                # tensors [B, H, T, d] per layer
    record: BatchPassRecord | None      # pass events
    choices: list[Choice] | None        # choose events
    logits: torch.Tensor                # [B, V_out] logits of each sequence's last processed token
    passes: int                         # forward passes run so far (one per pass event)
    kv_computed: int                    # real (non-padding) K/V columns computed so far
    kv_padding: int                     # padding K/V slots computed so far

    @property
    def batch(self) -> int:
        return len(self.sequences)

    @property
    def n_columns(self) -> int:
        return int(self.key_mask.shape[1])

    def cached(self, b: int) -> int:
        """Real tokens of sequence b in the cache."""
        return int(self.key_mask[b].sum())


@dataclass(frozen=True)
class BatchRun:
    model_name: str
    prompts: list[list[str]]
    events: list[BatchEvent]
    rule: dict
    pad: list[int]                      # padding columns in front of each prompt

    @property
    def tolerance(self) -> float:
        """How close a sequence must come to its solo run to count as the same: float64 models
        agree to rounding (1e-9); float32 ones differ by ~1e-6, since a batched matrix product sums
        in another order than a one-row one."""
        return FLOAT64_TOLERANCE if self.events[0].logits.dtype == torch.float64 else FLOAT32_TOLERANCE


def run_batch(model: BatchModel, prompts: Sequence[Sequence[str]], new_tokens: int,
              rule: SelectionRule | None = None, seed: int = 0) -> BatchRun:
    """Decode every prompt together: one prefill pass for all, then one decode pass per step.

    Same schedule as ``run_generation`` (prefill, choose, decode, choose, …), so event i of the
    batched run corresponds to event i of each solo run. Every sequence draws from its own
    generator seeded with ``seed``: a sampled batch gives each sequence its solo tokens.
    """
    prompts = [list(p) for p in prompts]
    check_int("Number of prompts", len(prompts), 1, MAX_BATCH_PROMPTS)
    for i, p in enumerate(prompts):
        if not p:
            raise LimitError(f"Prompt {i + 1} is empty: give at least one token.")
        check_int(f"Prompt {i + 1} length", len(p), 1, model.limits.max_prompt_tokens)
    new_tokens = check_int("New tokens", new_tokens, 1, model.limits.max_new_tokens)
    ids = [encode(model, p) for p in prompts]
    rule = rule or Greedy()
    gens = [torch.Generator().manual_seed(int(seed)) for _ in prompts]
    n_seq, width = len(prompts), max(len(p) for p in prompts)
    pad = [width - len(p) for p in prompts]

    cache = DynamicCache(model.n_layers)
    slots: list[list[str | None]] = [[None] * pad[b] + prompts[b] for b in range(n_seq)]
    mask = torch.tensor([[c is not None for c in row] for row in slots])        # [B, T]
    sequences = [list(p) for p in prompts]
    events: list[BatchEvent] = []
    passes = kv_real = kv_pad = 0

    def snapshot_slots() -> list[list[str | None]]:
        return [list(row) for row in slots]

    def do_pass(phase: str, tok_ids: torch.Tensor, pos: torch.Tensor, key_mask: torch.Tensor,
                tokens: list[list[str]], positions: list[list[int]]) -> None:
        nonlocal passes, kv_real, kv_pad
        rec = model.forward_batch(tok_ids, pos, key_mask, cache)
        passes += 1
        real = int((pos >= 0).sum())
        kv_real += real
        kv_pad += pos.numel() - real
        last = torch.stack([rec.logits[b, -1] for b in range(n_seq)])          # [B, V]
        events.append(BatchEvent(len(events), phase, tokens, positions, [list(s) for s in sequences],
                                 [None] * n_seq, snapshot_slots(), key_mask.clone(),
                                 CacheSnapshot(*cache.snapshot(), rows=(), held_bytes=cache.nbytes()),
                                 rec, None, last, passes, kv_real, kv_pad))

    def do_choose() -> None:
        last = events[-1]
        choices = [rule.choose(last.logits[b], gens[b]) for b in range(n_seq)]
        chosen = [model.logit_tokens[c.index] for c in choices]
        for b, tok in enumerate(chosen):
            sequences[b].append(tok)
        events.append(BatchEvent(len(events), "choose", [[c] for c in chosen],
                                 [[len(s) - 1] for s in sequences], [list(s) for s in sequences],
                                 list(chosen), last.slots, last.key_mask, last.cache, None, choices,
                                 last.logits, passes, kv_real, kv_pad))

    # prefill: [B, width] with left padding; padding gets position -1 and a masked key
    tok = torch.tensor([[0] * pad[b] + ids[b] for b in range(n_seq)])
    pos = torch.tensor([[-1] * pad[b] + list(range(len(ids[b]))) for b in range(n_seq)])
    do_pass("prefill", tok, pos, mask, [list(p) for p in prompts],
            [list(range(len(p))) for p in prompts])
    do_choose()
    for _ in range(new_tokens - 1):
        chosen = [s[-1] for s in sequences]
        for b in range(n_seq):
            slots[b].append(chosen[b])
        mask = torch.cat([mask, torch.ones(n_seq, 1, dtype=torch.bool)], dim=1)
        tok = torch.tensor([[model.vocab.index(c)] for c in chosen])               # [B, 1]
        pos = torch.tensor([[len(s) - 1] for s in sequences])                      # [B, 1]
        do_pass("decode", tok, pos, mask, [[c] for c in chosen], pos.tolist())
        do_choose()
    return BatchRun(model.name, prompts, events, rule.describe(), pad)


# --- checking against solo runs ------------------------------------------------------------------

@dataclass(frozen=True)
class SoloComparison:
    """Sequence b of a batched run against the same prompt run alone."""

    same_tokens: bool
    logits_max_abs_diff: float      # over every pass, the real rows of sequence b
    attention_max_abs_diff: float   # over every pass, real rows and real key columns

    @property
    def max_abs_diff(self) -> float:
        return max(self.logits_max_abs_diff, self.attention_max_abs_diff)


def sequence_attention(ev: BatchEvent, b: int) -> torch.Tensor:
    """The attention of sequence b in pass ``ev`` with padding rows and columns removed:
    [L, H, n_real_new, n_real_keys], the shape a solo run records."""
    rec = ev.record
    assert rec is not None
    rows = rec.positions[b] >= 0
    cols = ev.key_mask[b]
    return rec.attention[b][:, :, rows][:, :, :, cols]


def compare_with_solo(run: BatchRun, solo: Sequence[Run]) -> list[SoloComparison]:
    """Compare every sequence's passes and chosen tokens with its solo run (same rule and seed)."""
    out = []
    for b, alone in enumerate(solo):
        d_logits = d_att = 0.0
        for ev, se in zip(run.events, alone.events):
            if ev.record is None:
                continue
            rows = ev.record.positions[b] >= 0
            d_logits = max(d_logits, float((ev.record.logits[b][rows] - se.record.logits).abs().max()))
            d_att = max(d_att, float((sequence_attention(ev, b) - se.record.attention).abs().max()))
        same = run.events[-1].sequences[b] == alone.events[-1].sequence
        out.append(SoloComparison(same, d_logits, d_att))
    return out


def solo_runs(model, run: BatchRun, new_tokens: int, rule: SelectionRule | None = None,
              seed: int = 0) -> list[Run]:
    """Each prompt of ``run`` run alone through the ordinary stepper."""
    return [run_generation(model, p, new_tokens, rule=rule, seed=seed) for p in run.prompts]


# --- display data -------------------------------------------------------------------------------

def _fmt(t: torch.Tensor, dims: int | None = None) -> str:
    """``(a, b, …)``; with ``dims``, only the first ``dims`` components and an ellipsis."""
    vals = t.tolist()
    more = dims is not None and len(vals) > dims
    return "(" + ", ".join(f"{x:.4g}" for x in vals[:dims]) + (", …" if more else "") + ")"


def top_logit_columns(logits: torch.Tensor, k: int, always: Sequence[int | None] = ()) -> list[list[int]]:
    """For each sequence (``logits`` [B, V]) the vocabulary indices worth a bar: its top ``k``
    logits, highest first, plus its entry of ``always`` (the chosen token) if that is not among them."""
    out = []
    for b, top in enumerate(torch.topk(logits, min(k, logits.shape[-1]), dim=-1).indices.tolist()):
        extra = always[b] if b < len(always) else None
        out.append(top + ([extra] if extra is not None and extra not in top else []))
    return out


TABLE_NAMES = {"column": "column", "token": "token", "mask": "mask", "k": "k"}


def padded_cache_table(ev: BatchEvent, layer: int = 0, head: int = 0,
                       labels: Sequence[str] | None = None, pad_label: str = PAD,
                       names: dict[str, str] | None = None, dims: int | None = None) -> pd.DataFrame:
    """One row per cache column: for every sequence its token, mask bit and K of one head (of
    ``layer``; only its first ``dims`` components if given).

    Padding columns still hold a K/V (computed from the padding id) but their mask bit is 0, so no
    query ever reads them.
    """
    k = ev.cache.keys[layer]                                   # [B, H, T, d]
    labels = list(labels or [f"seq {b + 1}" for b in range(ev.batch)])
    n = {**TABLE_NAMES, **(names or {})}
    rows = []
    for col in range(ev.n_columns):
        row: dict[str, object] = {n["column"]: col}
        for b in range(ev.batch):
            tok = ev.slots[b][col]
            row[f"{labels[b]} {n['token']}"] = pad_label if tok is None else tok
            row[f"{labels[b]} {n['mask']}"] = int(ev.key_mask[b, col])
            row[f"{labels[b]} {n['k']}"] = "" if k is None else _fmt(k[b, head, col], dims)
        rows.append(row)
    return pd.DataFrame(rows)
