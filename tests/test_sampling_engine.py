"""docs/design.md §3: greedy, temperature, top-k, top-p and seeded draws, against the engine."""
import math

import pytest
import torch

from kvviz.decoding.logit_sources import quiz_distribution
from kvviz.decoding.sampling import Greedy, Sampler, draw_counts, make_rule, top_k_filter, top_p_filter
from kvviz.limits import MAX_DRAWS, LimitError

INF = float("inf")


def kept_tokens(stage, tokens):
    return {tokens[i] for i in stage.kept}


# -------------------------------------------------------------- the lesson's quiz

@pytest.mark.parametrize("rest", [["D"], ["D", "E"], ["D", "E", "F", "G", "H"], [f"R{i}" for i in range(10)]])
def test_quiz_top_p_08_keeps_exactly_a_and_b(rest):
    q = quiz_distribution(rest)
    assert [round(p, 6) for p in torch.softmax(q.logits, 0).tolist()[:3]] == [0.6, 0.25, 0.1]
    assert sum(torch.softmax(q.logits, 0).tolist()[3:]) == pytest.approx(0.05)
    final = Sampler(1.0, None, 0.8).stages(q.logits)[-1]
    assert kept_tokens(final, q.tokens) == {"A", "B"}
    # the renormalised distribution the draw uses: 0.6/0.85 and 0.25/0.85
    assert final.probs[:2] == pytest.approx([0.6 / 0.85, 0.25 / 0.85])
    assert sum(final.probs[2:]) == 0


@pytest.mark.parametrize("p, kept", [(1e-9, "A"), (0.5, "A"), (0.6, "A"), (0.61, "AB"), (0.8, "AB"),
                                     (0.85, "AB"), (0.86, "ABC"), (0.95, "ABC"), (0.951, "ABCDEFGH"),
                                     (1.0, "ABCDEFGH")])
def test_top_p_drops_a_token_when_the_mass_before_it_reached_p(p, kept):
    # A alone has 0.6: at p = 0.6 the mass before B (0.6) has reached p, so B goes; at 0.61 B crosses p
    # and is kept. The top token is never dropped, however small p is.
    q = quiz_distribution()
    out = top_p_filter(q.logits, p)
    assert "".join(t for t, v in zip(q.tokens, out.tolist()) if v != -INF) == kept


# ---------------------------------------------------------------- top-k

def test_top_k_keeps_the_k_largest_along_the_last_axis_with_batch_dims():
    x = torch.tensor([[[0.1, 3.0, 2.0, -1.0], [5.0, 4.0, 3.0, 2.0]],
                      [[1.0, 1.5, 0.5, 2.5], [-3.0, -2.0, -1.0, 0.0]]])          # [2, 2, 4]
    out = top_k_filter(x, 2)
    assert out.shape == x.shape
    assert (out != -INF).tolist() == [[[False, True, True, False], [True, True, False, False]],
                                      [[False, True, False, True], [False, False, True, True]]]
    kept = out[out != -INF]
    assert torch.equal(kept, x[out != -INF])          # kept logits are unchanged


def test_top_k_one_keeps_the_argmax_and_k_at_or_above_vocab_keeps_everything():
    x = torch.tensor([0.3, 2.0, -1.0, 1.9])
    assert (top_k_filter(x, 1) != -INF).tolist() == [False, True, False, False]
    for k in (4, 5, 10**9):
        assert torch.equal(top_k_filter(x, k), x)


def test_ties_are_never_split():
    x = torch.tensor([1.0, 2.0, 2.0, 0.0])
    # top-k: both tokens tied at the k-th value stay
    assert (top_k_filter(x, 1) != -INF).tolist() == [False, True, True, False]
    # top-p: the two tied tokens (mass 0.40 each) share the mass before them (0), so both stay
    assert (top_p_filter(x, 0.1) != -INF).tolist() == [False, True, True, False]
    # greedy picks the first of a tie, as torch.argmax does
    assert Greedy().choose(x).index == 1
    # tokens tied exactly at the top-p boundary go together too
    y = torch.log(torch.tensor([0.5, 0.2, 0.2, 0.1], dtype=torch.float64))
    assert (top_p_filter(y, 0.6) != -INF).tolist() == [True, True, True, False]


