"""What every subcommand of the command line shares: the parser class and the selection-rule arguments."""
from __future__ import annotations

import argparse
import sys

from kvviz.decoding.sampling import Greedy, Sampler, make_rule
from kvviz.limits import MAX_SEED


class Parser(argparse.ArgumentParser):
    """An argparse parser whose errors are one line on stderr and exit code 2."""

    def error(self, message: str) -> None:
        print(f"kvviz: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def add_rule_arguments(p: argparse.ArgumentParser) -> None:
    """``--temperature/--top-k/--top-p/--seed``: greedy by default; temperature 0 is greedy, and a
    filter without a temperature samples at 1."""
    p.add_argument("--temperature", type=float, default=None,
                   help="sample with this temperature (0 = greedy; default: greedy, or 1 with --top-k/--top-p)")
    p.add_argument("--top-k", type=int, default=None, help="keep only the k most likely tokens (k >= 1)")
    p.add_argument("--top-p", type=float, default=None, help="keep the smallest top set reaching mass p (0 < p <= 1)")
    p.add_argument("--seed", type=int, default=0, help=f"seed of the draws (0..{MAX_SEED}; default 0)")


def rule_from(a: argparse.Namespace) -> Greedy | Sampler:
    """The selection rule ``add_rule_arguments``' values ask for (a LimitError if out of range)."""
    sampling = a.top_k is not None or a.top_p is not None
    temperature = a.temperature if a.temperature is not None else (1.0 if sampling else 0.0)
    return make_rule(temperature, a.top_k, a.top_p)
