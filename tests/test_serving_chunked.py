"""Chunked prefill (Sarathi-Serve's stall-free schedule) in kvviz.serving's Scheduler: a per-step
token budget, decodes first, prompts split into chunks in what is left. A prompt prefilled in chunks
chooses from the one-shot prefill's logits (float32 within the run's stated 1e-4; compared with the
request's solo run at every chosen token) and every request gets its solo run's tokens; on the tiny
GPT, a tiny random Llama (through transformers' forward) and chat requests (SmolLM2's class and chat
template on the tiny random Llama's weights), where the chunked tokens also equal transformers' own
chunked prefill (GenerationConfig ``prefill_chunk_size``)."""
import json

import pytest
import torch

from kvviz.limits import LimitError
from kvviz.models import registry
from kvviz.models.gpt import GPTModel
from kvviz.serving import Request, chat_stream, measure_stall, request_stream, serve, stall_stream
from tests import tiny_models
from tests.test_cli import cli, one_line_error

BUDGETS = [None, 4, 5, 9]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = str(tiny_models.save("llama", tmp_path_factory.mktemp("chunked") / "llama"))
    return {"gpt": GPTModel(), "llama": registry.host_models([folder])[folder]()}


SENTENCES = ["so nice that we go to the beach and eat ice cream", "cold", "rainy and we read a book",
             "windy so we fly a kite in the park", "so warm"]


