"""The one model interface (kvviz.models.base.CausalLM) on both kinds of network: the tiny GPT's adapter
and a transformers causal LM (a tiny random Llama, tests/tiny_llama.py). The fast ``logits`` runs the
arithmetic ``forward`` records, every cache kind comes from ``new_cache``, ``layout`` says what the
config says, the one generation loop chooses what the stepper chooses, and every adapter has every
member the protocol declares (``kv_projections`` and ``with_kv_heads`` included)."""
import pytest
import torch
from transformers import Gemma3TextConfig, LlamaConfig

from kvviz.cache import DynamicCache, QuantizedCache, SlidingWindowCache, StaticCache
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.models.base import FLOAT32_TOLERANCE, CausalLM, LayerLayout, Model
from kvviz.models.gpt import GPTModel, random_gpt
from kvviz.models.gpt.config import GPTConfig
from kvviz.models.hf import HFCausalLM, layout
from kvviz.models.registry import MODELS

PROMPT = "Today the weather is so nice that we"
# what CausalLM declares, its own and Model's: the methods, and the attributes an instance carries
METHODS = sorted({name for proto in (Model, CausalLM) for name, v in vars(proto).items()
                  if callable(v) and not name.startswith("_")})
ATTRIBUTES = sorted({name for proto in (Model, CausalLM) for name in proto.__annotations__})
# every network that generates: the tiny GPT's adapter, the transformers adapter and each real model
ADAPTERS = sorted({cls for cls in MODELS.values() if hasattr(cls, "logits")} | {GPTModel, HFCausalLM},
                  key=lambda c: c.__name__)


@pytest.fixture(params=["gpt", "hf"])
def model(request):
    return GPTModel() if request.param == "gpt" else request.getfixturevalue("tiny_hf")


def test_logits_are_forwards_logits_with_and_without_a_cache(model):
    ids = [model.vocab.index(t) for t in model.tokenize(PROMPT)]
    recorded = model.forward(ids, model.new_cache(), 0).logits                       # [N, V]
    for cache in (None, model.new_cache(), model.new_cache("static", max_length=len(ids) + 1)):
        fast = model.logits(ids, cache, 0)
        assert fast.shape == recorded.shape and fast.dtype == torch.float32
        assert torch.allclose(fast, recorded, atol=1e-5), float((fast - recorded).abs().max())
    # a decode step on a cache holding the prompt: the same logits as one pass over the whole text
    cache = model.new_cache()
    model.logits(ids, cache, 0)
    step = model.logits([ids[0]], cache, len(ids), keep=1)                          # [1, V]
    whole = model.forward(ids + [ids[0]], None, 0).logits[-1:]
    assert cache.get_seq_length() == len(ids) + 1
    assert torch.allclose(step, whole, atol=1e-4)
    # keep=2 runs the readout on the last two rows only: another shape of matrix product, which BLAS
    # may sum in another order (≈ 2e-8 apart on an AVX2 processor): close, not bit-equal
    whole = model.logits(ids, None, 0)
    torch.testing.assert_close(model.logits(ids, None, 0, keep=2), whole[-2:], rtol=0, atol=FLOAT32_TOLERANCE)
    assert float((whole[-2] - whole[-3]).abs().max()) > 100 * FLOAT32_TOLERANCE    # another row is far off


def test_the_one_loop_chooses_what_the_stepper_chooses_with_and_without_the_cache(model):
    """generate_cached (kvviz.decoding.loops) on either network: the stepper's tokens, greedy and
    sampled with a seed; recomputing the whole text at every step (cached=False) gives the same
    tokens and logits."""
    tokens = model.tokenize(PROMPT)
    ids = [model.vocab.index(t) for t in tokens]
    run = run_generation(model, tokens, 6, recheck=False)
    chosen = [e.chosen for e in run.events if e.phase == "choose"]
    cached, recomputed = generate_cached(model, ids, 6), generate_cached(model, ids, 6, cached=False)
    assert [model.vocab[i] for i in cached.tokens] == [model.vocab[i] for i in recomputed.tokens] == chosen
    assert float((cached.logits - recomputed.logits).abs().max()) < 1e-4
    assert cached.cached and cached.cache_bytes and len(cached.step_seconds) == 6
    rule = Sampler(1.0)
    a, b = (run_generation(model, tokens, 6, rule, seed=11, recheck=False) for _ in range(2))
    sampled = [e.chosen for e in a.events if e.phase == "choose"]
    assert sampled == [e.chosen for e in b.events if e.phase == "choose"]
    assert sampled == [model.vocab[i] for i in generate_cached(model, ids, 6, rule, seed=11).tokens]
    assert sampled != [e.chosen for e in run_generation(model, tokens, 6, rule, seed=12, recheck=False).events
                       if e.phase == "choose"]


