"""The smaller caches of kvviz.cache: a sliding window with attention sinks and KIVI-style quantized K/V
(on the tiny GPT; the exact window on a tiny random Llama too, whose rotary keys a window re-rotates).

Checked against what a user would notice: the logits (exact when nothing is evicted or quantized),
which rows attention reads, the bytes the cache holds (against kvviz.cost) and the error bound."""
import pytest
import torch

from kvviz import cost
from kvviz.cache import DynamicCache, QuantizedCache, SlidingWindowCache, quantize
from kvviz.compress.text import held_out_ids
from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models.gpt import GPTModel, cost_config, load_tiny_gpt

TEXT = "Today the weather is so nice . It is rainy in London , so we take an umbrella ."   # 19 tokens


@pytest.fixture(scope="module")
def tiny():
    return load_tiny_gpt()


@pytest.fixture(scope="module")
def gpt(tiny):
    return GPTModel(tiny)


@pytest.fixture(scope="module")
def ids(tiny):
    return tiny.tokenizer.encode(TEXT)


@torch.no_grad()
def _logits(model, ids, cache, prefill: int) -> torch.Tensor:
    """Logits of every position: a prefill of the first ``prefill`` tokens, then one token per step
    (``model``: any kvviz model, through the protocol's ``forward``)."""
    out = [model.forward(ids[:prefill], cache, 0).logits]
    out += [model.forward([t], cache, i).logits for i, t in enumerate(ids[prefill:], start=prefill)]
    return torch.cat(out)                                                   # [T, V]


@torch.no_grad()
def _banded_reference(model, ids, window: int, sinks: int) -> torch.Tensor:
    """The whole text in one pass without a cache, each query reading only its sinks and window."""
    n = len(ids)
    q, k = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
    allowed = (k <= q) & ((k < sinks) | (k > q - window))                   # [N, N]
    x = model.hidden(torch.tensor([ids]), None, positions=torch.arange(n).unsqueeze(0), allowed=allowed.unsqueeze(0))
    return model.readout(x)[0]


# --- sliding window -----------------------------------------------------------------------------

# each model's text (token ids) and the windows (window, sinks, key positions) that cover it
COVERING = {"gpt": [(19, 0, "own"), (15, 4, "own")],                      # 15 + 4 sinks ≥ 19
            "llama": [(6, 2, "own"), (6, 2, "cache")]}                    # 8 tokens of the held-out text


@pytest.mark.parametrize("name,prefill", [("gpt", 1), ("gpt", 7), ("gpt", 19), ("llama", 5)])
def test_a_window_as_long_as_the_text_gives_exactly_the_full_caches_logits(request, gpt, ids, name, prefill):
    """Every position's logits, bit for bit, on either kind of model (a transformers model with
    rotary positions, the tiny random Llama: with the kept keys at their own and at cache positions,
    re-rotated with its rotary frequencies)."""
    if name == "gpt":
        model, text, inv_freq = gpt, ids, None
    else:
        model = request.getfixturevalue("tiny_hf")
        text, inv_freq = held_out_ids(model.tokenizer, 8), model.rope_inv_freq()
    n_layers = model.n_layers
    full = _logits(model, text, DynamicCache(n_layers), prefill)
    for window, sinks, positions in COVERING[name]:
        cache = SlidingWindowCache(n_layers, window, sinks, positions, inv_freq if positions == "cache" else None)
        assert torch.equal(_logits(model, text, cache, prefill), full), (window, sinks, positions)


