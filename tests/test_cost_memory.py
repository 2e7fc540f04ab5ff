"""docs/design.md §4, cache memory: the lesson's GPT-2 figures, every preset against an independent
calculation (real tensors in a real DynamicCache), parameter counts against the published ones, and the
validation messages a user sees."""
import math

import pytest
import torch

from kvviz import cost
from kvviz.cache import DynamicCache
from kvviz.limits import LimitError
from kvviz.measure.scaling import MeasuredGPT

# torch dtypes that store one value per element; int4 is packed two per byte (uint8)
TORCH_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
                "fp8": torch.float8_e4m3fn}


def test_gpt2_small_fp16_seed_figures():
    assert cost.cache_bytes_per_token(cost.GPT2_SMALL, "fp16") == 36_864
    assert cost.cache_bytes(cost.GPT2_SMALL, 1024, 1, "fp16") == 37_748_736
    # the lesson's own arithmetic: 2 · L · d · bytes with d = n_embd = 768
    assert 2 * 12 * 768 * 2 == 36_864
    assert round(cost.cache_bytes(cost.GPT2_SMALL, 1024, 1, "fp16") / 1e6, 1) == 37.7


def _measured_bytes_per_token(cfg: cost.ModelConfig, dtype: str, tokens: int = 3, batch: int = 2) -> float:
    """Fill a real DynamicCache with tensors of the model's K/V shape and read back its nbytes."""
    cache = DynamicCache(cfg.n_layers)
    if dtype == "int4":   # two 4-bit values per byte: the head dimension halves in bytes
        k = torch.zeros(batch, cfg.n_kv_heads, tokens, cfg.head_dim // 2, dtype=torch.uint8)
    else:
        k = torch.zeros(batch, cfg.n_kv_heads, tokens, cfg.head_dim).to(TORCH_DTYPES[dtype])
    for layer in range(cfg.n_layers):
        cache.update(k, k, layer)
    return cache.nbytes() / (tokens * batch)


@pytest.mark.parametrize("key", sorted(cost.PRESETS))
@pytest.mark.parametrize("dtype", sorted(cost.DTYPE_BITS))
def test_every_preset_matches_a_real_cache(key, dtype):
    cfg = cost.PRESETS[key]
    if dtype == "int4" and cfg.head_dim % 2:
        pytest.skip("odd head size cannot be packed per row")
    per_token = cost.cache_bytes_per_token(cfg, dtype)
    assert per_token == _measured_bytes_per_token(cfg, dtype)
    assert cost.cache_bytes(cfg, 1000, 3, dtype) == per_token * 3000


def test_preset_figures_published_or_derived():
    # Llama-3-8B / Mistral-7B: 32 layers × 8 KV heads × 128 → 128 KiB per token in fp16
    assert cost.cache_bytes_per_token(cost.LLAMA3_8B, "fp16") == 128 * 1024
    assert cost.cache_bytes_per_token(cost.MISTRAL_7B, "bf16") == 128 * 1024
    assert cost.cache_bytes_per_token(cost.QWEN25_7B, "bf16") == 56 * 1024
    # Falcon-7B is multi-query: one K/V head of 64 values per layer
    assert cost.cache_bytes_per_token(cost.FALCON_7B, "bf16") == 2 * 32 * 64 * 2
    assert [c.attention_kind for c in (cost.GPT2_SMALL, cost.LLAMA3_8B, cost.FALCON_7B)] == ["MHA", "GQA", "MQA"]


@pytest.mark.parametrize("cfg, published", [
    (cost.GPT2_SMALL, 124_439_808),          # the well-known exact count of GPT-2 small
    (cost.LLAMA3_8B, 8_030_261_248),         # exact count of Meta-Llama-3-8B
])
def test_parameter_counts_exact(cfg, published):
    assert cost.param_count(cfg) == published


@pytest.mark.parametrize("cfg, billions", [
    (cost.MISTRAL_7B, 7.24), (cost.QWEN25_7B, 7.61), (cost.FALCON_7B, 6.92), (cost.LLAMA31_70B, 70.6),
])
def test_parameter_counts_match_model_cards(cfg, billions):
    # the cards give three significant figures: agree within half a unit of the last one
    assert cost.param_count(cfg) / 1e9 == pytest.approx(billions, rel=1e-3)


def test_measured_gpt_has_exactly_the_counted_parameters():
    """The GPT the timing runs (kvviz.models.gpt, tied readout counted once) has param_count weights."""
    tiny = MeasuredGPT(cost.TINY_GPT, 1, 4)
    assert tiny.model.n_params() == cost.param_count(cost.TINY_GPT)
    gpt2 = MeasuredGPT(cost.GPT2_SMALL, 1, 4, device="meta")   # shapes only, no memory
    assert gpt2.model.transformer.wte.weight.is_meta
    assert gpt2.model.n_params() == cost.param_count(cost.GPT2_SMALL) == 124_439_808


def test_measured_gpt_refuses_shapes_it_cannot_build():
    with pytest.raises(ValueError, match="not a GPT-2-style shape"):
        MeasuredGPT(cost.LLAMA3_8B, 1, 4, device="meta")


def test_grouped_and_multi_query_savings():
    rep = cost.memory_report(cost.LLAMA3_8B, 8192, 4, "fp16")
    assert rep.kind == "GQA" and rep.saving_vs_mha == 4.0
    assert rep.mha_total == 4 * rep.total and rep.mqa_total * 8 == rep.total
    bars = cost.kv_sharing(cost.LLAMA3_8B, 8192, 4, "fp16")
    assert [kv for kv, _, _ in bars] == [1, 2, 4, 8, 16, 32]
    assert [b for _, _, b in bars] == [rep.mqa_total * k for k in (1, 2, 4, 8, 16, 32)]
    assert cost.memory_report(cost.GPT2_SMALL, 1024, 1, "fp16").saving_vs_mha == 1.0


def test_tokens_that_fit_and_transfer():
    per = cost.cache_bytes_per_token(cost.LLAMA3_8B, "fp16")
    assert cost.tokens_that_fit(cost.LLAMA3_8B, 80 * 10**9, 1, "fp16") == 80 * 10**9 // per
    tr = cost.cache_transfer(cost.LLAMA3_8B, 4096, 2, "fp16", 100)
    assert tr.bytes == per * 4096 * 2 and tr.seconds == pytest.approx(tr.bytes * 8 / 100e9)
    assert tr.per_layer_bytes * 32 == tr.bytes


@pytest.mark.parametrize("args, words", [
    ((0, 12, 12, 64), "Layers must be between 1"),
    ((-3, 12, 12, 64), "Layers must be between 1"),
    ((12, 12, 5, 64), "divisible by KV heads"),
    ((12, 12, 24, 64), "cannot exceed attention heads"),
    ((12, 0, 1, 64), "Attention heads must be between 1"),
    ((12, 12, 12, 0), "Head size must be between 1"),
    ((12, 12, 12, float("nan")), "whole number"),
    ((12, float("inf"), 12, 64), "whole number"),
    ((10**9, 12, 12, 64), "Layers must be between 1 and"),
])
def test_bad_shapes_get_clear_messages(args, words):
    with pytest.raises(LimitError, match=words):
        cost.cache_config(*args)


def test_bad_sizes_and_types():
    cfg = cost.GPT2_SMALL
    with pytest.raises(LimitError, match="Tokens must be between 1"):
        cost.cache_bytes(cfg, 0, 1, "fp16")
    with pytest.raises(LimitError, match="Batch size must be between 1"):
        cost.cache_bytes(cfg, 10, -1, "fp16")
    with pytest.raises(LimitError, match="Tokens must be between 1 and 10000000"):
        cost.cache_bytes(cfg, 10**12, 1, "fp16")
    with pytest.raises(LimitError, match="Unknown data type"):
        cost.cache_bytes(cfg, 10, 1, "fp12")
    with pytest.raises(LimitError, match="Link speed"):
        cost.cache_transfer(cfg, 10, 1, "fp16", math.nan)
    with pytest.raises(LimitError, match="Link speed"):
        cost.cache_transfer(cfg, 10, 1, "fp16", 0)


def test_accelerators_are_counted_in_the_unit_they_are_sold_in():
    """A card sold as "80 GB" has 80 GiB: the lines and the fit table use 2³⁰ bytes, 7.4 % above 10⁹."""
    assert cost.ACCELERATOR_GB == (24, 40, 80)
    assert [cost.accelerator_bytes(gb) for gb in cost.ACCELERATOR_GB] == [25_769_803_776, 42_949_672_960,
                                                                           85_899_345_920]
    assert round(cost.GIB / 10**9 - 1, 3) == 0.074


# --- multi-head latent attention (DeepSeek-V2/V3) -------------------------------------------------

def test_mla_shapes_deepseek():
    """V3 caches 512 latent + 64 rotary = 576 elements per token and layer; its expanded K and V are
    128 heads × (192 + 128) = 40,960. As GQA with one wide group the memory formulas agree."""
    from kvviz import cost

    v3 = cost.DEEPSEEK_V3
    assert v3.latent_elements == 576
    assert v3.expanded_elements == 128 * (192 + 128) == 40_960
    latent, expanded = cost.mla_cache_config(v3), cost.mla_expanded_config(v3)
    assert latent.kv_width == 576 and expanded.kv_width == 40_960
    assert latent.attention_kind == "MQA" and expanded.attention_kind == "MHA"
    assert cost.cache_bytes_per_token(latent, "bf16") == 61 * 576 * 2 == 70_272
    assert cost.cache_bytes_per_token(expanded, "bf16") == 61 * 40_960 * 2
    assert cost.cache_bytes(latent, 1000, dtype="bf16") * 40_960 == cost.cache_bytes(expanded, 1000, dtype="bf16") * 576
    v2 = cost.DEEPSEEK_V2
    assert (v2.n_layers, v2.latent_elements, v2.expanded_elements) == (60, 576, 40_960)
    assert 1 - v2.latent_elements / v2.expanded_elements == pytest.approx(0.9859, abs=1e-4)


def test_kv_sharing_bars_leave_room_for_the_end_bars_value_labels():
    """A bar's value label ("3.15 MB") is wider than the bar: the first and last were cut at the plot's
    edges (".15 MB"). The labels are drawn unclipped and the axis reaches beyond both end bars."""
    from kvviz.viz.cost import kv_sharing_bars

    names = ["MQA 1", "GQA 2", "GQA 3", "MHA 12"]
    fig = kv_sharing_bars(names, [3_145_728, 6_291_456, 9_437_184, 37_748_736], 3, {"x": "x", "y": "y", "title": "t"})
    bar = fig.data[0]
    assert bar.cliponaxis is False and list(bar.text)[0] == "3.15 MB"
    low, high = fig.layout.xaxis.range
    assert low <= -0.9 and high >= len(names) - 0.1           # ≥ 0.4 of a category beyond each end bar's edge
