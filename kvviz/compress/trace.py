"""One text through a smaller cache beside the full cache, step by step (the CLI's ``steps``, the
page's eviction view): at every scored position the KL(full ‖ variant), top-1 agreement, the
cache's bytes and, per layer and K/V head, the positions it still holds — for an evicting cache
also the scores that decided and the positions it dropped at that step.

``trace_variant(model, variant, ids, prefill)``: the first ``prefill`` ids in one pass, then one id
per decode step (teacher forcing on ``ids``), both caches through the same loop as the evaluation
(kvviz.compress._protocol.next_logits).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.compress._protocol import next_logits
from kvviz.compress.evaluation import kl_divergence
from kvviz.compress.variants import Variant, variant_cache, variant_model
from kvviz.limits import LimitError


@dataclass(frozen=True)
class TraceStep:
    """After the pass that processed ``position`` (the last of the prefill, or one decode step)."""

    position: int
    kl: float
    agree: bool
    full_top1: int
    variant_top1: int
    nbytes: int
    full_nbytes: int
    kept: tuple[tuple[tuple[int, ...], ...], ...]           # [layer][K/V head] positions held
    evicted: tuple[tuple[tuple[int, ...], ...], ...]        # [layer][K/V head] dropped by this pass
    scores: tuple[tuple[tuple[float, ...], ...], ...] | None    # [layer][head] the scores of kept + evicted rows
    scored: tuple[tuple[tuple[int, ...], ...], ...] | None      # [layer][head] their positions
    kept_scores: tuple[tuple[tuple[float, ...], ...], ...] | None = None   # [layer][head] aligned with kept
    gone: tuple[tuple[tuple[tuple[int, float], ...], ...], ...] = ()      # [layer][head] (position, score) so far
    # an evicting cache: the pass's last query, what it read before the eviction (the attention that remains)
    attention: torch.Tensor | None = None     # [layer, query head, rows] float32 weights (0 past a layer's rows)
    read: tuple[tuple[tuple[int, ...], ...], ...] | None = None   # [layer][K/V head] the positions of those rows

    def attention_over(self, layer: int, head: int, group: int) -> dict[int, float]:
        """Query head ``head``'s weights in ``layer`` by position (its K/V head is ``head // group``):
        only the rows it read, so an evicted position is absent."""
        if self.attention is None or self.read is None:
            return {}
        rows = self.read[layer][head // group]
        return {p: float(w) for p, w in zip(rows, self.attention[layer, head, :len(rows)].tolist())}

    def as_dict(self) -> dict:
        return {"position": self.position, "kl": round(self.kl, 8), "top1_agreement": self.agree,
                "bytes": self.nbytes, "full_bytes": self.full_nbytes,
                "kept": [[list(h) for h in layer] for layer in self.kept],
                "evicted": [[list(h) for h in layer] for layer in self.evicted]}


def _kept(cache, n_kv_heads: int) -> list[list[list[int]]]:
    out = []
    for i, layer in enumerate(cache.layers):
        heads = getattr(layer, "head_positions", None)
        out.append(heads() if heads is not None else [cache.held_positions(i)] * n_kv_heads)
    return out


@torch.inference_mode()
def trace_variant(model, variant: Variant, ids: Sequence[int], prefill: int) -> list[TraceStep]:
    ids = [int(i) for i in ids]
    if not 1 <= prefill <= len(ids):
        raise LimitError(f"The prefill must be 1..{len(ids)} tokens, got {prefill}.")
    net = variant_model(model, variant)
    full, cache = variant_cache(model, Variant.of("full")), variant_cache(model, variant)   # full: the model's own
    n_kv = net.cost_config.n_kv_heads
    steps = []
    before: list = [[] for _ in range(model.n_layers)]
    gone: list = [[{} for _ in range(n_kv)] for _ in range(model.n_layers)]     # position → its deciding score
    seen: dict = {}

    def look(record) -> None:               # before the eviction: the rows this pass read, and its weights
        seen["attention"] = record.attention[:, :, -1, :].detach().float().clone()       # [L, H, T]
        seen["read"] = tuple(tuple(tuple(h) for h in layer.positions.tolist()) for layer in cache.layers)

    for start, chunk in [(0, ids[:prefill])] + [(i, [t]) for i, t in enumerate(ids[prefill:], start=prefill)]:
        seen.clear()
        p, q = next_logits(model, chunk, full, start), next_logits(net, chunk, cache, start, on_record=look)
        kept = _kept(cache, n_kv)
        new = set(range(start, start + len(chunk)))          # held before or computed now, and not held after
        evicted = [[sorted((set(b) | new) - set(a)) for a, b in zip(now, was or [[]] * len(now))]
                   for now, was in zip(kept, before)]
        scores = scored = None
        last = [getattr(layer, "last_positions", None) for layer in cache.layers]
        if any(x is not None for x in last):
            scored = tuple(tuple(tuple(h) for h in (x.tolist() if x is not None else [])) for x in last)
            scores = tuple(tuple(tuple(round(v, 6) for v in h) for h in
                                 (layer.last_scores.tolist() if layer.last_scores is not None else []))
                           for layer in cache.layers)
        kept_scores = None
        if scores is not None:
            kept_scores = tuple(tuple(tuple(round(v, 6) for v in h) for h in layer.scores.tolist())
                                if getattr(layer, "scores", None) is not None else () for layer in cache.layers)
            for li, layer in enumerate(cache.layers):
                if layer.last_positions is None:
                    continue
                decided = {(h, pos): sc for h, (ps, ss) in enumerate(zip(layer.last_positions.tolist(),
                                                                         layer.last_scores.tolist()))
                           for pos, sc in zip(ps, ss)}
                for h, dropped in enumerate(evicted[li]):
                    for pos in dropped:
                        gone[li][h].setdefault(pos, round(decided.get((h, pos), float("nan")), 6))
        steps.append(TraceStep(start + len(chunk) - 1, float(kl_divergence(p, q)), bool(p.argmax() == q.argmax()),
                               int(p.argmax()), int(q.argmax()), cache.nbytes(), full.nbytes(),
                               tuple(tuple(tuple(h) for h in layer) for layer in kept),
                               tuple(tuple(tuple(h) for h in layer) for layer in evicted), scores, scored,
                               kept_scores, tuple(tuple(tuple(sorted(g.items())) for g in layer) for layer in gone),
                               seen.get("attention"), seen.get("read")))
        before = kept
    return steps