@pytest.mark.parametrize("window,sinks", [(4, 0), (5, 2), (1, 3)])
@pytest.mark.parametrize("prefill", [1, 12, 19])
def test_a_window_reads_its_sinks_and_recent_positions_and_a_long_prefill_sees_the_same(tiny, gpt, ids, window,
                                                                                        sinks, prefill):
    """Prefilled or fed token by token, every position's logits are those of a pass that lets each
    query read only positions < sinks and the last ``window`` (itself included)."""
    ref = _banded_reference(tiny.model, ids, window, sinks)
    cache = SlidingWindowCache(4, window, sinks)
    got = _logits(gpt, ids, cache, prefill)
    assert torch.allclose(got, ref, atol=2e-5), float((got - ref).abs().max())
    full = _logits(gpt, ids, DynamicCache(4), 19)
    assert (got[-1] - full[-1]).abs().max() > 0.1                          # what was evicted mattered
    n = len(ids)
    held = list(range(sinks)) + list(range(n - window, n))
    assert cache.held_positions() == held and cache.get_seq_length() == n
    assert cache.layers[0].keys.shape == (1, 4, len(held), 32)
    cfg = cost_config(tiny.model.config)
    assert cache.nbytes() == cost.window_cache_bytes(cfg, n, window, sinks, dtype="fp32")   # evicted rows freed


def test_a_window_crops_back_only_while_the_rows_it_needs_are_held(tiny, gpt, ids):
    cache = SlidingWindowCache(4, 4, 2)
    _logits(gpt, ids[:10], cache, 10)                                # holds 0, 1, 6..9
    cache.crop(9)
    assert cache.held_positions() == [0, 1, 6, 7, 8] and cache.get_seq_length() == 9
    with pytest.raises(LimitError, match="evicted position 5"):
        cache.crop(8)                                                      # would need position 5 again
    with pytest.raises(LimitError, match="Window"):
        SlidingWindowCache(4, 0, 2)


def test_the_stepper_logs_evicted_rows_and_every_snapshot_keeps_its_own_view(tiny):
    model = GPTModel(tiny)
    prompt = tiny.tokenizer.tokenize("Today the weather is so")             # 5 tokens
    run = run_generation(model, prompt, 5, cache=SlidingWindowCache(4, 3, 1))
    first, last = run.events[0].cache, run.events[-1].cache
    assert [r.position for r in first.held_rows] == [0, 2, 3, 4]
    assert [r.evicted_at for r in first.rows] == [None, 0, None, None, None]
    assert [r.position for r in last.held_rows] == [0, 6, 7, 8] and last.seq_length == 9
    assert last.rows[3].evicted_at == 4 and last.rows[2].evicted_at == 2   # the decode that pushed it out
    assert last.keys[0].shape[2] == 4 and first.keys[0].shape[2] == 4
    decode = run.events[-2]                                                 # its query read 0, 6, 7, 8
    assert decode.record.attention.shape[-1] == 4


# --- quantized ----------------------------------------------------------------------------------

SETTINGS = [(8, "channel"), (8, "token"), (4, "channel"), (4, "token"), (2, "channel"), (2, "token")]


@pytest.mark.parametrize("bits,axis", SETTINGS)
def test_every_dequantized_value_is_within_half_a_step_of_the_original(bits, axis):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 12, 7, generator=g) * torch.tensor([1, 5, 0.1, 2, 1, 30, 1])   # odd dim, uneven channels
    x[0, 0, :4, 2] = 1.5                                                    # a constant group: exact
    q = quantize(x, bits, 4, axis)
    err = (q.dequantize() - x).abs()
    assert (err <= q.step() / 2 + 1e-6 * x.abs().amax()).all()
    assert float(err.max()) > 0                                             # it did round
    assert int(q.unpacked().max()) == 2 ** bits - 1 and q.unpacked().shape == x.shape
    assert q.codes.shape[-1] == {8: 7, 4: 4, 2: 2}[bits]                    # int4: two codes per byte, int2: four
    if axis == "channel":
        assert q.scale.shape == (2, 3, 3, 7) and torch.equal(q.dequantize()[0, 0, :4, 2], x[0, 0, :4, 2])
    else:
        assert q.scale.shape == (2, 3, 12, 2)                                # 7 channels: groups of 4 and 3


