"""``python -m kvviz compress --kind window …``: a smaller cache against the full one on held-out prompts
(kvviz.compress), as JSON."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.compress import KEY_AXES, KINDS, Variant, evaluate
from kvviz.limits import (
    COMPRESS_MAX_NEW_TOKENS,
    COMPRESS_MAX_PROMPTS,
    MAX_CACHE_SINKS,
    MAX_CACHE_WINDOW,
    MAX_QUANT_GROUP_SIZE,
    MAX_QUANT_RESIDUAL,
    MAX_SEED,
    LimitError,
)


def add_command(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("compress", help="mean KL and top-1 agreement of a smaller cache against the full one",
                       description="Run a smaller cache on held-out prompts of the tiny GPT and print JSON: "
                                   "kind, settings, bytes_per_token, kl_mean, top1_agreement, prompts, positions.")
    c.add_argument("--kind", required=True, choices=KINDS)
    c.add_argument("--window", type=int, help=f"window: recent positions kept (default 16, ≤ {MAX_CACHE_WINDOW})")
    c.add_argument("--sinks", type=int, help=f"window: first positions kept (default 4, ≤ {MAX_CACHE_SINKS})")
    c.add_argument("--bits", type=int, help="quant: 8 or 4 (default 8)")
    c.add_argument("--group-size", type=int, help=f"quant: values per scale (default 32, ≤ {MAX_QUANT_GROUP_SIZE})")
    c.add_argument("--key-axis", choices=KEY_AXES, help="quant: keys per channel (KIVI, default) or per token")
    c.add_argument("--residual", type=int,
                   help=f"quant: newest positions in full precision (default 0, ≤ {MAX_QUANT_RESIDUAL})")
    c.add_argument("--kv-heads", type=int, help="gqa: K/V heads after mean-pooling (default 1; must divide 4)")
    c.add_argument("--prompts", type=int, default=8, help=f"held-out prompts (1..{COMPRESS_MAX_PROMPTS}, default 8)")
    c.add_argument("--new-tokens", type=int, default=32,
                   help=f"tokens the full cache generates per prompt (1..{COMPRESS_MAX_NEW_TOKENS}, default 32)")
    c.add_argument("--seed", type=int, default=0, help=f"picks the prompts (0..{MAX_SEED}, default 0)")
    c.set_defaults(run=lambda a: run(a, c))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        variant = Variant.of(a.kind, window=a.window, sinks=a.sinks, bits=a.bits, group_size=a.group_size,
                             key_axis=a.key_axis, residual=a.residual, kv_heads=a.kv_heads)
        result = evaluate([variant], a.prompts, a.new_tokens, a.seed).results[0]
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(result.as_dict(), sys.stdout, indent=1)
    print()
    return 0
