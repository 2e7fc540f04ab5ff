"""docs/design.md §3: the tiny GPT, its two generation loops, its cache, and the shipped checkpoint."""
import hashlib
import json

import pytest
import torch

from kvviz import cost
from kvviz.cache import DynamicCache, StaticCache
from kvviz.decoding.loops import compare, generate, generate_cached, max_cached_new_tokens
from kvviz.decoding.sampling import Greedy, Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.measure.timing import measure_sweep, sweep_sizes
from kvviz.models.gpt import (
    CHECKPOINT,
    CHECKPOINT_META,
    GPTConfig,
    GPTModel,
    UnknownWordsError,
    cost_config,
    load_tiny_gpt,
    plain_state_dict,
    random_gpt,
    weights_sha256,
)
from kvviz.models.gpt.corpus import ACTIONS, WEATHER, corpus_tokens, vocabulary
from kvviz.models.gpt.train import train

TINY = load_tiny_gpt()
M = TINY.model
FAST = GPTModel(TINY)                       # the same network behind the model protocol (the loops')
TOK = TINY.tokenizer
SHAPE = cost_config(M.config)                 # the network's shape for kvviz.cost
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
    assert TOK.vocab[generate_cached(FAST, ids, 1).tokens[0]] in WEATHER_WORDS


def test_trained_weights_pick_what_we_do_from_the_weather_word_earlier_in_the_sentence():
    # the first word of the action depends on the weather kind four tokens back
    firsts = {k: {a.split()[0] for a in acts} for k, acts in ACTIONS.items()}
    for adj, kind in (("rainy", "rain"), ("sunny", "sun"), ("snowy", "cold"), ("stormy", "wind")):
        ids = TOK.encode(f"It is {adj} in Paris , so we")
        nxt = TOK.vocab[generate_cached(FAST, ids, 1).tokens[0]]
        assert nxt in firsts[kind], (adj, nxt)


def test_tokenizer_is_word_level_forgives_case_and_names_unknown_words():
    assert TOK.tokenize("today THE weather is so,nice!") == ["Today", "the", "weather", "is", "so", ",", "nice", "!"]
    assert TOK.decode(TOK.encode("It is cold . In Oslo")) == "It is cold. In Oslo"
    with pytest.raises(UnknownWordsError, match="'hello', 'Zürich'") as err:
        TOK.tokenize("hello weather in Zürich hello")
    assert err.value.tokens == ["hello", "Zürich"]
    assert GPTModel(TINY).tokenize("today THE weather") == ["Today", "the", "weather"]
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
            b = generate_cached(FAST, ids, n, rule, seed)
            assert a.tokens == b.tokens, (prompt, n, seed)
            assert len(b.tokens) == n and b.prompt == ids
            assert float((a.logits - b.logits).abs().max()) < 1e-4


def test_sampling_really_samples_and_the_seed_decides():
    ids = TOK.encode("Today the weather is so")
    runs = {tuple(generate_cached(FAST, ids, 12, Sampler(1.2), seed).tokens) for seed in range(6)}
    assert len(runs) > 1
    again = [generate_cached(FAST, ids, 12, Sampler(1.2), 3).tokens for _ in range(2)]
    assert again[0] == again[1]


def test_the_loops_draw_exactly_what_the_sampler_chooses():
    g = torch.Generator().manual_seed(0)
    huge = torch.tensor([1e4, -1e4, 9999.9, 0.0, -3.0] * 16 + [1e4, 2.0, -1e4])   # ±1e4 at τ = 0.01
    cases = [(torch.randn(83, generator=g) * 3, rule) for rule in RULES for _ in range(6)]
    cases += [(huge, Sampler(0.01)), (huge, Sampler(0.01, top_p=0.9)), (huge * 0.001, Sampler(0.01, top_k=3))]
    for logits, rule in cases:
        for seed in range(5):
            fast = rule.draw(logits, torch.Generator().manual_seed(seed))
            slow = rule.choose(logits, torch.Generator().manual_seed(seed)).index
            assert fast == slow, (rule.describe(), seed)
    # at τ = 0.01 a margin of 0.1 in the logits is 10 after scaling: the runner-up (9999.9) is never drawn
    assert {float(huge[Sampler(0.01).draw(huge, torch.Generator().manual_seed(s))]) for s in range(20)} == {1e4}


