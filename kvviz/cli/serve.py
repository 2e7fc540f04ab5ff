"""``python -m kvviz serve --requests 6 …``: a seeded stream of requests served from a paged cache
(kvviz.serving), as JSON.

``serve --model smollm2|gemma3|… [--chat]`` serves a stream of short messages to a real model
instead (kvviz.serving.chat_stream): with ``--chat`` (a model with a chat template, as SmolLM2) each
one inside the chat template, so every prompt
begins with the same system prompt, and prefix caching is on; the same JSON, with every request
checked against its solo greedy run (``same_as_solo``, ``max_abs_diff``) and the blocks it shared.

``--chunk-budget N``: chunked prefill (kvviz.serving.scheduler): each step's pass processes at most N
positions, the decodes first; the JSON adds each step's ``budget`` and ``chunks``. Every request's
``ttft_steps`` and ``gap_steps`` (steps between its tokens) are printed with or without it; ``--timed`` times every pass
and adds ``ttft_s`` and ``gaps_s`` (measured seconds, one sample per pass).

``--prefix-cache hash|radix``: prefix caching on, by full blocks named by hash (vLLM) or to the token
(a radix tree's match, SGLang; a partly matched block copied); every request is checked against its
solo run and the JSON adds ``prefix_cache``, ``tolerance`` and per request ``same_as_solo``,
``max_abs_diff``, ``blocks_saved`` and ``prefill_saved``."""
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
    check_int,
)
from kvviz.models.base import encode
from kvviz.models.registry import MODELS, REAL_MODELS, get_model, limits_before_loading
from kvviz.serving import POLICIES, chat_stream, request_stream, serve, serve_run_dict
from kvviz.serving.disagg import serve_disaggregated
from kvviz.serving.scheduler import MAX_CHUNK_BUDGET, PREFIX_CACHES

SERVE_MODELS = ("gpt", *REAL_MODELS)      # the tiny GPT, SmolLM2, Gemma 3 and any the host names
LLM_DEFAULTS = {"requests": 3, "block_size": 8, "num_blocks": 32, "max_new_tokens": 4}   # a real model


def add_command(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a seeded stream of requests from a paged cache; print the run as JSON")
    p.add_argument("--model", choices=SERVE_MODELS, default="gpt",
                   help="gpt (default: the tiny GPT's weather sentences) or a real model (short messages)")
    p.add_argument("--chat", action="store_true",
                   help="a real model with a chat template (smollm2): every message inside it (a shared system "
                        "prompt); prefix caching on")
    p.add_argument("--requests", type=int, default=None,
                   help=f"requests in the stream (1..{MAX_SERVE_REQUESTS}; default 6, smollm2 3 of at most 6)")
    p.add_argument("--block-size", type=int, default=None,
                   help=f"positions per block (1..{MAX_SERVE_BLOCK_SIZE}; default 4, smollm2 8)")
    p.add_argument("--num-blocks", type=int, default=None,
                   help=f"blocks in the pool (1..{MAX_SERVE_BLOCKS}; default 32; smollm2: at most 1,024 positions)")
    p.add_argument("--seed", type=int, default=0, help=f"seed of the stream (0..{MAX_SEED})")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help=f"most tokens a request generates (1..{MAX_SERVE_NEW_TOKENS}; default 12, smollm2 4 of "
                        "at most 16)")
    p.add_argument("--policy", choices=POLICIES, default="continuous", help="continuous or static batching")
    p.add_argument("--shared-prefix", type=int, default=0, metavar="P",
                   help="gpt: every prompt starts with the same P words, and prefix caching is on "
                        f"(0..{MAX_SERVE_SHARED_PREFIX})")
    p.add_argument("--chunk-budget", type=int, default=None, metavar="N",
                   help=f"chunked prefill: tokens each step's pass may process, decodes first, prompts in chunks "
                        f"in the rest (batch size..{MAX_CHUNK_BUDGET}; default: whole prompts)")
    p.add_argument("--prefix-cache", choices=PREFIX_CACHES, default=None,
                   help="prefix caching on, by full blocks named by hash (vLLM) or to the token through a radix "
                        "tree (SGLang); every request is checked against its solo run: same_as_solo, prefill_saved")
    p.add_argument("--timed", action="store_true",
                   help="time every pass (kvviz.measure.clock): each request's ttft_s and gaps_s in seconds")
    p.add_argument("--disaggregated", action="store_true",
                   help="gpt: also serve each request by two processes, the cache shipped between them "
                        "(kvviz.serving.disagg): bytes_shipped and same_as_disaggregated per request")
    p.set_defaults(run=lambda a: run(a, p))


def _value(a: argparse.Namespace, name: str, default: int) -> int:
    got = getattr(a, name)
    return default if got is None else got


