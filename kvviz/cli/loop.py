"""``python -m kvviz loop --what one-word|greedy-loop|whole-run``: the Real LLM page's loop views as JSON
(kvviz/ui/pages/llm_loop.py; the whole run is the Tiny GPT page's too). ``one-word``: two prompts'
next-token distributions and the greedy decode after each (kvviz.decoding.one_word); ``greedy-loop``:
greedy against sampling on one prompt, with the span each repeats (long_runs.loop_pair);
``whole-run``: the greedy run's attention as one matrix, a row per pass (kvviz.decoding.whole_run).
``--model smollm2`` (default, any text), ``gemma3`` or ``gpt`` (the tiny GPT: space-separated words)."""
from __future__ import annotations

import argparse
import json
import sys

from kvviz.decoding.long_runs import LOOP_TOKENS, SMOLLM2_LOOP_PROMPT, loop_pair
from kvviz.decoding.one_word import MAX_NEW, MAX_TOP, PROMPTS, one_word
from kvviz.decoding.stepper import run_generation
from kvviz.decoding.whole_run import whole_run
from kvviz.limits import LimitError, check_int
from kvviz.models.base import encode, split_prompt
from kvviz.models.registry import get_model

WHAT = ("one-word", "greedy-loop", "whole-run")
LOOP_PROMPT = SMOLLM2_LOOP_PROMPT


def add_command(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser("loop", help="print the loop views (two prompts, greedy's loop, the whole run) as JSON")
    c.add_argument("--what", choices=WHAT, default="one-word", help="which view (default one-word)")
    c.add_argument("--model", choices=("smollm2", "gemma3", "gpt"), default="smollm2")
    c.add_argument("--a", default=PROMPTS[0], help=f'one-word and whole-run: the first prompt ("{PROMPTS[0]}")')
    c.add_argument("--b", default=PROMPTS[1], help=f'one-word: the second prompt ("{PROMPTS[1]}")')
    c.add_argument("--prompt", default=LOOP_PROMPT, help=f'greedy-loop: the prompt ("{LOOP_PROMPT}")')
    c.add_argument("--new-tokens", type=int, default=None,
                   help=f"new tokens (default 12; greedy-loop {LOOP_TOKENS}; 1..{MAX_NEW})")
    c.add_argument("--top", type=int, default=8, help=f"one-word: next tokens listed per prompt (1..{MAX_TOP})")
    c.add_argument("--tau", type=float, default=1.0, help="greedy-loop: the sampling temperature")
    c.add_argument("--seed", type=int, default=0, help="greedy-loop: the seed of the draws")
    c.add_argument("--layer", type=int, default=1, help="whole-run: the layer, from 1")
    c.add_argument("--head", type=int, default=1, help="whole-run: the head, from 1")
    c.set_defaults(run=lambda a: run(a, c))


def _tokens(model, text: str) -> list[str]:
    """The prompt as the model's tokens: a real model's tokenizer (no chat template), the tiny GPT's words."""
    return model.prompt(text, False) if hasattr(model, "prompt") else split_prompt(text)


def _text(model, ids: list[int]) -> str:
    return model.decode(ids) if hasattr(model, "decode") else " ".join(model.vocab[i] for i in ids)


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        new = check_int("New tokens", LOOP_TOKENS if a.new_tokens is None and a.what == "greedy-loop"
                        else 12 if a.new_tokens is None else a.new_tokens, 1, MAX_NEW)
        top = check_int("Top", a.top, 1, MAX_TOP)
        model = get_model(a.model)
        out: dict = {"model": model.name, "what": a.what}
        if a.what == "one-word":
            ids = tuple(encode(model, _tokens(model, s)) for s in (a.a, a.b))
            got = one_word(model, ids, new)
            out.update(total_variation=got.total_variation(), first_differing_token=got.first_differing_token,
                       prompts=[{"prompt": s, "next": [{"token": _text(model, [i]), "p": p} for i, p in br.top(top)],
                                 "greedy": [{"token": _text(model, [i]), "p": p}
                                            for i, p in zip(br.generation.tokens, br.chosen_p())],
                                 "text": _text(model, br.generation.tokens)}
                                for s, br in ((a.a, got.a), (a.b, got.b))])
        elif a.what == "greedy-loop":
            pair = loop_pair(model, encode(model, _tokens(model, a.prompt)), new, a.tau, a.seed)
            out.update(prompt=a.prompt, tau=pair.tau, seed=pair.seed, **{
                k: {"text": _text(model, g.tokens), "repeat": None if r is None else
                    {"span": _text(model, list(r.span)), "count": r.count, "covered": r.covered,
                     "starts": list(r.starts)}}
                for k, g, r in (("greedy", pair.greedy, pair.greedy_repeat),
                                ("sampled", pair.sampled, pair.sampled_repeat))})
        else:
            run_ = run_generation(model, _tokens(model, a.a), new, recheck=False)
            w = whole_run(run_, a.layer - 1, a.head - 1, model)
            out.update(prompt=a.a, layer=a.layer, head=a.head, prompt_rows=w.prompt_len, passes=w.passes,
                       tokens=w.tokens, pass_of_row=w.pass_of_row, recompute_max_abs_diff=w.recompute_max_abs_diff,
                       weights=[[round(float(x), 6) for x in w.weights[p, :p + 1]] for p in range(len(w.tokens))])
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    json.dump(out, sys.stdout, indent=1, ensure_ascii=False)
    print()
    return 0
