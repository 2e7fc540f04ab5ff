"""docs/design.md §1: every number of the A/B/C miniature model, against the engine."""
import math

import pytest
import torch

from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models.abc import ABCModel

M = ABCModel()


def test_prefill_of_a_b_gives_the_seed_h_and_logits():
    run = run_generation(M, ["A", "B"], 1)
    pre = run.events[0]
    assert pre.phase == "prefill"
    h0, h1 = pre.record.output[-1].tolist()
    assert (round(h0, 3), round(h1, 3)) == (0.330, 0.670)
    assert [round(x, 3) for x in pre.logits.tolist()] == [0.670, 0.330, -1.000]
    # the exact value behind the rounding: softmax([0, 1/sqrt2]) on keys A, B
    assert h1 == pytest.approx(1 / (1 + math.exp(-1 / math.sqrt(2))), abs=1e-12)


def test_first_answer_is_a_then_greedy_alternates():
    run = run_generation(M, ["A", "B"], 6)
    chosen = [e.chosen for e in run.events if e.phase == "choose"]
    assert chosen == ["A", "B", "A", "B", "A", "B"]
    assert [e.phase for e in run.events[:4]] == ["prefill", "choose", "decode", "choose"]


def test_chosen_is_not_processed():
    run = run_generation(M, ["A", "B"], 3)
    pre, choose, dec = run.events[:3]
    assert choose.chosen == "A" and choose.pending == "A"
    assert choose.cache_len == 2                        # A is not in the cache yet
    assert [r.token for r in choose.cache.rows] == ["A", "B"]
    assert dec.phase == "decode" and dec.tokens == ["A"] and dec.positions == [2]
    assert dec.cache_len == 3                           # only the next pass appends A
    assert dec.cache.rows[2].event == dec.index and dec.cache.rows[2].phase == "decode"
    assert dec.record.attention.shape == (1, 1, 1, 3)   # A's query reads positions 0..2
    assert torch.all(dec.record.attention > 0)


def test_counters_count_computed_positions_only():
    run = run_generation(M, ["A", "B"], 4)
    passes = [e for e in run.events if e.record is not None]
    # with the cache: 2 (prompt) then one per decode; without: the whole prefix at each pass
    assert [e.kv_computed for e in passes] == [2, 3, 4, 5]
    assert [e.kv_recompute for e in passes] == [2, 2 + 3, 2 + 3 + 4, 2 + 3 + 4 + 5]


@pytest.mark.parametrize("prompt", [["A", "B"], ["C", "A", "B"], ["B"], ["C", "C", "A", "B", "B"]])
def test_recompute_agrees_at_every_step(prompt):
    run = run_generation(M, prompt, 8)
    for e in run.events:
        if e.check is not None:
            assert e.check.max_abs_diff <= 1e-6


def test_other_prompts_match_hand_computation():
    # prompt "C A": the query of A=(1,0) reads C (score -1/sqrt2) and A (1/sqrt2)
    run = run_generation(M, ["C", "A"], 1)
    w = torch.softmax(torch.tensor([-1.0, 1.0], dtype=torch.float64) / math.sqrt(2), 0)
    h = w[0] * torch.tensor([-1.0, -1.0], dtype=torch.float64) + w[1] * torch.tensor([1.0, 0.0], dtype=torch.float64)
    assert torch.allclose(run.events[0].record.output[-1], h)
    assert run.events[1].chosen == ["A", "B", "C"][int(torch.argmax(torch.stack([h[1], h[0], -h.sum()])))]


def test_bad_prompts_are_refused_with_a_message():
    with pytest.raises(ValueError, match="Unknown token"):
        run_generation(M, ["A", "D"], 2)
    with pytest.raises(LimitError, match="empty"):
        run_generation(M, [], 2)
    with pytest.raises(LimitError, match="between"):
        run_generation(M, ["A"], 10_000)
    with pytest.raises(LimitError, match="between"):
        run_generation(M, ["A"] * 1000, 2)
