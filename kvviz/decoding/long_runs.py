"""What only a long generation shows (docs/design.md §3): greedy's loops, and the uncached loop's crop.

``repeated_span`` finds the span a text writes over and over (greedy on the tiny GPT: "… so windy !
Today the weather is so windy …"). ``crop_run`` runs the tiny GPT past its ``block_size``: the
uncached ``generate`` keeps going and its model sees only the last ``block_size`` tokens
(``idx[:, -block_size:]``: learned positions cannot see further), while ``generate_cached`` stops
where its cache runs out of positions, with the reason (kvviz.decoding.loops).
"""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from kvviz.decoding.loops import Generation, generate, generate_cached, max_cached_new_tokens
from kvviz.decoding.sampling import Greedy, Sampler, SelectionRule
from kvviz.limits import LimitError, check_int
from kvviz.models.base import CausalLM
from kvviz.models.gpt import GPT, GPTModel

CROP_PAST = 8       # crop_run's default: tokens generated beyond what the cache can hold
LOOP_TOKENS = 48    # a greedy run long enough for the tiny GPT to loop (the Tiny GPT page's)
SMOLLM2_LOOP_PROMPT = "i love you because"   # found by trying: SmolLM2's greedy decode loops after it


@dataclass(frozen=True)
class Repeat:
    """A span a text writes again: its tokens and where each occurrence starts (no overlaps)."""

    span: tuple[Hashable, ...]
    starts: tuple[int, ...]        # 0-based into the text examined, ascending

    @property
    def count(self) -> int:
        return len(self.starts)

    @property
    def covered(self) -> int:
        """Tokens of the text inside an occurrence."""
        return len(self.span) * self.count

    def positions(self) -> set[int]:
        return {s + i for s in self.starts for i in range(len(self.span))}


def repeated_span(tokens: Sequence[Hashable], min_len: int = 3, min_count: int = 3) -> Repeat | None:
    """The span ``tokens`` repeats most: of the spans of at least ``min_len`` tokens written at least
    ``min_count`` times without overlap, the one whose occurrences cover the most tokens (ties: the
    longer, then the earlier). None when no span repeats that often: a text that does not loop.

    Occurrences are counted greedily left to right, the way a reader finds them. O(n²) spans of a
    text of n tokens: fine for the few hundred tokens a page generates.
    """
    n = len(tokens)
    best: Repeat | None = None
    for length in range(min_len, n // min_count + 1):
        found: dict[tuple[Hashable, ...], list[int]] = {}
        for i in range(n - length + 1):
            starts = found.setdefault(tuple(tokens[i:i + length]), [])
            if not starts or i >= starts[-1] + length:
                starts.append(i)
        for span, starts in found.items():
            if len(starts) < min_count:
                continue
            cand = Repeat(span, tuple(starts))
            if best is None or (cand.covered, len(span), -starts[0]) > (best.covered, len(best.span), -best.starts[0]):
                best = cand
    return best


@dataclass(frozen=True)
class Window:
    """What the uncached loop's model sees when it chooses new token ``step``: text positions
    ``start`` .. ``end - 1`` (0-based, the prompt first); positions before ``start`` are cropped."""

    step: int
    start: int
    end: int

    @property
    def dropped(self) -> int:
        return self.start


def crop_windows(prompt_len: int, new_tokens: int, block_size: int) -> list[Window]:
    """The window of each step of ``generate``: the text so far, cut to its last ``block_size`` tokens."""
    return [Window(t, max(0, prompt_len + t - block_size), prompt_len + t) for t in range(new_tokens)]


@dataclass(frozen=True)
class CropRun:
    """One prompt generated past ``block_size`` by both loops, with the same rule and seed."""

    prompt: list[int]
    block_size: int
    uncached: Generation           # every token asked for; past block_size its model sees a cropped text
    cached: Generation             # as many as its cache has positions for
    stop_reason: str               # what generate_cached says when asked for all of them
    windows: list[Window]          # the uncached loop's view at every step

    @property
    def first_cropped(self) -> int | None:
        """The first step whose model no longer sees the whole text (None: none)."""
        return next((w.step for w in self.windows if w.dropped), None)

    @property
    def same_tokens(self) -> bool:
        """Both loops chose the same tokens as long as both ran."""
        return self.uncached.tokens[:len(self.cached.tokens)] == self.cached.tokens


def crop_run(model: GPT, prompt: Sequence[int], rule: SelectionRule | None = None, seed: int = 0,
             past: int = CROP_PAST) -> CropRun:
    """Generate ``past`` tokens more than the cache can hold after ``prompt``: the uncached loop crops,
    the cached one stops (its LimitError's message is ``stop_reason``)."""
    block = model.config.block_size
    past = check_int("Tokens past the cache", past, 1, block)
    lm = GPTModel(model)                     # the protocol's view of the same network: the cached loop's
    limit = max_cached_new_tokens(lm, len(prompt))
    if limit < 1:
        raise LimitError(f"The prompt is longer than the {block} positions the tiny GPT has learned.")
    total = limit + past
    try:
        generate_cached(lm, prompt, total, rule, seed, keep_logits=False)
    except LimitError as e:            # refused before any pass: the reason is the point
        reason = str(e)
    else:
        raise AssertionError("generate_cached ran past its learned positions")
    cached = generate_cached(lm, prompt, limit, rule, seed, keep_logits=False)
    uncached = generate(model, prompt, total, rule, seed, keep_logits=False)
    return CropRun(list(prompt), block, uncached, cached, reason, crop_windows(len(prompt), total, block))


@dataclass(frozen=True)
class LoopPair:
    """The same prompt decoded greedily and by sampling (τ, seed), with the span each repeats."""

    greedy: Generation
    sampled: Generation
    greedy_repeat: Repeat | None
    sampled_repeat: Repeat | None
    tau: float
    seed: int


def loop_pair(model: CausalLM, prompt: Sequence[int], new_tokens: int = LOOP_TOKENS, tau: float = 1.0,
              seed: int = 0, key=None) -> LoopPair:
    """Greedy and plain sampling at temperature ``tau`` after ``prompt``, ``new_tokens`` each (any model
    of the protocol, the one cached loop); ``key`` maps a token id to what ``repeated_span`` compares
    (default the id itself: SmolLM2's tokens)."""
    key = key or (lambda i: i)
    greedy = generate_cached(model, prompt, new_tokens, Greedy(), seed, keep_logits=False)
    sampled = generate_cached(model, prompt, new_tokens, Sampler(tau), seed, keep_logits=False)
    return LoopPair(greedy, sampled, repeated_span([key(i) for i in greedy.tokens]),
                    repeated_span([key(i) for i in sampled.tokens]), tau, seed)
