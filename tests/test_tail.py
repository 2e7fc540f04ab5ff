"""Why top-k and top-p exist (kvviz.decoding.tail): the long tail measured with the engine's own filters,
on a small distribution by hand and on SmolLM2's next-token distributions."""
import math

import pytest
import torch

from kvviz.decoding.sampling import draw_counts
from kvviz.decoding.tail import JUNK, next_token_logits, tail_draws, tail_of
from kvviz.limits import LimitError


def _logits(probs):
    return torch.tensor([math.log(p) for p in probs], dtype=torch.float64)


def test_tail_by_hand():
    tail = tail_of(_logits([0.05, 0.5, 0.1, 0.3, 0.05]), k=2, p=0.8)
    assert tail.order[:3].tolist() == [1, 3, 2] and tail.rank(2) == 3
    assert tail.top_k_size == 2 and tail.mass_beyond_k == pytest.approx(0.2)
    assert tail.top_p_size == 2 and tail.mass_beyond_p == pytest.approx(0.2)     # 0.5 + 0.3 reaches 0.8
    assert tail.tail_size == 3 and tail.junk_in_k == 0
    # a sure model: top-k = 4 keeps three tokens under 1 % that top-p (p = 0.9) drops
    sure = tail_of(_logits([0.97, 0.005, 0.004, 0.003, 0.018]), k=4, p=0.9)
    assert sure.top_p_size == 1 and sure.junk_in_k == 2 and JUNK == 0.01      # 0.018 is not junk
    with pytest.raises(LimitError):
        tail_of(_logits([0.5, 0.5]), k=0, p=0.9)


def test_tail_draws_are_draw_counts_draws():
    tail = tail_of(_logits([0.6, 0.25, 0.1, 0.03, 0.02]), k=2, p=0.8)
    d = tail_draws(tail, 500, seed=3)
    counts = draw_counts(tail.probs.tolist(), 500, 3)                          # the same seeded draws
    assert d.outside_k == sum(counts[i] for i in tail.order[2:].tolist())
    assert d.outside_p == sum(counts[i] for i in tail.order[tail.top_p_size:].tolist())
    assert d.first_tail is not None and d.first_tail[1] in tail.order[tail.top_p_size:].tolist()
    again = tail_draws(tail, 500, seed=3)
    assert again == d


def test_smollm2_sure_and_open_contexts_show_why_both_filters_exist(smollm2):
    sure = tail_of(next_token_logits(smollm2, smollm2.prompt("The capital of France is", False)), 50, 0.9)
    open_ = tail_of(next_token_logits(smollm2, smollm2.prompt("Once upon a time, there was a", False)), 50, 0.9)
    assert sure.vocab == open_.vocab == len(smollm2.vocab)
    assert smollm2.decode([int(sure.order[0])]) == " Paris" and float(sure.probs[sure.order[0]]) > 0.5
    # sure: a small top-p set, and top-k lets through tokens under 1 % each
    assert sure.top_p_size < 50 and sure.junk_in_k > 0 and sure.mass_beyond_k < 0.1
    # open: top-p keeps far more than k, and top-k cuts a large share of the probability
    assert open_.top_p_size > 10 * 50 and open_.mass_beyond_k > 0.25 and open_.junk_in_k == 0
    # the tail together is not negligible: a draw from it comes up within a few hundred draws
    d = tail_draws(open_, 1000, 0)
    assert 0 < d.outside_p < 200 and d.first_tail is not None and open_.rank(d.first_tail[1]) > open_.top_p_size
