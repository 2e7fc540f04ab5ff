"""Eviction by attention score (kvviz.cache.scored: H2O, SnapKV, PyramidKV) on the tiny GPT and a
transformers Llama (tests/tiny_llama.py: GQA and rotary positions, like SmolLM2): exact while the
budget covers the text, and when it does not, exactly the rows the policy's rule names."""
import pytest
import torch

from kvviz.cache import H2OCache, PyramidKVCache, SnapKVCache, pyramid_budgets
from kvviz.compress import Variant, evaluate, held_out_text, run_cache, variant_cache
from kvviz.compress.variants import model_windows
from kvviz.limits import LimitError
from tests.conftest import HELD_OUT_TEXT as TEXT  # the fixtures gpt and model_ids live there too

KINDS = ("h2o", "snapkv", "pyramid")



def _run(model, ids, cache, prefill):
    """Logits of every position through the recording forward, the attention fed back after each pass."""
    out = []
    for start, chunk in [(0, ids[:prefill])] + [(i, [t]) for i, t in enumerate(ids[prefill:], start=prefill)]:
        rec = model.forward(chunk, cache, start)
        if hasattr(cache, "observe"):
            cache.observe(rec.attention)
        out.append(rec.logits)
    return torch.cat(out)


@pytest.mark.parametrize("kind", KINDS)
def test_budget_covering_the_text_is_exact(model_ids, kind):
    model, ids = model_ids
    full = _run(model, ids, model.new_cache("dense"), 6)
    budget = len(ids) * 2 if kind == "pyramid" else len(ids)          # a pyramid's top layer gets half
    cache = model.new_cache(kind, budget=budget)
    assert torch.equal(_run(model, ids, cache, 6), full)
    # nothing evicted by score; a sliding layer (tiny Gemma 3's window of 8) holds what the model's own holds
    dense = model.new_cache("dense")
    _run(model, ids, dense, 6)
    held = [dense.held_positions(i) for i in range(model.n_layers)]
    assert [layer.held_positions() for layer in cache.layers] == held
    assert all(layer.evicted == [] for layer in cache.layers if layer.window is None)
    # run_cache (the evaluation's loop) on the same cache kind: the same tokens, KL 0
    v = Variant.of(kind, budget=budget)
    assert v.lossless_for(len(ids), model.cost_config.n_kv_heads, model.n_layers, model_windows(model))
    ref_tokens, ref = run_cache(model, ids[:6], 10, model.new_cache("dense"), forced=ids[6:])
    tokens, got = run_cache(model, ids[:6], 10, variant_cache(model, v), forced=ids[6:])
    assert tokens == ref_tokens
    assert torch.allclose(got, ref, atol=1e-5)          # forward's explicit softmax against the fused one


@pytest.mark.parametrize("kind", KINDS)
def test_small_budget_holds_the_budget_and_changes_logits(model_ids, kind):
    model, ids = model_ids
    full = _run(model, ids, model.new_cache("dense"), 12)
    cache = model.new_cache(kind, budget=6, **({"recent": 2} if kind == "h2o" else {"window": 3}))
    got = _run(model, ids, cache, 12)
    assert torch.equal(got[:12], full[:12])                # the prefill reads everything: exact
    assert not torch.equal(got[12:], full[12:])
    for layer in cache.layers:
        heads = layer.head_positions()
        assert len(heads) == model.cost_config.n_kv_heads
        for pos in heads:
            assert pos == sorted(pos)
            if layer.window is not None:              # a sliding layer holds nothing its window cannot reach
                assert pos[0] >= len(ids) - (layer.window - 1) and layer.budget <= layer.window - 1
            if kind == "h2o":
                assert len(pos) == layer.budget and pos[-2:] == [len(ids) - 2, len(ids) - 1]
            else:       # compressed once after the prefill, decode rows appended (a sliding layer: in its window)
                cap = len(ids) if layer.window is None else layer.window - 1
                assert len(pos) == min(layer.budget + len(ids) - 12, cap)
                assert pos[-min(len(ids) - 12 + 3, cap):] == list(range(len(ids) - min(len(ids) - 9, cap), len(ids)))


def test_a_sliding_layer_drops_what_left_its_window_first_by_hand():
    """One sliding layer (window 4: rows of the last 3 positions), two K/V heads, H2O budget 2 with 1
    recent: the window drops first, then the heavy hitter per head; where the heads then differ, each
    keeps as many rows as the one with the fewest inside its window (the newest)."""
    cache = H2OCache(1, budget=2, recent=1, windows=[4])
    assert cache.is_sliding == [True] and cache.layers[0].budget == 2
    k = torch.arange(10.0).reshape(1, 2, 5, 1)
    cache.update(k, k, 0)
    cache.observe(torch.tensor([[[[0, 0, 0.6, 0.2, 0.2]], [[0, 0, 0.2, 0.6, 0.2]]]]))      # [L, H, N, T]
    assert cache.head_positions(0) == [[2, 4], [3, 4]]          # 0, 1 left the window; heavy 2 / 3, recent 4
    cache.update(torch.full((1, 2, 1, 1), 9.0), torch.full((1, 2, 1, 1), 9.0), 0)
    assert cache.get_mask_sizes(1, 0) == (1, 6)                 # a decode step: a one-column mask
    cache.observe(torch.zeros(1, 2, 1, 3))
    assert cache.head_positions(0) == [[4, 5], [4, 5]]          # head 0 had 2 rows inside: both keep 2
    assert cache.layers[0].evicted[-1].tolist() == [[2], [3]]


