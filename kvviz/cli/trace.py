"""``python -m kvviz trace MODEL --prompt "A B" --new-tokens 4``: the events of one stepper run as JSON."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.cli.args import add_rule_arguments, rule_from
from kvviz.decoding.loops import generate
from kvviz.decoding.stepper import run_generation
from kvviz.decoding.trace import run_dict
from kvviz.limits import GPT_MAX_SWEEP_TOKENS, MAX_NEW_TOKENS, LimitError, check_int
from kvviz.models.registry import MODELS, get_model


def add_command(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("trace", help="print the events of one run as JSON")
    t.add_argument("model", choices=sorted(MODELS), help="which model to run")
    t.add_argument("--prompt", required=True, help='space-separated tokens, e.g. "A B"')
    t.add_argument("--new-tokens", type=int, default=4, help=f"tokens to generate (1..{MAX_NEW_TOKENS})")
    add_rule_arguments(t)
    t.add_argument("--no-cache", action="store_true",
                   help="gpt only: print the tokens of the recomputing generate (no KV cache), not the trace")
    t.set_defaults(run=lambda a: run(a, t))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    model = get_model(a.model)
    try:
        rule = rule_from(a)
        prompt = model.tokenize(a.prompt)
        if a.no_cache:
            network = getattr(model, "network", None)     # models with a GPT network have the fast loops
            if network is None:
                parser.error(f"--no-cache needs a model with a generate loop (gpt), not {a.model!r}")
            n = check_int("New tokens", a.new_tokens, 1, GPT_MAX_SWEEP_TOKENS)
            gen = generate(network, [model.vocab.index(w) for w in prompt], n, rule, a.seed)
            json.dump({"model": model.name, "prompt": prompt, "cache": False, "rule": rule.describe(),
                       "seed": a.seed, "tokens": [model.vocab[i] for i in gen.tokens]}, sys.stdout, indent=1)
            print()
            return 0
        stepped = run_generation(model, prompt, a.new_tokens, rule=rule, seed=a.seed)
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(run_dict(stepped, model.logit_tokens), sys.stdout, indent=1)
    print()
    return 0
