"""DESIGN.md §1.3: the tiny GPT, its two generation loops, its cache, and the shipped checkpoint."""
import hashlib
import json

import pytest
import torch

from kvviz.cache import KVCache
from kvviz.generation import run_generation
from kvviz.gpt_corpus import UnknownWordsError, corpus_tokens, vocabulary, WEATHER, ACTIONS
from kvviz.gpt_generate import (LeanGPT, StaticKVCache, choose_next, compare, generate, generate_cached,
                                lean_gpt, max_cached_new_tokens)
from kvviz.gpt_timing import (cache_bytes_formula, flop_ratio, generation_flops, measure_sweep, pass_flops,
                              sweep_sizes)
from kvviz.limits import LimitError
from kvviz.models.gpt import (CHECKPOINT, CHECKPOINT_META, GPTConfig, GPTModel, load_tiny_gpt, plain_state_dict,
                              random_gpt, weights_sha256)
from kvviz.train_gpt import train
from kvviz.sampling import Greedy, Sampler

TINY = load_tiny_gpt()
M = TINY.model
TOK = TINY.tokenizer
WEATHER_WORDS = {w for ws in WEATHER.values() for w in ws}
PROMPTS = ["Today the weather is so", "It is rainy in London , so we", "In Oslo the sky", "Tomorrow"]
RULES = [Greedy(), Sampler(1.0), Sampler(0.8, top_k=5), Sampler(1.3, top_p=0.9), Sampler(0.7, 10, 0.8)]


# ---- the shipped checkpoint and its tokenizer ------------------------------------------------------

def test_checkpoint_is_shipped_small_and_matches_its_metadata():
    assert TINY.trained, "kvviz/data/tiny_gpt.pt is missing: run python -m kvviz.train_gpt"
    meta = json.loads(CHECKPOINT_META.read_text())
    assert CHECKPOINT.stat().st_size < 5_000_000
    assert hashlib.sha256(CHECKPOINT.read_bytes()).hexdigest() == meta["sha256"]
    assert meta["vocab"] == vocabulary() == TOK.vocab
    cfg = M.config
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.block_size) == (4, 4, 128, 256)
    sd = torch.load(CHECKPOINT, weights_only=True)
    assert weights_sha256(sd) == meta["weights_sha256"]
    # GPT-2's names; the tied lm_head is not stored twice
    assert {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.3.attn.c_attn.weight",
            "transformer.h.0.mlp.c_proj.bias", "transformer.ln_f.weight"} <= set(sd)
    assert "lm_head.weight" not in sd and M.lm_head.weight is M.transformer.wte.weight


def test_training_is_seeded_so_a_rerun_gives_the_same_weights():
    a, info = train(steps=2, batch=2, sentences=800, threads=1, log_every=10**6)
    b, _ = train(steps=2, batch=2, sentences=800, threads=1, log_every=10**6)
    assert weights_sha256(plain_state_dict(a)) == weights_sha256(plain_state_dict(b))
    c, _ = train(steps=2, batch=2, sentences=800, seed=1, threads=1, log_every=10**6)
    assert weights_sha256(plain_state_dict(a)) != weights_sha256(plain_state_dict(c))
    assert info["vocab"] == vocabulary() and info["training"]["steps"] == 2


def test_trained_weights_continue_the_weather_prompt_with_a_weather_word():
    ids = TOK.encode("Today the weather is so")
    with torch.no_grad():
        probs = torch.softmax(M(torch.tensor([ids]))[0, -1], -1)
    top5 = [TOK.vocab[i] for i in probs.topk(5).indices]
    assert set(top5) <= WEATHER_WORDS, top5
    assert sum(float(probs[TOK.index[w]]) for w in WEATHER_WORDS) > 0.9
    assert TOK.vocab[generate_cached(M, ids, 1).tokens[0]] in WEATHER_WORDS


