"""Gemma 3's hybrid cache and attention on a tiny random Gemma 3 (tests/tiny_models.py: three
sliding layers with a window of 8, one global layer, one K/V head): kvviz's cache against
transformers' ``DynamicCache(config=...)``, its bytes against the formula, and the q/k kvviz
records against the attention the model computed. The real model: tests/test_gemma3.py."""
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers import DynamicCache as HFDynamicCache

from kvviz.cache import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer, layer_windows
from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models.base import FLOAT32_TOLERANCE
from kvviz.models.hf import HFCausalLM
from tests import tiny_models

W = tiny_models.SLIDING_WINDOW
TEXT = "Today the weather is so nice that we walk in the park. It is rainy in London"


@pytest.fixture(scope="module")
def gemma(tiny_gemma_dir):
    d = tiny_gemma_dir
    net = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
    return HFCausalLM(net, AutoTokenizer.from_pretrained(d), name="tiny-gemma3")


def kv_bytes(m: HFCausalLM, t: int) -> int:
    """2 · kv_heads · head_dim · 4 bytes · (n_global · T + n_sliding · min(T, window − 1))."""
    n_sliding = sum(w is not None for w in m.windows)
    return 2 * m.n_kv_heads * m.head_dim * 4 * ((m.n_layers - n_sliding) * t + n_sliding * min(t, W - 1))


def test_the_layers_are_those_transformers_builds(gemma):
    assert gemma.windows == layer_windows(gemma.config) == [W, W, W, None]
    hf = HFDynamicCache(config=gemma.config)
    ours = gemma.new_cache("dense")
    assert [type(x).__name__ for x in hf.layers] == [type(x).__name__ for x in ours.layers][:3] + ["DynamicLayer"]
    assert [type(x) for x in ours.layers] == [DynamicSlidingWindowLayer] * 3 + [DynamicLayer]
    assert [x.is_sliding for x in ours.layers] == [x.is_sliding for x in hf.layers] == [True] * 3 + [False]


@torch.no_grad()
def test_prefill_longer_than_the_window_and_decode_give_transformers_logits_exactly(gemma):
    ids = gemma.ids(gemma.tokenize(TEXT))
    assert len(ids) > 2 * W
    runs = []
    for cache in (gemma.new_cache("dense"), HFDynamicCache(config=gemma.config)):
        out = gemma.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
        logits = [out.logits]
        for _ in range(W + 2):                    # decode on past the window again
            nxt = torch.tensor([[int(logits[-1][0, -1].argmax())]])
            logits.append(gemma.model(input_ids=nxt, past_key_values=cache, use_cache=True).logits)
        runs.append((logits, cache))
    (ours, kv), (theirs, hf) = runs
    assert all(torch.equal(a, b) for a, b in zip(ours, theirs))             # bit for bit, every pass
    t = len(ids) + W + 2
    for a, b in zip(kv.layers, hf.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)
        assert a.get_seq_length() == b.get_seq_length() == t
    assert [x.keys.shape[-2] for x in kv.layers] == [W - 1] * 3 + [t]
    assert kv.nbytes() == kv_bytes(gemma, t) < 2 * gemma.n_layers * gemma.n_kv_heads * gemma.head_dim * 4 * t
    assert kv.layers[0].held_positions() == list(range(t - W + 1, t))


def test_the_stepper_runs_the_hybrid_cache_and_its_bytes_follow_the_formula(gemma):
    run = run_generation(gemma, gemma.tokenize(TEXT), 4, recheck="final")
    assert all(e.check.max_abs_diff < 1e-4 for e in run.events if e.record is not None)
    for e in run.events:
        t = e.cache.seq_length
        assert e.cache.nbytes() == kv_bytes(gemma, t)
        assert [k.shape[-2] for k in e.cache.keys] == [min(t, W - 1)] * 3 + [t]
    prefill = run.events[0].record
    n = len(prefill.positions)
    assert prefill.attention.shape == (4, 4, n, n)
    decode = run.events[2].record                    # one query: a sliding layer read W keys, zeros before
    assert decode.attention.shape[-1] == n + 1 and float(decode.attention[0, :, 0, :n + 1 - W].abs().sum()) == 0


