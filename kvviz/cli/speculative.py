"""``python -m kvviz speculate --prompt … --gamma 4``: a speculative run of the tiny GPT with its draft
model (kvviz.speculative), as JSON.

``speculate --model smollm2 --draft prompt-lookup --prompt TEXT [--chat]`` (or ``--model gemma3``, a base
model: plain text only) runs prompt-lookup decoding
on SmolLM2 instead (kvviz.speculative.prompt_lookup: the draft is looked up in the text itself) and
runs plain greedy decoding too, to say whether the tokens are the same (``same_as_greedy``).
``--draft early-exit --exit-layer K`` drafts with SmolLM2's own first K layers
(kvviz.speculative.early_exit), the same JSON.
"""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.cli.args import add_rule_arguments, rule_from
from kvviz.decoding.loops import generate_cached
from kvviz.limits import (
    EARLY_EXIT_MAX_TOKENS,
    PROMPT_LOOKUP_MAX_NGRAM,
    PROMPT_LOOKUP_MAX_TOKENS,
    SPECULATIVE_MAX_GAMMA,
    SPECULATIVE_MAX_NEW_TOKENS,
    LimitError,
)
from kvviz.models.hf import HFCausalLM
from kvviz.models.registry import get_model, limits_before_loading
from kvviz.speculative import (
    check_prompt_lookup,
    load_pair,
    prompt_lookup_dict,
    prompt_lookup_generate,
    speculation_dict,
    speculative_generate,
)
from kvviz.speculative.early_exit import DEFAULT_DRAFT_TOKENS, DEFAULT_EXIT_LAYER, check_early_exit, early_exit_generate
from kvviz.speculative.prompt_lookup import DEFAULT_LOOKUP_TOKENS, DEFAULT_MAX_NGRAM

DRAFTS = ("model", "prompt-lookup", "early-exit")
SPEC_MODELS = ("gpt", "smollm2", "gemma3")  # the draft model is the tiny GPT's; prompt lookup needs a transformers LM
DEFAULT_GAMMA = 4
EARLY_EXIT_LAYERS = {"smollm2": 30, "gemma3": 18}   # layers known before the weights load (checked first)