def test_trained_weights_pick_what_we_do_from_the_weather_word_earlier_in_the_sentence():
    # the first word of the action depends on the weather kind four tokens back
    firsts = {k: {a.split()[0] for a in acts} for k, acts in ACTIONS.items()}
    for adj, kind in (("rainy", "rain"), ("sunny", "sun"), ("snowy", "cold"), ("stormy", "wind")):
        ids = TOK.encode(f"It is {adj} in Paris , so we")
        nxt = TOK.vocab[generate_cached(M, ids, 1).tokens[0]]
        assert nxt in firsts[kind], (adj, nxt)


def test_tokenizer_is_word_level_forgives_case_and_names_unknown_words():
    assert TOK.tokenize("today THE weather is so,nice!") == ["Today", "the", "weather", "is", "so", ",", "nice", "!"]
    assert TOK.decode(TOK.encode("It is cold . In Oslo")) == "It is cold. In Oslo"
    with pytest.raises(UnknownWordsError, match="'hello', 'Zürich'"):
        TOK.tokenize("hello weather in Zürich hello")
    assert set(corpus_tokens(500, seed=3)) <= set(vocabulary())
    assert corpus_tokens(50, seed=1) == corpus_tokens(50, seed=1) != corpus_tokens(50, seed=2)


def test_missing_checkpoint_falls_back_to_seeded_random_weights(tmp_path):
    a = load_tiny_gpt(str(tmp_path / "none.pt"), fallback_seed=5)
    b = load_tiny_gpt(str(tmp_path / "other.pt"), fallback_seed=5)
    c = load_tiny_gpt(str(tmp_path / "none.pt"), fallback_seed=6)
    assert not a.trained and a.tokenizer.vocab == vocabulary()
    assert torch.equal(a.model.transformer.wte.weight, b.model.transformer.wte.weight)
    assert not torch.equal(a.model.transformer.wte.weight, c.model.transformer.wte.weight)


# ---- generate == generate_cached -------------------------------------------------------------------

@pytest.mark.parametrize("rule", RULES, ids=lambda r: str(r.describe()))
def test_same_seed_same_tokens_with_and_without_cache(rule):
    for prompt in PROMPTS:
        ids = TOK.encode(prompt)
        for n, seed in ((1, 0), (7, 1), (40, 2)):
            a = generate(M, ids, n, rule, seed)
            b = generate_cached(M, ids, n, rule, seed)
            assert a.tokens == b.tokens, (prompt, n, seed)
            assert len(b.tokens) == n and b.prompt == ids
            assert float((a.logits - b.logits).abs().max()) < 1e-4


def test_sampling_really_samples_and_the_seed_decides():
    ids = TOK.encode("Today the weather is so")
    runs = {tuple(generate_cached(M, ids, 12, Sampler(1.2), seed).tokens) for seed in range(6)}
    assert len(runs) > 1
    assert generate_cached(M, ids, 12, Sampler(1.2), 3).tokens == generate_cached(M, ids, 12, Sampler(1.2), 3).tokens


def test_fast_choice_draws_exactly_what_the_sampler_draws():
    g = torch.Generator().manual_seed(0)
    for rule in RULES:
        for seed in range(30):
            logits = torch.randn(83, generator=g) * 3
            fast = choose_next(logits, rule, torch.Generator().manual_seed(seed))
            slow = rule.choose(logits, torch.Generator().manual_seed(seed)).index
            assert fast == slow, (rule.describe(), seed)


def test_long_generation_reaches_position_255_and_the_cached_path_stops_with_a_clear_error():
    ids = TOK.encode("Today the weather is so nice !")          # 7 tokens
    top = max_cached_new_tokens(M, len(ids))
    assert top == 256 - 7 + 1
    a, b = generate(M, ids, top), generate_cached(M, ids, top)
    assert a.tokens == b.tokens
    with pytest.raises(LimitError, match="block_size"):
        generate_cached(M, ids, top + 1)
    longer = generate(M, ids, top + 5)                          # no cache: crops instead
    assert longer.tokens[:top] == a.tokens and len(longer.tokens) == top + 5