@pytest.mark.parametrize("bits,axis", SETTINGS)
@pytest.mark.parametrize("residual", [0, 3])
def test_nbytes_counts_codes_scales_and_the_residual_as_the_cost_formula_says(tiny, ids, bits, axis, residual):
    cfg = cost_config(tiny.model.config)
    cache = QuantizedCache(4, bits, 4, axis, residual)
    with torch.no_grad():
        tiny.model(torch.tensor([ids[:6]]), cache, 0)
        for i in range(6, len(ids)):
            assert cache.nbytes() == cost.quantized_cache_bytes(cfg, i, bits, 4, axis, residual), i
            tiny.model(torch.tensor([[ids[i]]]), cache, i)
    full = cost.cache_bytes(cfg, len(ids), dtype="fp32")
    assert cache.nbytes() == cost.quantized_cache_bytes(cfg, len(ids), bits, 4, axis, residual) < full
    layer = cache.layers[0]
    quantized = len(cache.quantized_positions())
    assert quantized == cost.quantized_rows(len(ids), 4, axis, residual) > 0
    assert layer.keys.shape[2] == len(ids) - quantized >= residual          # the newest rows, full precision


@pytest.mark.parametrize("bits,axis", SETTINGS)
def test_a_residual_as_long_as_the_text_gives_exactly_the_full_caches_logits(tiny, gpt, ids, bits, axis):
    full = _logits(gpt, ids, DynamicCache(4), 5)
    assert torch.equal(_logits(gpt, ids, QuantizedCache(4, bits, 4, axis, len(ids)), 5), full)
    lossy = _logits(gpt, ids, QuantizedCache(4, bits, 4, axis, 0), 5)
    assert torch.equal(lossy[:5], full[:5])                 # the prefill reads its own K/V unquantized
    assert not torch.equal(lossy[5:], full[5:])             # decode steps read dequantized rows


def test_the_cache_reads_back_each_row_within_half_a_step_and_the_residual_exactly(tiny, ids):
    cache = QuantizedCache(4, 4, 8, "channel", 2)
    rec = GPTModel(tiny).forward(ids, cache, 0)                           # the K/V the model computed
    keys, values = cache.snapshot()
    layer = cache.layers[1]
    q = len(cache.quantized_positions())                                  # 19 − 2 = 17 → 16 (whole groups)
    assert q == 16
    k_true, v_true = rec.k[1].unsqueeze(0), rec.v[1].unsqueeze(0)         # [1, 4, 19, 32]
    assert (keys[1][:, :, :q] - k_true[:, :, :q]).abs().le(layer.quantized_keys.step() / 2 + 1e-6).all()
    assert (values[1][:, :, :q] - v_true[:, :, :q]).abs().le(layer.quantized_values.step() / 2 + 1e-6).all()
    assert torch.equal(keys[1][:, :, q:], k_true[:, :, q:])


def test_a_quantized_cache_refuses_to_crop_into_rows_it_already_quantized(tiny, ids):
    cache = QuantizedCache(4, 8, 4, "token", 2)
    with torch.no_grad():
        tiny.model(torch.tensor([ids[:6]]), cache, 0)                        # 4 quantized, 2 exact
    cache.crop(6)
    with pytest.raises(LimitError, match="as codes"):
        cache.crop(5)
    with pytest.raises(LimitError, match="Bits"):
        QuantizedCache(4, 3)
    with pytest.raises(LimitError, match="Key axis"):
        QuantizedCache(4, 8, 4, "row")


def test_the_stepper_logs_when_each_row_was_quantized(tiny):
    model = GPTModel(tiny)
    prompt = tiny.tokenizer.tokenize("Today the weather is so")
    run = run_generation(model, prompt, 4, cache=QuantizedCache(4, 8, 2, "token", 3))
    rows = run.events[-1].cache.rows                                        # 8 positions, 3 exact
    assert [r.quantized_at for r in rows] == [0, 0, 2, 4, 6, None, None, None]
    assert [r.quantized_at for r in run.events[0].cache.rows] == [0, 0, None, None, None]   # its own view


# --- FP8 (E4M3) K/V ---------------------------------------------------------------------------

def _fp8_inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    prefill = [torch.randn(1, 3, 9, 16, generator=g) * 3 for _ in range(2)]
    steps = [[torch.randn(1, 3, 1, 16, generator=g) * 3 for _ in range(2)] for _ in range(4)]
    steps[-1][0][0, 0, 0, 0] = 1000.0            # past the prefill's largest: saturates under a frozen scale
    return prefill, steps


