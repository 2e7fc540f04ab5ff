"""Serving a stream of requests from one paged cache (kvviz.serving): continuous and static
batching, preemption, prefix sharing, forks. Every request gets the tokens of its solo greedy run, and
the allocator's books balance at every step, on the tiny GPT and on transformers models (SmolLM2's chat
and plain-text requests through transformers' own forward, a tiny random Gemma 3's plain text through
its hybrid cache): one test per claim, parametrized over the models; real weights only where a number
needs them (SmolLM2, loaded once per worker, the session fixture; Gemma 3's real weights: tests/test_gemma3.py)."""
import dataclasses
import json

import pytest
import torch

from kvviz import cost
from kvviz.cache import DynamicCache
from kvviz.cli.main import main
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.stepper import run_generation
from kvviz.limits import MAX_SERVE_REQUESTS, LimitError
from kvviz.models.abc import ABCModel
from kvviz.models.base import encode
from kvviz.models.gpt import GPTModel
from kvviz.serving import (
    Request,
    chat_stream,
    common_prefix,
    compare_policies,
    fork_run,
    request_stream,
    serve,
    serve_run_dict,
)
from tests.test_cli import cli, one_line_error

M = GPTModel()
STREAM = request_stream(6, seed=0, max_new_tokens=10)
SHARED = request_stream(5, seed=1, max_new_tokens=6, shared_prefix=8)


BLOCK = 8          # real models: SmolLM2's 24 tokens of system prompt and markers fill three full blocks
REAL = {"smollm2_chat": ("smollm2", True), "smollm2_plain": ("smollm2", False),
        "gemma3_plain": ("tiny_gemma_host", False)}            # Gemma 3's architecture, random tiny weights
_REAL_RUNS: dict = {}


def _solo_tokens(req: Request, model=M) -> tuple[str, ...]:
    """The request alone through the fast loop (a contiguous StaticCache): an independent path."""
    gen = generate_cached(model, encode(model, req.prompt), req.max_new_tokens)
    return tuple(model.logit_tokens[i] for i in gen.tokens)


def _real(request, case: str):
    """(model, stream, checked run) of a transformers model's case (REAL): 2 requests of 2 tokens, one step apart, in
    blocks of 8; chat requests with prefix caching (request 1's prefill shares a pass with request 0's
    decode). Served once per module."""
    if case not in _REAL_RUNS:
        name, chat = REAL[case]
        model = request.getfixturevalue(name)
        stream = chat_stream(model, 2, 2, chat=chat)
        _REAL_RUNS[case] = (model, stream, serve(model, stream, BLOCK, 32, prefix_caching=chat, check=True))
    return _REAL_RUNS[case]


@pytest.fixture(scope="module")
def runs():
    return {
        "continuous": serve(M, STREAM, block_size=4, num_blocks=32, check=True, keep_kv=True),
        "static": serve(M, STREAM, block_size=4, num_blocks=32, policy="static"),
        "tight": serve(M, STREAM, block_size=4, num_blocks=8, check=True),        # too small: preemptions
        "shared": serve(M, SHARED, block_size=4, num_blocks=32, prefix_caching=True, check=True),
        "unshared": serve(M, SHARED, block_size=4, num_blocks=32),
    }


def _balanced(run) -> None:
    """The allocator's books after every step: reference counts are the block tables' entries, free
    blocks are exactly those nobody holds, slack lives only in last blocks."""
    bs = run.block_size
    for s in run.steps:
        counts = [0] * run.num_blocks
        for _, table in s.block_tables:
            for b in table:
                counts[b] += 1
        assert list(s.refcounts) == counts, s.step
        assert sorted(s.free_blocks) == [b for b in range(run.num_blocks) if counts[b] == 0]
        m = s.memory
        assert m.used <= m.paged and m.used <= m.logical <= m.contiguous
        assert m.slack < bs * max(1, len(s.running))           # at most one part-empty block per sequence
        assert set(s.running) | set(s.waiting) | set(s.preempted) >= set(s.finished)


