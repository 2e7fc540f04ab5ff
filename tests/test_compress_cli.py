"""``python -m kvviz compress`` with the new kinds (h2o, snapkv, pyramid, latent, fp8): today's
fields plus per step the KL, top-1 agreement, bytes and kept positions per layer and K/V head;
bad arguments one line, exit code 2."""
import json

import pytest

from kvviz.compress import Variant, evaluate
from kvviz.compress.evaluation import HeldOutPrompt
from kvviz.compress.trace import trace_variant
from kvviz.models.gpt import GPTModel, load_tiny_gpt
from tests.test_cli import cli, one_line_error

TEXT = "Today the weather is so nice . It is rainy in London , so we take an umbrella ."


@pytest.mark.parametrize("args", [["--kind", "h2o", "--budget", "6"], ["--kind", "snapkv", "--budget", "6"],
                                  ["--kind", "pyramid", "--budget", "6", "--hold"],
                                  ["--kind", "latent", "--rank", "32"], ["--kind", "fp8", "--scale", "token"]])
def test_new_kinds_print_steps(capsys, args):
    code, out, _ = cli(capsys, "compress", *args, "--text", TEXT, "--prefill", "8")
    assert code == 0
    d = json.loads(out)
    for key in ("kind", "settings", "bytes_per_token", "kl_mean", "top1_agreement", "prompts", "positions", "steps"):
        assert key in d
    tiny = load_tiny_gpt()
    ids = tiny.tokenizer.encode(TEXT)
    assert d["positions"] == len(ids) - 8 + 1 == len(d["steps"])
    steps = d["steps"]
    assert [s["position"] for s in steps] == list(range(7, len(ids)))
    assert len(steps[0]["kept"]) == 4 and len(steps[0]["kept"][0]) == 4          # layers × K/V heads
    # the summary is the steps' mean: the same loop
    assert d["kl_mean"] == pytest.approx(sum(s["kl"] for s in steps) / len(steps), abs=1e-7)
    assert d["top1_agreement"] == pytest.approx(sum(s["top1_agreement"] for s in steps) / len(steps), abs=1e-6)
    if d["kind"] == "h2o":
        assert all(len(h) <= 6 for layer in steps[-1]["kept"] for h in layer)
        assert any(h for layer in steps[0]["evicted"] for h in layer)          # the prefill's pass evicted


def test_trace_matches_the_evaluation():
    model = GPTModel(load_tiny_gpt())
    ids = model.tokenizer.encode(TEXT)
    v = Variant.of("h2o", budget=8)
    steps = trace_variant(model, v, ids, 6)
    ev = evaluate(model, [v], [HeldOutPrompt(tuple(model.vocab[i] for i in ids), tuple(ids), 0)], len(ids) - 5, 6)
    assert [s.kl for s in steps] == pytest.approx(list(ev.results[0].kl[0]), abs=1e-9)
    assert steps[-1].nbytes == ev.results[0].cache_bytes[0]


@pytest.mark.parametrize("args", [
    ["--kind", "h2o", "--budget", "0"], ["--kind", "h2o", "--budget", "x"], ["--kind", "latent", "--rank", "abc"],
    ["--kind", "latent", "--rank", "999"], ["--kind", "fp8", "--budget", "3"], ["--kind", "snapkv", "--kernel", "4"],
    ["--kind", "h2o", "--text", ""], ["--kind", "h2o", "--text", "zebra quantum"], ["--kind", "h2o", "--recent", "40"],
    ["--kind", "fp8", "--scale", "channel"], ["--kind", "h2o", "--text", TEXT, "--prefill", "99"],
    ["--kind", "h2o", "--model", "smollm2", "--prompts", "3"], ["--kind", "h2o", "--model", "gemma3", "--seed", "1"],
    ["--kind", "latent", "--model", "gemma3", "--rank", "abc"], ["--kind", "h2o", "--model", "gemma4"]])
def test_bad_arguments_one_line_exit_2(capsys, args):
    one_line_error(capsys, "compress", *args)


def test_pyramid_refuses_a_mean_budget_whose_lowest_layer_passes_the_cap_naming_the_number_given(capsys):
    """PyramidKV gives its lowest layer 1.5 × the mean budget: 4,096 was refused as "got 6144"; the
    message names the mean's own limit and the number the user typed."""
    err = one_line_error(capsys, "compress", "--model", "gpt", "--kind", "pyramid", "--budget", "4096")
    assert "between 1 and 2730, got 4096" in err and "mean" in err
    code, out, _ = cli(capsys, "compress", "--model", "gpt", "--kind", "pyramid", "--budget", "2730")
    assert code == 0 and json.loads(out)["settings"]["budget"] == 2730
