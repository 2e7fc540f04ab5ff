"""One prompt through the stepper twice (``compare_steps``): the full cache greedily and a smaller
cache's variant teacher-forced on the same tokens (``Forced``), event by event, with KL and top-1
agreement at every choice; ``key_positions``, ``sink_mass`` and ``row_errors`` read the records a
page draws.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.compress.evaluation import kl_divergence
from kvviz.compress.variants import Variant, variant_cache, variant_model
from kvviz.decoding.sampling import Choice
from kvviz.decoding.stepper import Event, Run, run_generation
from kvviz.limits import LimitError
from kvviz.models.gpt import GPTModel, load_tiny_gpt


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


def compare_steps(variant: Variant, prompt: Sequence[str], new_tokens: int, model=None) -> StepComparison:
    """Step ``prompt`` (tokens of ``model``, any kvviz model: the shipped tiny GPT by default) with
    the full cache and with ``variant`` (its model and its cache, kvviz.compress.variants); the
    model's stepper caps apply (``model.limits``)."""
    full_model = model or GPTModel(load_tiny_gpt())
    full = run_generation(full_model, prompt, new_tokens)
    model = variant_model(full_model, variant)
    chosen = [model.vocab.index(e.chosen) for e in full.events if e.phase == "choose"]  # type: ignore[arg-type]
    compressed = run_generation(model, prompt, new_tokens, rule=Forced(chosen),
                                cache=variant_cache(full_model, variant))
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
