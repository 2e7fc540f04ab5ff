"""The real model's loop views (kvviz.decoding.one_word, long_runs.loop_pair, whole_run): the tea / water
example, greedy's loop and the whole run's attention matrix. The tiny random Llama and the tiny GPT for
the mechanics; SmolLM2's numbers (tea and water differ, greedy loops where sampling does not) are
asserted by tests/test_page_llm.py on the records its page visit computes anyway."""
from __future__ import annotations

import pytest
import torch

from kvviz.decoding.long_runs import loop_pair
from kvviz.decoding.one_word import one_word
from kvviz.decoding.stepper import run_generation
from kvviz.decoding.whole_run import whole_run
from kvviz.models.gpt import GPTModel, load_tiny_gpt


def test_one_word_keeps_each_branchs_distributions(tiny_hf):
    a, b = (tiny_hf.ids(tiny_hf.tokenize(s)) for s in ("Today the weather is", "Today the sky is"))
    got = one_word(tiny_hf, (a, b), 5)
    for br, p in ((got.a, a), (got.b, b)):
        assert br.prompt == p and len(br.generation.tokens) == br.probs.shape[0] <= 5
        assert torch.allclose(br.probs.sum(-1), torch.ones(br.probs.shape[0], dtype=torch.float64))
        # greedy wrote the most likely token of the distribution it was chosen from
        assert [int(r.argmax()) for r in br.probs] == br.generation.tokens
        assert br.chosen_p()[0] == br.top(1)[0][1]
    direct = tiny_hf.logits(a, None, 0, keep=1)[0].double().softmax(-1)
    assert torch.allclose(got.a.probs[0], direct, atol=1e-6)
    assert 0 < got.total_variation() <= 1


def test_one_word_refuses_a_bad_length(tiny_hf):
    with pytest.raises(ValueError, match="New tokens"):
        one_word(tiny_hf, ([1, 2], [1, 3]), 0)


def test_loop_pair_on_the_tiny_gpt_matches_the_pages_words():
    tiny = load_tiny_gpt()
    lm = GPTModel(tiny)
    ids = [tiny.tokenizer.index[w] for w in "Today the weather is".split()]
    pair = loop_pair(lm, ids, 24, 1.0, 0, key=lambda i: lm.vocab[i])
    assert len(pair.greedy.tokens) == len(pair.sampled.tokens) == 24
    if pair.greedy_repeat is not None:
        words = [lm.vocab[i] for i in pair.greedy.tokens]
        s = pair.greedy_repeat.starts[0]
        assert tuple(words[s:s + len(pair.greedy_repeat.span)]) == pair.greedy_repeat.span


@pytest.mark.parametrize("which", ["gpt", "llama"])
def test_whole_run_rows_are_the_passes_and_never_change(which, tiny_hf):
    if which == "gpt":
        model = GPTModel(load_tiny_gpt())
        prompt = "Today the weather is".split()
    else:
        model = tiny_hf
        prompt = tiny_hf.tokenize("Today the weather is")
    run = run_generation(model, prompt, 5, recheck=False)
    w = whole_run(run, 1, 1, model)
    T = len(prompt) + 4                          # the fifth chosen token is pending
    assert w.weights.shape == (T, T) and w.prompt_len == len(prompt)
    assert w.pass_of_row == [0] * len(prompt) + [1, 2, 3, 4] and w.passes == 5
    assert w.rows_after(1) == len(prompt) and w.rows_after(w.passes) == T
    assert torch.allclose(w.row_sums(), torch.ones(T, dtype=torch.float64), atol=1e-5)
    assert float(w.weights.triu(1).abs().max()) == 0.0          # nothing reads the future
    assert w.recompute_max_abs_diff < 1e-5                       # the cached rows are the recomputed ones
    # a longer run keeps every row of the shorter one: rows once written never change
    longer = whole_run(run_generation(model, prompt, 7, recheck=False), 1, 1)
    assert torch.allclose(longer.weights[:T, :T], w.weights, atol=1e-6)
    with pytest.raises(ValueError, match="layers"):
        whole_run(run, 99, 0)


def test_cli_loop_prints_the_engines_json(capsys):
    import json

    from kvviz.cli.main import main
    assert main(["loop", "--model", "gpt", "--what", "whole-run", "--a", "Today the weather is", "--new-tokens", "3",
                 "--layer", "2", "--head", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    model = GPTModel(load_tiny_gpt())
    w = whole_run(run_generation(model, "Today the weather is".split(), 3, recheck=False), 1, 2)
    assert out["tokens"] == w.tokens and out["pass_of_row"] == w.pass_of_row and out["passes"] == 3
    assert out["weights"][-1] == [round(float(x), 6) for x in w.weights[-1]]
    assert main(["loop", "--model", "gpt", "--a", "Today the weather is", "--b", "Today the sky is",
                 "--new-tokens", "2", "--top", "3"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [len(p["next"]) for p in out["prompts"]] == [3, 3] and len(out["prompts"][0]["greedy"]) == 2
    for bad, says in ((["--layer", "9"], "layers"), (["--new-tokens", "0"], "New tokens")):
        with pytest.raises(SystemExit):
            main(["loop", "--model", "gpt", "--what", "whole-run", "--a", "Today the", *bad])
        assert says in capsys.readouterr().err


def test_figures_draw_the_engines_numbers():
    from kvviz.viz.loop import next_token_bars, whole_run_figure
    model = GPTModel(load_tiny_gpt())
    w = whole_run(run_generation(model, "Today the weather is".split(), 4, recheck=False), 0, 0)
    labels = dict.fromkeys(("title", "x", "y", "weight", "hover", "cached"), "")
    fig = whole_run_figure(w, w.rows_after(2), labels)
    z = fig.data[0].z
    assert len(z) == 5 and list(z[-1][:5]) == pytest.approx(w.weights[4, :5].tolist()) and z[-1][5] is None
    assert fig.layout.shapes[-1].y0 == 3.5                     # the newest row outlined
    bars = next_token_bars({"a": [("x", 0.5, "50 %"), ("y", 0.2, "20 %")], "b": [("x", 0.4, "40 %")]},
                           {"title": "", "x": "", "hover": ""})
    assert list(bars.data[0].x) == [0.5, 0.2] and bars.data[0].marker.color[0] == bars.data[1].marker.color[0]
