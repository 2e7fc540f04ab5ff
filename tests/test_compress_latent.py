"""The latent cache (MLA-style, kvviz.cache.latent and kvviz.compress.latent): the K and V projections
factored by SVD, the cache holding only the latent; exact within rounding at full rank, on the tiny
GPT (learned positions) and a transformers Llama (rotary: rotation after reconstruction)."""
import pytest
import torch

from kvviz.cache import DynamicCache
from kvviz.compress import Variant, run_cache, variant_cache
from kvviz.compress.latent import elements_per_token, full_rank, latent_cache, latent_spectrum
from kvviz.limits import LimitError
from tests.conftest import HELD_OUT_TEXT as TEXT  # the fixtures gpt and model_ids live there too


def _logits(model, ids, cache, prefill):
    out = [model.logits(ids[:prefill], cache, 0)]
    out += [model.logits([t], cache, i) for i, t in enumerate(ids[prefill:], start=prefill)]
    return torch.cat(out)


def test_full_rank_is_exact_within_rounding(model_ids):
    model, ids = model_ids
    full = _logits(model, ids, model.new_cache("dense"), 6)
    cache = latent_cache(model, "full")
    got = _logits(model, ids, cache, 6)
    assert (got - full).abs().max() < 1e-4
    rank = full_rank(model)
    assert cache.ranks() == [rank] * model.n_layers
    assert cache.layers[0].keys.shape == (1, len(ids), rank)          # only the latent is held
    assert cache.nbytes() == model.n_layers * len(ids) * rank * 4       # float32 here


def test_lower_rank_drifts_and_holds_less(model_ids):
    model, ids = model_ids
    full = _logits(model, ids, model.new_cache("dense"), 6)
    rank = full_rank(model) // 4
    got = _logits(model, ids, latent_cache(model, rank), 6)
    assert (got - full).abs().max() > 1e-3
    e = elements_per_token(model, rank)
    assert e["latent"] == rank and e["full_kv"] == 2 * model.cost_config.n_kv_heads * model.cost_config.head_dim
    s = latent_spectrum(model)
    assert len(s) == model.n_layers and all(a >= b for a, b in zip(s[0], s[0][1:]))


def test_rotation_after_reconstruction_keeps_the_keys(tiny_hf):
    """What attention reads from the cache at full rank is the rotated K and V the model handed in."""
    ids = tiny_hf.tokenizer.encode("Today the weather is so nice")
    dense, lat = DynamicCache(tiny_hf.n_layers), latent_cache(tiny_hf)
    tiny_hf.logits(ids, dense, 0)
    tiny_hf.logits(ids, lat, 0)
    k, v = lat.layers[1].kv()
    assert torch.allclose(k, dense.layers[1].keys, atol=1e-5) and torch.allclose(v, dense.layers[1].values, atol=1e-5)


def test_variant_and_bad_ranks(gpt):
    ids = gpt.tokenizer.encode(TEXT)
    v = Variant.of("latent", rank=32)
    _, got = run_cache(gpt, ids[:6], 8, variant_cache(gpt, v), forced=ids[6:])
    assert got.shape == (8, len(gpt.vocab))
    assert Variant.of("latent").rank == "full"
    with pytest.raises(LimitError):
        Variant.of("latent", rank=0)
    with pytest.raises(LimitError):
        variant_cache(gpt, Variant.of("latent", rank=129))      # past the tiny GPT's 128


def test_smollm2_latent_numbers(smollm2):
    """SmolLM2's K and V: 3 K/V heads × 64 × 2 = 384 elements per token and layer, full rank 384
    (the projections are 384 × 576)."""
    assert full_rank(smollm2) == 384
    assert elements_per_token(smollm2, 96) == {"rank": 96, "latent": 96, "full_kv": 384, "ratio": 0.25}
