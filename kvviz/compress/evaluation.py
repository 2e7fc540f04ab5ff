"""What a smaller cache costs, for any kvviz model (``evaluate``; the CLI, the page and the
benchmark share it).

One run (``run_cache``): a prompt's first ``prefill`` tokens in one pass, then one token per decode
step: the rest of the prompt (teacher forcing), then the model's greedy choice. The full cache runs
first; each variant (its model and its cache, kvviz.compress.variants) then runs teacher-forced on
the full cache's tokens, and at every scored position we record KL(full ‖ variant) of the next-token
distributions and whether the top-1 tokens agree. Per variant: mean KL, top-1 agreement and cache
bytes per token (``nbytes()`` of the cache object at the end of each run over the positions it
processed, averaged over the prompts). A lossless variant scores exactly 0; same input, same numbers.

Two sources of held-out input, each with its caps (kvviz.limits):

- ``evaluate_prompts``: the tiny GPT's held-out prompts (``held_out_prompts``:
  ``COMPRESS_PROMPT_TOKENS`` tokens from the start of a sentence in the tail of the training corpus
  that no training batch read, picked with a seeded ``random.Random``), each prefilled whole; the
  full cache then generates ``new_tokens`` greedily;
- ``evaluate_text``: a model with a transformers tokenizer on the held-out text
  (kvviz.compress.text), its first ``prefill`` tokens prefilled, every later token one decode step;
  the positions from the last prefilled one on are scored.
"""
from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch

from kvviz.cache import Cache
from kvviz.compress._protocol import next_logits
from kvviz.compress.text import held_out_ids
from kvviz.compress.variants import Variant, variant_cache, variant_model
from kvviz.limits import (
    COMPRESS_MAX_NEW_TOKENS,
    COMPRESS_MAX_PROMPTS,
    COMPRESS_MAX_VARIANTS,
    COMPRESS_PROMPT_TOKENS,
    LLM_COMPRESS_MAX_TOKENS,
    LLM_COMPRESS_MAX_VARIANTS,
    MAX_SEED,
    LimitError,
    check_int,
)
from kvviz.models.gpt import GPTModel, TinyGPT, load_tiny_gpt
from kvviz.models.gpt.corpus import corpus_tokens
from kvviz.models.gpt.train import split_train_val

FULL = Variant.of("full")

# --- held-out prompts -------------------------------------------------------------------------

@dataclass(frozen=True)
class HeldOutPrompt:
    """Held-out ``tokens`` and their ``ids``: from the tail of the tiny GPT's training corpus,
    starting at ``offset`` in that tail (always the first token of a sentence), or the start of the
    held-out text (offset 0)."""

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


DEFAULT_TOKENS = 96         # the held-out text's length on the page and in the CLI (80 decode steps per variant)
DEFAULT_PREFILL = 16        # of them, prefilled in one pass before the decode steps


def held_out_text(model, tokens: int = DEFAULT_TOKENS) -> HeldOutPrompt:
    """The held-out text's first ``tokens`` tokens as one prompt (``model.tokenizer``: a
    transformers tokenizer)."""
    ids = held_out_ids(model.tokenizer, tokens)
    return HeldOutPrompt(tuple(model.vocab[i] for i in ids), tuple(ids), 0)


# --- the evaluation ---------------------------------------------------------------------------

@torch.inference_mode()
def run_cache(model, prompt: Sequence[int], new_tokens: int, cache: Cache, forced: Sequence[int] = (),
              step: Callable[[], None] | None = None, start: int = 0) -> tuple[list[int], torch.Tensor]:
    """Prefill ``prompt`` (positions ``start``.., after what ``cache`` holds) into ``cache`` with
    ``model`` (any kvviz model), then decode one token per step: the tokens ``forced`` (teacher
    forcing) while they last, then greedily. Returns the ``new_tokens`` tokens and the next-token
    logits [new_tokens, V] (float32) that chose (or would have chosen) each; the last token is never
    processed, as in generation. ``step`` is called after every decode pass (a benchmark's clock)."""
    logits = next_logits(model, prompt, cache, start)
    rows, tokens = [], []
    pos = start + len(prompt)
    for i in range(new_tokens):
        rows.append(logits)
        tokens.append(int(forced[i]) if i < len(forced) else int(torch.argmax(logits)))
        if i + 1 < new_tokens:
            logits = next_logits(model, [tokens[-1]], cache, pos)
            pos += 1
            if step:
                step()
    return tokens, torch.stack(rows)