def add_command(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("speculate", help="speculative decoding (the tiny GPT with its draft model, or "
                                          "prompt lookup on SmolLM2), as JSON")
    sp.add_argument("--model", choices=SPEC_MODELS, default="gpt",
                    help="the target: gpt (default, with --draft model), smollm2 or gemma3 (with --draft prompt-lookup "
                         "or early-exit)")
    sp.add_argument("--draft", choices=DRAFTS, default="model",
                    help="model: the tiny GPT's draft model (default); prompt-lookup: the continuation of an "
                         "earlier occurrence of the text's last n-gram; early-exit: the target's own first "
                         "K layers (smollm2)")
    sp.add_argument("--prompt", required=True,
                    help='words of the tiny GPT, e.g. "Today the weather is so" (smollm2: any text)')
    sp.add_argument("--chat", action="store_true",
                    help="smollm2: the prompt is a user message inside the model's chat template")
    sp.add_argument("--new-tokens", type=int, default=24,
                    help=f"tokens to generate (1..{SPECULATIVE_MAX_NEW_TOKENS}; smollm2: 1..64)")
    sp.add_argument("--gamma", type=int, default=None,
                    help=f"--draft model: draft tokens per round (1..{SPECULATIVE_MAX_GAMMA}, default {DEFAULT_GAMMA})")
    sp.add_argument("--lookup-tokens", type=int, default=None, metavar="K",
                    help=f"--draft prompt-lookup: most draft tokens per round (1..{PROMPT_LOOKUP_MAX_TOKENS}, "
                         f"default {DEFAULT_LOOKUP_TOKENS}); early-exit: 1..{EARLY_EXIT_MAX_TOKENS}, "
                         f"default {DEFAULT_DRAFT_TOKENS}")
    sp.add_argument("--ngram", type=int, default=None, metavar="N",
                    help=f"--draft prompt-lookup: the largest n-gram looked up (1..{PROMPT_LOOKUP_MAX_NGRAM}, "
                         f"default {DEFAULT_MAX_NGRAM})")
    sp.add_argument("--exit-layer", type=int, default=None, metavar="K",
                    help=f"--draft early-exit: the layers the draft runs (1..layers − 1, default {DEFAULT_EXIT_LAYER})")
    add_rule_arguments(sp)
    sp.set_defaults(run=lambda a: run(a, sp))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The JSON on stdout, or one line on stderr and exit code 2 (``parser.error``)."""
    if a.draft in ("prompt-lookup", "early-exit"):
        return run_prompt_lookup(a, parser)
    if a.model != "gpt":
        parser.error(f"--draft model is the tiny GPT's draft; --model {a.model} needs --draft prompt-lookup")
    for flag, value in (("--chat", a.chat or None), ("--lookup-tokens", a.lookup_tokens), ("--ngram", a.ngram),
                        ("--exit-layer", a.exit_layer)):
        if value is not None:
            parser.error(f"{flag} needs --draft prompt-lookup or early-exit")
    target, draft = load_pair()
    try:
        rule = rule_from(a)
        prompt = target.tokenize(a.prompt)
        ids = [target.tokenizer.index[w] for w in prompt]
        gamma = DEFAULT_GAMMA if a.gamma is None else a.gamma
        spec = speculative_generate(target, draft, ids, a.new_tokens, gamma, rule, a.seed)
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(speculation_dict(spec, target.tokenizer.vocab), sys.stdout, indent=1)
    print()
    return 0


def run_prompt_lookup(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Prompt lookup or early exit on a transformers model: every number is checked before the weights load."""
    early_exit = a.draft == "early-exit"
    if a.model == "gpt":
        parser.error(f"--draft {a.draft} needs a transformers model (--model smollm2 or gemma3), not {a.model!r}")
    if a.gamma is not None:
        parser.error(f"--gamma is the draft model's; --draft {a.draft} takes --lookup-tokens")
    if early_exit and a.ngram is not None:
        parser.error("--ngram is prompt lookup's; early exit takes --exit-layer")
    if not early_exit and a.exit_layer is not None:
        parser.error("--exit-layer needs --draft early-exit")
    default_k = DEFAULT_DRAFT_TOKENS if early_exit else DEFAULT_LOOKUP_TOKENS
    k = default_k if a.lookup_tokens is None else a.lookup_tokens
    n = DEFAULT_MAX_NGRAM if a.ngram is None else a.ngram
    layers = EARLY_EXIT_LAYERS.get(a.model)
    default_exit = DEFAULT_EXIT_LAYER if layers is None else max(1, min(layers - 1, round(layers * 4 / 5)))
    exit_layer = default_exit if a.exit_layer is None else a.exit_layer
    early = limits_before_loading(a.model)
    try:
        rule = rule_from(a)
        if early is not None:
            check_prompt_lookup(early.check_request(a.prompt, a.new_tokens), 1 if early_exit else k, n, rule,
                                early.max_new_tokens)
            if early_exit:
                check_early_exit(None, exit_layer, k, EARLY_EXIT_LAYERS.get(a.model))
        model = get_model(a.model)                        # ModelUnavailable (a LimitError) without weights
        if not isinstance(model, HFCausalLM):
            parser.error(f"--draft {a.draft} needs a transformers model, not {a.model!r}")
        new_tokens = model.limits.check_request(a.prompt, a.new_tokens)
        ids = model.ids(model.prompt(a.prompt, a.chat))
        if early_exit:
            run = early_exit_generate(model, ids, new_tokens, exit_layer, k, rule)
        else:
            run = prompt_lookup_generate(model, ids, new_tokens, k, n, rule)
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    plain = generate_cached(model, ids, new_tokens, keep_logits=False)     # the same greedy, one step a token
    out = {"model": model.name, "draft": a.draft, "rule": {"name": "greedy"},
           **prompt_lookup_dict(run, model.vocab), "text": model.decode(run.tokens),
           "same_as_greedy": run.tokens == plain.tokens, "greedy_passes": len(plain.tokens)}
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0
