"""FLOPs with and without the cache (docs/design.md §4).

FLOPs count a multiply-add as 2 and include only the matrix products: the linear layers (Q/K/V and
output projections, the MLP, the readout to the vocabulary) and attention (Q·Kᵀ and weights·V,
4 · head size FLOPs per query head per visible (query, key) pair). Norms, softmax, activations and
biases are left out: they are a few percent at most.

Formulas come in closed form (``generation_flops``) and as a count over the passes a run actually
made (``count_flops``), so a page can show the two agreeing.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kvviz.cost.shapes import ModelConfig
from kvviz.limits import MAX_COST_GEN_TOKENS, check_int


@dataclass(frozen=True)
class Flops:
    """FLOPs split as in the table of docs/design.md §4: projections + MLP (incl. readout) and attention."""

    linear: int
    attention: int

    @property
    def total(self) -> int:
        return self.linear + self.attention

    def __add__(self, other: Flops) -> Flops:
        return Flops(self.linear + other.linear, self.attention + other.attention)

    def scaled(self, k: int) -> Flops:
        return Flops(self.linear * k, self.attention * k)


def block_flops_per_token(cfg: ModelConfig) -> int:
    """The layers' matrix products for one position, regardless of the context: 2 · (weights used)."""
    d, h, kv, hd = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    per_layer = 0
    if cfg.qkv_proj:
        per_layer += 2 * d * (h + 2 * kv) * hd
    if cfg.out_proj:
        per_layer += 2 * h * hd * d
    per_layer += 2 * {"gelu": 2, "gated": 3, "none": 0}[cfg.mlp] * d * cfg.d_ff
    return cfg.n_layers * per_layer


def readout_flops(cfg: ModelConfig) -> int:
    """The readout to the vocabulary of one position: 2 · d · V."""
    return 2 * cfg.d_model * cfg.vocab


def linear_flops_per_token(cfg: ModelConfig) -> int:
    """Everything but attention for one position, its readout included."""
    return block_flops_per_token(cfg) + readout_flops(cfg)


def attention_flops_per_pair(cfg: ModelConfig) -> int:
    """One (query, visible key) pair in every layer and query head: Q·K (2·hd) and weight·V (2·hd;
    2 · V width when V is narrower)."""
    v_dim = cfg.head_dim if cfg.v_head_dim is None else cfg.v_head_dim
    return 2 * cfg.n_layers * cfg.n_heads * (cfg.head_dim + v_dim)


def _tri(m: int) -> int:       # 1 + 2 + … + m: pairs a causal pass over positions 0..m-1 reads
    return m * (m + 1) // 2


def _tet(m: int) -> int:       # _tri(1) + … + _tri(m)
    return m * (m + 1) * (m + 2) // 6


def pass_flops(cfg: ModelConfig, n_new: int, start: int, last_only: bool = False) -> Flops:
    """One pass over positions start..start+n_new-1 with positions 0..start-1 already cached.

    ``last_only``: logits only for the last position (the generation loops need no more; the
    stepper computes them for every new position)."""
    pairs = _tri(start + n_new) - _tri(start)     # query at position p reads p + 1 keys
    readouts = 1 if last_only else n_new
    return Flops(n_new * block_flops_per_token(cfg) + readouts * readout_flops(cfg),
                 pairs * attention_flops_per_pair(cfg))


def loop_flops(cfg: ModelConfig, prompt_len: int, new_tokens: int, cached: bool) -> Flops:
    """What kvviz.decoding.loops computes to generate ``new_tokens`` after a ``prompt_len`` prompt, logits of
    the last position only. With the cache: a prefill, then one position per further token.
    Without: every step reruns the text, cropped to the model's learned positions."""
    p = check_int("Prompt length", prompt_len, 1, MAX_COST_GEN_TOKENS)
    n = check_int("New tokens", new_tokens, 1, MAX_COST_GEN_TOKENS)
    if cached:
        total = pass_flops(cfg, p, 0, last_only=True)
        for t in range(1, n):
            total = total + pass_flops(cfg, 1, p + t - 1, last_only=True)
        return total
    window = cfg.learned_positions or cfg.max_context or p + n
    total = Flops(0, 0)
    for t in range(n):
        total = total + pass_flops(cfg, min(p + t, window), 0, last_only=True)
    return total


