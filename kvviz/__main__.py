"""Command line: ``python -m kvviz trace MODEL --prompt "A B" --new-tokens 4`` prints the trace JSON."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.generation import run_generation
from kvviz.limits import MAX_NEW_TOKENS, LimitError
from kvviz.registry import MODELS, get_model
from kvviz.trace import run_dict


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        print(f"kvviz: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m kvviz", description="Export a generation trace as JSON.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    t = sub.add_parser("trace", help="print the events of one run as JSON")
    t.add_argument("model", choices=sorted(MODELS), help="which model to run")
    t.add_argument("--prompt", required=True, help='space-separated tokens, e.g. "A B"')
    t.add_argument("--new-tokens", type=int, default=4, help=f"tokens to generate (1..{MAX_NEW_TOKENS})")
    a = p.parse_args(argv)
    model = get_model(a.model)
    try:
        run = run_generation(model, a.prompt.split(), a.new_tokens)
    except (LimitError, ValueError) as e:
        p.error(str(e))
    json.dump(run_dict(run, model.logit_tokens), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