@pytest.mark.parametrize("name", ["continuous", "static", "tight", "shared", *REAL])
def test_every_request_gets_its_solo_greedy_tokens(runs, name, request):
    """Tokens equal the fast loop's on a contiguous cache; a request ends at its length or at the
    model's end token, as its solo run does (plain text on SmolLM2 used to run past it: an IndexError)."""
    if name in REAL:
        model, stream, run = _real(request, name)
    else:
        model, stream, run = M, SHARED if name == "shared" else STREAM, runs[name]
    assert [r.tokens for r in run.requests] == [_solo_tokens(q, model) for q in stream]
    ends = getattr(model, "end_tokens", ())
    assert all(len(r.tokens) == r.request.max_new_tokens or r.tokens[-1] in ends for r in run.requests)
    if name != "static":                                     # the checked runs: logits within fp32 rounding
        assert run.tolerance == 1e-4
        assert all(r.max_abs_diff is not None and r.max_abs_diff <= run.tolerance for r in run.requests)
        assert all(r.tokens == r.solo_tokens for r in run.requests)
        assert all(s.max_abs_diff is not None and s.max_abs_diff <= 1e-4 for s in run.steps if s.chosen)
    _balanced(run)


def test_continuous_batching_mixes_prefill_and_decode_and_beats_static(runs):
    cont, static = runs["continuous"], runs["static"]
    assert any(s.prefill and s.decode for s in cont.steps)       # newcomers join a running batch
    assert not any(s.prefill and s.decode for s in static.steps)  # static: a batch runs to its end first
    first_batch = static.steps[0]
    assert first_batch.prefill == () and first_batch.waiting     # it waits for a full batch (4 requests)
    assert cont.total_steps < static.total_steps and cont.mean_ttft < static.mean_ttft
    assert cont.requests[0].ttft == 1                            # admitted at arrival, first token at once
    for r in cont.requests:
        assert r.ttft == r.first_token_step - r.request.arrival_step + 1
        assert r.tpot == (r.finish_step - r.first_token_step) / (len(r.tokens) - 1)


def test_solo_reference_runs_skip_only_the_recompute_check():
    """The check's references (run_generation with recheck=False): the same events and logits as a
    full run, without the no-cache recompute of every pass."""
    req = STREAM[0]
    full, quick = (run_generation(M, req.prompt, req.max_new_tokens, recheck=r) for r in (True, False))
    assert [e.tokens for e in quick.events] == [e.tokens for e in full.events]
    assert all(torch.equal(a.logits, b.logits) for a, b in zip(quick.events, full.events))
    assert all(e.check is None for e in quick.events) and full.events[0].check is not None


def test_a_finished_request_frees_its_blocks_in_its_last_step(runs):
    run = runs["continuous"]
    for s in run.steps[1:]:
        prev = run.steps[s.step - 1]
        for rid in s.finished:
            held = set(prev.tables[rid]) if rid in prev.tables else set()
            assert rid not in s.tables and held <= set(s.freed) | set(s.free_blocks)


def test_a_tight_pool_preempts_the_newest_and_recomputes_it(runs):
    run = runs["tight"]
    assert run.preemptions > 0
    admitted: dict[int, tuple[int, int]] = {}            # request -> (step, place) of its latest admission
    for s in run.steps:
        held = set(run.steps[s.step - 1].tables) if s.step else set()
        for rid in s.preempted:                          # the newest admitted goes first, then the next
            assert rid == max(held, key=admitted.__getitem__)
            assert rid in s.waiting and rid not in s.tables
            held.remove(rid)
        admitted.update({rid: (s.step, i) for i, rid in enumerate(s.prefill)})
    again = [s for s in run.steps if s.recomputed]
    assert again and all(set(s.recomputed) <= set(s.prefill) for s in again)
    # the recompute prefills the prompt and the tokens generated before the preemption
    rid = again[0].recomputed[0]
    ctx = dict(again[0].contexts)[rid]
    req = run.requests[rid]
    assert ctx[:len(req.request.prompt)] == req.request.prompt and len(ctx) > len(req.request.prompt)
    assert max(s.memory.paged for s in run.steps) <= 8 * 4


def test_memory_books_in_bytes_come_from_the_pool_and_the_cost_model(runs):
    run = runs["continuous"]
    per_token = cost.cache_bytes_per_token(M.cost_config, "fp32")
    busy = [s for s in run.steps if s.running]
    assert all(s.memory.slot_bytes == per_token for s in busy)
    # contiguous reservation: each running request's whole maximum length from the start
    s = busy[3]
    want = sum(len(run.requests[i].request.prompt) + run.requests[i].request.max_new_tokens - 1 for i in s.running)
    assert s.memory.contiguous == want
    assert s.memory.bytes("contiguous") == cost.cache_bytes(M.cost_config, want, 1, "fp32")
    assert sum(s.memory.paged for s in busy) < sum(s.memory.contiguous for s in busy)
    assert run.peak("paged") < run.peak("contiguous")