def step_flops(cfg: ModelConfig, context: int, cached: bool) -> Flops:
    """The pass that processes the token at position ``context - 1``: one new position with the
    cache, the whole prefix of ``context`` positions again without it."""
    context = check_int("Context", context, 1, 2 * MAX_COST_GEN_TOKENS)   # prompt + generated
    return pass_flops(cfg, 1, context - 1) if cached else pass_flops(cfg, context, 0)


def generation_flops(cfg: ModelConfig, prompt_len: int, new_tokens: int, cached: bool) -> Flops:
    """Closed form for the stepper's schedule: a prefill of the prompt, then one pass per further
    token (``new_tokens`` passes in all; the last chosen token is never processed).

    With the cache the passes process prompt_len + new_tokens - 1 positions once each; without
    it, pass k reruns the whole prefix of prompt_len + k positions:
      linear    P+N-1 tokens            vs  N·P + N(N-1)/2 tokens         (O(N d²) vs O(N² d²))
      attention tri(P+N-1) pairs        vs  tet(P+N-1) - tet(P-1) pairs   (O(N² d) vs O(N³ d))
    """
    p = check_int("Prompt length", prompt_len, 1, MAX_COST_GEN_TOKENS)
    n = check_int("New tokens", new_tokens, 1, MAX_COST_GEN_TOKENS)
    lin, att = linear_flops_per_token(cfg), attention_flops_per_pair(cfg)
    if cached:
        return Flops((p + n - 1) * lin, _tri(p + n - 1) * att)
    return Flops((n * p + n * (n - 1) // 2) * lin, (_tet(p + n - 1) - _tet(p - 1)) * att)


def flops_curve(cfg: ModelConfig, prompt_len: int, ns: Iterable[int]) -> dict[str, list[int]]:
    """Total FLOPs against N, with and without the cache, split (for a log-scale plot)."""
    out: dict[str, list[int]] = {"n": [], "cached_linear": [], "cached_attention": [],
                                 "uncached_linear": [], "uncached_attention": []}
    for n in ns:
        c, u = generation_flops(cfg, prompt_len, n, True), generation_flops(cfg, prompt_len, n, False)
        out["n"].append(int(n))
        out["cached_linear"].append(c.linear)
        out["cached_attention"].append(c.attention)
        out["uncached_linear"].append(u.linear)
        out["uncached_attention"].append(u.attention)
    return out


@dataclass(frozen=True)
class FlopCount:
    """FLOPs summed over a run's passes: what the stepper ran with the cache, and what its
    recompute checks ran (the whole prefix again, as a run without a cache does)."""

    cached: Flops
    uncached: Flops
    passes: int
    per_pass: list[tuple[str, int, int, Flops]]   # (phase, new positions, visible pairs, FLOPs)


def _visible_pairs(positions: Sequence[int], n_keys: int) -> int:
    """Count (query, key) pairs the causal mask leaves open: keys 0..min(p, T-1) for query p."""
    return sum(min(p + 1, n_keys) for p in positions)


def count_flops(events: Sequence, cfg: ModelConfig) -> FlopCount:
    """Walk a run's pass events and count their FLOPs from the records' own shapes.

    Each pass record holds q ``[L, H, N, hd]`` and attention ``[L, H, N, T]``: the layers, heads,
    head size, new positions and visible keys are read from the tensors (and checked against
    ``cfg``, which supplies the widths the records don't show: d_model, d_ff, vocabulary).
    """
    lin, att = linear_flops_per_token(cfg), attention_flops_per_pair(cfg)
    cached = uncached = Flops(0, 0)
    per_pass = []
    for ev in events:
        rec = getattr(ev, "record", None)
        if rec is None:
            continue
        n_layers, n_heads, n_new, hd = rec.q.shape
        n_keys = rec.attention.shape[-1]
        if (n_layers, n_heads, hd) != (cfg.n_layers, cfg.n_heads, cfg.head_dim):
            raise ValueError(f"pass record shape {tuple(rec.q.shape)} does not match {cfg.name} "
                             f"({cfg.n_layers} layers, {cfg.n_heads} heads, head size {cfg.head_dim})")
        pairs = _visible_pairs(rec.positions, n_keys)
        f = Flops(n_new * lin, pairs * att)
        cached = cached + f
        prefix = rec.positions[-1] + 1                     # the recompute check reran 0..last
        uncached = uncached + Flops(prefix * lin, _visible_pairs(range(prefix), prefix) * att)
        per_pass.append((ev.phase, n_new, pairs, f))
    return FlopCount(cached, uncached, len(per_pass), per_pass)
