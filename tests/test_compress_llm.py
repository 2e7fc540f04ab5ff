"""Smaller caches on the real SmolLM2 (kvviz.compress.llm): re-rotation to cache positions, the exact
window, per-channel against per-token keys on its own keys, the pooled K/V head. Short texts: a
decode step of the real model is 60-140 ms here."""
import json

import pytest
import torch

from kvviz.cache import DynamicCache, SlidingWindowCache, quantize
from kvviz.cache.window import rerotate
from kvviz.compress import Variant
from kvviz.compress.llm import evaluate_llm, key_channels, run_text, variant_cache
from kvviz.compress.text import HELD_OUT_TEXT, held_out_ids
from kvviz.limits import LLM_COMPRESS_MAX_TOKENS, LimitError
from kvviz.models.grouped import pooled_network


@pytest.fixture(scope="module")
def m(smollm2):
    return smollm2


@pytest.fixture(scope="module")
def record(m):
    """One recording pass over the text's first 64 tokens without a cache: q and k after the rotation."""
    return m.forward(held_out_ids(m.tokenizer, 64), None, 0)


def test_rerotation_equals_a_fresh_rotation_at_the_new_position(m, record):
    raw = record.k_unrotated[3, 1, :10]                                         # [10, 64] before RoPE
    at_own = torch.stack([m.rotate(raw[i], i) for i in range(10)])
    shift = torch.tensor([0, 5, -3, 40, 100, 1, 2, 3, 7, 1000])
    moved = rerotate(at_own, shift, m.rope_inv_freq())
    fresh = torch.stack([m.rotate(raw[i], i + int(shift[i])) for i in range(10)])   # transformers' own rotation
    assert torch.allclose(moved, fresh, atol=2e-5)
    assert torch.equal(rerotate(at_own, torch.zeros(10, dtype=torch.long), m.rope_inv_freq()), at_own)


def test_a_window_at_cache_positions_reads_keys_rotated_afresh_there(m, record):
    """Sinks 2 + window 4 over 10 one-token updates: the keys a query reads are exactly its held keys
    rotated at contiguous positions ending at the query (cache positions plus a constant), so every
    score equals the one with keys at cache positions 0..5 and the query at 5."""
    raw_k = record.k_unrotated[5, 0, :10]                                       # [10, 64]
    raw_q = record.q_unrotated[5, 0, 9]
    own = SlidingWindowCache(1, 4, 2)
    cache = SlidingWindowCache(1, 4, 2, "cache", m.rope_inv_freq())
    for p in range(10):
        k = m.rotate(raw_k[p], p).reshape(1, 1, 1, 64)
        got_own, _ = own.update(k, k, 0)
        got, _ = cache.update(k, k, 0)
    held = cache.held_positions()
    assert held == own.held_positions() == [0, 1, 6, 7, 8, 9]
    assert cache.layers[0].read_positions() == [4, 5, 6, 7, 8, 9] and own.layers[0].read_positions() == held
    fresh = torch.stack([m.rotate(raw_k[h], r) for h, r in zip(held, [4, 5, 6, 7, 8, 9])])
    assert torch.allclose(got[0, 0], fresh, atol=2e-5)
    assert torch.equal(got[0, 0, 2:], got_own[0, 0, 2:])                       # the window's keys stay
    q = m.rotate(raw_q, 9)
    at_cache = torch.stack([m.rotate(raw_k[h], i) for i, h in enumerate(held)]) @ m.rotate(raw_q, 5)
    assert torch.allclose(got[0, 0] @ q, at_cache, atol=2e-4)
    assert not torch.allclose(got_own[0, 0] @ q, at_cache, atol=1e-2)          # own positions: sinks far away
    with pytest.raises(LimitError, match="rotary"):
        SlidingWindowCache(1, 4, 2, "cache")


def test_a_window_covering_the_text_equals_the_full_cache_exactly_both_ways(m):
    ids = held_out_ids(m.tokenizer, 8)
    full = run_text(m.model, ids, DynamicCache(m.n_layers), 5)
    for positions in ("own", "cache"):
        v = Variant.of("window", window=6, sinks=2, positions=positions)
        assert torch.equal(run_text(m.model, ids, variant_cache(m, v), 5), full), positions


