"""Smaller caches (kvviz.compress) on both models, the trained tiny GPT and the real SmolLM2 (its
tests are skipped where its weights are not installed; short texts: a decode step of the real model
is 60-140 ms here): K/V heads pooled in groups, the one evaluation on held-out prompts and text,
stepping one prompt beside the full cache, re-rotation to cache positions, per-channel against
per-token keys on SmolLM2's own keys, the CLI and the figures."""
import json
import math

import pytest
import torch

from kvviz import cost
from kvviz.cache import DynamicCache, SlidingWindowCache, quantize
from kvviz.cache.window import rerotate
from kvviz.cli.main import main
from kvviz.compress import (
    HeldOutPrompt,
    Variant,
    compare_steps,
    evaluate,
    evaluate_prompts,
    evaluate_text,
    held_out_prompts,
    key_channels,
    key_positions,
    page_variants,
    pass_event,
    row_errors,
    run_cache,
    sink_mass,
    variant_cache,
    variant_model,
)
from kvviz.compress.text import HELD_OUT_TEXT, held_out_ids
from kvviz.limits import LLM_COMPRESS_MAX_TOKENS, LimitError
from kvviz.models.gpt import GPTModel, TinyGPT, cost_config, load_tiny_gpt, to_grouped
from kvviz.models.gpt.corpus import corpus_tokens
from kvviz.models.grouped import pooled_network
from kvviz.models.hf import HFCausalLM
from kvviz.viz import compress as compress_viz
from kvviz.viz.theme import ATTENTION_SCALE

MODELS = ["gpt", "smollm2"]


@pytest.fixture(scope="module")
def tiny():
    return load_tiny_gpt()


@pytest.fixture(scope="module")
def gpt(tiny):
    return GPTModel(tiny)


@pytest.fixture(scope="module")
def m(smollm2):
    return smollm2


@pytest.fixture(params=MODELS)
def model(request):
    """Each model in turn (SmolLM2 skipped where its weights are not installed)."""
    return request.getfixturevalue("gpt" if request.param == "gpt" else "m")


def _network(model) -> torch.nn.Module:
    """The torch module behind a kvviz model (the tiny GPT's GPT, a transformers model)."""
    return model.network if isinstance(model, GPTModel) else model.model


def _pool(model, kv_heads: int) -> torch.nn.Module:
    """The one pooling (kvviz.models.grouped.pool_heads) through each architecture's conversion."""
    net = _network(model)
    return to_grouped(net, kv_heads) if isinstance(model, GPTModel) else pooled_network(net, kv_heads)


