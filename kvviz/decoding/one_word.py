"""Why decode is a loop (docs/design.md §1.3): two prompts that differ in one word leave the model in
different contexts, and every token it writes next is chosen in the context its own last choice made.

``one_word`` runs a model of the protocol (kvviz.models.base.CausalLM: SmolLM2, the tiny random Llama
of the tests) greedily after each prompt with the one cached loop (``generate_cached``), keeping the
logits of every choice: the first row is the next-token distribution after the prompt, the others
the distributions the loop met after what it had just written. Nothing here is chosen by hand: the
probabilities are the model's.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.decoding.loops import Generation, generate_cached
from kvviz.decoding.sampling import Greedy
from kvviz.limits import check_int
from kvviz.models.base import CausalLM

PROMPTS = ("Today I drink tea", "Today I drink water")   # the pages' pair: one word apart
MAX_TOP = 50        # tokens listed per distribution at most
MAX_NEW = 64        # tokens decoded after each prompt at most


@dataclass(frozen=True)
class Branch:
    """One prompt and the greedy decode that follows it."""

    prompt: list[int]                  # token ids
    generation: Generation             # greedy, with the logits of every choice ([N, V])

    @property
    def probs(self) -> torch.Tensor:
        """``[N, V]`` float64: the distribution each choice was made from (row 0: after the prompt)."""
        return self.generation.logits.to(torch.float64).softmax(-1)

    def top(self, n: int, step: int = 0) -> list[tuple[int, float]]:
        """The ``n`` most likely next tokens at ``step`` (0: right after the prompt) as (id, p)."""
        p = self.probs[step]
        values, ids = p.topk(min(n, p.numel()))
        return [(int(i), float(v)) for v, i in zip(values, ids)]

    def chosen_p(self) -> list[float]:
        """The probability of each token greedy wrote, in the context it was written in."""
        p = self.probs
        return [float(p[i, t]) for i, t in enumerate(self.generation.tokens)]


@dataclass(frozen=True)
class OneWord:
    """The two branches; the prompts differ somewhere (in one word, on the pages)."""

    a: Branch
    b: Branch

    @property
    def first_differing_token(self) -> int | None:
        """The first new token (0-based) the two greedy decodes write differently (None: the same)."""
        return next((i for i, (x, y) in enumerate(zip(self.a.generation.tokens, self.b.generation.tokens))
                     if x != y), None)

    def shared_top(self, n: int) -> set[int]:
        """Tokens among both distributions' ``n`` most likely after the prompts."""
        return {i for i, _ in self.a.top(n)} & {i for i, _ in self.b.top(n)}

    def total_variation(self) -> float:
        """Half the L1 distance between the two next-token distributions after the prompts: 0 the
        same distribution, 1 nothing in common."""
        return float((self.a.probs[0] - self.b.probs[0]).abs().sum() / 2)


def one_word(model: CausalLM, prompts: tuple[Sequence[int], Sequence[int]], new_tokens: int = 12) -> OneWord:
    """Greedy after each of the two prompts (token ids), ``new_tokens`` each (fewer if an end token comes)."""
    new_tokens = check_int("New tokens", new_tokens, 1, MAX_NEW)
    a, b = (Branch(list(p), generate_cached(model, list(p), new_tokens, Greedy(), 0, keep_logits=True))
            for p in prompts)
    return OneWord(a, b)
