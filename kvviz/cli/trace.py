"""``python -m kvviz trace MODEL --prompt "A B" --new-tokens 4``: the events of one stepper run as JSON.

``trace smollm2 --prompt TEXT [--chat]`` runs SmolLM2-135M-Instruct (any text; ``--chat`` puts it in
the model's chat template) and adds ``prompt_ids`` and ``new_ids``, the tokenizer's ids; ``trace
gemma3`` runs Gemma 3 270M (a base model: plain text) and any model a host names (``KVVIZ_MODELS``)
by its name. A real model's trace also lists each layer's cache after the run (``cache_layers``:
kind, window, rows held, positions seen) and the cache's bytes: Gemma 3's sliding layers stop at
their window while its global layers grow. A real model's long prompt is recorded as the Real LLM
page records it (kvviz.models.base.Keep): a pass longer than ``Keep.rows`` lists its newest query's
attention row (``attention_positions``) and its last positions' output, and a run whose records
would pass the cap is refused in one line.

``--no-cache`` prints the tokens of the recomputing loop, with ``repeat``: the span the new text writes
most often (kvviz.decoding.long_runs.repeated_span; null when nothing comes back three times: greedy's
loop shows here), and for the tiny GPT ``cropped_steps``: the steps whose model saw the text cut to
its last block_size tokens.
"""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.cli.args import add_rule_arguments, rule_from
from kvviz.decoding.long_runs import crop_windows, repeated_span
from kvviz.decoding.loops import generate, generate_cached
from kvviz.decoding.stepper import run_generation
from kvviz.decoding.trace import run_dict
from kvviz.limits import GPT_MAX_SWEEP_TOKENS, MAX_NEW_TOKENS, LimitError, check_int
from kvviz.models.base import Keep
from kvviz.models.hf import HFCausalLM
from kvviz.models.registry import MODELS, get_model, limits_before_loading

KEEP = Keep()   # a transformers model's long pass keeps what the Real LLM page keeps: its records capped

def add_command(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("trace", help="print the events of one run as JSON")
    t.add_argument("model", choices=sorted(MODELS), help="which model to run")
    t.add_argument("--prompt", required=True, help='space-separated tokens, e.g. "A B" (smollm2, gemma3: any text)')
    t.add_argument("--chat", action="store_true",
                   help="smollm2 only (a chat model): the prompt is a user message inside the model's chat template")
    t.add_argument("--new-tokens", type=int, default=4, help=f"tokens to generate (1..{MAX_NEW_TOKENS})")
    add_rule_arguments(t)
    t.add_argument("--no-cache", action="store_true",
                   help="gpt and the real models: print the tokens of the recomputing generate (no KV cache), "
                        "not the trace")
    t.set_defaults(run=lambda a: run(a, t))


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if a.chat and not getattr(getattr(MODELS.get(a.model), "SPEC", None), "chat_template", False):
        parser.error(f"--chat needs a chat model (smollm2), not {a.model!r}")
    early = limits_before_loading(a.model)
    if early is not None:
        try:
            early.check_request(a.prompt, a.new_tokens)
        except LimitError as e:
            parser.error(str(e))
    try:
        model = get_model(a.model)
    except (LimitError, ValueError) as e:                 # the weights are not installed, not representable
        parser.error(str(e))
    by_id = isinstance(model, HFCausalLM)                 # a tokenizer's ids next to its token strings
    try:
        rule = rule_from(a)
        prompt = model.prompt(a.prompt, a.chat) if by_id else model.tokenize(a.prompt)
        if a.no_cache:
            out = {"model": model.name, "prompt": prompt, "cache": False, "rule": rule.describe(), "seed": a.seed}
            if by_id:                                     # transformers' forward, the whole text every step
                n = check_int("New tokens", a.new_tokens, 1, model.limits.max_new_tokens)
                gen = generate_cached(model, model.ids(prompt), n, rule, a.seed, cached=False)
                out.update(tokens=model.tokens(gen.tokens), prompt_ids=gen.prompt, new_ids=gen.tokens)
            else:
                network = getattr(model, "network", None)     # models with a GPT network have the fast loops
                if network is None:
                    parser.error(f"--no-cache needs a model with a generate loop (gpt, smollm2), not {a.model!r}")
                n = check_int("New tokens", a.new_tokens, 1, GPT_MAX_SWEEP_TOKENS)
                gen = generate(network, [model.vocab.index(w) for w in prompt], n, rule, a.seed)
                out["tokens"] = [model.vocab[i] for i in gen.tokens]
                out["cropped_steps"] = sum(1 for w in crop_windows(len(prompt), n, network.config.block_size)
                                           if w.dropped)
            rep = repeated_span(out["tokens"])
            out["repeat"] = None if rep is None else {"span": list(rep.span), "count": rep.count,
                                                      "starts": list(rep.starts), "covered": rep.covered}
            json.dump(out, sys.stdout, indent=1)
            print()
            return 0
        # a causal transformers model: one recomputation of the whole text at the end checks every pass
        # a long prompt's passes keep the newest query rows and pooled maps (KEEP), as on the page
        stepped = run_generation(model, prompt, a.new_tokens, rule=rule, seed=a.seed,
                                 recheck="final" if by_id else True, keep=KEEP if by_id else None)
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    d = run_dict(stepped, model.logit_tokens)
    if by_id:
        d["prompt_ids"] = model.ids(stepped.prompt)
        d["new_ids"] = model.ids([e.chosen for e in stepped.events if e.phase == "choose"])
        last = stepped.events[-1].cache          # each layer after the run: global, or sliding with its window
        seen = len(stepped.prompt) + len(d["new_ids"]) - 1
        d["cache_layers"] = [{"layer": i, "kind": "global" if w is None else "sliding", "window": w,
                              "length": 0 if k is None else int(k.shape[-2]), "positions": seen}
                             for i, (w, k) in enumerate(zip(model.windows, last.keys))]
        d["cache_bytes"] = last.nbytes()
    json.dump(d, sys.stdout, indent=1)
    print()
    return 0