def test_bad_inputs_are_refused():
    with pytest.raises(LimitError, match="empty"):
        generate_cached(M, [], 3)
    with pytest.raises(LimitError):
        generate(M, [1, 2], 0)
    with pytest.raises(LimitError, match="vocabulary"):
        generate(M, [1, 999], 2)


def test_compare_reports_identical_tokens_and_a_tiny_logit_difference():
    cmp = compare(M, TOK.encode("It is sunny in Rome , so we"), 20, Sampler(0.9, top_k=8), seed=4)
    assert cmp.identical and cmp.first_difference is None
    assert 0 <= cmp.max_abs_logit_diff < 1e-4


# ---- the model protocol: stepper, cache, recompute check -------------------------------------------

def test_stepper_runs_the_gpt_with_per_layer_cache_and_recompute_check():
    model = GPTModel(TINY)
    prompt = TOK.tokenize("Today the weather is so")
    run = run_generation(model, prompt, 6)
    pre, choose, dec = run.events[:3]
    assert pre.record.attention.shape == (4, 4, 5, 5)           # [L, H, N, T]
    assert pre.record.q.shape == (4, 4, 5, 32)
    assert choose.cache_len == 5 and choose.pending == choose.chosen   # chosen, not processed
    assert dec.record.attention.shape == (4, 4, 1, 6)            # the new query reads positions 0..5
    for layer in range(4):
        assert dec.cache.keys[layer].shape == (1, 4, 6, 32)      # [batch, heads, seq, head_dim]
    assert torch.allclose(pre.record.attention.sum(-1), torch.ones(4, 4, 5))
    assert float(pre.record.attention[0, 0, 0, 1:].abs().max()) == 0.0   # causal mask
    for e in run.events:
        if e.check is not None:
            assert e.check.max_abs_diff < 1e-4
    assert [e.kv_computed for e in run.events if e.record is not None] == [5, 6, 7, 8, 9, 10]
    chosen = [e.chosen for e in run.events if e.phase == "choose"]
    assert chosen == [TOK.vocab[i] for i in generate_cached(M, TOK.encode("Today the weather is so"), 6).tokens]
    assert run.events[-1].cache.nbytes() == cache_bytes_formula(M.config, 10)


def test_lean_loop_computes_the_modules_numbers():
    lean = LeanGPT(M)
    ids = torch.tensor([TOK.encode("Today the weather is so nice . It is")])

    def same(a, b):   # the head's layout differs ([d, V] copy): float32 rounding only
        return torch.allclose(a, b, rtol=0, atol=1e-5) and torch.equal(a.argmax(-1), b.argmax(-1))

    with torch.no_grad():
        assert same(lean(ids), M(ids, last_only=True)[:, -1])                     # full pass, causal
        a, b = StaticKVCache(M, 12), StaticKVCache(M, 12)
        assert same(lean(ids[:, :6], a, 0), M(ids[:, :6], b, 0, last_only=True)[:, -1])   # prefill
        assert same(lean(ids[:, 6:8], a, 6), M(ids[:, 6:8], b, 6, last_only=True)[:, -1])  # 2 after a past
        assert same(lean(ids[:, 8:], a, 8), M(ids[:, 8:], b, 8, last_only=True)[:, -1])   # one decode step
        assert torch.equal(a.k[3], b.k[3]) and torch.equal(a.v[0], b.v[0])          # the blocks: bit for bit
        with pytest.raises(LimitError, match="block_size"):
            lean(ids, None, 250)


def test_lean_copy_follows_weight_changes():
    model = random_gpt(GPTConfig(vocab_size=40, block_size=32, n_layer=1, n_head=2, n_embd=16), seed=2)
    first = lean_gpt(model)
    assert lean_gpt(model) is first
    with torch.no_grad():
        model.transformer.wte.weight.mul_(2.0)                  # weights changed in place: rebuild
    assert lean_gpt(model) is not first
    assert torch.equal(lean_gpt(model).head, model.transformer.wte.weight.t())


