"""The one cache module (kvviz.cache): Hugging Face's API and names, and every kind computing the same."""
import pytest
import torch

from kvviz.cache import DynamicCache, PagedCache, StaticCache
from kvviz.decoding.sampling import Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models.abc import ABCModel
from kvviz.models.gpt import load_tiny_gpt

KINDS = [lambda: DynamicCache(2), lambda: StaticCache(2, 8), lambda: PagedCache(2, 3, 4),  # blocks of 3: 5 ∤
         lambda: DynamicCache(2, [8, 8])]    # sliding-attention layers (kvviz.cache.hybrid), within their window


def _kv(n: int, start: float = 0.0):
    """K and V of ``n`` new positions, [batch 1, 3 heads, n, 4]; V = −K so the two cannot be swapped."""
    k = torch.arange(start, start + 12 * n).reshape(1, n, 3, 4).transpose(1, 2)   # a view, like q/k/v
    return k, -k


@pytest.mark.parametrize("make", KINDS, ids=["dynamic", "static", "paged", "sliding"])
def test_update_takes_key_value_layer_and_returns_the_whole_layer(make):
    cache = make()
    assert len(cache) == 2 and cache.get_seq_length() == 0       # len() counts layers, as in transformers
    k1, v1 = _kv(3)
    keys, values = cache.update(k1, v1, 0)
    assert keys.shape == (1, 3, 3, 4) and torch.equal(keys, k1) and torch.equal(values, v1)
    k2, v2 = _kv(1, 100.0)
    keys, values = cache.update(k2, v2, 0)
    assert keys.shape == (1, 3, 4, 4) and torch.equal(keys[:, :, 3:], k2) and torch.equal(values[:, :, :3], v1)
    assert cache.get_seq_length(0) == 4 and cache.get_seq_length(1) == 0


@pytest.mark.parametrize("make", KINDS, ids=["dynamic", "static", "paged", "sliding"])
def test_crop_keeps_the_first_positions_and_reset_empties(make):
    cache = make()
    for layer in range(2):
        cache.update(*_kv(5), layer)
    cache.crop(3)
    assert [cache.get_seq_length(i) for i in range(2)] == [3, 3]
    k, v = cache.update(*_kv(1, 500.0), 0)                          # the next token lands at position 3
    assert k.shape[2] == 4 and float(k[0, 0, 3, 0]) == 500.0 and torch.equal(k[:, :, :3], _kv(5)[0][:, :, :3])
    cache.reset()
    assert cache.get_seq_length() == 0


def test_dynamic_cache_copies_what_it_stores_and_frees_what_it_crops():
    cache = DynamicCache(1)
    qkv = torch.randn(1, 5, 3 * 12)                                  # a fused projection's output
    k = qkv[..., 12:24].reshape(1, 5, 3, 4).transpose(1, 2)          # a view into it
    cache.update(k, k, 0)
    assert cache.layers[0].keys.untyped_storage().data_ptr() != qkv.untyped_storage().data_ptr()
    assert cache.nbytes() == 2 * 5 * 12 * 4                          # K and V, 5 positions, float32
    cache.crop(2)
    assert cache.nbytes() == 2 * 2 * 12 * 4                          # dropped rows are really freed


def test_static_cache_is_allocated_once_from_the_first_key_and_refuses_overflow():
    cache = StaticCache(1, 6)
    assert cache.nbytes() == 0
    cache.update(*_kv(2), 0)
    layer = cache.layers[0]
    assert layer.keys.shape == (1, 3, 6, 4) and layer.keys.dtype == torch.float32
    assert cache.nbytes() == 2 * 6 * 12 * 4                          # all 6 rows, from the start
    storage = layer.keys.untyped_storage().data_ptr()
    cache.update(*_kv(4), 0)
    assert layer.keys.untyped_storage().data_ptr() == storage         # written in place
    with pytest.raises(LimitError, match="holds 6 positions"):
        cache.update(*_kv(1), 0)


@pytest.mark.parametrize("make", KINDS, ids=["dynamic", "static", "paged", "sliding"])
def test_snapshots_do_not_change_when_the_cache_does(make):
    cache = make()
    cache.update(*_kv(2), 0)
    keys, _ = cache.snapshot()
    before = keys[0].clone()
    cache.crop(1)
    cache.update(*_kv(3, 900.0), 0)
    assert torch.equal(keys[0], before) and keys[1] is None


def test_the_stepper_gives_bit_identical_records_with_either_kind():
    m = ABCModel()
    a = run_generation(m, ["A", "B", "C"], 6, rule=Sampler(1.3), seed=4)
    b = run_generation(m, ["A", "B", "C"], 6, rule=Sampler(1.3), seed=4, cache=StaticCache(1, 16))
    for x, y in zip(a.events, b.events):
        assert torch.equal(x.logits, y.logits) and x.tokens == y.tokens
        if x.record is not None:
            assert torch.equal(x.record.attention, y.record.attention)
            assert torch.equal(x.cache.keys[0], y.cache.keys[0])


def test_crop_rolls_the_gpt_back_without_a_trace_of_the_rejected_tokens():
    """What speculative decoding needs: two caches that saw different rejected tokens after the same
    accepted one are, once cropped, the same cache, and decode the next token identically."""
    tiny = load_tiny_gpt()
    ids = tiny.tokenizer.encode("Today the weather is so nice")                  # 6 tokens
    a_tail, b_tail = tiny.tokenizer.encode(". It is"), tiny.tokenizer.encode(". wet cold")
    with torch.no_grad():
        caches = []
        for tail in (a_tail, b_tail):                           # "." accepted, the other two rejected
            cache = StaticCache(4, 16)
            tiny.model(torch.tensor([ids]), cache, 0)
            tiny.model(torch.tensor([tail]), cache, 6)
            kept = [layer.kv()[0][:, :, :7].clone() for layer in cache.layers]
            cache.crop(7)
            assert cache.get_seq_length() == 7
            assert all(torch.equal(layer.kv()[0], k) for layer, k in zip(cache.layers, kept))  # untouched
            caches.append(cache)
        nxt = torch.tensor([tiny.tokenizer.encode("In")])
        a, b = (tiny.model(nxt, cache, 7, last_only=True) for cache in caches)
    assert torch.equal(a, b)
    assert all(torch.equal(x.kv()[1], y.kv()[1]) for x, y in zip(*(c.layers for c in caches)))