def test_the_pool_read_through_a_block_table_is_the_requests_cache(runs):
    """Layer 0's K of a running request, gathered from the kept pool through its block table,
    equals the K its solo run caches (to float32 rounding)."""
    run = runs["continuous"]
    s = run.steps[5]
    rid = s.decode[0]
    keys = s.logical_keys(rid)
    ctx = dict(s.contexts)[rid]
    solo = DynamicCache(M.n_layers)
    with torch.no_grad():
        M.network(torch.tensor([[M.vocab.index(w) for w in ctx]]), solo, 0)
    assert keys.shape == solo.layers[0].keys[0].shape
    assert float((keys - solo.layers[0].keys[0]).abs().max()) <= 1e-4


@pytest.mark.parametrize("name", ["shared", "smollm2_chat"])
def test_only_full_blocks_of_a_shared_prefix_are_shared_and_every_saved_position_counted(runs, name, request):
    run = runs[name] if name in runs else _real(request, name)[2]
    prompts = [r.request.prompt for r in run.requests]
    full = common_prefix([r.request for r in run.requests]) // run.block_size
    assert run.blocks_saved == full * (len(prompts) - 1) > 0       # every later request attached them all
    assert run.prefill_saved == run.block_size * run.blocks_saved
    assert sum(s.prefill_saved for s in run.steps) == run.prefill_saved
    assert not any(s.copied for s in run.steps)                  # only full blocks are shared: nothing to copy


def test_shared_prefix_blocks_are_counted_shared_and_saved(runs):
    shared, plain = runs["shared"], runs["unshared"]
    prompts = [r.request.prompt for r in shared.requests]
    assert len({p[:8] for p in prompts}) == 1                 # every prompt begins with the same 8 words
    assert shared.prefill_saved > 0 and shared.prefill_saved == 4 * shared.blocks_saved
    assert sum(s.prefill_saved for s in shared.steps) == shared.prefill_saved
    assert any(n > 1 for s in shared.steps for n in s.refcounts)
    assert all(n <= 1 for s in plain.steps for n in s.refcounts)
    assert [r.tokens for r in shared.requests] == [r.tokens for r in plain.requests]
    assert shared.peak("paged") < plain.peak("paged")
    assert any(s.memory.used < s.memory.logical for s in shared.steps)   # a shared block counted once
    assert not any(s.copied for s in shared.steps)             # only full blocks are shared: nothing to copy


def test_abc_served_with_sharing_is_exact():
    m = ABCModel()
    reqs = [Request(0, ("A", "B", "B", "A", "C"), 4, 0), Request(1, ("A", "B", "B", "A", "A"), 5, 1),
            Request(2, ("C",), 3, 1)]
    run = serve(m, reqs, block_size=2, num_blocks=8, prefix_caching=True, check=True)
    assert run.tolerance == 1e-9 and run.blocks_saved == 2
    assert all(r.max_abs_diff <= 1e-9 and r.tokens == r.solo_tokens for r in run.requests)