def kl_divergence(p_logits: torch.Tensor, q_logits: torch.Tensor) -> torch.Tensor:
    """KL(p ‖ q) in nats of the softmax distributions, over the last axis (float64; rounding below
    zero is clipped to 0)."""
    p, q = torch.log_softmax(p_logits.double(), -1), torch.log_softmax(q_logits.double(), -1)
    return (p.exp() * (p - q)).sum(-1).clamp(min=0.0)


@dataclass(frozen=True)
class VariantResult:
    """One variant over every prompt: per prompt and scored position the KL(full ‖ variant) and
    top-1 agreement, and per prompt the cache's bytes at the end and the positions it processed."""

    variant: Variant
    kl: tuple[tuple[float, ...], ...]           # [prompt][position]
    agree: tuple[tuple[bool, ...], ...]         # [prompt][position]
    cache_bytes: tuple[int, ...]                # [prompt] nbytes() of the cache after the run
    cached_positions: tuple[int, ...]           # [prompt] positions processed (prefill + new − 1)
    answers: tuple[tuple[int, ...], ...] = ()   # [prompt] its own greedy tokens after the scored inputs
    full_answers: tuple[tuple[int, ...], ...] = ()   # [prompt] the full cache's

    @property
    def answer_changed(self) -> bool | None:
        """Whether its greedy answer differs from the full cache's on some prompt (None: not asked)."""
        return None if not self.answers else self.answers != self.full_answers

    @property
    def first_difference(self) -> int | None:
        """The first answer token (0-based, over the prompts in order) that differs; None if none."""
        flat = [(a, b) for x, y in zip(self.answers, self.full_answers) for a, b in zip(x, y)]
        return next((i for i, (a, b) in enumerate(flat) if a != b), None)

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
                "positions": self.positions,
                **({"answer_changed": self.answer_changed, "first_difference": self.first_difference}
                   if self.answers else {})}


@dataclass(frozen=True)
class Evaluation:
    """The held-out prompts, the tokens the full cache's runs went on with after each prompt's
    prefill (teacher-forced, then greedy), and every variant's result."""

    prompts: tuple[HeldOutPrompt, ...]
    generated: tuple[tuple[int, ...], ...]      # [prompt] the full cache's run's tokens after the prefill
    new_tokens: int                             # scored positions per prompt
    seed: int
    results: tuple[VariantResult, ...]
    vocab: tuple[str, ...] = field(repr=False, default=())

    def result(self, variant: Variant) -> VariantResult:
        return next(r for r in self.results if r.variant == variant)


Progress = Callable[[int, int], None]      # (done, in all), e.g. a page's progress bar
UNITS = ("run", "step")                    # what Progress counts: runs of a prompt, or decode steps


def evaluate(model, variants: Sequence[Variant], prompts: Sequence[HeldOutPrompt], new_tokens: int,
             prefill: int | None = None, *, seed: int = 0, progress: Progress | None = None, unit: str = "run",
             threads: int = 1, answer: int = 0) -> Evaluation:
    """Every variant against the full cache of ``model`` (any kvviz model) on ``prompts`` (see the
    module doc): ``prefill`` tokens of each prompt in one pass (None: all of it), ``new_tokens``
    positions scored per prompt. ``progress`` counts runs (one prompt through one cache) or decode
    steps (``unit``); the full cache runs once, as the reference, also for a "full" variant.

    Runs on ``threads`` torch threads (restored afterwards): one by default, since on a shared
    2-core machine two threads waiting for each other made these one-token steps many times slower.

    ``answer`` > 0: every run goes on ``answer`` greedy tokens of its own after the last scored
    input (the full cache's and each variant's: whether the greedy answer changes); the scores stay
    those of the ``new_tokens`` positions."""
    variants = list(variants)
    check_int("Variants", len(variants), 1, COMPRESS_MAX_VARIANTS)
    new_tokens = check_int("New tokens", new_tokens, 1, LLM_COMPRESS_MAX_TOKENS)
    threads = check_int("Threads", threads, 1, 64)
    answer = check_int("Answer tokens", answer, 0, LLM_COMPRESS_MAX_TOKENS)
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}")
    if not prompts:
        raise LimitError("No prompts to evaluate on.")
    for v in variants:
        variant_model(model, v)                       # refuse a bad head count before any work
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        return _evaluate(model, variants, list(prompts), new_tokens, prefill, seed, progress, unit, answer)
    finally:
        torch.set_num_threads(before)