def test_new_cache_makes_every_kind(model):
    n = model.n_layers
    kinds = {"dense": (DynamicCache, {}), "static": (StaticCache, {"max_length": 8}),
             "window": (SlidingWindowCache, {"window": 4, "sinks": 1}), "quantized": (QuantizedCache, {"bits": 4})}
    for kind, (cls, options) in kinds.items():
        c = model.new_cache(kind, **options)
        assert type(c) is cls and len(c.layers) == n and c.get_seq_length() == 0
    assert type(model.new_cache()) is DynamicCache
    with pytest.raises(ValueError, match="unknown cache kind"):
        model.new_cache("paper")


def test_layout_of_the_tiny_gpt_and_of_a_transformers_config(tiny_hf):
    gpt = GPTModel(random_gpt(GPTConfig(vocab_size=20, n_layer=2, n_head=4, n_embd=32, n_kv_head=2)))
    assert gpt.layout == (LayerLayout(4, 2, 8, "full", None, "learned", None),) * 2
    assert gpt.max_positions == 256 and gpt.tokenizer is None and gpt.chat_template is None
    assert not gpt.end_tokens and gpt.vocab[:3] == ["0", "1", "2"]
    cfg = tiny_hf.config
    assert len(tiny_hf.layout) == cfg.num_hidden_layers
    assert {(lay.attention, lay.positions, lay.n_heads, lay.n_kv_heads, lay.head_dim) for lay in tiny_hf.layout} == {
        ("full", "rotary", cfg.num_attention_heads, cfg.num_key_value_heads, tiny_hf.head_dim)}
    assert tiny_hf.max_positions is None
    # a hybrid config (Gemma 3's kind): sliding layers with their window, a rotary base per layer type
    hybrid = Gemma3TextConfig(
        num_attention_heads=4, num_key_value_heads=1, head_dim=16, hidden_size=64, num_hidden_layers=3,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"], sliding_window=512,
        rope_parameters={"sliding_attention": {"rope_type": "default", "rope_theta": 10_000.0},
                         "full_attention": {"rope_type": "default", "rope_theta": 1e6}})
    assert layout(hybrid) == (LayerLayout(4, 1, 16, "sliding", 512, "rotary", 10_000.0),) * 2 + (
        LayerLayout(4, 1, 16, "full", None, "rotary", 1e6),)
    old = LlamaConfig(num_attention_heads=2, hidden_size=16, num_hidden_layers=1, rope_theta=500.0)
    assert layout(old) == (LayerLayout(2, 2, 8, "full", None, "rotary", 500.0),)
    with pytest.raises(ValueError):
        LayerLayout(2, 2, 8, "sliding")


def test_the_protocol_declares_what_the_smaller_caches_ask_of_a_model():
    assert {"logits", "new_cache", "kv_projections", "with_kv_heads", "forward", "tokenize"} <= set(METHODS)
    assert {"layout", "limits", "cost_config", "max_positions"} <= set(ATTRIBUTES)


@pytest.mark.parametrize("cls", ADAPTERS, ids=lambda c: c.__name__)
def test_every_adapter_has_every_method_the_protocol_declares(cls):
    assert [m for m in METHODS if not callable(getattr(cls, m, None))] == []


def test_every_instance_answers_the_whole_protocol(model):
    """The attributes are there, and the two the smaller caches use answer in the shapes declared:
    per layer the stacked K/V projections, and a pooled model of the same kind with fewer K/V heads."""
    assert [a for a in ATTRIBUTES if not hasattr(model, a)] == []
    lay = model.layout[0]
    projections = model.kv_projections()
    assert len(projections) == model.n_layers
    for w, b in projections:
        assert w.dtype == b.dtype == torch.float64
        assert w.shape[0] == b.shape[0] == 2 * lay.n_kv_heads * lay.head_dim
    pooled = model.with_kv_heads(1)
    assert type(pooled) is type(model)
    assert {layer.n_kv_heads for layer in pooled.layout} == {1} != {layer.n_kv_heads for layer in model.layout}
    assert pooled.kv_projections()[0][0].shape[0] == 2 * lay.head_dim