def test_long_generation_reaches_position_255_and_the_cached_path_stops_with_a_clear_error():
    ids = TOK.encode("Today the weather is so nice !")          # 7 tokens
    top = max_cached_new_tokens(FAST, len(ids))
    assert top == 256 - 7 + 1
    b = generate_cached(FAST, ids, top)
    with pytest.raises(LimitError, match="block_size"):
        generate_cached(FAST, ids, top + 1)
    longer = generate(M, ids, top + 5)                          # no cache: crops instead
    # its first ``top`` steps are the uncached run to position 255 (greedy: the same steps), so one
    # uncached run checks both: the loops agree up to the last position, and cropping goes past it
    assert longer.tokens[:top] == b.tokens and len(longer.tokens) == top + 5


def test_bad_inputs_are_refused():
    with pytest.raises(LimitError, match="empty"):
        generate_cached(FAST, [], 3)
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
    assert run.events[-1].cache.nbytes() == cost.cache_bytes(SHAPE, 10, 1, "fp32")


def test_every_cache_kind_and_split_of_the_text_computes_the_same_numbers():
    """One network: a full pass, a prefill + a 2-token pass + a decode step through the static
    cache, and the same through the dynamic cache all give the same last logits (the cached K/V
    bit for bit), and the stepper's explicit-weights path agrees with the fused one."""
    ids = torch.tensor([TOK.encode("Today the weather is so nice . It is")])          # 9 tokens
    with torch.no_grad():
        full = M(ids, last_only=True)
        a, b = StaticCache(4, 12), DynamicCache(4)
        for cache in (a, b):
            M(ids[:, :6], cache, 0)
            M(ids[:, 6:8], cache, 6)
        la, lb = M(ids[:, 8:], a, 8, last_only=True), M(ids[:, 8:], b, 8, last_only=True)
    assert torch.equal(la, lb)
    for layer in range(4):
        assert torch.equal(a.layers[layer].kv()[0], b.layers[layer].keys)
        assert torch.equal(a.layers[layer].kv()[1], b.layers[layer].values)
    assert torch.allclose(la, full, rtol=0, atol=1e-5) and torch.equal(la.argmax(-1), full.argmax(-1))
    rec = GPTModel(TINY).forward(ids[0].tolist(), None, 0)                          # explicit weights
    assert torch.allclose(rec.logits[-1], full[0], rtol=0, atol=1e-5)
    with pytest.raises(LimitError, match="block_size"):
        M(ids, None, 250)


def test_the_readout_copy_follows_weight_changes():
    model = random_gpt(GPTConfig(vocab_size=40, block_size=32, n_layer=1, n_head=2, n_embd=16), seed=2)
    first = model.head()
    assert model.head() is first
    with torch.no_grad():
        model.transformer.wte.weight.mul_(2.0)                  # weights changed in place: rebuild
    assert model.head() is not first
    assert torch.equal(model.head(), model.transformer.wte.weight.t())
    x = torch.randn(3, 16)
    with torch.no_grad():       # the copy and the transposed view go through different matmul kernels:
        # equal up to float32 rounding (2 % of random inputs differed by 3e-8 near zero, over atol 1e-8)
        assert torch.allclose(model.readout(x), x @ model.transformer.wte.weight.t(), atol=1e-6)


def test_grouped_kv_heads_run_and_hold_fewer_heads_in_the_cache():
    """n_kv_head < n_head: each K/V head serves a group of query heads; the cache holds only them."""
    cfg = GPTConfig(vocab_size=40, block_size=32, n_layer=2, n_head=4, n_embd=32, n_kv_head=2)
    model = random_gpt(cfg, seed=3)
    assert model.transformer.h[0].attn.c_attn.weight.shape == ((4 + 2 * 2) * 8, 32)
    a, b = generate(model, [1, 2, 3], 10), generate_cached(GPTModel(model), [1, 2, 3], 10)
    assert a.tokens == b.tokens
    assert b.cache_bytes == cost.cache_bytes(cost_config(cfg), 12, 1, "fp32") == 2 * 2 * 12 * 2 * 8 * 4


# ---- memory and FLOPs ------------------------------------------------------------------------------

