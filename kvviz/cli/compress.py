"""``python -m kvviz compress --kind window …``: a smaller cache against the full one, as JSON, by the
one evaluation (kvviz.compress.evaluate): on held-out prompts of the tiny GPT, or with ``--model
smollm2`` on the held-out text with the real SmolLM2-135M-Instruct (the same JSON), or on ``--text``.
``steps`` (the kinds h2o, snapkv, pyramid, latent, fp8, any kind with ``--text`` or ``--steps``): per
scored position of one input (the first prompt, the text) the KL, top-1 agreement, bytes and the
positions each layer and K/V head holds (kvviz.compress.trace)."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.cache.fp8 import SCALES
from kvviz.cache.window import POSITIONS
from kvviz.compress import (
    DEFAULT_PREFILL,
    DEFAULT_TOKENS,
    KEY_AXES,
    KINDS,
    HeldOutPrompt,
    Variant,
    evaluate,
    evaluate_prompts,
    evaluate_text,
    held_out_prompts,
    held_out_text,
)
from kvviz.compress.trace import trace_variant
from kvviz.limits import (
    COMPRESS_MAX_NEW_TOKENS,
    COMPRESS_MAX_PROMPTS,
    LLM_COMPRESS_MAX_TOKENS,
    LLM_COMPRESS_MIN_TOKENS,
    MAX_CACHE_SINKS,
    MAX_CACHE_WINDOW,
    MAX_QUANT_GROUP_SIZE,
    MAX_QUANT_RESIDUAL,
    MAX_SEED,
    LimitError,
)
from kvviz.models.gpt import GPTModel, load_tiny_gpt
from kvviz.models.registry import REAL_MODELS, get_model

MODELS = ("gpt", *REAL_MODELS)      # the tiny GPT, SmolLM2, Gemma 3 and any the host names
NEW_KINDS = ("h2o", "snapkv", "pyramid", "latent", "fp8")


def add_command(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compress", help="mean KL and top-1 agreement of a smaller cache against the full one",
                       description="Run a smaller cache on held-out prompts of the tiny GPT (or, with --model "
                                   "smollm2, on the held-out text with SmolLM2) and print JSON: kind, settings, "
                                   "bytes_per_token, kl_mean, top1_agreement, prompts, positions.")
    c.add_argument("--kind", required=True, choices=KINDS)
    c.add_argument("--model", choices=MODELS, default="gpt",
                   help="gpt (the tiny GPT, default), smollm2 (SmolLM2-135M-Instruct, rotary positions) or gemma3 "
                        "(Gemma 3 270M: on its sliding layers an evicting policy chooses inside the window)")
    c.add_argument("--window", type=int, help=f"window: recent positions kept (default 16, ≤ {MAX_CACHE_WINDOW})")
    c.add_argument("--sinks", type=int, help=f"window: first positions kept (default 4, ≤ {MAX_CACHE_SINKS})")
    c.add_argument("--positions", choices=POSITIONS,
                   help="window: the kept keys at their own positions (default) or re-rotated to their positions "
                        "in the cache (StreamingLLM; smollm2 only)")
    c.add_argument("--bits", type=int, help="quant: 8, 4 or 2 (default 8)")
    c.add_argument("--group-size", type=int, help=f"quant: values per scale (default 32, ≤ {MAX_QUANT_GROUP_SIZE})")
    c.add_argument("--key-axis", choices=KEY_AXES, help="quant: keys per channel (KIVI, default) or per token")
    c.add_argument("--residual", type=int,
                   help=f"quant: newest positions in full precision (default 0, ≤ {MAX_QUANT_RESIDUAL})")
    c.add_argument("--kv-heads", type=int, help="gqa: K/V heads after mean-pooling (default 1; must divide 4, "
                                                "smollm2: 3)")
    c.add_argument("--budget", type=int, help="h2o, snapkv, pyramid: positions kept per layer and K/V head "
                                              "(default 32, at most 4,096; pyramid: the mean, at most 2,730)")
    c.add_argument("--recent", type=int, help="h2o: of the budget, the newest positions (default half)")
    c.add_argument("--obs-window", type=int, help="snapkv, pyramid: the prompt's last queries that vote (default 8)")
    c.add_argument("--kernel", type=int,
                   help="snapkv, pyramid: votes pooled over this many neighbours (odd, default 5)")
    c.add_argument("--hold", action="store_true", default=None,
                   help="snapkv, pyramid: keep the budget while decoding too (vote again every window steps)")
    c.add_argument("--rank", help="latent: the latent's size per token and layer, or full (default)")
    c.add_argument("--scale", choices=SCALES, help="fp8: one scale per tensor (default) or per token")
    c.add_argument("--text", help="run on this text instead (its first --prefill tokens in one pass)")
    c.add_argument("--steps", action="store_true", help="add the per-step records (always with the new kinds "
                                                        "h2o, snapkv, pyramid, latent, fp8 and with --text)")
    c.add_argument("--prompts", type=int, help=f"gpt: held-out prompts (1..{COMPRESS_MAX_PROMPTS}, default 8)")
    c.add_argument("--new-tokens", type=int,
                   help=f"gpt: tokens the full cache generates per prompt (1..{COMPRESS_MAX_NEW_TOKENS}, default 32)")
    c.add_argument("--seed", type=int, help=f"gpt: picks the prompts (0..{MAX_SEED}, default 0)")
    c.add_argument("--tokens", type=int, help=f"smollm2: tokens of the held-out text ({LLM_COMPRESS_MIN_TOKENS}.."
                                              f"{LLM_COMPRESS_MAX_TOKENS}, default 96)")
    c.add_argument("--prefill", type=int, help="smollm2: of them, prefilled in one pass before the decode steps "
                                               "(default 16; a window must hold them)")
    c.set_defaults(run=lambda a: run(a, c))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    theirs = ("tokens", "prefill") if a.model == "gpt" else ("prompts", "new_tokens", "seed")
    if a.text is not None:
        theirs = ("tokens", "prompts", "new_tokens", "seed")
    stray = [n for n in theirs if getattr(a, n) is not None]
    if stray:
        parser.error(f"--{stray[0].replace('_', '-')} is not a setting of --model {a.model}")
    try:
        rank = a.rank if a.rank in (None, "full") else _rank(a.rank)
        variant = Variant.of(a.kind, window=a.window, sinks=a.sinks, positions=a.positions, bits=a.bits,
                             group_size=a.group_size, key_axis=a.key_axis, residual=a.residual, kv_heads=a.kv_heads,
                             budget=a.budget, recent=a.recent, obs_window=a.obs_window, kernel=a.kernel,
                             hold=a.hold, rank=rank, scale=a.scale)
        if a.model == "gpt":
            if variant.kind == "window" and variant.positions == "cache":
                raise LimitError("Cache positions re-rotate the kept keys: they need a model with rotary positions "
                                 "(--model smollm2); the tiny GPT learns absolute positions.")
        model = get_model(a.model) if a.model != "gpt" else GPTModel(load_tiny_gpt())
        if a.text is not None:
            ids = _text_ids(model, a.text)
            prefill = min(DEFAULT_PREFILL, len(ids) - 1) if a.prefill is None else a.prefill
            if not 1 <= prefill < len(ids):
                raise LimitError(f"The prefill must be 1..{len(ids) - 1} tokens of the text's {len(ids)}.")
            prompt = HeldOutPrompt(tuple(model.vocab[i] for i in ids), tuple(ids), 0)
            result = evaluate(model, [variant], [prompt], len(ids) - prefill + 1, prefill).results[0]
        elif a.model == "gpt":
            result = evaluate_prompts([variant], 8 if a.prompts is None else a.prompts,
                              32 if a.new_tokens is None else a.new_tokens, 0 if a.seed is None else a.seed,
                              model=model).results[0]
            first = held_out_prompts(1, 0 if a.seed is None else a.seed, model.tiny)[0]
            ids, prefill = list(first.ids), len(first.ids)
        else:
            tokens = DEFAULT_TOKENS if a.tokens is None else a.tokens
            prefill = DEFAULT_PREFILL if a.prefill is None else a.prefill
            result = evaluate_text(model, [variant], tokens, prefill).results[0]
            ids = list(held_out_text(model, tokens).ids)
        want = a.steps or a.text is not None or variant.kind in NEW_KINDS    # earlier kinds: today's JSON
        steps = trace_variant(model, variant, ids, prefill) if want else None
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    out = result.as_dict()
    if steps is not None:
        out["steps"] = [s.as_dict() for s in steps]
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def _rank(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise LimitError(f"The rank must be a whole number or 'full', got {text!r}.") from None


def _text_ids(model, text: str) -> list[int]:
    """The model's own token ids of ``text`` (unknown words refused by the tokenizer)."""
    if not text.strip():
        raise LimitError("The text is empty.")
    ids = [model.vocab.index(t) for t in model.tokenize(text)]
    if len(ids) < 2:
        raise LimitError("The text needs at least 2 tokens (one to prefill, one to score).")
    return ids