def test_keys_per_channel_beat_keys_per_token_on_smollm2s_own_keys(m, record):
    """KIVI's reason on the real model: a few key channels are far larger than the rest (here the
    largest channel's mean |k| is many times the median's), so a group along a token spans them all
    while a group along a channel does not; the attention scores' error is smaller per channel at
    int4 and int2 in every layer checked."""
    kc = key_channels(m, held_out_ids(m.tokenizer, 64), 10)
    assert kc.magnitude.shape == (192, 64) and kc.outlier_ratio() > 5
    per_token, per_channel = kc.spread()
    assert per_token > 2 * per_channel
    for layer in (0, 10, 20, 29):
        k, q = record.k[layer:layer + 1], record.q[layer]                          # rotated, as cached
        exact = q @ k[0].repeat_interleave(3, 0).transpose(-1, -2)
        for bits in (4, 2):
            err = {a: float((q @ quantize(k, bits, 32, a).dequantize()[0].repeat_interleave(3, 0).transpose(-1, -2)
                             - exact).abs().mean()) for a in ("channel", "token")}
            assert err["channel"] < err["token"], (layer, bits, err)


def test_the_pooled_model_has_one_kv_head_and_shares_the_other_weights(m):
    net = m.model
    pooled = pooled_network(net, 1)
    a0, p0 = net.model.layers[0].self_attn, pooled.model.layers[0].self_attn
    assert a0.k_proj.weight.shape == (192, 576) and p0.k_proj.weight.shape == (64, 576)
    assert p0.v_proj.weight.shape == (64, 576) and p0.num_key_value_groups == 9
    assert torch.equal(p0.k_proj.weight, a0.k_proj.weight.reshape(3, 64, 576).mean(0))
    assert p0.q_proj.weight.data_ptr() == a0.q_proj.weight.data_ptr()            # shared, not copied
    assert net.config.num_key_value_heads == 3 and pooled.config.num_key_value_heads == 1
    cache = DynamicCache(m.n_layers)
    with torch.no_grad():
        out = pooled(input_ids=torch.tensor([held_out_ids(m.tokenizer, 8)]), past_key_values=cache, use_cache=True)
    assert cache.layers[0].keys.shape == (1, 1, 8, 64) and out.logits.shape == (1, 8, 49152)
    with pytest.raises(LimitError, match="divide"):
        pooled_network(net, 2)


def test_the_held_out_text_and_the_evaluation_refuse_what_they_cannot_do(m):
    assert len(m.tokenizer.encode(HELD_OUT_TEXT)) >= LLM_COMPRESS_MAX_TOKENS
    with pytest.raises(LimitError, match="Text tokens"):
        held_out_ids(m.tokenizer, LLM_COMPRESS_MAX_TOKENS + 1)
    with pytest.raises(LimitError, match="divide"):
        evaluate_llm(m, [Variant.of("gqa", kv_heads=2)], tokens=8, prefill=4)
    with pytest.raises(LimitError, match="fit the window"):
        evaluate_llm(m, [Variant.of("window", window=4, sinks=0)], tokens=16, prefill=8)


# --- CLI ---------------------------------------------------------------------------------------

def test_cli_on_smollm2_prints_the_same_json_as_on_the_tiny_gpt(m, capsys):
    from kvviz.cli.main import main
    assert main(["compress", "--model", "smollm2", "--kind", "window", "--window", "4", "--sinks", "2",
                 "--positions", "cache", "--tokens", "8", "--prefill", "6"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert list(d) == ["kind", "settings", "bytes_per_token", "kl_mean", "top1_agreement", "prompts", "positions"]
    assert d["settings"] == {"window": 4, "sinks": 2, "positions": "cache"} and d["prompts"] == 1
    assert d["positions"] == 3 and d["kl_mean"] > 0 and 0 <= d["top1_agreement"] <= 1
    assert d["bytes_per_token"] == round(6 * 46_080 / 8, 3)                  # 6 rows held of 8 positions


@pytest.mark.parametrize("args", [
    ["--kind", "window", "--positions", "cache"], ["--model", "smollm2", "--kind", "full", "--prompts", "2"],
    ["--kind", "full", "--tokens", "20"], ["--model", "smollm2", "--kind", "full", "--tokens", "500"],
    ["--model", "smollm2", "--kind", "gqa", "--kv-heads", "2", "--tokens", "8"],
    ["--model", "smollm2", "--kind", "window", "--window", "4", "--sinks", "0", "--tokens", "20"]])
def test_cli_bad_arguments_on_either_model_give_one_line_and_exit_2(m, args, capsys):
    from kvviz.cli.main import main
    with pytest.raises(SystemExit) as e:
        main(["compress", *args])
    out = capsys.readouterr()
    assert e.value.code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1, out.err