def test_top_p_works_on_batches_row_by_row():
    rows = torch.stack([quiz_distribution().logits, torch.linspace(2, -2, 8, dtype=torch.float64)])   # [2, 8]
    out = top_p_filter(rows, 0.8)
    for r in range(2):
        assert torch.equal(out[r], top_p_filter(rows[r], 0.8))


def test_top_p_one_keeps_even_a_vanishing_token():
    x = torch.tensor([0.0, -700.0, -745.0], dtype=torch.float64)   # exp(-745) is below float64's tiny
    assert torch.equal(top_p_filter(x, 1.0), x)


# ---------------------------------------------------------------- temperature and greedy

def test_temperature_divides_the_logits_before_softmax():
    x = torch.tensor([0.67, 0.33, -1.0], dtype=torch.float64)
    for tau in (0.5, 1.0, 2.0):
        st = Sampler(tau).stages(x)[1]
        assert st.name == "temperature" and st.setting == tau
        assert st.logits == pytest.approx((x / tau).tolist())
        assert st.probs == pytest.approx(torch.softmax(x / tau, 0).tolist())
    # τ < 1 sharpens (less entropy), τ > 1 flattens (more)
    h = [Sampler(tau).stages(x)[1].entropy_bits for tau in (0.5, 1.0, 2.0)]
    assert h[0] < h[1] < h[2]


def test_temperature_to_zero_equals_greedy():
    g = torch.Generator().manual_seed(0)
    for _ in range(50):
        x = torch.randn(12, generator=g, dtype=torch.float64) * 3
        want = Greedy().choose(x).index
        for tau in (1e-3, 1e-6, 1e-12):
            s = Sampler(tau)
            assert s.stages(x)[-1].probs[want] == 1.0
            assert s.choose(x, torch.Generator().manual_seed(1)).index == want
    assert make_rule(0.0) == Greedy() and make_rule(0.0, 2, 0.5) == Greedy()
    zero = Sampler(0.0)
    assert zero.describe() == {"name": "greedy"}
    assert [s.name for s in zero.stages(x)] == ["input", "greedy"]
    assert zero.choose(x).index == Greedy().choose(x).index


def test_small_temperature_with_a_tie_splits_the_mass_between_the_tied_tokens():
    # the limit τ → 0 is uniform over the tied maxima; greedy picks the first of them
    st = Sampler(1e-9).stages(torch.tensor([1.0, 1.0, 0.0]))[-1]
    assert st.probs == pytest.approx([0.5, 0.5, 0.0])


def test_extreme_temperatures_give_no_nan_and_remove_nothing():
    x = torch.tensor([1e6, -1e6, 5.0, -INF], dtype=torch.float64)
    tiny = Sampler(1e-310).stages(x)
    assert tiny[1].removed == [] and tiny[1].kept == [0, 1, 2]          # overflow handled by a shift
    assert tiny[-1].probs == [1.0, 0.0, 0.0, 0.0]
    huge = Sampler(1e12).stages(x[:3])[-1]
    assert huge.probs == pytest.approx([1 / 3] * 3, abs=1e-5)
    assert huge.entropy_bits == pytest.approx(math.log2(3), abs=1e-6)
    assert all(math.isfinite(p) for s in tiny + [huge] for p in s.probs)


# ---------------------------------------------------------------- -inf, single token, invalid input

def test_minus_inf_tokens_are_never_kept_or_drawn():
    x = torch.tensor([-INF, 1.0, -INF, 0.5], dtype=torch.float64)
    assert Greedy().choose(x).index == 1
    s = Sampler(1.5, top_k=3, top_p=1.0)
    st = s.stages(x)
    assert all(stage.kept == [1, 3] for stage in st)
    assert all(stage.removed == [] for stage in st)                       # nobody removed them: already -inf
    assert {s.choose(x, torch.Generator().manual_seed(i)).index for i in range(200)} == {1, 3}
    assert (top_p_filter(x, 0.5) != -INF).tolist() == [False, True, False, False]


def test_a_single_token_vocabulary_always_gives_that_token():
    x = torch.tensor([-3.2])
    for rule in (Greedy(), Sampler(0.3), Sampler(5.0, 1, 0.01), Sampler(1.0, 10, 1.0)):
        c = rule.choose(x, torch.Generator().manual_seed(0))
        assert c.index == 0 and c.probs == [1.0] and c.kept == [0]
        assert rule.stages(x)[-1].entropy_bits == 0.0


