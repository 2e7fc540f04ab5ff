"""``python -m kvviz tail --prompt TEXT --top-k 50 --top-p 0.9``: SmolLM2's next-token distribution after
TEXT seen through top-k and top-p (kvviz.decoding.tail), with seeded draws at τ = 1 that show how often
the long tail comes up. The Sampling page's *The long tail, on a real model*, as JSON."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.decoding.tail import JUNK, next_token_logits, tail_draws, tail_of
from kvviz.limits import MAX_DRAWS, TAIL_DRAWS, TAIL_MAX_K, LimitError, check_int
from kvviz.models.registry import get_model

SHOWN = 10          # tokens listed, most likely first


def add_command(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("tail", help="print SmolLM2's next-token distribution through top-k and top-p as JSON")
    t.add_argument("--prompt", required=True, help='the context, e.g. "The capital of France is"')
    t.add_argument("--top-k", type=int, default=50, help=f"k (1..{TAIL_MAX_K})")
    t.add_argument("--top-p", type=float, default=0.9, help="p in (0, 1]")
    t.add_argument("--draws", type=int, default=TAIL_DRAWS, help=f"seeded draws at τ = 1 (1..{MAX_DRAWS})")
    t.add_argument("--seed", type=int, default=0, help="seed of the draws")
    t.set_defaults(run=lambda a: run(a, t))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        k = check_int("Top-k", a.top_k, 1, TAIL_MAX_K)
        model = get_model("smollm2")
        tokens = model.prompt(a.prompt, False)
        tail = tail_of(next_token_logits(model, tokens), k, a.top_p)
        d = tail_draws(tail, a.draws, a.seed)
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    first = None
    if d.first_tail is not None:
        i, tok = d.first_tail
        first = {"draw": i, "token": model.decode([tok]), "rank": tail.rank(tok), "p": float(tail.probs[tok])}
    out = {"model": model.name, "prompt": tokens, "vocab": tail.vocab,
           "top": [{"token": model.decode([int(i)]), "p": float(tail.probs[i])} for i in tail.order[:SHOWN]],
           "top_k": tail.k, "top_k_size": tail.top_k_size, "mass_beyond_k": tail.mass_beyond_k,
           "junk_in_k": tail.junk_in_k, "junk_below": JUNK,
           "top_p": tail.p, "top_p_size": tail.top_p_size, "mass_beyond_p": tail.mass_beyond_p,
           "tail_size": tail.tail_size,
           "draws": {"n": d.n, "seed": d.seed, "outside_k": d.outside_k, "outside_p": d.outside_p,
                     "first_tail": first}}
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0
