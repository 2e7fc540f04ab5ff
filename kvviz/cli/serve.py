"""``python -m kvviz serve --requests 6 …``: a seeded stream of requests served from a paged cache
(kvviz.serving), as JSON."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.limits import (
    MAX_SEED,
    MAX_SERVE_BLOCK_SIZE,
    MAX_SERVE_BLOCKS,
    MAX_SERVE_NEW_TOKENS,
    MAX_SERVE_REQUESTS,
    MAX_SERVE_SHARED_PREFIX,
    LimitError,
)
from kvviz.models.registry import get_model
from kvviz.serving import POLICIES, request_stream, serve, serve_run_dict


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a seeded stream of requests from a paged cache; print the run as JSON")
    p.add_argument("--requests", type=int, default=6, help=f"requests in the stream (1..{MAX_SERVE_REQUESTS})")
    p.add_argument("--block-size", type=int, default=4, help=f"positions per block (1..{MAX_SERVE_BLOCK_SIZE})")
    p.add_argument("--num-blocks", type=int, default=32, help=f"blocks in the pool (1..{MAX_SERVE_BLOCKS})")
    p.add_argument("--seed", type=int, default=0, help=f"seed of the stream (0..{MAX_SEED})")
    p.add_argument("--max-new-tokens", type=int, default=12,
                   help=f"most tokens a request generates (1..{MAX_SERVE_NEW_TOKENS})")
    p.add_argument("--policy", choices=POLICIES, default="continuous", help="continuous or static batching")
    p.add_argument("--shared-prefix", type=int, default=0, metavar="P",
                   help="every prompt starts with the same P words, and prefix caching is on "
                        f"(0..{MAX_SERVE_SHARED_PREFIX})")
    p.set_defaults(run=lambda a: run(a, p))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        stream = request_stream(a.requests, a.seed, a.max_new_tokens, a.shared_prefix)
        served = serve(get_model("gpt"), stream, a.block_size, a.num_blocks, a.policy,
                       prefix_caching=a.shared_prefix > 0)
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(serve_run_dict(served), sys.stdout, indent=1)
    print()
    return 0
