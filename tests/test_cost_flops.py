"""docs/design.md §4, FLOPs: the lesson's table in closed form, the same counted over the passes the
stepper ran, and both checked against torch's own FLOP counter on real forward passes."""
import functools

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from kvviz import cost
from kvviz.cache import DynamicCache
from kvviz.decoding.stepper import run_generation
from kvviz.measure.scaling import MeasuredGPT
from kvviz.models.abc import ABCModel


def _schedule_sum(cfg, p, n, cached):
    """The stepper's schedule pass by pass: prefill of p, then one pass per further token."""
    total = cost.Flops(0, 0)
    for k in range(n):
        if cached:
            total = total + (cost.pass_flops(cfg, p, 0) if k == 0 else cost.pass_flops(cfg, 1, p + k - 1))
        else:
            total = total + cost.pass_flops(cfg, p + k, 0)
    return total


@pytest.mark.parametrize("cfg", [cost.ABC_CONFIG, cost.GPT2_SMALL, cost.LLAMA3_8B, cost.FALCON_7B])
@pytest.mark.parametrize("p, n", [(1, 1), (1, 7), (5, 1), (3, 20), (16, 33)])
def test_closed_form_equals_the_pass_by_pass_sum(cfg, p, n):
    for cached in (True, False):
        assert cost.generation_flops(cfg, p, n, cached) == _schedule_sum(cfg, p, n, cached)


