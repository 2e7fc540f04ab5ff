"""What a server is asked to do: requests (prompt, tokens to generate, arrival step), a seeded stream
of them for the tiny GPT, a stream of chat requests for a real LLM (SmolLM2: each message inside its
chat template, so every prompt begins with the same system prompt), and each request's solo run,
the reference a served row must match."""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import torch

from kvviz.decoding.batching import BatchModel
from kvviz.decoding.sampling import Greedy, SelectionRule
from kvviz.decoding.stepper import run_generation
from kvviz.limits import MAX_SEED, MAX_SERVE_NEW_TOKENS, MAX_SERVE_REQUESTS, MAX_SERVE_SHARED_PREFIX, check_int
from kvviz.models.gpt.corpus import corpus_tokens, sentence

GREEDY = Greedy()

# Short user messages for the chat stream (the model's input, not page text): each is a few tokens
# after the 24 of the system prompt and its role markers, so the shared beginning dominates
CHAT_MESSAGES = ("Hi!", "What is 2+2?", "Name a colour.", "Say hello in French.", "What is a cat?",
                 "Count to three.", "Is the sun a star?", "What is rain?")


@dataclass(frozen=True)
class Request:
    id: int
    prompt: tuple[str, ...]            # tokens of the model's vocabulary
    max_new_tokens: int
    arrival_step: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt", tuple(self.prompt))     # a list would make the record mutable


def request_stream(n_requests: int, seed: int = 0, max_new_tokens: int = 12,
                   shared_prefix: int = 0) -> tuple[Request, ...]:
    """A seeded stream of requests for the tiny GPT: prompts are the first 2–7 words of sentences of
    its weather corpus, each request generates between a quarter of ``max_new_tokens`` and all of
    them, and requests arrive 0–3 steps apart (the first at step 0). ``shared_prefix`` P: every
    prompt begins with the same P words of the corpus (a "system prompt") and then 1–6 own words."""
    n = check_int("Requests", n_requests, 1, MAX_SERVE_REQUESTS)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    max_new = check_int("New tokens", max_new_tokens, 1, MAX_SERVE_NEW_TOKENS)
    p = check_int("Shared prefix", shared_prefix, 0, MAX_SERVE_SHARED_PREFIX)
    rng = random.Random(seed)
    prefix = tuple(corpus_tokens(p // 4 + 1, seed)[:p])
    out, arrival = [], 0
    for i in range(n):
        words = sentence(rng)
        own = rng.randint(1, min(6, len(words))) if p else rng.randint(2, min(7, len(words)))
        new = rng.randint(max(1, max_new // 4), max_new)
        out.append(Request(i, prefix + tuple(words[:own]), new, arrival))
        arrival += rng.choice([0, 1, 1, 2, 3])
    return tuple(out)


def solo_run(model: BatchModel, req: Request, rule: SelectionRule = GREEDY,
             seed: int = 0) -> tuple[list[int], torch.Tensor]:
    """The request alone through the stepper with a contiguous cache (greedy unless ``rule``): its
    token ids and the logits [new, V] each choice used (no recompute check: only the logits count)."""
    run = run_generation(model, list(req.prompt), req.max_new_tokens, rule, seed,    # type: ignore[arg-type]
                         recheck=False)
    chooses = [e for e in run.events if e.phase == "choose"]
    return [model.logit_tokens.index(e.chosen) for e in chooses], torch.stack([e.logits for e in chooses])


class ChatModel(Protocol):
    """A model with a chat template (kvviz.models.smollm2.SmolLM2)."""

    def prompt(self, text: str, chat: bool) -> list[str]:
        ...


def chat_stream(model: ChatModel, n_requests: int, max_new_tokens: int = 4, chat: bool = True, seed: int = 0,
                messages: Sequence[str] = CHAT_MESSAGES) -> tuple[Request, ...]:
    """``n_requests`` requests to a chat model, one arriving per step: request i is message
    ``(seed + i) mod len(messages)`` inside the model's chat template (``chat``; else the plain
    text) and generates ``max_new_tokens``. One step apart, so that a request's full blocks are
    named (prefix caching) before the next one is admitted and can share them."""
    limits = getattr(model, "limits", None)
    cap = min(MAX_SERVE_REQUESTS, getattr(limits, "serve_requests", MAX_SERVE_REQUESTS))
    new_cap = min(MAX_SERVE_NEW_TOKENS, getattr(limits, "serve_new_tokens", MAX_SERVE_NEW_TOKENS))
    n = check_int("Requests", n_requests, 1, cap)
    new = check_int("New tokens", max_new_tokens, 1, new_cap)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    if not messages:
        raise ValueError("no messages")
    return tuple(Request(i, tuple(model.prompt(messages[(seed + i) % len(messages)], chat)), new, i)
                 for i in range(n))


def common_prefix(requests: Sequence[Request]) -> int:
    """Tokens every prompt of ``requests`` begins with (a chat stream: the system prompt and markers)."""
    prompts = [r.prompt for r in requests]
    n = min((len(p) for p in prompts), default=0)
    return next((i for i in range(n) if len({p[i] for p in prompts}) > 1), n)


def conversation_trace(requests: Sequence[Request], seed: int = 0, follow: float = 0.5) -> tuple[tuple[str, ...], ...]:
    """A chat trace for prefix caching from a stream: every prompt begins with the stream's shared
    beginning (a system prompt); each request either starts a conversation (its own prompt) or, with
    probability ``follow``, continues an earlier one: that conversation's latest prompt, then this
    request's own tokens (its prompt after the shared beginning), so later turns share the earlier
    turns too. Seeded; the first request always starts a conversation."""
    rng = random.Random(check_int("Seed", seed, 0, MAX_SEED))
    shared = common_prefix(requests)
    talks: list[tuple[str, ...]] = []
    out = []
    for r in requests:
        if talks and rng.random() < follow:
            c = rng.randrange(len(talks))
            talks[c] = talks[c] + tuple(r.prompt[shared:])
        else:
            talks.append(tuple(r.prompt))
            c = len(talks) - 1
        out.append(talks[c])
    return tuple(out)