def test_records_cannot_be_changed(runs):
    s = runs["continuous"].steps[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.step = 3
    with pytest.raises(dataclasses.FrozenInstanceError):
        runs["continuous"].requests[0].tokens = ()
    assert isinstance(s.block_tables, tuple) and isinstance(s.refcounts, tuple)


def test_caps_and_bad_settings_are_refused():
    with pytest.raises(LimitError, match="Requests"):
        request_stream(MAX_SERVE_REQUESTS + 1)
    with pytest.raises(LimitError, match="pool holds only 8"):
        serve(M, STREAM, block_size=1, num_blocks=8)
    with pytest.raises(LimitError, match="Block size"):
        serve(M, STREAM, block_size=64)
    with pytest.raises(LimitError, match="policy"):
        serve(M, STREAM, policy="fifo")
    with pytest.raises(LimitError, match="Unknown token"):
        serve(M, [Request(0, ("Zebra",), 2)])


def test_compare_policies_runs_the_same_stream_twice():
    out = compare_policies(M, STREAM[:2], block_size=8, num_blocks=8)
    assert set(out) == {"continuous", "static"}
    assert [r.tokens for r in out["continuous"].requests] == [r.tokens for r in out["static"].requests]


def test_cli_prints_the_documented_shape(capsys):
    code, out, err = cli(capsys, "serve", "--requests", "3", "--block-size", "4", "--num-blocks", "16", "--seed", "0",
            "--max-new-tokens", "4", "--shared-prefix", "8")
    assert code == 0, err
    d = json.loads(out)
    assert set(d) == {"model", "block_size", "num_blocks", "policy", "requests", "steps"}
    assert (d["model"], d["block_size"], d["num_blocks"], d["policy"]) == ("gpt", 4, 16, "continuous")
    assert set(d["requests"][0]) == {"id", "prompt", "arrival_step", "tokens", "first_token_step",
                                     "finish_step", "preemptions", "ttft_steps", "gap_steps"}
    assert set(d["steps"][0]) == {"step", "prefill", "decode", "waiting", "finished", "block_tables",
                                  "refcounts", "free_blocks"}
    assert len({tuple(r["prompt"][:8]) for r in d["requests"]}) == 1
    assert any(n > 1 for s in d["steps"] for n in s["refcounts"].values())
    stream = request_stream(3, 0, 4, 8)
    assert d == serve_run_dict(serve(M, stream, 4, 16, prefix_caching=True))    # the same run as the engine's
    assert [r["tokens"] for r in d["requests"]] == [list(_solo_tokens(q)) for q in stream]


@pytest.mark.parametrize("args", [["--block-size", "0"], ["--num-blocks", "2"], ["--policy", "fifo"],
                                  ["--requests", "x"], ["--requests", "99"], ["--shared-prefix", "-1"],
                                  ["--max-new-tokens", "0"], ["--seed", "-3"], ["--prefix-cache", "tree"]])
def test_cli_bad_arguments_give_one_line_and_exit_2(args, capsys):
    """In-process (``python -m kvviz`` is this ``main``): a subprocess each would mostly time torch's import."""
    with pytest.raises(SystemExit) as ex:
        main(["serve", *args])
    out = capsys.readouterr()
    assert ex.value.code == 2 and out.out == ""
    assert len(out.err.strip().splitlines()) == 1 and out.err.startswith("kvviz: error: "), out.err


@pytest.mark.parametrize("model,prompt,bs,new", [(M, ("It", "was", "lovely", "in", "Dublin"), 4, 4),
                                                 (ABCModel(), ("A", "B", "A"), 2, 4),
                                                 ("tiny_hf", None, BLOCK, 3)])
def test_fork_run_shares_the_prompt_copies_on_first_write_and_equals_each_solo_run_bit_for_bit(model, prompt, bs,
                                                                                              new, request):
    """Parallel sampling (the page's copy-on-write section): the prompt's blocks are held by every
    sample after the fork; the first write into the partly filled last block copies it, once per
    sample but the last (who then owns the original); every sample's logits equal its own
    contiguous run's bit for bit; at the end every block is free. A transformers model (the tiny
    random Llama): a text of 30 tokens, 6 in its last block of 8."""
    if isinstance(model, str):
        model = request.getfixturevalue(model)
        prompt = tuple(model.tokenize("Today the weather is so nice that we walk in the park. It is rainy in London, "
                                      "so we stay at home and read a book."))
        assert len(prompt) == 30
    assert len(prompt) % bs
    run = fork_run(model, prompt, new_tokens=new, block_size=bs, num_blocks=16, samples=3, seed=5)
    first = run.steps[0]
    n_prompt_blocks = -(-len(prompt) // bs)
    assert first.prefill == (0,) and first.refcounts[:n_prompt_blocks] == (3,) * n_prompt_blocks
    assert first.taken == tuple(range(n_prompt_blocks)) and first.prefill_saved == 2 * len(prompt)
    last_prompt_block = n_prompt_blocks - 1
    assert [(t, a) for t, a, _ in run.copies] == [(1, last_prompt_block)] * 2      # two of three copy
    assert all(run.identical)
    assert all(s.max_abs_diff == 0.0 for s in run.steps)
    for i, seed in enumerate(run.seeds):
        solo = run_generation_tokens(model, prompt, new, seed)
        assert run.samples[i] == solo
    end = run.steps[-1]
    assert end.finished == (0, 1, 2) and sum(end.refcounts) == 0 and len(end.free_blocks) == 16
    assert sorted(end.freed) == sorted({b for s in run.steps[:-1] for _, t in s.block_tables for b in t})


def run_generation_tokens(model, prompt, n, seed):
    """The sample alone on a contiguous cache: the fast loop where the model has one (the stepper's
    draws, seeded alike), else the stepper (the ABC model)."""
    from kvviz.decoding.sampling import Sampler
    if hasattr(model, "logits"):
        gen = generate_cached(model, encode(model, prompt), n, Sampler(1.0), seed)
        return tuple(model.logit_tokens[i] for i in gen.tokens)
    run = run_generation(model, list(prompt), n, Sampler(1.0), seed)
    return tuple(e.chosen for e in run.events if e.phase == "choose")


def test_fork_run_with_a_full_last_block_copies_nothing_and_refuses_a_small_pool():
    run = fork_run(M, ("It", "was", "lovely", "in"), new_tokens=3, block_size=4, num_blocks=8)
    assert run.copies == () and all(run.identical)
    with pytest.raises(LimitError):
        fork_run(M, ("It", "was", "lovely", "in"), new_tokens=12, block_size=4, num_blocks=4)


# ---- the real models' own numbers (SmolLM2's chat template, its caps, the CLI) -------------------------

def test_every_prompt_begins_with_the_system_prompt_and_its_markers(request):
    smollm2, stream, _ = _real(request, "smollm2_chat")
    n = common_prefix(stream)
    assert n == 24 and stream[1].arrival_step == 1
    assert smollm2.decode(stream[0].prompt[:n]) == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                                                    "trained by Hugging Face<|im_end|>\n<|im_start|>user\n")


def test_the_system_prompts_full_blocks_are_shared(request):
    served = _real(request, "smollm2_chat")[2]
    assert served.steps[1].prefill == (1,) and served.steps[1].decode == (0,)       # one padded batch
    first, second = served.requests
    assert (first.blocks_saved, first.prefill_saved) == (0, 0)
    assert (second.blocks_saved, second.prefill_saved) == (3, 24)
    assert served.blocks_saved == 3 and served.prefill_saved == 24
    s0, s1 = served.steps[:2]
    assert s0.tables[0][:3] == (0, 1, 2) and s1.shared == (0, 1, 2) and s1.tables[1][:3] == (0, 1, 2)
    assert s1.finished == (0,) and [s1.refcounts[b] for b in (0, 1, 2)] == [1, 1, 1]     # request 0 let go


def test_the_engine_caps_a_served_run_on_smollm2(request):
    smollm2, stream, _ = _real(request, "smollm2_chat")
    with pytest.raises(LimitError, match="between 1 and 6"):
        serve(smollm2, [Request(i, stream[0].prompt, 2) for i in range(7)], BLOCK, 32)
    with pytest.raises(LimitError, match="limit for this model is 1,024"):
        serve(smollm2, stream, 32, 64)
    with pytest.raises(LimitError, match="new tokens must be between 1 and 16"):
        serve(smollm2, [Request(0, stream[0].prompt, 17)], BLOCK, 32)
    with pytest.raises(LimitError, match="between 1 and 6"):
        chat_stream(smollm2, 7)


def test_cli_serve_smollm2_chat(smollm2, capsys, monkeypatch):
    from kvviz.models import registry
    monkeypatch.setitem(registry.MODELS, "smollm2", lambda: smollm2)        # the worker's loaded model
    code, out, _ = cli(capsys, "serve", "--model", "smollm2", "--chat", "--requests", "2", "--max-new-tokens", "1")
    d = json.loads(out)
    assert code == 0 and d["model"] == "smollm2" and d["block_size"] == 8 and d["chat"] is True
    assert {"requests", "steps", "num_blocks", "policy"} <= set(d)
    assert [r["blocks_saved"] for r in d["requests"]] == [0, 3] and d["prefill_saved"] == 24
    assert all(r["same_as_solo"] and r["max_abs_diff"] <= d["tolerance"] for r in d["requests"])
    assert d["requests"][1]["prompt_text"].endswith("What is 2+2?<|im_end|>\n<|im_start|>assistant\n")
    assert d["steps"][1]["prefill"] == [1] and d["steps"][1]["block_tables"] == {}      # both done at step 1


def test_cli_serve_smollm2_plain_text_stops_a_request_at_its_end_token_as_its_solo_run(smollm2, capsys, monkeypatch):
    """Plain-text requests (no chat template): SmolLM2 answers "Hi!" style prompts with <|im_end|> at
    once. The served request finishes there, as its solo run does (it used to run on past it and
    compare with solo logits that do not exist: an IndexError on every seed; one seed shows it)."""
    from kvviz.models import registry
    monkeypatch.setitem(registry.MODELS, "smollm2", lambda: smollm2)
    code, out, _ = cli(capsys, "serve", "--model", "smollm2", "--seed", "0")
    d = json.loads(out)
    assert code == 0 and d["chat"] is False
    assert all(r["same_as_solo"] and r["max_abs_diff"] <= d["tolerance"] for r in d["requests"])
    ended = [r for r in d["requests"] if r["tokens"][-1] == "<|im_end|>"]
    assert ended and all(r["finish_step"] == r["first_token_step"] + len(r["tokens"]) - 1 for r in ended)
    assert any(len(r["tokens"]) == 4 for r in d["requests"])      # the others run to --max-new-tokens


def test_cli_serve_smollm2_refuses_bad_numbers_before_the_weights_load(capsys, monkeypatch):
    from kvviz.models import registry

    def never():
        raise AssertionError("the weights were loaded")
    monkeypatch.setitem(registry.MODELS, "smollm2", type("S", (), {"LIMITS": registry.SmolLM2.LIMITS,
                                                                   "__new__": lambda cls: never()}))
    base = ["serve", "--model", "smollm2", "--chat"]
    assert "between 1 and 6" in one_line_error(capsys, *base, "--requests", "7")
    assert "1,024" in one_line_error(capsys, *base, "--block-size", "32", "--num-blocks", "64")
    assert "between 1 and 16" in one_line_error(capsys, *base, "--max-new-tokens", "17")
    assert "--chat needs a real model with a chat template" in one_line_error(capsys, "serve", "--chat")
    assert "gemma3 is a base model" in one_line_error(capsys, "serve", "--model", "gemma3", "--chat")


def test_cli_serve_gemma3_plain_text_as_its_solo_runs(tiny_gemma_host, capsys, monkeypatch):
    """Any real model serves through the one CLI path: Gemma 3 (a base model) takes plain text, each
    prompt the model's own plain-text prompt (the real Gemma 3's begins with ``<bos>``:
    tests/test_gemma3.py). A tiny random Gemma 3 stands in for the weights."""
    from kvviz.models import registry
    from kvviz.serving.workload import CHAT_MESSAGES
    m = tiny_gemma_host
    monkeypatch.setitem(registry.MODELS, "gemma3", lambda: m)
    code, out, err = cli(capsys, "serve", "--model", "gemma3", "--requests", "2", "--max-new-tokens", "3")
    d = json.loads(out)
    assert code == 0 and d["model"] == m.name and d["chat"] is False, err
    assert [r["prompt"] for r in d["requests"]] == [m.prompt(CHAT_MESSAGES[i], False) for i in range(2)]
    assert all(r["same_as_solo"] and len(r["tokens"]) == 3 for r in d["requests"])


@pytest.mark.parametrize("case", ["gpt", "smollm2_chat", "gemma3_plain"])
def test_a_pass_on_the_paged_cache_records_the_rows_it_wrote(case, request):
    """A model's forward with a PagedCache reads its K/V through the block table, not the pool: the
    same records as with a contiguous cache, bit for bit."""
    from kvviz.cache import DynamicCache, PagedCache
    model, stream = (M, SHARED) if case == "gpt" else _real(request, case)[:2]
    ids = encode(model, stream[0].prompt)
    paged, dense = PagedCache(model.n_layers, BLOCK, 8), DynamicCache(model.n_layers)
    for tokens, start in ((ids, 0), (ids[-1:], len(ids))):
        a, b = model.forward(tokens, paged, start), model.forward(tokens, dense, start)
        assert torch.equal(a.k, b.k) and torch.equal(a.v, b.v) and torch.equal(a.logits, b.logits)


def test_tokens_equal_transformers_continuous_batching(tmp_path):
    """The same requests through transformers' own continuous batching (``generate_batch``, its paged
    cache and scheduler) give kvviz's tokens, with and without prefix caching and chunked prefill.
    A tiny random Qwen2 (tests/tiny_models.py); flash attention off: on CPU transformers otherwise
    spends ≈ 25 s looking for its kernels before the first batch."""
    from transformers import ContinuousBatchingConfig, GenerationConfig

    from kvviz.models import registry
    from tests import tiny_models
    name = str(tiny_models.save("qwen2", tmp_path / "qwen2"))
    m = registry.host_models([name])[name]()
    prompts = [[5, 6, 7, 8, 9, 30, 40], [5, 6, 7, 8, 11, 50], [60, 12, 70]]       # 0 and 1 share 4 tokens
    new = 5
    reqs = [Request(i, tuple(m.logit_tokens[t] for t in p), new, i) for i, p in enumerate(prompts)]
    out = m.model.generate_batch(
        inputs=prompts, generation_config=GenerationConfig(max_new_tokens=new, do_sample=False, eos_token_id=None,
                                                           pad_token_id=0),
        continuous_batching_config=ContinuousBatchingConfig(page_size=16, num_blocks=16, max_batch_tokens=64,
                                                            max_requests_per_batch=4, auto_switch_to_flash=False,
                                                            use_cuda_graph=False, use_async_batching=False))
    theirs = [list(out[f"req_{i}"].generated_tokens) for i in range(len(prompts))]
    assert all(len(t) == new for t in theirs)
    for sharing, budget in ((False, None), (True, 4)):
        run = serve(m, reqs, 4, 32, prefix_caching=sharing, chunk_budget=budget)
        assert [[m.logit_tokens.index(t) for t in r.tokens] for r in run.requests] == theirs, (sharing, budget)


@pytest.mark.parametrize("seed,blocks,budget", [(0, 40, None), (0, 12, 5), (4, 14, None)])
def test_radix_prefix_caching_matches_to_the_token_and_keeps_every_solo_run(seed, blocks, budget):
    """The scheduler's radix mode on a chat trace (shared system prompt, repeated earlier turns):
    every request its solo tokens and logits within float32's 1e-4, with preemptions and chunked
    prefill too; it saves at least what full-block hashing saves, and more where a match ends
    inside a block (copied or taken back, never written under another reader)."""
    from kvviz.serving import conversation_trace
    prompts = conversation_trace(request_stream(8, seed, 12, 6), seed)
    reqs = [Request(i, p, 6, i) for i, p in enumerate(prompts)]
    runs = {mode: serve(M, reqs, 4, blocks, prefix_caching=True, check=True, chunk_budget=budget, prefix_cache=mode)
            for mode in ("hash", "radix")}
    for run in runs.values():
        assert all(r.tokens == r.solo_tokens and r.max_abs_diff <= run.tolerance for r in run.requests)
        _balanced(run)
    assert runs["radix"].prefill_saved > runs["hash"].prefill_saved
    assert any(r.prefill_saved % 4 for r in runs["radix"].requests)                # a match inside a block
    assert all(r.prefill_saved % 4 == 0 for r in runs["hash"].requests)
    assert [r.tokens for r in runs["radix"].requests] == [r.tokens for r in runs["hash"].requests]


def test_cli_prefix_cache_radix_prints_each_requests_check(capsys):
    code, out, err = cli(capsys, "serve", "--requests", "4", "--shared-prefix", "6", "--prefix-cache", "radix",
                         "--max-new-tokens", "4", "--num-blocks", "16")
    assert code == 0, err
    d = json.loads(out)
    assert d["prefix_cache"] == "radix" and d["tolerance"] == 1e-4
    assert all(r["same_as_solo"] and r["max_abs_diff"] <= 1e-4 for r in d["requests"])
    assert d["prefill_saved"] == sum(r["prefill_saved"] for r in d["requests"]) > 0
    run = serve(M, request_stream(4, 0, 4, 6), 4, 16, prefix_caching=True, prefix_cache="radix")
    assert [r["tokens"] for r in d["requests"]] == [list(r.tokens) for r in run.requests]