def test_cache_memory_formula_and_the_gpt2_small_figures():
    assert cost.cache_bytes_per_token(cost.GPT2_SMALL, "fp16") == 36_864
    assert round(cost.cache_bytes(cost.GPT2_SMALL, 1024, 1, "fp16") / 1e6, 1) == 37.7
    assert cost.cache_bytes(SHAPE, 10, 3, "fp32") == 3 * 2 * 4 * 10 * 128 * 4     # 2·L·T·d·4 × batch


def test_measured_cache_bytes_equal_the_formula():
    ids = TOK.encode("Today the weather is so")
    g = generate_cached(FAST, ids, 12)
    assert g.cache_bytes == cost.cache_bytes(SHAPE, len(ids) + 12 - 1, 1, "fp32")
    # the stepper's cache copies its rows too (no views of the fused q/k/v output): exactly 2·L·T·d·4
    cache = DynamicCache(4)
    GPTModel(TINY).forward(ids, cache, 0)
    assert cache.nbytes() == cost.cache_bytes(SHAPE, len(ids), 1, "fp32")
    static = StaticCache(4, 8)
    GPTModel(TINY).forward(ids, static, 0)
    assert static.nbytes() == cost.cache_bytes(SHAPE, 8, 1, "fp32")       # preallocated: all 8 rows


def test_flop_counts_of_the_loops_follow_the_seed_table():
    L, d, V = SHAPE.n_layers, SHAPE.d_model, SHAPE.vocab
    one = cost.pass_flops(SHAPE, 1, 9, last_only=True)                       # one token reading 10 keys
    assert (one.linear, one.attention) == (24 * L * d * d + 2 * d * V, 4 * L * d * 10)
    P, N = 5, 20
    cached, uncached = cost.loop_flops(SHAPE, P, N, True), cost.loop_flops(SHAPE, P, N, False)
    assert cached.linear == 24 * L * d * d * (P + N - 1) + 2 * d * V * N                  # O(N d²)
    assert uncached.linear == 24 * L * d * d * sum(P + t for t in range(N)) + 2 * d * V * N   # O(N² d²)
    assert uncached.attention == 4 * L * d * sum((P + t) * (P + t + 1) // 2 for t in range(N))   # O(N³ d)

    def ratio(n: int) -> float:
        return cost.loop_flops(SHAPE, P, n, False).total / cost.loop_flops(SHAPE, P, n, True).total
    assert ratio(248) > 10 * ratio(8) > 10                                   # the gap widens with N
    # past the learned positions the recomputing loop crops the text: each pass at most 256 tokens
    crop = cost.loop_flops(SHAPE, 250, 10, False)
    assert crop.linear == 24 * L * d * d * sum(min(250 + t, 256) for t in range(10)) + 2 * d * V * 10


def test_sweep_measures_both_loops_and_reports_progress():
    ids = TOK.encode("Today the weather is so")
    seen = []
    sweep = measure_sweep(M, ids, [4, 8], progress=lambda f, what: seen.append(f))
    assert [p.n for p in sweep.points] == [4, 8] and all(p.same_tokens for p in sweep.points)
    assert seen[0] == 0 and seen[-1] == 1.0 and seen == sorted(seen)
    e = sweep.explanation()
    ratio = cost.loop_flops(SHAPE, 5, 8, False).total / cost.loop_flops(SHAPE, 5, 8, True).total
    assert e["n"] == 8 and e["flop_ratio"] == pytest.approx(ratio)
    assert sweep.weight_bytes == M.n_params() * 4 == cost.weight_bytes(SHAPE, "fp32")
    assert sweep_sizes(M, 5, 248) == [8, 16, 32, 64, 128, 248]
    assert sweep_sizes(M, 60, 999) == [8, 16, 32, 64, 128, 197]
    with pytest.raises(LimitError):
        measure_sweep(M, ids, [500])


def test_random_weights_same_tokens_too():
    model = random_gpt(GPTConfig(vocab_size=40, block_size=64, n_layer=2, n_head=2, n_embd=32), seed=1)
    for seed in range(3):
        a = generate(model, [1, 2, 3], 30, Sampler(1.0), seed)
        b = generate_cached(GPTModel(model), [1, 2, 3], 30, Sampler(1.0), seed)
        assert a.tokens == b.tokens
