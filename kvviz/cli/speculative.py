"""``python -m kvviz speculate --prompt … --gamma 4``: a speculative run of the tiny GPT with its draft
model (kvviz.speculative), as JSON."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.cli.args import add_rule_arguments, rule_from
from kvviz.limits import SPECULATIVE_MAX_GAMMA, SPECULATIVE_MAX_NEW_TOKENS, LimitError
from kvviz.models.gpt import GPTModel
from kvviz.speculative import load_pair, speculation_dict, speculative_generate


def add_command(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("speculate", help="speculative decoding of the tiny GPT with its draft model, as JSON")
    sp.add_argument("--prompt", required=True, help='words of the tiny GPT, e.g. "Today the weather is so"')
    sp.add_argument("--new-tokens", type=int, default=24, help=f"tokens to generate (1..{SPECULATIVE_MAX_NEW_TOKENS})")
    sp.add_argument("--gamma", type=int, default=4, help=f"draft tokens per round (1..{SPECULATIVE_MAX_GAMMA})")
    add_rule_arguments(sp)
    sp.set_defaults(run=lambda a: run(a, sp))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The JSON on stdout, or one line on stderr and exit code 2 (``parser.error``)."""
    target, draft = load_pair()
    try:
        rule = rule_from(a)
        prompt = GPTModel(target).tokenize(a.prompt)
        ids = [target.tokenizer.index[w] for w in prompt]
        spec = speculative_generate(target.model, draft.model, ids, a.new_tokens, a.gamma, rule, a.seed)
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(speculation_dict(spec, target.tokenizer.vocab), sys.stdout, indent=1)
    print()
    return 0