def test_h2o_keeps_the_heavy_hitters_by_hand():
    """One layer, one head: the accumulated attention decides, the recent rows stay."""
    cache = H2OCache(1, budget=3, recent=1)
    k = torch.arange(5.0).reshape(1, 1, 5, 1)
    cache.update(k, k, 0)
    att = torch.tensor([[0.1, 0.5, 0.05, 0.3, 0.05]]).reshape(1, 1, 1, 5)
    cache.observe(att)
    assert cache.head_positions(0) == [[1, 3, 4]]           # heavy 1 and 3, recent 4
    assert cache.layers[0].evicted[0].tolist() == [[0, 2]]
    assert cache.layers[0].keys.flatten().tolist() == [1.0, 3.0, 4.0]
    cache.update(torch.full((1, 1, 1, 1), 5.0), torch.full((1, 1, 1, 1), 5.0), 0)
    cache.observe(torch.tensor([0.0, 0.6, 0.3, 0.1]).reshape(1, 1, 1, 4))
    # scores: pos1 0.5+0.0, pos3 0.3+0.6, pos4 0.05+0.3; newest 5 recent: heavy = 3 and 1
    assert cache.head_positions(0) == [[1, 3, 5]]
    assert cache.layers[0].evicted[1].tolist() == [[4]]


def test_snapkv_votes_pooled_by_hand():
    cache = SnapKVCache(1, budget=3, window=1, kernel=3)
    k = torch.zeros(1, 1, 6, 1)
    cache.update(k, k, 0)
    att = torch.zeros(1, 1, 6, 6)
    att[0, 0, -1] = torch.tensor([0.0, 0.0, 0.0, 0.9, 0.0, 0.1])
    cache.observe(att)
    # pooled over 3 neighbours (edges averaged over what exists): 2 → 0.3, 3 → 0.3, 4 → 0.3; ties by index
    kept = cache.head_positions(0)[0]
    assert kept[-1] == 5 and len(kept) == 3 and set(kept[:2]) <= {2, 3, 4}
    cache.update(k[:, :, :1], k[:, :, :1], 0)
    cache.observe(torch.ones(1, 1, 1, 4) / 4)
    assert len(cache.head_positions(0)[0]) == 4                # decode rows are never evicted


def test_pyramid_budgets():
    assert pyramid_budgets(30, 32) == [round(32 * (1.5 - i / 29)) for i in range(30)]
    b = pyramid_budgets(30, 32)
    assert b[0] == 48 and b[-1] == 16 and b == sorted(b, reverse=True)
    assert abs(sum(b) - 30 * 32) <= 30
    assert PyramidKVCache(3, 10).budgets() == [15, 10, 5]
    with pytest.raises(LimitError):
        pyramid_budgets(3, 10, 1.0)


@pytest.mark.parametrize("bad", [dict(budget=0), dict(budget=10**6), dict(budget=4, recent=5)])
def test_bad_settings_are_refused(bad):
    with pytest.raises(LimitError):
        Variant.of("h2o", **bad)
    with pytest.raises(LimitError):
        Variant.of("snapkv", budget=8, kernel=4)


def test_crop_after_eviction_is_refused(gpt):
    ids = gpt.tokenizer.encode(TEXT)
    cache = H2OCache(gpt.n_layers, budget=4)
    _run(gpt, ids, cache, 8)
    with pytest.raises(LimitError):
        cache.crop(3)


def test_evaluate_runs_every_policy(tiny_hf):
    text = held_out_text(tiny_hf, 40)
    variants = [Variant.of("full"), Variant.of("h2o", budget=12, recent=4), Variant.of("snapkv", budget=12),
                Variant.of("pyramid", budget=12), Variant.of("h2o", budget=64)]
    ev = evaluate(tiny_hf, variants, [text], 20, 20)
    by = {r.variant: r for r in ev.results}
    assert by[variants[-1]].kl_mean < 1e-9 and by[variants[-1]].top1_agreement == 1.0
    assert by[variants[1]].kl_mean > 0
    assert by[variants[1]].bytes_per_token < by[variants[0]].bytes_per_token


def test_snapkv_hold_keeps_the_budget_while_decoding(gpt):
    ids = gpt.tokenizer.encode(TEXT + " " + TEXT)
    cache = SnapKVCache(gpt.n_layers, budget=8, window=4, hold=True)
    _run(gpt, ids, cache, 10)
    for layer in cache.layers:
        assert all(8 <= len(p) < 12 for p in layer.head_positions())
        assert len(layer.evicted) > 1                       # compressed after the prefill and again later


def test_equal_bytes_comparison_and_verdict(tiny_hf):
    from kvviz.compress.budget import compare_at_budgets, verdict, verdict_text

    cmp = compare_at_budgets(tiny_hf, 48, 16, answer=6)
    rows = cmp.rows()
    assert {r["fraction"] for r in rows} == {0.25, 0.10}
    for r in rows:
        assert r["answer_changed"] in (True, False)
        if r["kind"] in ("h2o", "latent", "window", "fp8", "quant", "gqa"):
            assert r["bytes_fraction"] <= r["fraction"] * 1.02
    full = cmp.full
    assert full.kl_mean == 0 and full.answer_changed is False
    v = verdict(cmp)
    for f, got in zip(cmp.fractions, v):
        fits = [r for r in rows if r["fraction"] == f and r["bytes_fraction"] <= f * 1.02]
        assert got["winner"] == min(fits, key=lambda r: (r["kl_mean"], -r["top1_agreement"]))["variant"]
        assert got["none_safe"] == (not got["safe"])
    assert "wins" in verdict_text("tiny", v)