def test_attention_records_match_the_fast_path():
    ids = TOK.encode("In Oslo the sky was")
    rec = GPTModel(TINY).forward(ids, None, 0)
    with torch.no_grad():
        fast = M(torch.tensor([ids]))[0]
    assert torch.allclose(rec.logits, fast, atol=1e-5)


# ---- memory and FLOPs ------------------------------------------------------------------------------

def test_cache_memory_formula_and_the_gpt2_small_figures():
    gpt2 = GPTConfig(vocab_size=50_257, block_size=1_024, n_layer=12, n_head=12, n_embd=768)
    assert cache_bytes_formula(gpt2, 1, bytes_per_value=2) == 36_864
    assert round(cache_bytes_formula(gpt2, 1024, bytes_per_value=2) / 1e6, 1) == 37.7
    assert cache_bytes_formula(M.config, 10, batch=3) == 3 * 2 * 4 * 10 * 128 * 4


def test_measured_cache_bytes_equal_the_formula_and_views_would_cost_more():
    ids = TOK.encode("Today the weather is so")
    g = generate_cached(M, ids, 12)
    assert g.cache_bytes == cache_bytes_formula(M.config, len(ids) + 12 - 1)
    # the stepper's cache copies its rows too: exactly 2·L·T·d·4 after the prefill
    cache = KVCache(4)
    GPTModel(TINY).forward(ids, cache, 0)
    assert cache.nbytes() == cache_bytes_formula(M.config, len(ids))
    static = StaticKVCache(M, 8)
    assert static.nbytes() == cache_bytes_formula(M.config, 8)


def test_flop_counts_follow_the_seed_table():
    cfg = GPTConfig()
    L, d, V = cfg.n_layer, cfg.n_embd, cfg.vocab_size
    one = pass_flops(cfg, 1, 9)                                  # one token reading 10 keys
    assert (one.dense, one.attention, one.head) == (24 * L * d * d, 4 * L * d * 10, 2 * d * V)
    P, N = 5, 20
    cached, uncached = generation_flops(cfg, P, N, True), generation_flops(cfg, P, N, False)
    assert cached.dense == 24 * L * d * d * (P + N - 1)                      # O(N d²)
    assert uncached.dense == 24 * L * d * d * sum(P + t for t in range(N))   # O(N² d²)
    assert uncached.attention == 4 * L * d * sum((P + t) * (P + t + 1) // 2 for t in range(N))   # O(N³ d)
    assert flop_ratio(cfg, P, 248) > 10 * flop_ratio(cfg, P, 8) > 10       # the gap widens with N


def test_sweep_measures_both_loops_and_reports_progress():
    ids = TOK.encode("Today the weather is so")
    seen = []
    sweep = measure_sweep(M, ids, [4, 8], progress=lambda f, what: seen.append(f))
    assert [p.n for p in sweep.points] == [4, 8] and all(p.same_tokens for p in sweep.points)
    assert seen[0] == 0 and seen[-1] == 1.0 and seen == sorted(seen)
    e = sweep.explanation()
    assert e["n"] == 8 and e["flop_ratio"] == pytest.approx(flop_ratio(M.config, 5, 8))
    assert sweep_sizes(M, 5, 248) == [8, 16, 32, 64, 128, 248]
    assert sweep_sizes(M, 60, 999) == [8, 16, 32, 64, 128, 197]
    with pytest.raises(LimitError):
        measure_sweep(M, ids, [500])


def test_random_weights_same_tokens_too():
    model = random_gpt(GPTConfig(vocab_size=40, block_size=64, n_layer=2, n_head=2, n_embd=32), seed=1)
    for seed in range(3):
        a = generate(model, [1, 2, 3], 30, Sampler(1.0), seed)
        b = generate_cached(model, [1, 2, 3], 30, Sampler(1.0), seed)
        assert a.tokens == b.tokens