@pytest.mark.parametrize("kwargs, msg", [
    (dict(temperature=-0.1), "Temperature"), (dict(temperature=float("nan")), "Temperature"),
    (dict(temperature=INF), "Temperature"), (dict(temperature=True), "Temperature"),
    (dict(top_k=0), "Top-k"), (dict(top_k=-2), "Top-k"), (dict(top_k=2.5), "Top-k"), (dict(top_k=True), "Top-k"),
    (dict(top_p=0.0), "Top-p"), (dict(top_p=-0.2), "Top-p"), (dict(top_p=1.01), "Top-p"),
    (dict(top_p=float("nan")), "Top-p"),
])
def test_invalid_settings_are_refused_with_a_message(kwargs, msg):
    with pytest.raises(LimitError, match=msg):
        Sampler(**kwargs)
    if "top_k" in kwargs:
        with pytest.raises(LimitError, match=msg):
            top_k_filter(torch.zeros(3), kwargs["top_k"])
    if "top_p" in kwargs:
        with pytest.raises(LimitError, match=msg):
            top_p_filter(torch.zeros(3), kwargs["top_p"])


@pytest.mark.parametrize("bad, msg", [([0.1, float("nan"), 0.2], "NaN"), ([INF, 0.0], r"\+inf"),
                                      ([-INF, -INF], "no token"), ([], "empty")])
def test_logits_no_rule_can_use_are_refused(bad, msg):
    x = torch.tensor(bad, dtype=torch.float64)
    for fn in (lambda: Greedy().choose(x), lambda: Sampler(1.0).choose(x), lambda: top_k_filter(x, 1),
               lambda: top_p_filter(x, 0.5), lambda: Sampler(1.0).stages(x)):
        with pytest.raises(LimitError, match=msg):
            fn()


# ---------------------------------------------------------------- stages, entropy, draws

def test_stages_report_what_each_filter_removed_and_the_entropy():
    q = quiz_distribution()
    st = Sampler(0.7, 2, 0.7).stages(q.logits)
    assert [s.name for s in st] == ["input", "temperature", "top-k", "top-p"]
    assert [s.setting for s in st] == [None, 0.7, 2, 0.7]
    assert st[0].entropy_bits == pytest.approx(-(0.6 * math.log2(0.6) + 0.25 * math.log2(0.25)
                                                 + 0.1 * math.log2(0.1) + 5 * 0.01 * math.log2(0.01)))
    assert st[1].removed == [] and len(st[1].kept) == 8
    assert [q.tokens[i] for i in st[2].removed] == ["C", "D", "E", "F", "G", "H"]
    # after τ = 0.7 and top-k 2, A has 0.6^(1/0.7) / (0.6^(1/0.7) + 0.25^(1/0.7)) ≈ 0.777 ≥ 0.7: B goes
    a = 0.6 ** (1 / 0.7) / (0.6 ** (1 / 0.7) + 0.25 ** (1 / 0.7))
    assert st[3].mass_before[1] == pytest.approx(a) and [q.tokens[i] for i in st[3].removed] == ["B"]
    assert st[3].probs[0] == 1.0 and st[3].entropy_bits == 0.0
    # filters that are off change nothing
    off = Sampler(1.0).stages(q.logits)
    assert off[2].setting is None and off[3].setting is None
    assert off[3].probs == pytest.approx(off[0].probs) and off[3].removed == []


def test_draw_counts_are_seeded_capped_and_follow_the_probabilities():
    probs = Sampler(1.0, None, 0.8).stages(quiz_distribution().logits)[-1].probs
    a, b = draw_counts(probs, 100_000, 42), draw_counts(probs, 100_000, 42)
    assert a == b and sum(a) == 100_000
    assert a != draw_counts(probs, 100_000, 43)
    assert a[0] / 1e5 == pytest.approx(0.6 / 0.85, abs=0.01) and sum(a[2:]) == 0
    with pytest.raises(LimitError, match="between 1 and"):
        draw_counts(probs, MAX_DRAWS + 1, 0)
    with pytest.raises(LimitError, match="Seed"):
        draw_counts(probs, 10, -1)


def test_the_same_seed_gives_the_same_draws():
    x = torch.tensor([0.5, 0.4, 0.3, 0.2, 0.1])
    s = Sampler(1.3, 4, 0.95)
    def seq(seed: int) -> list[int]:
        g = torch.Generator().manual_seed(seed)
        return [s.choose(x, g).index for _ in range(40)]

    assert seq(7) == seq(7)
    assert seq(7) != seq(8)
