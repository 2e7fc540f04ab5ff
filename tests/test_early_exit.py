"""Early-exit self-speculation (kvviz.speculative.early_exit): the first k layers draft, the whole
model verifies with prompt lookup's verification; the tokens are plain greedy's for every k, the
draft's rows never stay in the shared cache, bad requests are refused. On the tiny random Llama
(fast; the command on SmolLM2's class with its weights: its chat template and caps)."""
from __future__ import annotations

import json

import pytest
import torch

from kvviz.cache import DynamicCache
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import Sampler
from kvviz.limits import EARLY_EXIT_MAX_TOKENS, LimitError
from kvviz.speculative import early_exit_generate, early_exit_round, prompt_lookup_generate
from tests.test_cli import cli, one_line_error
from tests.test_prompt_lookup import REPEAT, TINY_PROMPTS


@pytest.mark.parametrize("prompt", TINY_PROMPTS[:2])
def test_tiny_tokens_are_greedy_for_every_exit_layer(tiny_hf, prompt):
    ids = tiny_hf.ids(tiny_hf.tokenize(prompt))
    greedy = generate_cached(tiny_hf, ids, 16, cached=True).tokens
    for k in range(1, tiny_hf.n_layers):
        for d in (1, 3):
            run = early_exit_generate(tiny_hf, ids, 16, k, d)
            assert run.tokens == greedy, (k, d)
            assert run.source == "early-exit" and run.exit_layer == k and run.gamma == d
            assert run.rounds[0].draft == () and run.rounds[0].fed == tuple(ids)      # round 0: the prefill
            assert all(len(r.draft) <= d for r in run.rounds)


def test_the_draft_is_the_first_k_layers_and_its_rows_are_cropped(tiny_hf):
    """The draft's logits are what the first k layers, the norm and lm_head give (transformers' own
    hidden states); after every round every layer holds the text but its last token, and those rows
    are a fresh prefill's (the draft's own rows were cropped, the verification wrote them again)."""
    ids = tiny_hf.ids(tiny_hf.tokenize(TINY_PROMPTS[0]))
    k = 1
    with torch.inference_mode():
        out = tiny_hf.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
        want = tiny_hf.model.lm_head(tiny_hf.model.model.norm(out.hidden_states[k][:, -1]))[0]
        got = tiny_hf.exit_logits(ids, DynamicCache(tiny_hf.n_layers), k)
    assert torch.allclose(got, want.float(), atol=1e-5)
    cache, seq, proposed = DynamicCache(tiny_hf.n_layers), list(ids), 0
    for i in range(8):
        r = early_exit_round(tiny_hf, cache, seq, k, 3, max_draft=3, index=i)
        seq += r.emitted
        proposed += len(r.draft)
        assert r.target_cache.grown == r.start + len(r.fed) + len(r.draft)
        assert [layer.get_seq_length() for layer in cache.layers] == [len(seq) - 1] * tiny_hf.n_layers
    assert proposed > 0
    fresh = DynamicCache(tiny_hf.n_layers)
    with torch.inference_mode():
        tiny_hf.model(input_ids=torch.tensor([seq[:-1]]), past_key_values=fresh, use_cache=True)
    for got_l, want_l in zip(cache.layers, fresh.layers):
        assert torch.allclose(got_l.keys, want_l.keys, atol=1e-5)
        assert torch.allclose(got_l.values, want_l.values, atol=1e-5)


def test_bad_early_exit_requests_are_refused(tiny_hf):
    ids = tiny_hf.ids(tiny_hf.tokenize(TINY_PROMPTS[0]))
    for kw in (dict(exit_layer=0), dict(exit_layer=tiny_hf.n_layers), dict(draft_tokens=0),
               dict(draft_tokens=EARLY_EXIT_MAX_TOKENS + 1), dict(max_new_tokens=0), dict(ids=[]),
               dict(exit_layer="x")):
        with pytest.raises(LimitError):
            early_exit_generate(tiny_hf, **{"ids": ids, "max_new_tokens": 4, **kw})
    with pytest.raises(LimitError, match="greedy only"):
        early_exit_generate(tiny_hf, ids, 4, exit_layer=1, rule=Sampler(0.8))


def test_smollm2_early_exit_is_greedy_and_the_cli_says_so(tiny_smollm2, capsys, monkeypatch):
    """The command's plumbing on SmolLM2's class (the tiny random Llama's two layers stand in for its
    weights: the first layer drafts, the whole model's layer count is refused)."""
    from kvviz.models import registry
    m = tiny_smollm2
    monkeypatch.setitem(registry.MODELS, "smollm2", lambda: m)
    code, out, err = cli(capsys, "speculate", "--model", "smollm2", "--draft", "early-exit", "--chat",
                         "--prompt", REPEAT, "--new-tokens", "6", "--exit-layer", "1", "--lookup-tokens", "3")
    assert code == 0, err
    d = json.loads(out)
    assert d["same_as_greedy"] is True and len(d["new_ids"]) == 6     # the command ran plain greedy beside it
    assert d["method"] == "early-exit" and d["exit_layer"] == 1 and d["lookup_tokens"] == 3
    assert d["draft"] == "early-exit" and d["rounds"][0]["draft"] == [] and d["target_passes"] == len(d["rounds"])
    assert d["proposed"] == sum(len(r["draft"]) for r in d["rounds"]) > 0
    for args in (["--exit-layer", str(m.n_layers)], ["--exit-layer", "0"], ["--ngram", "2"], ["--lookup-tokens", "9"]):
        err = one_line_error(capsys, "speculate", "--model", "smollm2", "--draft", "early-exit", "--prompt", "hi",
                             *args)
        assert err
    assert "needs --draft early-exit" in one_line_error(
        capsys, "speculate", "--model", "smollm2", "--draft", "prompt-lookup", "--prompt", "hi", "--exit-layer", "3")


@pytest.fixture(params=["gpt", "hf"])
def either(request):
    """Both kinds of network behind the model protocol: the tiny GPT and the tiny random Llama."""
    from kvviz.models.gpt import GPTModel
    return GPTModel() if request.param == "gpt" else request.getfixturevalue("tiny_hf")


def test_every_model_drafts_with_its_own_first_layers_and_speculation_stays_greedy(either):
    """Early exit and prompt lookup need only the protocol (``exit_logits`` for the first layers):
    cut after all its layers the network is the whole network, and on either model both drafts give
    plain greedy decoding's tokens."""
    m = either
    ids = [m.vocab.index(t) for t in m.tokenize("Today the weather is so nice that we")]
    whole = m.logits(ids, None, 0)[-1]
    assert torch.allclose(m.exit_logits(ids, m.new_cache(), m.n_layers), whole, atol=1e-5)
    assert not torch.allclose(m.exit_logits(ids, m.new_cache(), 1), whole, atol=1e-3)
    greedy = generate_cached(m, ids, 12).tokens
    for k in range(1, m.n_layers):
        run = early_exit_generate(m, ids, 12, k, 3)
        assert run.tokens == greedy and run.source == "early-exit", k
    looked = prompt_lookup_generate(m, ids, 12, 4, 2)
    assert looked.tokens == greedy and looked.source == "prompt-lookup" and looked.prefill_len == 0