def test_seed_table_orders_with_a_one_token_prompt():
    """P = 1: Σ t·d² vs N·d² for the linear layers, Σ t² d vs Σ t d for attention (docs/design.md §4)."""
    cfg, n = cost.GPT2_SMALL, 1000
    f, a = cost.linear_flops_per_token(cfg), cost.attention_flops_per_pair(cfg)
    unc, cac = cost.generation_flops(cfg, 1, n, False), cost.generation_flops(cfg, 1, n, True)
    assert unc.linear == f * sum(range(1, n + 1)) and cac.linear == f * n
    assert unc.attention == a * sum(t * (t + 1) // 2 for t in range(1, n + 1))
    assert cac.attention == a * n * (n + 1) // 2
    # O(N²d²)/O(Nd²) grows like N/2 and O(N³d)/O(N²d) like N/3
    assert unc.linear / cac.linear == pytest.approx((n + 1) / 2)
    assert unc.attention / cac.attention == pytest.approx((n + 2) / 3)


def test_gpt2_linear_flops_are_twice_the_matrix_weights():
    cfg = cost.GPT2_SMALL
    matrices = 12 * (768 * 3 * 768 + 768 * 768 + 2 * 768 * 3072) + 768 * 50257
    assert cost.linear_flops_per_token(cfg) == 2 * matrices
    assert cost.attention_flops_per_pair(cfg) == 4 * 12 * 12 * 64


@pytest.mark.parametrize("prompt", [["A", "B"], ["C"], ["A", "B", "C", "A", "B"]])
@pytest.mark.parametrize("n", [1, 2, 6, 12])
def test_counted_over_the_stepper_passes_equals_formula(prompt, n):
    run = run_generation(ABCModel(), prompt, n)
    counted = cost.count_flops(run.events, cost.config_of(ABCModel()))
    assert counted.passes == n
    assert counted.cached == cost.generation_flops(cost.ABC_CONFIG, len(prompt), n, True)
    assert counted.uncached == cost.generation_flops(cost.ABC_CONFIG, len(prompt), n, False)


def test_counter_reads_shapes_from_the_records():
    run = run_generation(ABCModel(), ["A", "B"], 3)
    wrong = cost.GPT2_SMALL
    with pytest.raises(ValueError, match="does not match"):
        cost.count_flops(run.events, wrong)


def _torch_flops(fn) -> int:
    with FlopCounterMode(display=False) as fc:
        fn()
    return fc.get_total_flops()


def test_abc_decode_attention_flops_equal_torch_count():
    """The A/B/C model's only matrix products are Q·Kᵀ and weights·V: a decode pass at position t
    reads t + 1 keys, 4 · 2 FLOPs each (its readout is a fixed stack, not a product)."""
    m = ABCModel()
    run = run_generation(m, ["A", "B"], 5)
    ids = [m.vocab.index(tok) for tok in run.events[-1].sequence]
    for ev in run.events:
        if ev.phase != "decode":
            continue
        cache = DynamicCache(1)
        m.forward(ids[: ev.positions[0]], cache, 0)          # prefix into a fresh cache
        pos = ev.positions[0]
        torch_count = _torch_flops(functools.partial(m.forward, ids[pos: pos + 1], cache, pos))
        assert torch_count == cost.pass_flops(cost.ABC_CONFIG, 1, pos).attention


@pytest.mark.parametrize("batch, context", [(1, 9), (3, 17)])
def test_measured_gpt_decode_flops_equal_torch_count(batch, context):
    """A whole decode step of the GPT with explicit attention products (the stepper's ``trace``
    path) counted by torch equals the formula for one new position reading ``context`` keys, times
    the batch."""
    gpt = MeasuredGPT(cost.TINY_GPT, batch, 32)
    model, cache = gpt.model, gpt.cache
    ids = torch.zeros(batch, 1, dtype=torch.long)                    # [B, 1]

    gpt.fill(context - 1)                                            # the keys the step reads

    def explicit():
        cache.crop(context - 1)
        with torch.no_grad():
            model.readout(model.hidden(ids, cache, context - 1, trace=[]))

    formula = cost.pass_flops(cost.TINY_GPT, 1, context - 1).scaled(batch)
    assert _torch_flops(explicit) == formula.total
    # the fused kernel the timing runs hides attention from torch's counter (CPU): only the linear part
    assert _torch_flops(lambda: gpt(ids, context - 1)) == formula.linear


def test_measured_gpt_static_cache_is_exact():
    """Prefill + cached decode steps through the adapter's static cache give the logits of one full
    pass of the same GPT without a cache."""
    torch.manual_seed(0)
    gpt = MeasuredGPT(cost.TINY_GPT, 2, 16)
    ids = torch.randint(0, 65, (2, 12))                                # [B, T]
    with torch.no_grad():
        full = gpt.model(ids)                                          # [B, T, V]
    outs = [gpt(ids[:, :7], 0)] + [gpt(ids[:, i:i + 1], i) for i in range(7, 12)]   # each [B, V]
    assert torch.allclose(torch.stack(outs, dim=1), full[:, 6:], atol=1e-5, rtol=1e-5)
    # a repeated step at the same position overwrites the same column: same logits again
    assert torch.allclose(gpt(ids[:, 11:12], 11), outs[-1], atol=1e-6)
    assert gpt.cache_nbytes() == cost.cache_bytes(cost.TINY_GPT, 16, 2, "fp32")


def test_intensity_prefill_grows_decode_levels_off():
    cfg = cost.LLAMA3_8B
    decode_one = cost.decode_intensity(cfg, 4096, 1).flops_per_byte
    assert cost.prefill_intensity(cfg, 512, 1).flops_per_byte > 100 * decode_one
    big = cost.decode_intensity(cfg, 4096, 10_000).flops_per_byte
    assert big < cost.decode_intensity_limit(cfg, 4096) and big == pytest.approx(
        cost.decode_intensity_limit(cfg, 4096), rel=0.1)


def test_the_recorded_speed_up_is_docs_measured_and_its_flop_ratio_the_engines():
    """The Cost page quotes docs/measured.md's latest tiny-GPT run beside the FLOPs of the same two loops."""
    import re

    from kvviz.cost.recorded import GPT_SPEEDUP as rec
    from kvviz.models.registry import get_model
    from tests.conftest import ROOT

    text = (ROOT / "docs" / "measured.md").read_text(encoding="utf-8").split(f"## {rec.where}", 1)[1]
    row = re.search(r"\| tiny shape, N = (\d+): cached ÷ uncached \| ([\d.]+)× \|", text)
    assert (int(row.group(1)), float(row.group(2))) == (rec.new_tokens, rec.speedup)
    prompt = re.search(r'^PROMPT = "([^"]+)"', (ROOT / "bench" / "gpt_speed.py").read_text(), re.MULTILINE)
    assert len(get_model("gpt").tokenize(prompt.group(1))) == rec.prompt_len
    assert rec.config == cost.config_of(get_model("gpt"))
    u, c = (cost.loop_flops(rec.config, rec.prompt_len, rec.new_tokens, cached=k).total for k in (False, True))
    assert rec.flop_ratio == u / c and round(rec.flop_ratio) == 121      # docs/measured.md: "≈ 120×"
    assert round(rec.share, 3) == round(4.9 / (u / c), 3) < 0.05