def test_fp8_per_tensor_matches_transformers_fp8_layer():
    """transformers 5.23's own FP8 layer (QuantizedCache's fp8 backend) on the same tensors: the same
    codes, scales and dequantized cached rows; the one difference is the new rows of a later pass
    (transformers returns them dequantized, kvviz as computed)."""
    from transformers.cache_utils import Fp8QuantizedLayer

    from kvviz.cache import Fp8Cache

    prefill, steps = _fp8_inputs()
    theirs, ours = Fp8QuantizedLayer(), Fp8Cache(1, "tensor")
    k_t, v_t = theirs.update(*prefill)
    k_o, v_o = ours.update(*prefill, 0)
    assert torch.equal(k_t, k_o) and torch.equal(v_t, v_o)             # the first pass: as computed
    for k, v in steps:
        cached = ours.layers[0].kv()
        k_t, v_t = theirs.update(k, v)
        k_o, v_o = ours.update(k, v, 0)
        n = cached[0].shape[-2]
        assert torch.equal(k_t[..., :n, :], cached[0]) and torch.equal(v_t[..., :n, :], cached[1])
        assert torch.equal(k_o[..., :n, :], cached[0])
        assert torch.equal(k_o[..., n:, :], k) and not torch.equal(k_t[..., n:, :], k)
    codes_t, scale_t = theirs._quantized_keys
    layer = ours.layers[0]
    assert codes_t.dtype == layer.keys.dtype == torch.float8_e4m3fn
    assert torch.equal(codes_t.view(torch.uint8), layer.keys.view(torch.uint8))
    assert torch.equal(scale_t, layer.key_scale)
    assert layer.kv()[0][0, 0, -1, 0] == pytest.approx(448 * float(layer.key_scale))    # saturated


def test_fp8_direct_round_trip_and_bytes():
    """Per token: each row's amax / 448 is its scale, the error within E4M3's half step (2⁻⁴ relative)."""
    from kvviz.cache import Fp8Cache

    prefill, steps = _fp8_inputs()
    cache = Fp8Cache(2, "token")
    for layer_idx in range(2):
        cache.update(*prefill, layer_idx)
        for k, v in steps:
            cache.update(k, v, layer_idx)
    keys = torch.cat([prefill[0]] + [k for k, _ in steps], dim=-2)
    got = cache.layers[0].kv()[0]
    amax = keys.abs().amax(-1, keepdim=True)
    err = (got - keys).abs()            # half a step: 2⁻⁴ relative (3 mantissa bits), 2⁻¹⁰ · scale for subnormals
    assert torch.all(err <= keys.abs() * 2.0 ** -4 + amax / 448 * 2.0 ** -10 + 1e-7)
    assert err.max() > 0
    assert got.abs().max() == pytest.approx(1000.0, rel=2 ** -4)                    # never saturates
    cfg = cost.cache_config(2, 3, 3, 16)
    for scale in ("tensor", "token"):
        c = Fp8Cache(2, scale)
        for layer_idx in range(2):
            c.update(*prefill, layer_idx)
            for k, v in steps:
                c.update(k, v, layer_idx)
        assert c.nbytes() == cost.fp8_cache_bytes(cfg, 13, scale)
    assert cost.fp8_cache_bytes(cfg, 13, "tensor") == 2 * (13 * 2 * 3 * 16 + 8)
    with pytest.raises(LimitError):
        Fp8Cache(1, "channel")


def test_fp8_on_the_tiny_gpt(gpt, ids):
    from kvviz.cache import Fp8Cache

    full = _logits(gpt, ids, DynamicCache(gpt.n_layers), 8)
    got = _logits(gpt, ids, Fp8Cache(gpt.n_layers, "tensor"), 8)
    assert torch.equal(got[:8], full[:8])                                 # the prefill reads its own rows
    assert 0 < (got[8:] - full[8:]).abs().max() < 0.5