def run(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if a.model != "gpt":
        return run_llm(a, parser)
    if a.chat:
        parser.error("--chat needs a real model with a chat template (--model smollm2)")
    if a.disaggregated and _value(a, "requests", 6) > 4:
        parser.error("--disaggregated starts two processes per request: at most 4 requests")
    try:
        stream = request_stream(_value(a, "requests", 6), a.seed, _value(a, "max_new_tokens", 12), a.shared_prefix)
        served = serve(get_model("gpt"), stream, _value(a, "block_size", 4), _value(a, "num_blocks", 32), a.policy,
                       prefix_caching=a.shared_prefix > 0 or a.prefix_cache is not None, chunk_budget=a.chunk_budget,
                       timed=a.timed, check=a.prefix_cache is not None, prefix_cache=a.prefix_cache or "hash")
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    out = serve_run_dict(served)
    if a.prefix_cache is not None:
        _checked(out, served, a.prefix_cache)
    if a.disaggregated:
        model = get_model("gpt")
        for r, d in zip(served.requests, out["requests"]):
            shipped = serve_disaggregated("gpt", encode(model, r.request.prompt), len(r.tokens))
            d.update(bytes_shipped=shipped.bytes_sent, transfer_s=shipped.transfer_s,
                     same_as_disaggregated=[model.logit_tokens[i] for i in shipped.tokens] == list(r.tokens))
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def run_llm(a: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """A real model's stream of messages; every number is checked before the weights load (seconds, 0.5-1 GB)."""
    if a.disaggregated:
        parser.error("--disaggregated serves the tiny GPT (a real model's workers would each load its weights)")
    if a.shared_prefix:
        parser.error("--shared-prefix is the tiny GPT's; a real model shares its chat template's system prompt "
                     "(--chat)")
    n, bs = _value(a, "requests", LLM_DEFAULTS["requests"]), _value(a, "block_size", LLM_DEFAULTS["block_size"])
    blocks, new = _value(a, "num_blocks", LLM_DEFAULTS["num_blocks"]), _value(a, "max_new_tokens",
                                                                               LLM_DEFAULTS["max_new_tokens"])
    early = limits_before_loading(a.model)
    try:
        check_int("Block size", bs, 1, MAX_SERVE_BLOCK_SIZE)
        check_int("Number of blocks", blocks, 1, MAX_SERVE_BLOCKS)
        check_int("Seed", a.seed, 0, MAX_SEED)
        if a.chunk_budget is not None:
            check_int("Chunk budget", a.chunk_budget, 1, MAX_CHUNK_BUDGET)
        if early is not None:
            early.check_serve_pool(n, bs, blocks)
            check_int("New tokens", new, 1, early.serve_new_tokens)
        if a.chat and not getattr(getattr(MODELS[a.model], "SPEC", None), "chat_template", True):
            raise ValueError(f"--chat needs a chat template; {a.model} is a base model (plain text only)")
        model = get_model(a.model)                      # ModelUnavailable (a LimitError) without weights
        served = serve(model, chat_stream(model, n, new, chat=a.chat, seed=a.seed), bs, blocks, a.policy,
                       prefix_caching=a.chat or a.prefix_cache is not None, check=True, chunk_budget=a.chunk_budget,
                       timed=a.timed, prefix_cache=a.prefix_cache or "hash")
    except (LimitError, ValueError) as e:
        parser.error(str(e))
    out = serve_run_dict(served)
    for r, d in zip(served.requests, out["requests"]):     # the real model's check, per request
        d.update(prompt_text=model.decode(r.request.prompt), text=model.decode(r.tokens),
                 same_as_solo=r.tokens == r.solo_tokens, max_abs_diff=r.max_abs_diff,
                 blocks_saved=r.blocks_saved, prefill_saved=r.prefill_saved)
    out.update(chat=a.chat, prefix_caching=served.prefix_caching, tolerance=served.tolerance,
               blocks_saved=served.blocks_saved, prefill_saved=served.prefill_saved)
    if a.prefix_cache is not None:
        out["prefix_cache"] = a.prefix_cache
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0


def _checked(out: dict, served, mode: str) -> None:
    """The JSON of a run served with ``--prefix-cache``: the mode, the tolerance, and per request its
    check against its solo run and what prefix caching saved."""
    for r, d in zip(served.requests, out["requests"]):
        d.update(same_as_solo=r.tokens == r.solo_tokens, max_abs_diff=r.max_abs_diff, blocks_saved=r.blocks_saved,
                 prefill_saved=r.prefill_saved)
    out.update(prefix_cache=mode, tolerance=served.tolerance, blocks_saved=served.blocks_saved,
               prefill_saved=served.prefill_saved)
