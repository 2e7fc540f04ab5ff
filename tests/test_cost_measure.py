"""The timing helpers (kvviz.measure.scaling): they run on the tiny shape, return consistent numbers,
and refuse sizes beyond the caps before allocating anything."""
import pytest

from kvviz import cost
from kvviz.cache import StaticCache
from kvviz.limits import MAX_MEASURE_BATCH, LimitError
from kvviz.measure.scaling import build_stack, measure_all, measure_batch_sweep, stack_cache_bytes
from kvviz.models.gpt import GPT


def test_measure_all_on_the_tiny_shape_reports_every_sweep():
    seen = []
    res = measure_all("tiny", [1, 4], 32, [8, 64], [8, 32], steps=2,
                      progress=lambda f, label: seen.append(f))
    assert [p.batch for p in res.batch] == [1, 4] and {p.context for p in res.batch} == {32}
    assert [p.context for p in res.context] == [8, 64]
    assert [p.prompt_len for p in res.prefill] == [8, 32]
    for p in res.batch + res.context:
        assert p.tokens_per_s == pytest.approx(p.batch * 1000 / p.ms_per_step)
        # FLOPs and bytes come from the formulas for exactly this step
        assert p.flops == cost.pass_flops(cost.TINY_GPT, 1, p.context - 1).scaled(p.batch).total
        assert p.bytes_moved == cost.param_count(cost.TINY_GPT) * 4 + \
            p.batch * p.context * cost.cache_bytes_per_token(cost.TINY_GPT, "fp32")
    assert seen == sorted(seen) and seen[-1] == 1.0          # the progress bar only moves forward


def test_stack_cache_is_preallocated_to_the_asked_size():
    gpt = build_stack("tiny", 3, 40)
    assert isinstance(gpt.model, GPT) and isinstance(gpt.cache, StaticCache)
    held = [t for layer in gpt.cache.layers for t in (layer.keys, layer.values)]
    assert len(gpt.cache) == 4 and {tuple(t.shape) for t in held} == {(3, 4, 40, 32)}
    assert gpt.cache_nbytes() == stack_cache_bytes(cost.TINY_GPT, 3, 40) == \
        cost.cache_bytes(cost.TINY_GPT, 40, 3, "fp32")


def test_batch_sweep_reuses_the_weights_and_sizes_the_cache_per_point():
    gpt = build_stack("tiny", 1, 2)
    weights = gpt.model.transformer.wte.weight
    pts = measure_batch_sweep("tiny", [1, 3], 16, steps=1, stack=gpt)
    assert [p.batch for p in pts] == [1, 3]
    assert gpt.model.transformer.wte.weight is weights and gpt.cache.layers[0].keys.shape == (3, 4, 16, 32)


@pytest.mark.parametrize("call, words", [
    (lambda: build_stack("gpt2", 32, 1024), "MiB; the limit here is 256 MiB"),
    (lambda: build_stack("llama", 1, 8), "Unknown shape"),
    (lambda: measure_batch_sweep("tiny", [MAX_MEASURE_BATCH + 1], 8), "Batch size must be between 1"),
    (lambda: measure_batch_sweep("tiny", [], 8), "at least one"),
    (lambda: measure_batch_sweep("tiny", [1], 5000), "Context length must be between 1 and 1024"),
    (lambda: measure_all("tiny", [1], 8, [8], [1024]), "Prompt length must be between 1 and 1023"),
    (lambda: measure_all("gpt2", [32], 1024, [8], [8]), "limit here is 256 MiB"),
    (lambda: measure_all("gpt2", [1], 8, [8], [512]), "GFLOP; the limit here is 300 GFLOP"),
])
def test_caps_give_messages(call, words):
    with pytest.raises(LimitError, match=words):
        call()