@torch.no_grad()
def test_recorded_q_and_k_are_what_attention_used_each_layer_with_its_own_rotation(gemma):
    """Gemma 3 normalizes q and k per head before the rotation, and its sliding and global layers
    rotate with different bases: softmax(q·kᵀ/√d) from the recorded q and k, under each layer's
    mask, is the model's own attention."""
    ids = gemma.ids(gemma.tokenize(TEXT))
    rec = gemma.forward(ids, gemma.new_cache("dense"), 0)
    n = len(ids)
    i, j = torch.arange(n).unsqueeze(1), torch.arange(n).unsqueeze(0)
    for layer, w in enumerate(gemma.windows):
        allowed = (j <= i) & ((i - j < w) if w is not None else True)
        k = rec.k[layer].repeat_interleave(gemma.n_heads // gemma.n_kv_heads, 0)           # [H, N, d]
        scores = rec.q[layer] @ k.transpose(-1, -2) * gemma.config.query_pre_attn_scalar ** -0.5
        att = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
        assert torch.allclose(att, rec.attention[layer], atol=1e-5), layer
    base = gemma.model.model.rotary_emb
    assert not torch.equal(base.sliding_attention_inv_freq, base.full_attention_inv_freq)
    assert torch.equal(gemma.rope_inv_freq(0), base.sliding_attention_inv_freq)
    assert torch.equal(gemma.rope_inv_freq(3), base.full_attention_inv_freq)
    for layer in (0, 3):                   # the RoPE view's rotation: each layer's own base
        again = gemma.rotate(rec.k_unrotated[layer, 0, n - 1], n - 1, layer)
        assert torch.allclose(again, rec.k[layer, 0, n - 1], atol=1e-5), layer
    assert not torch.allclose(gemma.rotate(rec.k_unrotated[0, 0, n - 1], n - 1, 3), rec.k[0, 0, n - 1], atol=1e-3)


def test_a_sliding_layer_goes_back_only_until_it_dropped_a_row():
    layer = DynamicSlidingWindowLayer(4)
    rows = torch.arange(6.0).view(1, 1, 6, 1)
    layer.update(rows[..., :3, :], rows[..., :3, :])
    layer.crop(2)                                # nothing dropped yet: back to 2 positions
    assert layer.held_positions() == [0, 1] and layer.get_seq_length() == 2
    full, _ = layer.update(rows[..., 2:5, :], rows[..., 2:5, :])
    assert full.shape[-2] == 5 and layer.held_positions() == [2, 3, 4] and layer.get_mask_sizes(1) == (4, 2)
    with pytest.raises(LimitError):
        layer.crop(4)                            # position 4 would read 1 again: gone
    assert DynamicCache(2, [4, None]).layers[0].sliding_window == 4
    with pytest.raises(ValueError):
        DynamicCache(2, [4])


def test_a_long_text_run_keeps_what_its_views_draw_and_the_same_tokens_and_cache(gemma):
    """``Keep``: a pass longer than ``rows`` keeps the last query rows, the map pooled, the last logits;
    the tokens, the checks' rows and the cache's tensors are those of the run that keeps everything,
    and the sliding layers' snapshots share one buffer (no copy per event)."""
    from kvviz.models.base import Keep
    from kvviz.models.hf import pooled

    prompt = gemma.tokenize(TEXT)
    n = len(prompt)
    keep = Keep(rows=2, map_side=4, logits=3)
    full = run_generation(gemma, prompt, W + 2, recheck="final")
    lean = run_generation(gemma, prompt, W + 2, recheck="final", keep=keep)
    assert [e.tokens for e in lean.events] == [e.tokens for e in full.events]
    a, b = full.events[0].record, lean.events[0].record
    assert b.attention.shape == (gemma.n_layers, gemma.n_heads, 2, n)
    assert torch.equal(b.attention, a.attention[:, :, -2:])
    block = -(-n // 4)
    assert b.map_block == block and b.attention_map.shape == (gemma.n_layers, gemma.n_heads, 4, 4)
    assert torch.allclose(b.attention_map[2], pooled(a.attention[2], 4)[0])
    assert torch.allclose(b.attention_map[1, 0, 0, 0], a.attention[1, 0, :block, :block].mean())
    assert b.logits.shape[0] == b.output.shape[0] == 3 and torch.equal(b.output, a.output[-3:])
    # the vocabulary projection of 3 rows, not N: another shape of product, close rather than bit-equal
    torch.testing.assert_close(b.logits, a.logits[-3:], rtol=0, atol=FLOAT32_TOLERANCE)
    assert b.q.shape[2] == 2 and b.k.shape[2] == n                 # every key (the cache, RoPE), the last queries
    for x, y in zip(full.events, lean.events):
        if x.record is not None:
            assert y.check.logits_max_abs_diff < 1e-4 and y.check.logits.shape[0] == y.record.logits.shape[0]
            assert y.record.attention_map is None or y.index == 0
        assert all(torch.equal(k1, k2) for k1, k2 in zip(x.cache.keys, y.cache.keys))
    sliding = [e.cache.keys[0] for e in lean.events if e.record is not None]
    assert all(k.shape[-2] == W - 1 for k in sliding)
    assert len({k.untyped_storage().data_ptr() for k in sliding}) <= 2   # one buffer, grown at most once


def test_a_long_runs_records_are_estimated_capped_and_its_progress_told(gemma, monkeypatch):
    from kvviz.decoding import stepper
    from kvviz.models.base import Keep

    prompt, keep, told = gemma.tokenize(TEXT), Keep(rows=2, map_side=4, logits=3), []
    run = run_generation(gemma, prompt, 4, recheck="final", keep=keep, progress=lambda d, n: told.append((d, n)))
    assert told == [(0, 5), (1, 5), (2, 5), (3, 5), (4, 5)]          # prefill, 3 decode passes, the check
    need = stepper.record_bytes_estimate(gemma, len(prompt), 4, keep)
    assert stepper.run_bytes(run) <= need < 3 * stepper.run_bytes(run)
    assert stepper.record_bytes_estimate(gemma, len(prompt), 4) > need      # everything recorded: more
    monkeypatch.setattr(stepper, "MAX_RUN_RECORD_BYTES", need - 1)
    with pytest.raises(LimitError, match="MB of records; the limit is"):
        run_generation(gemma, prompt, 4, keep=keep)


def test_a_long_prefills_map_is_drawn_pooled_labelled_with_its_band_and_a_notice(gemma):
    """The frame's figure of a long prefill: the record's pooled map, cells labelled by the positions
    they cover, blank where a sliding layer sees no key; the one-line notice at the top."""
    from kvviz.models.base import Keep
    from kvviz.ui.frames import llm as frames_llm
    from kvviz.ui.frames import translator

    prompt = gemma.tokenize(TEXT)
    n = len(prompt)
    run = run_generation(gemma, prompt, 2, recheck=False, keep=Keep(rows=2, map_side=8, logits=1))
    src, tr = run.events[0], translator("en")
    fig, b = frames_llm.pooled_map_spec(src, gemma, 0, 1, tr)
    cells = -(-n // b)
    z = fig["data"][0]["z"]
    assert b == -(-n // 8) and len(z) == len(z[0]) == cells
    assert fig["data"][0]["y"][0] == f"0–{b - 1}" and fig["data"][0]["x"][-1].endswith(f"–{n - 1}")
    assert f"each cell the mean of {b} × {b} weights" in fig["layout"]["title"]["text"]
    assert z[-1][0] is None and z[0][0] is not None                   # the band: the first keys out of reach
    assert z[0][0] == pytest.approx(float(src.record.attention_map[0, 1, 0, 0]))
    notice = frames_llm.notice_blocks(src, gemma, tr)[0]["note"]
    assert f"prefill of {n} positions" in notice and "last 2 query rows" in notice
    far = frames_llm.notice_blocks(run.events[-1], gemma, tr)[0]["note"]
    assert f"positions 0–{run.events[-1].positions[-1] - W}" in far and "global layers (4)" in far


def test_the_trace_of_a_long_pass_holds_the_newest_querys_row_and_says_its_position(gemma):
    from kvviz.decoding.trace import run_dict
    from kvviz.models.base import Keep

    run = run_generation(gemma, gemma.tokenize(TEXT), 2, recheck="final", keep=Keep(rows=2, map_side=4, logits=1))
    prefill, decode = run_dict(run, gemma.logit_tokens)["events"][0::2]
    n = len(run.prompt)
    assert prefill["attention_positions"] == [n - 1] and len(prefill["attention"][0][0]) == 1
    assert prefill["attention"][3][0][0] == pytest.approx(run.events[0].record.attention[3, 0, -1].tolist(), abs=1e-6)
    assert "attention_positions" not in decode and len(decode["attention"][0][0]) == 1


def test_a_long_texts_token_strip_shows_its_last_tokens_numbered_by_position(gemma, monkeypatch):
    from kvviz.ui.frames import llm as frames_llm
    from kvviz.ui.frames import translator

    monkeypatch.setattr(frames_llm, "STRIP_TAIL", 6)
    run = run_generation(gemma, gemma.tokenize(TEXT), 2, recheck=False)
    ev, n = run.events[-1], len(run.prompt)                      # choose: its token pending
    strip = frames_llm.token_strip(ev, n, translator("en"))["strip"]
    off = len(ev.sequence) - 6
    assert [c[0] for c in strip["chips"]] == list(range(off, len(ev.sequence)))
    assert [c[2] for c in strip["chips"]][-1] == "pending" and strip["chips"][0][2] == "prompt"
    assert strip["label"].startswith(f"The last 6 of {len(ev.sequence)} tokens (positions {off}–")
