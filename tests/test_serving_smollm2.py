"""kvviz.serving on the real LLM: SmolLM2's chat requests from one paged cache, through transformers'
own forward (HFCausalLM.forward_batch). The shared system prompt's full blocks are shared, every
request's tokens equal its solo greedy run, every row of every step stays within float32's 1e-4 of
the solo run's logits, a fork copies the partly filled block and stays bit for bit; the caps; the CLI."""
import json

import pytest
import torch

from kvviz.limits import LimitError
from kvviz.serving import Request, chat_stream, common_prefix, fork_run, serve
from tests.test_cli import cli, one_line_error

BLOCK = 8          # the 24 tokens of the system prompt and its markers: three full blocks


@pytest.fixture(scope="module")
def stream(smollm2):
    return chat_stream(smollm2, 2, 2)


@pytest.fixture(scope="module")
def served(smollm2, stream):
    """Request 1's prefill shares a pass with request 0's decode (padded rows of one batch)."""
    return serve(smollm2, stream, BLOCK, 32, prefix_caching=True, check=True)


def test_every_prompt_begins_with_the_system_prompt_and_its_markers(smollm2, stream):
    n = common_prefix(stream)
    assert n == 24 and stream[1].arrival_step == 1
    assert smollm2.decode(stream[0].prompt[:n]) == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, "
                                                    "trained by Hugging Face<|im_end|>\n<|im_start|>user\n")


def test_tokens_equal_solo_runs_and_paged_equals_contiguous_within_float32(served):
    assert served.tolerance == 1e-4
    for r in served.requests:
        assert r.tokens == r.solo_tokens and len(r.tokens) == 2
        assert r.max_abs_diff is not None and r.max_abs_diff <= served.tolerance
    assert all(s.max_abs_diff is not None and s.max_abs_diff <= 1e-4 for s in served.steps if s.running)
    assert served.steps[1].prefill == (1,) and served.steps[1].decode == (0,)       # one padded batch


def test_the_system_prompts_full_blocks_are_shared(served):
    first, second = served.requests
    assert (first.blocks_saved, first.prefill_saved) == (0, 0)
    assert (second.blocks_saved, second.prefill_saved) == (3, 24)
    assert served.blocks_saved == 3 and served.prefill_saved == 24
    s0, s1 = served.steps[:2]
    assert s0.tables[0][:3] == (0, 1, 2) and s1.shared == (0, 1, 2) and s1.tables[1][:3] == (0, 1, 2)
    assert s1.finished == (0,) and [s1.refcounts[b] for b in (0, 1, 2)] == [1, 1, 1]     # request 0 let go


def test_a_fork_copies_the_partly_filled_block_and_stays_bit_for_bit(smollm2, stream):
    prompt = stream[1].prompt                                   # 37 tokens: 5 in its last block of 8
    fork = fork_run(smollm2, prompt, 2, BLOCK, 32, samples=2, seed=0)
    assert len(prompt) % BLOCK and all(fork.identical)
    ((step, src, dst),) = fork.copies
    assert step == 1 and src == len(prompt) // BLOCK and dst not in fork.steps[0].tables[0]


def test_the_engine_caps_a_served_run_on_smollm2(smollm2, stream):
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


@pytest.mark.parametrize("seed", [0, 4])
def test_cli_serve_smollm2_plain_text_stops_a_request_at_its_end_token_as_its_solo_run(smollm2, capsys, monkeypatch,
                                                                                       seed):
    """Plain-text requests (no chat template): SmolLM2 answers "Hi!" style prompts with <|im_end|> at
    once. The served request finishes there, as its solo run does (it used to run on past it and
    compare with solo logits that do not exist: an IndexError on every seed)."""
    from kvviz.models import registry
    monkeypatch.setitem(registry.MODELS, "smollm2", lambda: smollm2)
    code, out, _ = cli(capsys, "serve", "--model", "smollm2", "--seed", str(seed))
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
    assert "--chat needs --model smollm2" in one_line_error(capsys, "serve", "--chat")


def test_a_pass_on_the_paged_cache_records_the_rows_it_wrote(smollm2, stream):
    """HFCausalLM.forward with a PagedCache reads its K/V through the block table, not the pool."""
    from kvviz.cache import DynamicCache, PagedCache
    ids = smollm2.ids(stream[0].prompt)
    paged, dense = PagedCache(smollm2.n_layers, BLOCK, 8), DynamicCache(smollm2.n_layers)
    for tokens, start in ((ids, 0), (ids[-1:], len(ids))):
        a, b = smollm2.forward(tokens, paged, start), smollm2.forward(tokens, dense, start)
        assert torch.equal(a.k, b.k) and torch.equal(a.v, b.v) and torch.equal(a.logits, b.logits)
