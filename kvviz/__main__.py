"""Command line: ``python -m kvviz trace MODEL --prompt "A B" --new-tokens 4`` prints the trace JSON;
``python -m kvviz serve --requests 6 ...`` a served stream of requests (kvviz.serving);
``python -m kvviz compress --kind window …`` compares a smaller cache with the full one (kvviz.compress);
``python -m kvviz speculate --prompt … --gamma 4`` a speculative run (kvviz.speculative);
``python -m kvviz export --out DIR`` writes the lecture as static pages (kvviz.ui.export, docs/export.md).

Greedy by default; ``--temperature/--top-k/--top-p`` sample instead (temperature 0 is greedy, and a
filter without a temperature samples at 1), ``--seed`` fixes the draws: the same command prints the
same trace.
"""
from __future__ import annotations

import argparse
import json
import sys

from kvviz import compress
from kvviz.generation import run_generation
from kvviz.limits import GPT_MAX_SWEEP_TOKENS, MAX_NEW_TOKENS, MAX_SEED, LimitError, check_int
from kvviz.loops import generate
from kvviz.registry import MODELS, get_model
from kvviz.sampling import make_rule
from kvviz.serving import add_serve_command
from kvviz.speculative import add_speculate_command
from kvviz.trace import run_dict
from kvviz.ui.export.cli import add_command as add_export_command


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2
        print(f"kvviz: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    p = _Parser(prog="python -m kvviz", description="Export a generation trace, serve, compare smaller caches or speculate, as JSON.")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    t = sub.add_parser("trace", help="print the events of one run as JSON")
    t.add_argument("model", choices=sorted(MODELS), help="which model to run")
    t.add_argument("--prompt", required=True, help='space-separated tokens, e.g. "A B"')
    t.add_argument("--new-tokens", type=int, default=4, help=f"tokens to generate (1..{MAX_NEW_TOKENS})")
    t.add_argument("--temperature", type=float, default=None,
                   help="sample with this temperature (0 = greedy; default: greedy, or 1 with --top-k/--top-p)")
    t.add_argument("--top-k", type=int, default=None, help="keep only the k most likely tokens (k >= 1)")
    t.add_argument("--top-p", type=float, default=None, help="keep the smallest top set reaching mass p (0 < p <= 1)")
    t.add_argument("--seed", type=int, default=0, help=f"seed of the draws (0..{MAX_SEED}; default 0)")
    t.add_argument("--no-cache", action="store_true",
                   help="gpt only: print the tokens of the recomputing generate (no KV cache), not the trace")
    add_serve_command(sub)
    compress.add_command(sub)
    add_speculate_command(sub)
    add_export_command(sub)
    a = p.parse_args(argv)
    if hasattr(a, "run"):                                 # a subcommand that handles itself
        return a.run(a)
    model = get_model(a.model)
    try:
        sampling = a.top_k is not None or a.top_p is not None
        temperature = a.temperature if a.temperature is not None else (1.0 if sampling else 0.0)
        rule = make_rule(temperature, a.top_k, a.top_p)
        prompt = model.tokenize(a.prompt)
        if a.no_cache:
            network = getattr(model, "network", None)     # models with a GPT network have the fast loops
            if network is None:
                p.error(f"--no-cache needs a model with a generate loop (gpt), not {a.model!r}")
            n = check_int("New tokens", a.new_tokens, 1, GPT_MAX_SWEEP_TOKENS)
            gen = generate(network, [model.vocab.index(w) for w in prompt], n, rule, a.seed)
            json.dump({"model": model.name, "prompt": prompt, "cache": False, "rule": rule.describe(),
                       "seed": a.seed, "tokens": [model.vocab[i] for i in gen.tokens]}, sys.stdout, indent=1)
            print()
            return 0
        run = run_generation(model, prompt, a.new_tokens, rule=rule, seed=a.seed)
    except (LimitError, ValueError) as e:
        p.error(str(e))
    json.dump(run_dict(run, model.logit_tokens), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
