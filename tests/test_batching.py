"""Batched decoding (kvviz.decoding.batching): several A/B/C prompts of different lengths, left-padded with a
mask in the cache, one pass per step; every sequence equals its prompt run alone."""
import pytest
import torch

from kvviz.decoding.batching import compare_with_solo, padded_cache_table, run_batch, solo_runs
from kvviz.decoding.sampling import Sampler
from kvviz.limits import LimitError
from kvviz.models.abc import ABCModel
from kvviz.models.base import allowed_keys

PROMPT_SETS = [
    [["A", "B"], ["C", "A", "B", "B"], ["A"]],
    [["B"], ["A"]],
    [["C", "C", "A"], ["A", "B", "C"]],                   # equal lengths: no padding at all
    [["A"] * 9, ["B"], ["C", "A"]],
]


class CountingABC(ABCModel):
    """Counts forward passes so the test can see one pass per step serve every sequence."""

    def __init__(self):
        self.batch_calls, self.solo_calls = [], 0

    def forward_batch(self, token_ids, positions, key_mask, cache):
        self.batch_calls.append(tuple(token_ids.shape))
        return super().forward_batch(token_ids, positions, key_mask, cache)


@pytest.mark.parametrize("prompts", PROMPT_SETS)
def test_batched_equals_each_prompt_alone(prompts):
    m = ABCModel()
    run = run_batch(m, prompts, 6)
    solo = solo_runs(m, run, 6)
    for b, (cmp, alone) in enumerate(zip(compare_with_solo(run, solo), solo)):
        assert cmp.same_tokens, b
        assert cmp.logits_max_abs_diff <= 1e-12 and cmp.attention_max_abs_diff <= 1e-12   # float64
        assert run.events[-1].sequences[b] == alone.events[-1].sequence
        # choose events pick the same token at the same event index
        assert [e.tokens[b][0] for e in run.events if e.phase == "choose"] == \
               [e.chosen for e in alone.events if e.phase == "choose"]


def test_sampled_batch_gives_every_sequence_its_solo_tokens():
    m, rule = ABCModel(), Sampler(temperature=1.5)
    prompts = [["A", "B"], ["C", "A", "B", "B"], ["A"]]
    run = run_batch(m, prompts, 10, rule=rule, seed=7)
    solo = solo_runs(m, run, 10, rule=rule, seed=7)
    assert all(c.same_tokens and c.max_abs_diff <= 1e-12 for c in compare_with_solo(run, solo))
    assert len({tuple(s) for s in run.events[-1].sequences}) == 3


def test_one_pass_per_step_serves_every_sequence():
    m = CountingABC()
    run = run_batch(m, [["A", "B"], ["C", "A", "B", "B"], ["A"]], 5)
    assert m.batch_calls == [(3, 4)] + [(3, 1)] * 4          # prefill [B, width], then [B, 1] per step
    passes = [e for e in run.events if e.record is not None]
    assert [e.passes for e in passes] == [1, 2, 3, 4, 5]
    assert passes[0].kv_computed == 2 + 4 + 1 and passes[0].kv_padding == 2 + 0 + 3
    assert passes[-1].kv_computed == 7 + 3 * 4


def test_padded_cache_and_mask():
    run = run_batch(ABCModel(), [["A", "B"], ["C", "A", "B", "B"], ["A"]], 3)
    pre, choose, dec = run.events[:3]
    assert run.pad == [2, 0, 3]
    assert pre.key_mask.tolist() == [[False, False, True, True], [True] * 4, [False, False, False, True]]
    assert pre.cache.keys[0].shape == (3, 1, 4, 2)                  # [B, H, T, d]
    assert choose.pending == ["A", "A", "B"] and choose.n_columns == 4   # chosen, not yet cached
    assert dec.cache.keys[0].shape == (3, 1, 5, 2) and dec.key_mask[:, 4].all()
    # the padding columns get exactly zero attention from every real query
    att = dec.record.attention[:, 0, 0, 0]                           # [B, T]
    assert att[0, :2].tolist() == [0.0, 0.0] and att[2, :3].tolist() == [0.0, 0.0, 0.0]
    assert torch.allclose(att.sum(-1), torch.ones(3, dtype=att.dtype))
    table = padded_cache_table(dec, labels=["s1", "s2", "s3"], pad_label="pad")
    assert list(table["s1 token"]) == ["pad", "pad", "A", "B", "A"]
    assert list(table["s3 mask"]) == [0, 0, 0, 1, 1]
    assert list(table["s2 k"])[0] == "(-1, -1)"                     # C's vector


def test_allowed_keys_combines_padding_and_causality():
    mask = torch.tensor([[False, True, True], [True, True, True]])
    allowed = allowed_keys(mask, 2)                                  # the last two columns are new
    assert allowed.tolist() == [[[False, True, False], [False, True, True]],
                                [[True, True, False], [True, True, True]]]


class MaskBlindABC(ABCModel):
    """A broken batch forward that ignores the padding mask (the bug the mask prevents)."""

    def forward_batch(self, token_ids, positions, key_mask, cache):
        return super().forward_batch(token_ids, positions, torch.ones_like(key_mask), cache)


def test_without_the_mask_padded_sequences_would_differ():
    m = MaskBlindABC()
    run = run_batch(m, [["B"], ["C", "A", "B", "B"]], 4)
    cmp = compare_with_solo(run, solo_runs(ABCModel(), run, 4))
    assert cmp[0].logits_max_abs_diff > 0.1       # B read three padding keys of A's vector
    assert cmp[1].max_abs_diff <= 1e-12           # the unpadded sequence is unaffected


@pytest.mark.parametrize("prompts, words", [
    ([["A"], []], "Prompt 2 is empty"),
    ([["A"]] * 4, "Number of prompts must be between 1 and 3"),
    ([["A"], ["D"]], "Unknown token"),
    ([["A"] * 65, ["B"]], "Prompt 1 length must be between 1 and 64"),
])
def test_bad_batches_get_messages(prompts, words):
    with pytest.raises((LimitError, ValueError), match=words):
        run_batch(ABCModel(), prompts, 3)