def _qkv(net: torch.nn.Module, layer: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Layer ``layer``'s query, key and value projection weights [heads · d, C]."""
    if hasattr(net, "transformer"):                                        # the GPT's fused c_attn
        cfg = net.config
        w = net.transformer.h[layer].attn.c_attn.weight
        return tuple(w.split([cfg.n_head * cfg.head_dim] + [cfg.kv_heads * cfg.head_dim] * 2))   # type: ignore[return-value]
    a = net.model.layers[layer].self_attn
    return a.q_proj.weight, a.k_proj.weight, a.v_proj.weight


def _ids(model, n: int) -> list[int]:
    if isinstance(model, GPTModel):
        return model.tokenizer.encode("Today the weather in Oslo is so")[:n]
    return held_out_ids(model.tokenizer, n)


# --- K/V heads pooled in groups -----------------------------------------------------------------

def test_pooling_to_the_models_own_count_copies_the_weights_and_changes_nothing(model):
    n_kv = model.cost_config.n_kv_heads
    same = _pool(model, n_kv)
    assert same is not _network(model)
    if isinstance(model, GPTModel):
        assert same.config.n_kv_head == 4
    ids = _ids(model, 8)
    copy = GPTModel(TinyGPT(same, model.tokenizer, model.tiny.trained, model.tiny.meta)) \
        if isinstance(model, GPTModel) else HFCausalLM(same, model.tokenizer)
    assert torch.equal(copy.forward(ids, None, 0).logits, model.forward(ids, None, 0).logits)   # every position
    assert variant_model(model, Variant.of("gqa", kv_heads=n_kv)) is model     # runs the model itself


@pytest.mark.parametrize("name,kv_heads", [("gpt", 2), ("gpt", 1), ("smollm2", 1)])
def test_grouped_heads_are_the_mean_of_their_group_and_the_cache_shrinks(request, name, kv_heads):
    model = request.getfixturevalue("gpt" if name == "gpt" else "m")
    cfg = model.cost_config
    n_kv, hs, layer = cfg.n_kv_heads, cfg.head_dim, 2
    per = n_kv // kv_heads
    pooled = variant_model(model, Variant.of("gqa", kv_heads=kv_heads))           # what an evaluation runs
    q_old, k_old, v_old = _qkv(_network(model), layer)
    q_new, k_new, v_new = _qkv(_network(pooled), layer)
    assert k_new.shape == v_new.shape == (kv_heads * hs, cfg.d_model) and k_old.shape == (n_kv * hs, cfg.d_model)
    assert torch.equal(q_new, q_old)                                                     # query heads kept
    assert torch.allclose(k_new[:hs], k_old.reshape(n_kv, hs, -1)[:per].mean(0))         # K/V head 0 = mean of 0..per-1
    assert torch.allclose(v_new[-hs:], v_old.reshape(n_kv, hs, -1)[-per:].mean(0))
    ids = _ids(model, 8)
    cache = DynamicCache(model.n_layers)
    _, out = run_cache(pooled, ids, 1, cache)
    _, full = run_cache(model, ids, 1, DynamicCache(model.n_layers))
    assert not torch.allclose(out, full, atol=1e-3)                                     # no uptraining: it shows
    assert cache.layers[0].keys.shape == (1, kv_heads, len(ids), hs)
    assert pooled.cost_config.n_kv_heads == kv_heads and model.cost_config.n_kv_heads == n_kv   # the model stays
    if name == "gpt":
        g = _network(pooled)
        assert g.transformer.h[layer].attn.c_attn.weight.shape == ((4 + 2 * kv_heads) * hs, 128)
        assert cache.nbytes() == cost.cache_bytes(cost_config(g.config), len(ids), dtype="fp32") \
            == cost.cache_bytes(cost_config(model.network.config), len(ids), dtype="fp32") * kv_heads // 4
    else:
        net, p0 = model.model, pooled.model.model.layers[0].self_attn
        a0 = net.model.layers[0].self_attn
        assert a0.k_proj.weight.shape == (192, 576) and p0.k_proj.weight.shape == (64, 576)
        assert p0.v_proj.weight.shape == (64, 576) and p0.num_key_value_groups == 9
        assert torch.equal(p0.k_proj.weight, a0.k_proj.weight.reshape(3, 64, 576).mean(0))
        assert p0.q_proj.weight.data_ptr() == a0.q_proj.weight.data_ptr()            # shared, not copied
        assert net.config.num_key_value_heads == 3 and pooled.model.config.num_key_value_heads == 1
        assert out.shape == (1, 49152)


@pytest.mark.parametrize("name,kv_heads", [("gpt", 3), ("gpt", 0), ("gpt", 8), ("gpt", "two"),
                                           ("smollm2", 2), ("smollm2", 0), ("smollm2", 4)])
def test_grouping_refuses_head_counts_that_do_not_divide(request, name, kv_heads):
    model = request.getfixturevalue("gpt" if name == "gpt" else "m")
    with pytest.raises(LimitError, match="K/V heads"):
        _pool(model, kv_heads)
    if kv_heads in (3, 2):                              # a count the variant itself accepts: the model refuses
        with pytest.raises(LimitError, match="must divide the model's"):
            variant_model(model, Variant.of("gqa", kv_heads=kv_heads))


# --- held-out prompts and text ------------------------------------------------------------------

def test_prompts_are_seeded_sentence_starts_from_the_tail_training_never_read(tiny):
    a, b = held_out_prompts(3, seed=5), held_out_prompts(3, seed=5)
    assert a == b and a != held_out_prompts(3, seed=6)
    stream = corpus_tokens(30_000, 0)                  # the checkpoint's corpus (kvviz/data/tiny_gpt.json)
    tail = len(stream) - len(stream) // 20             # training windows end before the last 5 %
    for p in a:
        at = tail + p.offset
        assert tuple(stream[at:at + 16]) == p.tokens and stream[at - 1] in (".", "!") and p.offset >= 1
        assert list(p.ids) == tiny.tokenizer.encode(" ".join(p.tokens))


def test_the_held_out_text_and_the_evaluation_refuse_what_they_cannot_do(m):
    assert len(m.tokenizer.encode(HELD_OUT_TEXT)) >= LLM_COMPRESS_MAX_TOKENS
    with pytest.raises(LimitError, match="Text tokens"):
        held_out_ids(m.tokenizer, LLM_COMPRESS_MAX_TOKENS + 1)
    with pytest.raises(LimitError, match="divide"):
        evaluate_text(m, [Variant.of("gqa", kv_heads=2)], tokens=8, prefill=4)
    with pytest.raises(LimitError, match="fit the window"):
        evaluate_text(m, [Variant.of("window", window=4, sinks=0)], tokens=16, prefill=8)



# --- the evaluation -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_eval():
    variants = [Variant.of("full"), Variant.of("window", window=48, sinks=0), Variant.of("window", window=6, sinks=2),
                Variant.of("quant", bits=8, group_size=8, key_axis="token", residual=48),
                Variant.of("quant", bits=4, group_size=8, key_axis="channel", residual=2),
                Variant.of("gqa", kv_heads=2)]
    return evaluate_prompts(variants, prompts=2, new_tokens=10, seed=3)


def test_the_full_cache_and_lossless_settings_agree_exactly(small_eval, gpt):
    cfg = cost_config(gpt.network.config)
    full, long_window, _, long_residual, _, _ = small_eval.results
    for r in (full, long_window, long_residual):           # nothing evicted, nothing quantized
        assert r.kl_mean == 0.0 and r.top1_agreement == 1.0 and r.positions == 2 * 10 and r.prompts == 2
    assert full.bytes_per_token == cost.cache_bytes_per_token(cfg, "fp32") == 4096
    p = small_eval.prompts[0]
    tokens, _ = run_cache(gpt, p.ids, 10, DynamicCache(4))             # greedy from the full cache
    assert tuple(tokens) == small_eval.generated[0]


# each model's text, prefill and windows (window, sinks, key positions) that hold every position
LOSSLESS = {"gpt": (19, 7, [(19, 0, "own"), (15, 4, "own")]), "llama": (8, 5, [(6, 2, "own"), (6, 2, "cache")])}


@pytest.mark.parametrize("name", ["gpt", "llama"])
def test_a_window_covering_the_text_scores_exactly_zero_in_the_one_evaluation(name, request):
    """Teacher-forced on a text through the one run and the one evaluation: a window that, with its
    sinks, holds every position is the full cache, bit for bit (on a transformers model with rotary
    positions, the tiny random Llama, with the kept keys at their own and at cache positions; every
    position's logits: tests/test_cache_compress.py)."""
    model = request.getfixturevalue("gpt" if name == "gpt" else "tiny_hf")
    n, prefill, windows = LOSSLESS[name]
    ids = (model.tokenizer.encode("Today the weather is so nice . It is rainy in London , so we take an umbrella .")
           if name == "gpt" else held_out_ids(model.tokenizer, n))
    assert len(ids) == n
    full = run_cache(model, ids[:prefill], n - prefill + 1, DynamicCache(model.n_layers), forced=ids[prefill:])[1]
    variants = [Variant.of("window", window=w, sinks=s, positions=p) for w, s, p in windows]
    for v in variants:
        got = run_cache(model, ids[:prefill], n - prefill + 1, variant_cache(model, v), forced=ids[prefill:])[1]
        assert torch.equal(got, full), v
    text = HeldOutPrompt(tuple(model.vocab[i] for i in ids), tuple(ids), 0)
    ev = evaluate(model, variants, [text], n - prefill + 1, prefill)
    assert all(r.kl_mean == 0.0 and r.top1_agreement == 1.0 and r.positions == n - prefill + 1 for r in ev.results)
    assert ev.generated[0][:n - prefill] == tuple(ids[prefill:])           # the text, teacher-forced


def test_smaller_caches_cost_accuracy_and_save_the_bytes_the_cost_model_says(small_eval, tiny):
    cfg = cost_config(tiny.model.config)
    full, _, window, _, quant, gqa = small_eval.results
    positions = 16 + 10 - 1                                 # prompt + new − 1 tokens went through the cache
    assert window.bytes_per_token == cost.window_cache_bytes(cfg, positions, 6, 2, dtype="fp32") / positions
    assert quant.bytes_per_token == cost.quantized_cache_bytes(cfg, positions, 4, 8, "channel", 2) / positions
    assert gqa.bytes_per_token == full.bytes_per_token / 2
    for r in (window, quant, gqa):
        assert r.kl_mean > 0 and r.bytes_per_token < full.bytes_per_token
        assert all(kl >= 0 for row in r.kl for kl in row) and len(r.agree[0]) == 10
        assert (r.kl[0][0] == 0) == (r.variant.kind == "quant")    # a quantized cache's prefill reads exact K/V
    assert window.top1_agreement < 1.0 and gqa.kl_mean > quant.kl_mean


def test_the_evaluation_is_deterministic_for_a_seed(small_eval):
    again = evaluate_prompts([r.variant for r in small_eval.results[2:3]], prompts=2, new_tokens=10, seed=3)
    assert again.results[0] == small_eval.results[2] and again.prompts == small_eval.prompts


@pytest.mark.parametrize("kwargs,match", [
    (dict(prompts=0), "Prompts"), (dict(prompts=17), "Prompts"), (dict(new_tokens=65), "New tokens"),
    (dict(seed=-1), "Seed")])
def test_the_evaluation_enforces_its_caps(kwargs, match):
    with pytest.raises(LimitError, match=match):
        evaluate_prompts([Variant.of("full")], **{"prompts": 1, "new_tokens": 1, **kwargs})
    with pytest.raises(LimitError, match="Variants"):
        evaluate_prompts([Variant.of("full")] * 41, prompts=1, new_tokens=1)


@pytest.mark.parametrize("kind,settings,match", [
    ("window", dict(window=0), "Window"), ("window", dict(window=257), "Window"), ("window", dict(sinks=17), "Sink"),
    ("quant", dict(bits=3), "Bits"), ("quant", dict(group_size=129), "Group size"),
    ("quant", dict(key_axis="row"), "Key axis"),
    ("quant", dict(residual=-1), "Residual"), ("gqa", dict(window=4), "no setting window"), ("zip", {}, "Unknown")])
def test_variants_refuse_bad_settings(kind, settings, match):
    with pytest.raises(LimitError, match=match):
        Variant.of(kind, **settings)


def test_the_page_variants_cover_windows_sinks_bits_axes_residuals_and_heads():
    vs = page_variants()
    assert len(set(vs)) == len(vs) == 1 + 6 + 8 + 3
    assert {(v.bits, v.key_axis, bool(v.residual)) for v in vs if v.kind == "quant"} == \
        {(b, a, r) for b in (8, 4) for a in ("channel", "token") for r in (False, True)}
    assert {v.kv_heads for v in vs if v.kind == "gqa"} == {1, 2, 4}
    assert {v.sinks for v in vs if v.kind == "window"} == {0, 4}


# --- stepping one prompt ------------------------------------------------------------------------

PROMPT = "Today the weather is so nice . It is rainy in London".split()       # 12 tokens


@pytest.fixture(scope="module")
def window_steps():
    return compare_steps(Variant.of("window", window=4, sinks=2), PROMPT, 6)


def test_stepping_a_variant_beside_the_full_cache_uses_the_same_tokens(window_steps):
    full, small = window_steps.full, window_steps.compressed
    assert [e.phase for e in full.events] == [e.phase for e in small.events]
    assert [e.tokens for e in full.events] == [e.tokens for e in small.events]          # teacher-forced
    assert len(window_steps.scores) == 6 and window_steps.scores[0].event == 1
    s = window_steps.scores[2]
    assert s.kl > 0 and s.position == 14 and s.full_top1 == full.events[s.event].chosen
    assert window_steps.score_at(0) is None and window_steps.score_at(6) == s


def test_a_step_comparison_says_where_its_logits_stop_being_exact_and_the_running_means(window_steps):
    assert window_steps.positions == 12 + 6 - 1
    assert window_steps.scored_event(0) == 1 and window_steps.scored_event(1) == 1 and window_steps.scored_event(2) == 3
    # the window (4 + 2 sinks) is shorter than the 12-token prompt: the prefill's last query already differs
    assert window_steps.first_difference() == 0 and not window_steps.logits_equal(0)
    kl, agree, n = window_steps.mean_until(5)
    assert n == 3 and kl == pytest.approx(sum(s.kl for s in window_steps.scores[:3]) / 3)
    assert agree == sum(s.agree for s in window_steps.scores[:3]) / 3
    assert window_steps.mean_until(0) == (0.0, 1.0, 0)


@pytest.mark.parametrize("variant, lossless", [
    (Variant.of("window", window=17, sinks=0), True), (Variant.of("window", window=13, sinks=4), True),
    (Variant.of("window", window=12, sinks=4), False), (Variant.of("window", window=16, sinks=0), False),
    (Variant.of("quant", bits=4, group_size=2, key_axis="token", residual=17), True),
    (Variant.of("quant", bits=4, group_size=2, key_axis="token", residual=8), False),
    (Variant.of("gqa", kv_heads=4), True), (Variant.of("gqa", kv_heads=2), False)])
def test_lossless_settings_are_the_ones_whose_logits_equal_the_full_cache_at_every_step(variant, lossless):
    steps = compare_steps(variant, PROMPT, 6)                                          # 17 positions
    assert variant.lossless_for(steps.positions, 4) is lossless
    assert (steps.first_difference() is None) is lossless


def test_the_page_sees_which_keys_a_windowed_query_read_and_the_weight_on_the_sinks(window_steps):
    ev = window_steps.compressed.events[-2]                                            # the last decode (pos 16)
    assert ev.positions == [16] and key_positions(ev) == [0, 1, 13, 14, 15, 16]
    assert [r.evicted_at is not None for r in ev.cache.rows][:13] == [False, False] + [True] * 11
    mass = sink_mass(ev, layer=2, head=1, sinks=2)
    assert len(mass) == 1 and 0 < mass[0] < 1
    assert mass[0] == pytest.approx(float(ev.record.attention[2, 1, 0, :2].sum()))
    prefill = window_steps.compressed.events[0]
    assert key_positions(prefill) == list(range(12))
    att = prefill.record.attention[0, 0]                                               # query 11 reads 0, 1, 8..11
    assert (att[11, 2:8] == 0).all() and att[11, [0, 1, 8, 9, 10, 11]].sum() == pytest.approx(1.0)


def test_row_errors_show_each_quantized_row_within_half_a_step_and_exact_residual_rows(tiny):
    steps = compare_steps(Variant.of("quant", bits=4, group_size=4, key_axis="channel", residual=3), PROMPT, 5)
    last = len(steps.compressed.events) - 1
    err = row_errors(steps.compressed, last, layer=1)
    assert err.positions == tuple(range(16)) and err.quantized == (True,) * 12 + (False,) * 4  # 16 − 3 → 12
    assert (err.key_error[12:] == 0).all() and (err.value_error[12:] == 0).all()
    assert (err.key_error[:12] > 0).any() and not err.key_error.isnan().any()
    cache = Variant.of("quant", bits=4, group_size=4, key_axis="channel", residual=3).make_cache(4)
    run_cache(GPTModel(tiny), tiny.tokenizer.encode(" ".join(steps.full.events[last].sequence[:16])), 1, cache)
    step = cache.layers[1].quantized_keys.step()[0].amax(-1).T                        # [rows, heads]
    assert (err.key_error[:12] <= step / 2 + 1e-5).all()
    full_err = row_errors(steps.full, last, layer=1)
    assert (full_err.key_error == 0).all() and not any(full_err.quantized)


# --- CLI ---------------------------------------------------------------------------------------

# each model's run, and what its JSON must say beyond the documented keys
CLI = {"gpt": (["--kind", "quant", "--bits", "4", "--group-size", "8", "--key-axis", "token", "--residual", "4",
                "--prompts", "2", "--new-tokens", "6", "--seed", "1"],
               {"kind": "quant", "settings": {"bits": 4, "group_size": 8, "key_axis": "token", "residual": 4},
                "prompts": 2, "positions": 12,
                "bytes_per_token": round(cost.quantized_cache_bytes(cost.SHAPES["tiny-gpt"], 21, 4, 8, "token", 4) / 21,
                                         3)}),
       "smollm2": (["--model", "smollm2", "--kind", "window", "--window", "4", "--sinks", "2", "--positions", "cache",
                    "--tokens", "8", "--prefill", "6"],
                   {"kind": "window", "settings": {"window": 4, "sinks": 2, "positions": "cache"}, "prompts": 1,
                    "positions": 3, "bytes_per_token": round(6 * 46_080 / 8, 3)})}     # 6 rows held of 8 positions


@pytest.mark.parametrize("name", MODELS)
def test_cli_prints_the_documented_json_on_either_model(request, name, capsys):
    if name == "smollm2":
        request.getfixturevalue("m")
    args, want = CLI[name]
    assert main(["compress", *args]) == 0
    d = json.loads(capsys.readouterr().out)
    assert list(d) == ["kind", "settings", "bytes_per_token", "kl_mean", "top1_agreement", "prompts", "positions"]
    assert {k: d[k] for k in want} == want and 0 <= d["top1_agreement"] <= 1
    if name == "smollm2":
        assert d["kl_mean"] > 0


@pytest.mark.parametrize("args", [
    ["--kind", "window", "--bits", "4"], ["--kind", "gqa", "--kv-heads", "3"], ["--kind", "quant", "--prompts", "99"],
    ["--kind", "window", "--window", "x"], ["--kind", "lossy"], ["--kind", "quant", "--key-axis", "rows"],
    ["--kind", "window", "--window", "0"], ["--kind", "full", "--new-tokens", "0"],
    ["--kind", "window", "--positions", "cache"], ["--model", "smollm2", "--kind", "full", "--prompts", "2"],
    ["--kind", "full", "--tokens", "20"], ["--model", "smollm2", "--kind", "full", "--tokens", "500"],
    ["--model", "smollm2", "--kind", "gqa", "--kv-heads", "2", "--tokens", "8"],
    ["--model", "smollm2", "--kind", "window", "--window", "4", "--sinks", "0", "--tokens", "20"]])
def test_cli_bad_arguments_on_either_model_give_one_line_and_exit_2(request, args, capsys):
    if "--tokens" in args and "smollm2" in args:         # refused by the model's own checks: it loads
        request.getfixturevalue("m")
        capsys.readouterr()          # what the fixture wrote while it loaded is not the command's
    with pytest.raises(SystemExit) as e:
        main(["compress", *args])
    out = capsys.readouterr()
    assert e.value.code == 2 and out.out == "" and len(out.err.strip().splitlines()) == 1, out.err


# --- SmolLM2: rotary keys -------------------------------------------------------------------------

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


# --- figures -----------------------------------------------------------------------------------

def test_the_tradeoff_figure_has_one_labelled_point_per_variant_on_both_panels(small_eval):
    fig = compress_viz.tradeoff_figure(small_eval.results)
    pts = {}
    for tr in fig.data:
        for x, y, t in zip(tr.x, tr.y, tr.text):
            pts.setdefault(t, []).append((tr.xaxis, x, y))
    assert set(pts) == {r.variant.label() for r in small_eval.results}
    for r in small_eval.results:
        (ax1, x1, kl), (ax2, x2, top) = sorted(pts[r.variant.label()])
        assert (ax1, ax2) == ("x", "x2") and x1 == x2 == r.bytes_per_token and top == r.top1_agreement
        assert kl == max(r.kl_mean, compress_viz.KL_FLOOR)
    assert fig.layout.yaxis.type == "log" and fig.layout.xaxis2.title.text == "cache bytes per token"


def test_the_row_error_heatmap_blanks_evicted_rows_and_colours_quantized_ones(window_steps, tiny):
    err = row_errors(window_steps.compressed, len(window_steps.compressed.events) - 1, layer=0)
    fig = compress_viz.row_error_heatmap(err)
    z = fig.data[0].z
    assert len(z) == 17 and len(z[0]) == 8                                  # 17 positions × (K, V) × 4 heads
    assert all(v is None for v in z[2]) and list(z[0]) == [0.0] * 8      # evicted; a sink, never quantized
    steps = compare_steps(Variant.of("quant", bits=4, group_size=4, key_axis="token"), PROMPT, 3)
    fig = compress_viz.row_error_heatmap(row_errors(steps.compressed, 5, layer=0))
    assert min(v for row in fig.data[0].z for v in row) > 0 and fig.data[0].colorscale[0][1] == "#FFFFFF"


def test_the_next_token_pair_shows_both_distributions_and_the_kl(window_steps):
    fig = compress_viz.next_token_pair(window_steps, 5, k=5)
    full, small = fig.data
    assert full.x == small.x and full.name == "full cache" and small.name == "window 4 + 2 sinks"
    p = torch.softmax(window_steps.full.events[5].logits.double(), -1)
    assert full.y[0] == pytest.approx(float(p.max())) and len(full.x) >= 5
    assert f"{window_steps.score_at(5).kl:.4g}" in fig.layout.title.text


def test_the_attention_figure_marks_the_sinks_and_their_weight(window_steps):
    fig = compress_viz.attention_sinks_figure(window_steps, 8, layer=2, head=1)     # event 8: a decode
    ev = pass_event(window_steps.compressed, 8)
    assert list(fig.data[0].x) == [f"{p}:{ev.sequence[p]}" for p in key_positions(ev)]
    assert fig.layout.shapes[0].x0 == -0.5 and fig.layout.shapes[0].x1 == 1.5           # columns 0 and 1
    mass = sink_mass(ev, 2, 1, 2)[0]
    assert fig.layout.title.text.endswith(f"<sup>on sinks: {mass:.0%}</sup>")             # one query: in the title
    prefill = compress_viz.attention_sinks_figure(window_steps, 0, layer=2, head=1)
    masses = sink_mass(pass_event(window_steps.compressed, 0), 2, 1, 2)
    assert [a.text for a in prefill.layout.annotations] == [f"on sinks: {m:.0%}" for m in masses]   # one per query
    # the masses take the colour bar's place (it sat on them); the cells carry their values
    assert prefill.data[0].showscale is False and all(t for row, z in zip(prefill.data[0].text, prefill.data[0].z)
                                                      for t, v in zip(row, z) if v is not None)
    assert fig.data[0].colorscale[0][1] == ATTENTION_SCALE[0][1]          # the attention scale (kvviz.viz.theme)
    full = compress_viz.attention_sinks_figure(window_steps, 8, layer=2, head=1, compressed=False)
    assert len(full.data[0].x) == ev.positions[0] + 1 and not full.layout.shapes


def test_figures_take_translated_words(small_eval):
    fig = compress_viz.tradeoff_figure(small_eval.results, labels={"bytes": "Bytes je Token",
                                                                       "kinds": {"window": "Fenster"}},
                                           names=[str(i) for i in range(6)])
    assert fig.layout.xaxis.title.text == "Bytes je Token"
    assert "Fenster" in {t.name for t in fig.data} and {t for tr in fig.data for t in tr.text} == set("012345")
    assert not any(math.isnan(y) for tr in fig.data for y in tr.y)
