"""A cache shipped between two processes (kvviz.serving.disagg): the prefill worker's cache, sent as
raw bytes over a local socket, lets the decode worker continue the generation; tokens equal the
single-process solo run, the bytes sent equal kvviz.cost's cache formula, no process is left. On a
transformers model (the tiny random Llama of tests/tiny_llama.py: grouped K/V heads, rotary
positions) the same two workers' bodies run in two threads over the same kind of socket (two worker
processes would each import transformers' model code again: seconds)."""
import json
import multiprocessing as mp

import pytest

from kvviz.cost.memory import cache_bytes
from kvviz.limits import LimitError
from kvviz.models.base import encode
from kvviz.models.gpt import GPTModel
from kvviz.serving.disagg import serve_disaggregated, ship_in_threads
from kvviz.serving.workload import Request, solo_run
from tests.test_cli import cli, one_line_error


def test_the_decode_worker_continues_from_the_shipped_cache_like_the_solo_run():
    m = GPTModel()
    prompt = m.tokenize("Today the weather is so nice that we")
    shipped = serve_disaggregated("gpt", encode(m, prompt), 5)
    assert list(shipped.tokens) == solo_run(m, Request(0, prompt, 5, 0))[0]
    assert shipped.bytes_sent == cache_bytes(m.cost_config, len(prompt), 1, "fp32")
    assert shipped.transfer_s > 0
    assert mp.active_children() == []


def test_the_decode_worker_continues_a_transformers_models_shipped_cache_like_the_solo_run(tiny_hf):
    prompt = tiny_hf.tokenize("The weather today is sunny and warm")
    shipped = ship_in_threads(tiny_hf, encode(tiny_hf, prompt), 5)
    assert list(shipped.tokens) == solo_run(tiny_hf, Request(0, prompt, 5, 0))[0]
    assert shipped.bytes_sent == cache_bytes(tiny_hf.cost_config, len(prompt), 1, "fp32") > 0
    assert tiny_hf.cost_config.n_kv_heads < tiny_hf.cost_config.n_heads      # grouped: fewer K/V heads shipped


def test_bad_requests_are_refused_before_any_process_starts():
    for new in (0, 65):
        with pytest.raises(LimitError):
            serve_disaggregated("gpt", [1, 2], new)
    with pytest.raises(LimitError):
        serve_disaggregated("gpt", [], 2)
    assert mp.active_children() == []


def test_cli_disaggregated_prints_the_bytes_shipped_per_request(capsys):
    m = GPTModel()
    code, out, err = cli(capsys, "serve", "--requests", "2", "--max-new-tokens", "3", "--disaggregated")
    assert code == 0, err
    for r in json.loads(out)["requests"]:
        assert r["same_as_disaggregated"] is True
        assert r["bytes_shipped"] == cache_bytes(m.cost_config, len(r["prompt"]), 1, "fp32")
    assert mp.active_children() == []


@pytest.mark.parametrize("args", [["--requests", "5", "--disaggregated"],
                                  ["--model", "smollm2", "--disaggregated"]])
def test_cli_disaggregated_bad_arguments_give_one_line_and_exit_2(args, capsys):
    one_line_error(capsys, "serve", *args)