def _evaluate(model, variants: list[Variant], prompts: list[HeldOutPrompt], new_tokens: int, prefill: int | None,
              seed: int, progress: Progress | None, unit: str, answer: int = 0) -> Evaluation:
    runs = len(prompts) * (sum(v.kind != "full" for v in variants) + 1)
    length = new_tokens - 1 + max(answer, 1)          # tokens per run: the scored ones, then the answer
    total, done = runs * (length - 1 if unit == "step" else 1), 0

    def tick() -> None:
        nonlocal done
        done += 1
        if progress:
            progress(done, total)

    step, run_done = (tick, None) if unit == "step" else (None, tick)
    splits = [(p.ids[:prefill or len(p.ids)], p.ids[prefill or len(p.ids):]) for p in prompts]
    reference = []                                     # the full cache: the text, then greedy
    for head, rest in splits:
        cache = variant_cache(model, FULL)            # the model's own full cache (hybrid where it is)
        tokens, logits = run_cache(model, head, length, cache, forced=rest, step=step)
        reference.append((tokens, logits[:new_tokens], cache.nbytes()))
        if run_done:
            run_done()
    results = []
    for v in variants:
        net = variant_model(model, v)
        kl, agree, nbytes, cached, answers = [], [], [], [], []
        for (head, _), (tokens, full_logits, full_bytes) in zip(splits, reference):
            if v.kind == "full":
                logits, held, own = full_logits, full_bytes, tokens
            else:
                cache = variant_cache(model, v)
                forced = tokens[:new_tokens - 1] if answer else tokens
                own, logits = run_cache(net, head, length, cache, forced=forced, step=step)
                logits = logits[:new_tokens]
                held = cache.nbytes()
                if run_done:
                    run_done()
            answers.append(tuple(own[new_tokens - 1:]) if answer else ())
            kl.append(tuple(kl_divergence(full_logits, logits).tolist()))
            agree.append(tuple(bool(a) for a in (logits.argmax(-1) == full_logits.argmax(-1)).tolist()))
            nbytes.append(held)
            cached.append(len(head) + length - 1)
        full_answers = tuple(tuple(t[new_tokens - 1:]) for t, _, _ in reference) if answer else ()
        results.append(VariantResult(v, tuple(kl), tuple(agree), tuple(nbytes), tuple(cached),
                                     tuple(answers) if answer else (), full_answers))
    return Evaluation(tuple(prompts), tuple(tuple(t[:new_tokens]) for t, _, _ in reference), new_tokens, seed,
                      tuple(results), tuple(model.vocab))


# --- the two held-out inputs ------------------------------------------------------------------

def evaluate_prompts(variants: Sequence[Variant], prompts: int = 8, new_tokens: int = 32, seed: int = 0,
                     model: GPTModel | None = None, progress: Progress | None = None,
                     threads: int = 1) -> Evaluation:
    """``evaluate`` on the tiny GPT's (``model``, the shipped one by default) ``prompts`` held-out
    prompts picked with ``seed``, ``new_tokens`` greedy tokens each; ``progress`` counts runs."""
    variants = list(variants)
    check_int("Variants", len(variants), 1, COMPRESS_MAX_VARIANTS)
    new_tokens = check_int("New tokens", new_tokens, 1, COMPRESS_MAX_NEW_TOKENS)
    model = model or GPTModel(load_tiny_gpt())
    for v in variants:
        variant_model(model, v)                       # refuse a bad head count before picking prompts
    chosen = held_out_prompts(prompts, seed, model.tiny)
    return evaluate(model, variants, chosen, new_tokens, seed=seed, progress=progress, threads=threads)


def evaluate_text(model, variants: Sequence[Variant], tokens: int = DEFAULT_TOKENS, prefill: int = DEFAULT_PREFILL,
                  progress: Progress | None = None, threads: int = 1, answer: int = 0) -> Evaluation:
    """``evaluate`` on the held-out text's first ``tokens`` tokens (``held_out_text``), ``prefill``
    of them in one pass: one prompt, its ``new_tokens`` the positions scored per variant (tokens −
    prefill + 1: the next token after the text is scored too); ``progress`` counts decode steps.
    A window must hold the prefill (a transformers forward reads every key of its own pass)."""
    variants = list(variants)
    check_int("Variants", len(variants), 1, LLM_COMPRESS_MAX_VARIANTS)
    text = held_out_text(model, tokens)
    prefill = check_int("Prefill tokens", prefill, 1, len(text.ids))
    for v in variants:
        variant_model(model, v)
        if v.kind == "window" and prefill > v.window + v.sinks:            # type: ignore[operator]
            raise LimitError(f"The prefill of {prefill} tokens must fit the window ({v.window} + {v.sinks} sinks).")
    return evaluate(model, variants, [text], len(text.ids) - prefill + 1, prefill, progress=progress, unit="step",
                    threads=threads, answer=answer)
