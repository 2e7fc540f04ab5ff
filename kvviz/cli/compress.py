"""``python -m kvviz compress --kind window …``: a smaller cache against the full one, as JSON, by the
one evaluation (kvviz.compress.evaluate): on held-out prompts of the tiny GPT, or with ``--model
smollm2`` on the held-out text with the real SmolLM2-135M-Instruct (the same JSON)."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.cache.window import POSITIONS
from kvviz.compress import DEFAULT_PREFILL, DEFAULT_TOKENS, KEY_AXES, KINDS, Variant, evaluate_prompts, evaluate_text
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
from kvviz.models.smollm2 import SmolLM2

MODELS = ("gpt", "smollm2")


def add_command(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compress", help="mean KL and top-1 agreement of a smaller cache against the full one",
                       description="Run a smaller cache on held-out prompts of the tiny GPT (or, with --model "
                                   "smollm2, on the held-out text with SmolLM2) and print JSON: kind, settings, "
                                   "bytes_per_token, kl_mean, top1_agreement, prompts, positions.")
    c.add_argument("--kind", required=True, choices=KINDS)
    c.add_argument("--model", choices=MODELS, default="gpt",
                   help="gpt (the tiny GPT, default) or smollm2 (SmolLM2-135M-Instruct, rotary positions)")
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
    theirs = {"gpt": ("tokens", "prefill"), "smollm2": ("prompts", "new_tokens", "seed")}[a.model]
    stray = [n for n in theirs if getattr(a, n) is not None]
    if stray:
        parser.error(f"--{stray[0].replace('_', '-')} is not a setting of --model {a.model}")
    try:
        variant = Variant.of(a.kind, window=a.window, sinks=a.sinks, positions=a.positions, bits=a.bits,
                             group_size=a.group_size, key_axis=a.key_axis, residual=a.residual, kv_heads=a.kv_heads)
        if a.model == "gpt":
            if variant.kind == "window" and variant.positions == "cache":
                raise LimitError("Cache positions re-rotate the kept keys: they need a model with rotary positions "
                                 "(--model smollm2); the tiny GPT learns absolute positions.")
            result = evaluate_prompts([variant], 8 if a.prompts is None else a.prompts,
                              32 if a.new_tokens is None else a.new_tokens, 0 if a.seed is None else a.seed).results[0]
        else:
            tokens = DEFAULT_TOKENS if a.tokens is None else a.tokens
            prefill = DEFAULT_PREFILL if a.prefill is None else a.prefill
            result = evaluate_text(SmolLM2(), [variant], tokens, prefill).results[0]
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(result.as_dict(), sys.stdout, indent=1)
    print()
    return 0