def _stream(m, shared: str = "Today the weather is") -> list[Request]:
    """Five requests, arriving 0-2 steps apart, every prompt beginning with ``shared``."""
    return [Request(i, m.tokenize(f"{shared} {text}"), 5, i // 2 * 2) for i, text in enumerate(SENTENCES)]


def _exact(run) -> None:
    for r in run.requests:
        assert r.tokens == r.solo_tokens
        assert r.max_abs_diff is not None and r.max_abs_diff <= run.tolerance


@pytest.mark.parametrize("name", ["gpt", "llama"])
@pytest.mark.parametrize("budget", BUDGETS)
@pytest.mark.parametrize("prefix", [False, True])
def test_chunked_prefill_gives_every_request_its_solo_run(models, name, budget, prefix):
    m = models[name]
    run = serve(m, _stream(m), block_size=4, num_blocks=60,
                prefix_caching=prefix, check=True, chunk_budget=budget)
    _exact(run)
    for s in run.steps:
        assert s.budget == budget
        if budget is not None:
            assert s.tokens_used <= budget
            # decodes first: every decoding request processes exactly one position
            assert all(n == 1 for i, n in s.chunks if i in s.decode)


def test_a_long_prompt_is_split_into_chunks_beside_the_running_decodes(models):
    m = models["gpt"]
    words = m.tokenize("Today the weather is so nice that we go to the beach and eat ice cream in the park")
    reqs = [Request(0, m.tokenize("Today the weather"), 8, 0), Request(1, words, 3, 2)]
    whole = serve(m, reqs, 4, 40, check=True)
    chunked = serve(m, reqs, 4, 40, check=True, chunk_budget=4)
    _exact(whole)
    _exact(chunked)
    long_chunks = [dict(s.chunks).get(1, 0) for s in chunked.steps]
    assert max(long_chunks) == 3 and sum(long_chunks) >= len(words)    # 3 = the budget less request 0's decode
    # request 0 decodes in every step while request 1's prompt is prefilled: no stall
    end0 = chunked.requests[0].finish_step
    assert [s.step for s in chunked.steps if 1 in s.prefill and s.step <= end0]     # they overlap
    for s in chunked.steps:
        if 1 in s.prefill and s.step <= end0:
            assert 0 in s.decode
    assert whole.requests[1].first_token_step < chunked.requests[1].first_token_step
    assert whole.requests[0].tokens == chunked.requests[0].tokens


def test_chunking_survives_preemption(models):
    run = serve(models["gpt"], request_stream(6, seed=0, shared_prefix=8), block_size=4, num_blocks=12,
                check=True, chunk_budget=4)
    assert run.preemptions > 0
    _exact(run)


def test_a_bad_budget_is_refused(models):
    reqs = request_stream(2, seed=0)
    for bad in (0, 3, 10_000, "four", 4.5):
        with pytest.raises(LimitError):
            serve(models["gpt"], reqs, 4, 32, max_batch=4, chunk_budget=bad)


@pytest.mark.parametrize("chunk", [3, 7])
def test_transformers_prefill_chunk_size_gives_the_same_tokens(models, chunk):
    m = models["llama"]
    prompt = m.tokenize("Today the weather is so nice that we go to the park. It is rainy")
    run = serve(m, [Request(0, prompt, 5, 0)], 4, 40, max_batch=1, check=True, chunk_budget=chunk)
    _exact(run)
    ids = torch.tensor([m.ids(prompt)])
    ref = m.model.generate(ids, max_new_tokens=5, min_new_tokens=5, do_sample=False,
                           prefill_chunk_size=chunk)[0, ids.shape[1]:]
    assert m.ids(list(run.requests[0].tokens)) == ref.tolist()


def test_smollm2_chunked_chat_requests_equal_solo_and_transformers(tiny_smollm2):
    smollm2 = tiny_smollm2                       # the chunking is the mechanism: no real weights needed
    stream = chat_stream(smollm2, 2, 2)
    run = serve(smollm2, stream, 8, 32, prefix_caching=True, check=True, chunk_budget=16)
    _exact(run)
    assert any(0 < n < len(r.prompt) for s in run.steps for i, n in s.chunks for r in stream if r.id == i)
    ids = torch.tensor([smollm2.ids(stream[0].prompt)])
    ref = smollm2.model.generate(ids, max_new_tokens=2, min_new_tokens=2, do_sample=False,
                                 prefill_chunk_size=16)[0, ids.shape[1]:]
    assert smollm2.ids(list(run.requests[0].tokens)) == ref.tolist()


def test_cli_chunk_budget_prints_each_steps_budget_and_every_requests_gaps(capsys):
    code, out, err = cli(capsys, "serve", "--requests", "3", "--chunk-budget", "5")
    assert code == 0, err
    d = json.loads(out)
    assert d["chunk_budget"] == 5
    for s in d["steps"]:
        assert s["budget"] == 5 and sum(n for _, n in s["chunks"]) <= 5
        assert {i for i, _ in s["chunks"]} == set(s["prefill"]) | set(s["decode"])
    for r in d["requests"]:
        assert r["ttft_steps"] == r["first_token_step"] - r["arrival_step"] + 1
        assert len(r["gap_steps"]) == len(r["tokens"]) - 1 and sum(r["gap_steps"]) == r["finish_step"] - r[
            "first_token_step"]
    code, out, _ = cli(capsys, "serve", "--requests", "3")
    assert code == 0 and "chunk_budget" not in json.loads(out)


@pytest.mark.parametrize("args", [["--chunk-budget", "2"], ["--chunk-budget", "x"], ["--chunk-budget", "99999"],
                                  ["--model", "smollm2", "--chunk-budget", "0"]])
def test_cli_bad_chunk_budget_gives_one_line_and_exit_2(args, capsys):
    assert "hunk" in one_line_error(capsys, "serve", *args)


def test_a_timed_run_measures_every_pass_and_each_requests_seconds(models, capsys):
    m = models["gpt"]
    run = serve(m, _stream(m), 4, 60, chunk_budget=5, timed=True)
    assert all(s.seconds is not None and s.seconds > 0 for s in run.steps)
    for r in run.requests:
        ttft, gaps = run.measured(r)
        assert ttft > 0 and len(gaps) == len(r.tokens) - 1 and all(g > 0 for g in gaps)
        # the TTFT spans exactly the passes from its arrival step to its first token's step
        assert ttft == pytest.approx(sum(s.seconds for s in run.steps[r.request.arrival_step:r.first_token_step + 1]))
    assert serve(m, _stream(m), 4, 60).measured(run.requests[0]) is None
    code, out, err = cli(capsys, "serve", "--requests", "2", "--timed")
    assert code == 0, err
    assert all(r["ttft_s"] > 0 and len(r["gaps_s"]) == len(r["tokens"]) - 1 for r in json.loads(out)["requests"])


def test_the_stall_record_times_each_request_from_the_passes_of_its_schedule(models):
    """kvviz.serving.stall: the long prompt whole takes one pass (TTFT 1 step) and every running
    request waits for it; in chunks the schedule is serve's own, and each token's time is the sum of
    the passes up to its step (one repeat: the medians are the passes themselves)."""
    m = models["gpt"]
    reqs = stall_stream(m, 24, arrive=2, new=5)
    run = measure_stall(m, reqs, [6], repeats=1)
    whole, chunked = run.settings
    assert run.all_same_as_solo and (run.long_tokens, run.arrival_step) == (24, 2)
    assert whole.long.ttft_steps == 1 < chunked.long.ttft_steps
    schedule = serve(m, reqs, 16, 64, chunk_budget=6)
    assert chunked.steps == schedule.total_steps
    assert [r.gap_steps for r in chunked.requests] == [r.gaps for r in schedule.requests]
    for s in run.settings:
        for r in s.requests:
            assert r.token_s[0] == pytest.approx(sum(s.passes_s[:r.ttft_steps + r.arrival_step]))
            assert r.ttft_s == pytest.approx(sum(s.passes_s[r.arrival_step:r.arrival_step + r.ttft_steps]))
            assert len(r.gaps_s) == len(r.gap_steps) and all(g > 0 for g in r.gaps_s)
    # a running request's largest gap whole holds the long prompt's one pass
    assert whole.short_max_gap_s >= whole.passes_s[2]
    rows = run.rows()
    assert len(rows) == 8 and {r["chunk_budget"] for r in rows} == {None, 6}
    for bad in ({"repeats": 0}, {"budgets": []}, {"budgets": [0]}):
        with pytest.raises(LimitError):
            measure_stall(m, reqs, **{"budgets": [6], "repeats": 1, **bad})
    with pytest.raises(LimitError):
        stall_stream(m, 0)
