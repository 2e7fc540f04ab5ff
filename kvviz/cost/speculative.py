"""Speculative decoding's expectations (Leviathan et al. 2023; docs/design.md §5): tokens per target
pass and the wall-time improvement from the acceptance rate α, the proposals per round γ and the
cost ratio c of a draft pass to a target pass.
"""
from __future__ import annotations

from kvviz.limits import MAX_SPECULATIVE_FORMULA_GAMMA, LimitError, check_float, check_int


def _inputs(alpha: object, gamma: object) -> tuple[float, int]:
    return (check_float("Acceptance rate α", alpha, 0.0, 1.0),
            check_int("γ (draft tokens per round)", gamma, 0, MAX_SPECULATIVE_FORMULA_GAMMA))


def speculative_tokens_per_pass(alpha: object, gamma: object) -> float:
    """Expected tokens one target pass yields when each of γ proposals is accepted with probability α
    (independently) until the first rejection, which the target replaces, or all γ and the target's
    own next token (Leviathan et al. 2023, Eq. 1):

        1 + α + α² + … + α^γ = (1 − α^(γ+1)) / (1 − α),   γ + 1 at α = 1, 1 at α = 0.
    """
    a, g = _inputs(alpha, gamma)
    return float(g + 1) if a == 1.0 else (1.0 - a ** (g + 1)) / (1.0 - a)


def speculative_speedup(alpha: object, gamma: object, c: object, verify_cost: object = 1.0) -> float:
    """Expected wall-time improvement of speculative over plain decoding (Leviathan et al. 2023,
    Theorem 3.8): tokens per target pass over the time of a round in target decode passes,

        (1 − α^(γ+1)) / ((1 − α)(γ·c + v)),

    c = time of a draft pass / time of a target decode pass, v = ``verify_cost`` = time of the target's
    pass over γ + 1 positions / time of a one-position pass. The paper takes v = 1 (an accelerator reads
    the weights once, however many positions; the extra arithmetic is free); on a CPU v > 1 and grows
    with γ, which is why the measured speed-up falls short of the v = 1 formula. The round's bookkeeping
    (draws, the acceptance test) is left out.
    """
    a, g = _inputs(alpha, gamma)
    c = check_float("Cost ratio c", c, 0.0, 1_000.0)
    v = check_float("Verification cost v", verify_cost, 0.0, 1_000.0)
    if g * c + v <= 0:
        raise LimitError("A round must cost something: γ·c + v is 0.")
    return speculative_tokens_per_pass(a, g) / (g * c + v)


def best_gamma(alpha: object, c: object, max_gamma: int = 16) -> int:
    """The γ in 1..max_gamma with the largest expected improvement (v = 1). Speculation pays at all
    (some improvement > 1) exactly when α > c (Leviathan et al. 2023, Corollary 3.9)."""
    g_max = check_int("Largest γ", max_gamma, 1, MAX_SPECULATIVE_FORMULA_GAMMA)
    return max(range(1, g_max + 1), key=lambda g: (speculative_speedup(alpha, g, c), -g))
