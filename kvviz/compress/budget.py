"""Every smaller cache at equal bytes: each kind set to hold at most a fraction of the full cache's
bytes on a text (25 % and 10 % by default), measured on the same held-out text, and a verdict from
the measured numbers.

``equal_bytes_variants(model, positions, fraction)``: per kind the setting whose cache holds at most
``fraction`` of the full cache after ``positions`` positions — the eviction policies and the window
keep ``fraction · positions`` rows per layer and K/V head (SnapKV and PyramidKV with ``hold``: every
``window`` decode steps they vote again, so they end between budget and budget + window rows: their
budget is set half a window lower), the latent cache a rank of ``fraction`` of K and V's elements,
and the fixed-size ones (FP8, int4, int2, one pooled K/V head) only where their own bytes fit (from
kvviz.cost's formulas; within ``FIT``). Kinds that cannot reach a fraction are left out of it (``unreachable``
names them). The bytes each run really held are measured (``nbytes()``) and reported beside.

``verdict(comparison)``: per fraction, the variant with the lowest mean KL among those whose
measured bytes fit (within ``FIT``), whether it keeps the greedy answer, and which variants are safe (top-1
agreement at least ``SAFE_TOP1`` and the same greedy answer); none safe is said too.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvviz import cost
from kvviz.compress.evaluation import DEFAULT_PREFILL, DEFAULT_TOKENS, Evaluation, evaluate, held_out_text
from kvviz.compress.latent import full_rank
from kvviz.compress.variants import Variant
from kvviz.limits import LimitError, check_int

FRACTIONS = (0.25, 0.10)
FIT = 1.02                  # "at most the fraction": within 2 % over it (FP8's and int codes' few scales)
SAFE_TOP1 = 0.95            # a variant is "safe" at this top-1 agreement or more, with an unchanged answer
ANSWER_TOKENS = 16          # greedy tokens after the text whose change is checked
OBS_WINDOW = 8
SINKS = 4


def _dtype_name(model) -> str:
    name = str(getattr(model, "dtype", "torch.float32"))
    return {"torch.bfloat16": "bf16", "torch.float16": "fp16"}.get(name, "fp32")


def fixed_fraction(model, variant: Variant, positions: int) -> float:
    """The bytes of a fixed-size kind's cache over the full cache's after ``positions`` positions
    (kvviz.cost's formulas)."""
    cfg, dtype = model.cost_config, _dtype_name(model)
    full = cost.cache_bytes(cfg, positions, dtype=dtype)
    if variant.kind == "fp8":
        return cost.fp8_cache_bytes(cfg, positions, variant.scale) / full
    if variant.kind == "quant":
        return cost.quantized_cache_bytes(cfg, positions, variant.bits, variant.group_size, variant.key_axis,
                                          variant.residual, dtype=dtype) / full
    if variant.kind == "gqa":
        return variant.kv_heads / cfg.n_kv_heads
    raise ValueError(f"{variant.kind} has no fixed size")


def equal_bytes_variants(model, positions: int, fraction: float) -> tuple[list[Variant], list[str]]:
    """(the variants that hold at most ``fraction`` of the full cache, the kinds that cannot)."""
    rows = int(fraction * positions)
    out, unreachable = [], []
    if rows > SINKS:
        out.append(Variant.of("window", window=rows - SINKS, sinks=SINKS))
    else:
        unreachable.append("window")
    if rows >= 2:
        out.append(Variant.of("h2o", budget=rows, recent=rows // 2))
    else:
        unreachable.append("h2o")
    held = rows - OBS_WINDOW // 2
    if held >= OBS_WINDOW:
        out += [Variant.of(k, budget=held, obs_window=OBS_WINDOW, hold=True) for k in ("snapkv", "pyramid")]
    else:
        unreachable += ["snapkv", "pyramid"]
    cfg = model.cost_config
    rank = int(fraction * 2 * cfg.n_kv_heads * cfg.head_dim)
    if 1 <= rank <= full_rank(model):
        out.append(Variant.of("latent", rank=rank))
    else:
        unreachable.append("latent")
    fixed = [Variant.of("fp8", scale="tensor")]
    fixed += [Variant.of("quant", bits=b, group_size=32, key_axis="token", residual=0) for b in (4, 2)]
    fixed += [Variant.of("gqa", kv_heads=1)]
    for v in fixed:
        (out.append(v) if fixed_fraction(model, v, positions) <= fraction * FIT else unreachable.append(v.label()))
    return out, unreachable


@dataclass(frozen=True)
class BudgetComparison:
    """One evaluation of every variant of every fraction on one text, with what each fraction holds."""

    evaluation: Evaluation
    fractions: tuple[float, ...]
    variants: tuple[tuple[Variant, ...], ...]       # [fraction]
    unreachable: tuple[tuple[str, ...], ...]        # [fraction]

    @property
    def full(self):
        return self.evaluation.result(Variant.of("full"))

    def rows(self) -> list[dict]:
        """One row per fraction and variant: the CLI's and the CSV's fields."""
        full = self.full.bytes_per_token
        out = []
        for f, vs in zip(self.fractions, self.variants):
            for v in vs:
                r = self.evaluation.result(v)
                out.append({"fraction": f, "variant": v.label(), "kind": v.kind, "settings": v.settings(),
                            "bytes_per_token": round(r.bytes_per_token, 3),
                            "bytes_fraction": round(r.bytes_per_token / full, 4), "kl_mean": round(r.kl_mean, 8),
                            "top1_agreement": round(r.top1_agreement, 6), "answer_changed": r.answer_changed,
                            "first_difference": r.first_difference})
        return out


def compare_at_budgets(model, tokens: int = DEFAULT_TOKENS, prefill: int = DEFAULT_PREFILL,
                       fractions: Sequence[float] = FRACTIONS, answer: int = ANSWER_TOKENS,
                       progress=None) -> BudgetComparison:
    """Every variant at each fraction of the full cache's bytes on the held-out text's first ``tokens``
    tokens (``prefill`` of them in one pass), with ``answer`` greedy tokens after it."""
    answer = check_int("Answer tokens", answer, 1, 64)
    if not fractions or any(not 0 < f < 1 for f in fractions):
        raise LimitError("Fractions of the full cache must lie between 0 and 1.")
    positions = tokens + answer - 1                     # what each run's cache has processed at its end
    per, missing, everything = [], [], [Variant.of("full")]
    for f in fractions:
        vs, un = equal_bytes_variants(model, positions, f)
        short = [v for v in vs if v.kind == "window" and v.window + v.sinks < prefill]    # must hold the prefill
        vs = [v for v in vs if v not in short]
        un = un + ["window"] * bool(short)
        per.append(tuple(vs))
        missing.append(tuple(un))
        everything += [v for v in vs if v not in everything]
    text = held_out_text(model, tokens)              # evaluate_text's input, under the evaluation's own cap
    ev = evaluate(model, everything, [text], len(text.ids) - prefill + 1, prefill, progress=progress, unit="step",
                  answer=answer)
    return BudgetComparison(ev, tuple(fractions), tuple(per), tuple(missing))


def verdict(cmp: BudgetComparison) -> list[dict]:
    """Per fraction: the winner (lowest mean KL among the variants whose measured bytes fit), its
    numbers, the safe variants and whether none is safe. Derived from the numbers only."""
    full = cmp.full.bytes_per_token
    out = []
    for f, vs in zip(cmp.fractions, cmp.variants):
        results = [cmp.evaluation.result(v) for v in vs]
        fits = [r for r in results if r.bytes_per_token <= f * full * FIT]
        if not fits:
            out.append({"fraction": f, "winner": None, "safe": [], "none_safe": True})
            continue
        best = min(fits, key=lambda r: (r.kl_mean, -r.top1_agreement))
        safe = [r.variant.label() for r in fits if r.top1_agreement >= SAFE_TOP1 and r.answer_changed is False]
        out.append({"fraction": f, "winner": best.variant.label(), "winner_kind": best.variant.kind,
                    "kl_mean": best.kl_mean, "top1_agreement": best.top1_agreement,
                    "answer_changed": best.answer_changed, "safe": safe, "none_safe": not safe})
    return out


def verdict_text(model_name: str, verdicts: Sequence[dict]) -> str:
    """The verdict in plain English (the page words it in its language from the same dicts)."""
    lines = []
    for v in verdicts:
        pct = f"{v['fraction']:.0%}"
        if v["winner"] is None:
            lines.append(f"{model_name} at {pct} of the full cache: no variant fits.")
            continue
        answer = "keeps" if v["answer_changed"] is False else "changes"
        safe = ("none is safe" if v["none_safe"] else "safe: " + ", ".join(v["safe"]))
        lines.append(f"{model_name} at {pct} of the full cache: {v['winner']} wins (KL {v['kl_mean']:.3g}, "
                     f"top-1 {v['top1_agreement']:.1%}, {answer} the greedy answer); {safe}.")
    return "\n".join(lines)
