"""Speculative decoding of the tiny GPT (docs/design.md §5) with its draft model — the draft, the engine's
exactness (greedy token-identical, sampled distribution by a chi-square test), the cache invariant and
rollback, the records a page steps through, limits, the expected speed-up formulas, the measurement
and the ``speculate`` command."""
import hashlib
import json

import pytest
import torch

from kvviz import cost
from kvviz.cache import DynamicCache, StaticCache
from kvviz.cli.main import main as cli_main
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import Greedy, Sampler, draw_from, rule_probs
from kvviz.limits import SPECULATIVE_MAX_ATTENTION_TOKENS, SPECULATIVE_MAX_GAMMA, SPECULATIVE_MAX_NEW_TOKENS, LimitError
from kvviz.models.gpt import (
    DRAFT_CHECKPOINT,
    GPTConfig,
    GPTModel,
    draft_config,
    load_draft_gpt,
    load_tiny_gpt,
    random_gpt,
    weights_sha256,
)
from kvviz.models.gpt.corpus import vocabulary
from kvviz.speculative import measure_speedup, speculation_dict
from kvviz.speculative.decoding import speculative_generate, speculative_round
from tests.test_cli import cli

TINY, DRAFT = load_tiny_gpt(), load_draft_gpt()
T, D, TOK = TINY.model, DRAFT.model, TINY.tokenizer
TM, DM = GPTModel(TINY), GPTModel(DRAFT)     # the pair behind the model protocol (what the engine runs)
PROMPTS = ["Today the weather is so", "It is rainy in London , so we", "In Oslo the sky", "Tomorrow",
           "The weather in Dublin will be so"]
SAMPLERS = [Sampler(1.0), Sampler(0.8, top_k=5), Sampler(1.3, top_p=0.9), Sampler(0.7, 10, 0.8)]
# the draft has not learned what "we" do in the rain: here p and q differ most (Σ min(p, q) ≈ 0.3)
DISAGREE = "It is rainy in London , so we"


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """These models are tiny: one thread runs them faster than two fighting for a shared machine's cores
    (docs/design.md §4); the setting is restored for the other test modules."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---- the draft model ---------------------------------------------------------------------------------

def test_draft_checkpoint_is_shipped_small_and_matches_its_record():
    assert DRAFT.trained, "kvviz/data/draft_gpt.pt is missing: run python -m kvviz.train_gpt --draft"
    meta = json.loads(DRAFT_CHECKPOINT.with_suffix(".json").read_text())
    assert DRAFT_CHECKPOINT.stat().st_size < 500_000
    assert hashlib.sha256(DRAFT_CHECKPOINT.read_bytes()).hexdigest() == meta["sha256"]
    assert weights_sha256(torch.load(DRAFT_CHECKPOINT, weights_only=True)) == meta["weights_sha256"]
    assert D.config == draft_config(len(vocabulary())) and (D.config.n_layer, D.config.n_embd) == (1, 64)
    assert meta["vocab"] == TOK.vocab == DRAFT.tokenizer.vocab          # one tokenizer for both
    assert meta["training"]["command"] == "python -m kvviz.train_gpt --draft"
    assert D.n_params() * 10 < T.n_params()


def test_missing_draft_checkpoint_falls_back_to_seeded_random_weights(tmp_path):
    a = load_draft_gpt(str(tmp_path / "none.pt"), fallback_seed=5)
    b = load_draft_gpt(str(tmp_path / "other.pt"), fallback_seed=5)
    assert not a.trained and a.model.config == D.config
    assert torch.equal(a.model.transformer.wte.weight, b.model.transformer.wte.weight)
    # a random draft still gives the target's greedy tokens: it only proposes
    ids = TOK.encode("Today the weather is so")
    assert speculative_generate(TM, GPTModel(a), ids, 10, 3).tokens == generate_cached(TM, ids, 10).tokens


def test_the_draft_disagrees_with_the_target_sometimes_yet_is_useful():
    runs = [speculative_generate(TM, DM, TOK.encode(p), 40, 4, Sampler(1.0), seed=1) for p in PROMPTS[:3]]
    alpha = sum(r.accepted for r in runs) / sum(r.tested for r in runs)
    assert 0.5 < alpha < 0.95, alpha
    assert sum(r.tokens_per_target_pass for r in runs) / len(runs) > 2.0


def test_p_and_q_are_the_distributions_the_rule_draws_from_row_by_row():
    """Speculative decoding applies the rule's filters (temperature, then top-k, then top-p) to the
    target's and the draft's logits alike: p and q are ``rule_probs``, what ``rule.draw`` samples."""
    g = torch.Generator().manual_seed(0)
    for rule in [Greedy()] + SAMPLERS + [Sampler(1e-310), Sampler(0.01, top_p=0.9)]:
        x = torch.randn(5, 82, generator=g) * 4
        x[1, :4] = x[1].max()                           # a tie at the top
        x[2] *= 1e4
        x[3, 7] = float("-inf")
        rows = rule_probs(rule, x)
        assert torch.equal(rows, torch.stack([rule_probs(rule, r) for r in x]))   # one pass = each row alone
        if isinstance(rule, Sampler) and not rule.is_greedy:
            a, b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
            assert [rule.draw(r, a) for r in x] == [draw_from(rule_probs(rule, r), b) for r in x]
        else:
            assert rows.argmax(-1).tolist() == [rule.draw(r, None) for r in x]
            assert set(rows.flatten().tolist()) == {0, 1}


# ---- exactness ---------------------------------------------------------------------------------------

GREEDY = {prompt: generate_cached(TM, TOK.encode(prompt), 23).tokens for prompt in PROMPTS}   # the target alone


@pytest.mark.parametrize("gamma", range(1, 7))
def test_greedy_speculation_gives_exactly_the_targets_greedy_tokens(gamma):
    for prompt in PROMPTS:
        ids = TOK.encode(prompt)
        for n in (1, 2, 23):        # greedy: the first n of 23 tokens are the n-token run's
            assert speculative_generate(TM, DM, ids, n, gamma).tokens == GREEDY[prompt][:n], (prompt, gamma, n)
    assert speculative_generate(TM, DM, ids, 9, gamma, Sampler(0.0)).tokens == GREEDY[prompt][:9]


def _invariant_holds(spec, prompt_len):
    emitted = 0
    for r in spec.rounds:
        assert r.target_cache.before == prompt_len + emitted - 1 == r.start
        assert r.target_cache.grown == r.start + r.gamma + 1          # the one verification pass
        emitted += len(r.emitted)
        assert r.target_cache.after == prompt_len + emitted - 1       # prompt + emitted except the last
        assert r.draft_cache.after == min(r.draft_cache.grown, r.target_cache.after)
        # the draft proposed γ tokens after catching up to the pending one (a round with γ = 0 skips it)
        assert r.draft_cache.grown == (r.start + r.gamma if r.gamma else r.draft_cache.before)
        assert len(r.emitted) == r.n_accepted + 1 and r.emitted[:r.n_accepted] == tuple(
            pr.token for pr in r.proposals[:r.n_accepted])
    assert emitted == len(spec.tokens)


@pytest.mark.parametrize("rule", [Greedy()] + SAMPLERS, ids=lambda r: str(r.describe()))
def test_cache_lengths_follow_the_invariant_after_every_round(rule):
    for prompt in PROMPTS[:3]:
        ids = TOK.encode(prompt)
        for gamma, n in ((1, 7), (4, 30), (6, 13)):
            spec = speculative_generate(TM, DM, ids, n, gamma, rule, seed=gamma)
            assert len(spec.tokens) == n
            _invariant_holds(spec, len(ids))
            # a round never proposes more than the tokens still missing minus one: nothing is thrown away
            missing = n
            for r in spec.rounds:
                assert r.gamma == min(gamma, missing - 1)
                missing -= len(r.emitted)


@pytest.mark.parametrize("cache_kind", [StaticCache, DynamicCache])
def test_rollback_leaves_exactly_the_cache_a_fresh_prefill_of_the_accepted_text_gives(cache_kind):
    ids = TOK.encode("Today the weather is so")
    new = lambda m: cache_kind(m.config.n_layer, 64) if cache_kind is StaticCache else cache_kind(m.config.n_layer)  # noqa: E731
    tc, dc = new(T), new(D)
    seq = list(ids)
    g = torch.Generator().manual_seed(3)
    with torch.inference_mode():
        T(torch.tensor([seq[:-1]]), tc, 0)
        D(torch.tensor([seq[:-1]]), dc, 0)
        rejected = 0
        for i in range(8):
            r = speculative_round(TM, DM, tc, dc, seq, 4, Sampler(1.2), g, i)
            seq += r.emitted
            rejected += r.rejected_at is not None
            assert tc.get_seq_length() == len(seq) - 1 and dc.get_seq_length() <= len(seq) - 1
            fresh = new(T)
            T(torch.tensor([seq[:-1]]), fresh, 0)
            for layer in range(T.config.n_layer):
                k, v = tc.layers[layer].kv()
                k0, v0 = fresh.layers[layer].kv()
                assert k.shape == k0.shape and float((k - k0).abs().max()) < 1e-4
                assert float((v - v0).abs().max()) < 1e-4
    assert rejected >= 2          # the rollback really removed rows


def _first_tokens(prompt: str, rule, n: int, gamma: int) -> list[int]:
    """The first emitted token of ``n`` speculative rounds, one seed each, from the same prefilled caches
    (cropped back after every round: the rollback again)."""
    ids = TOK.encode(prompt)
    tc, dc = StaticCache(T.config.n_layer, 32), StaticCache(D.config.n_layer, 32)
    out = []
    with torch.inference_mode():
        T(torch.tensor([ids[:-1]]), tc, 0)
        D(torch.tensor([ids[:-1]]), dc, 0)
        for seed in range(n):
            r = speculative_round(TM, DM, tc, dc, ids, gamma, rule, torch.Generator().manual_seed(seed))
            out.append(r.emitted[0])
            tc.crop(len(ids) - 1)
            dc.crop(len(ids) - 1)
    return out


def _chi_square_p_value(tokens: list[int], probs: torch.Tensor) -> float:
    """Pearson's chi-square goodness of fit of the observed tokens to ``probs``; tokens expected fewer
    than 5 times are pooled into one bin. The p-value is the chi-square survival function,
    Q(dof/2, stat/2) (torch.special.gammaincc)."""
    n = len(tokens)
    counts = torch.bincount(torch.tensor(tokens), minlength=probs.numel()).double()
    expected = probs.double() * n
    big = expected >= 5
    obs = torch.cat([counts[big], counts[~big].sum().reshape(1)])
    exp = torch.cat([expected[big], expected[~big].sum().reshape(1)])
    if exp[-1] < 5:                   # pool what is left into the smallest bin instead
        obs, exp = obs[:-1].clone(), exp[:-1].clone()
        obs[exp.argmin()] += counts[~big].sum()
        exp[exp.argmin()] += expected[~big].sum()
    stat = float(((obs - exp) ** 2 / exp).sum())
    dof = len(obs) - 1
    return float(torch.special.gammaincc(torch.tensor(dof / 2, dtype=torch.float64),
                                         torch.tensor(stat / 2, dtype=torch.float64)))


@pytest.mark.parametrize("rule, gamma", [(Sampler(1.0), 1), (Sampler(0.9, top_k=6, top_p=0.95), 2)],
                         ids=lambda x: str(x.describe()) if hasattr(x, "describe") else f"gamma={x}")
def test_sampled_first_token_is_distributed_as_the_target_alone_chi_square(rule, gamma):
    """800 seeds on the prompt where the draft disagrees most (Σ min(p, q) ≈ 0.3: most first proposals
    are rejected and replaced from the residual). H0: the first emitted token follows the target's own
    distribution p after the rule's filters; Pearson's chi-square test must not reject it at
    significance 0.01. The same counts tested against the draft's q must be rejected (p-value < 1e-6:
    the test has power)."""
    ids = TOK.encode(DISAGREE)
    with torch.inference_mode():
        p = rule_probs(rule, T(torch.tensor([ids]))[0, -1])
        q = rule_probs(rule, D(torch.tensor([ids]))[0, -1])
    assert float(torch.minimum(p, q).sum()) < 0.6              # draft and target really disagree here
    tokens = _first_tokens(DISAGREE, rule, 800, gamma)
    assert _chi_square_p_value(tokens, p) > 0.01
    assert _chi_square_p_value(tokens, q) < 1e-6
    assert set(tokens) <= set(torch.nonzero(p).flatten().tolist())   # never a token the target's filters removed


def test_every_round_applies_the_acceptance_rule_and_the_residual():
    for rule in SAMPLERS:
        spec = speculative_generate(TM, DM, TOK.encode(DISAGREE), 40, 5, rule, seed=11)
        for r in spec.rounds:
            assert torch.allclose(r.p.sum(-1), torch.ones(r.gamma + 1, dtype=torch.float64))
            for i, pr in enumerate(r.proposals):
                assert pr.q == float(r.q[i, pr.token]) > 0 and pr.p == float(r.p[i, pr.token])
                if i < r.n_accepted:
                    assert pr.accepted and pr.u < pr.p / pr.q
                elif i == r.n_accepted:
                    assert pr.accepted is False and pr.u >= pr.p / pr.q
                else:
                    assert pr.accepted is None and pr.u is None
            if r.bonus:
                assert r.residual is None and float(r.p[r.gamma, r.emitted[-1]]) > 0
            else:
                k = r.rejected_at
                res = (r.p[k] - r.q[k]).clamp(min=0)
                assert torch.allclose(r.residual, res / res.sum())
                assert float(r.residual[r.emitted[-1]]) > 0
            # the theorem, on this round's own distributions: accept-or-correct gives exactly p
            q0, p0 = r.q[0] if r.gamma else None, r.p[0]
            if q0 is not None:
                accept = torch.minimum(q0, p0)
                assert torch.allclose(accept + (1 - accept.sum()) * (p0 - q0).clamp(min=0) /
                                      max(float((p0 - q0).clamp(min=0).sum()), 1e-300), p0, atol=1e-12)
        assert 0 < spec.acceptance_rate < 1


def test_same_seed_same_run_and_greedy_draws_nothing():
    ids = TOK.encode("Today the weather is so")
    a = speculative_generate(TM, DM, ids, 30, 4, Sampler(1.1), seed=5)
    b = speculative_generate(TM, DM, ids, 30, 4, Sampler(1.1), seed=5)
    assert a.tokens == b.tokens and [r.emitted for r in a.rounds] == [r.emitted for r in b.rounds]
    assert len({tuple(speculative_generate(TM, DM, ids, 30, 4, Sampler(1.1), seed=s).tokens) for s in range(4)}) > 1
    g = speculative_generate(TM, DM, ids, 30, 4)
    assert all(pr.u is None for r in g.rounds for pr in r.proposals)
    assert all(pr.accepted == (pr.p == 1.0) for r in g.rounds for pr in r.proposals if pr.accepted is not None)


# ---- the records a page steps through ---------------------------------------------------------------

def test_round_records_carry_what_a_page_shows():
    ids = TOK.encode(DISAGREE)
    spec = speculative_generate(TM, DM, ids, 20, 4, Sampler(1.0), seed=2, keep_attention=True)
    V = T.config.vocab_size
    assert spec.prefill_len == len(ids) - 1
    assert spec.target_passes == 1 + len(spec.rounds) and spec.draft_passes == 1 + spec.proposed
    assert spec.tokens_per_target_pass == len(spec.tokens) / len(spec.rounds)
    draft_s, verify_s = spec.pass_seconds()
    assert 0 < draft_s and 0 < verify_s and draft_s + verify_s < spec.seconds
    for r in spec.rounds:
        g = r.gamma
        assert r.q.shape == (g, V) and r.p.shape == (g + 1, V) and r.draft_logits.shape == (g, V)
        assert r.target_logits.shape == (g + 1, V)
        assert r.attention.shape == (T.config.n_layer, T.config.n_head, g + 1, r.start + g + 1)
        assert torch.allclose(r.attention.sum(-1), torch.ones(()), atol=1e-5)
        for i in range(g + 1):           # query i sits at position start + i: it reads no later key
            assert float(r.attention[..., i, r.start + i + 1:].abs().sum()) == 0
        # the draft's cache grows one proposal at a time
        assert [pr.draft_cache_len for pr in r.proposals] == list(range(r.start + 1, r.start + g + 1))
        assert len(r.acceptance_probabilities()) == g
        rows = spec.cache_rows(r.index, "target")
        assert [x.status for x in rows].count("removed") == len(r.target_cache.removed) == g - r.n_accepted
        assert [x.position for x in rows] == list(range(r.start + g + 1))
        assert [x.token for x in rows[r.start:]] == [r.pending] + [pr.token for pr in r.proposals]
        drows = spec.cache_rows(r.index, "draft")
        assert [x.status for x in drows].count("removed") == max(0, g - 1 - r.n_accepted)   # d_γ never enters it
    rejected = [r for r in spec.rounds if r.rejected_at is not None]
    assert rejected and all(r.residual.shape == (V,) for r in rejected)
    # keeping the attention runs the same network: greedy tokens unchanged
    assert speculative_generate(TM, DM, ids, 12, 3, keep_attention=True).tokens == generate_cached(TM, ids, 12).tokens


def test_limits_are_enforced_by_the_engine():
    ids = TOK.encode("Today")
    with pytest.raises(LimitError, match="Gamma"):
        speculative_generate(TM, DM, ids, 5, 0)
    with pytest.raises(LimitError, match="Gamma"):
        speculative_generate(TM, DM, ids, 5, SPECULATIVE_MAX_GAMMA + 1)
    with pytest.raises(LimitError, match="New tokens"):
        speculative_generate(TM, DM, ids, SPECULATIVE_MAX_NEW_TOKENS + 1, 2)
    with pytest.raises(LimitError, match="New tokens"):
        speculative_generate(TM, DM, ids, SPECULATIVE_MAX_ATTENTION_TOKENS + 1, 2, keep_attention=True)
    with pytest.raises(LimitError, match="Prompt length"):
        speculative_generate(TM, DM, ids * 65, 5, 2)
    short = random_gpt(draft_config(T.config.vocab_size, block_size=32))     # a draft that knows 32 positions
    speculative_generate(TM, GPTModel(short), ids * 5, 28, 2)              # 5 + 28 − 1 = 32 fit
    with pytest.raises(LimitError, match="32 positions"):
        speculative_generate(TM, GPTModel(short), ids * 5, 29, 2)
    with pytest.raises(LimitError, match="Seed"):
        speculative_generate(TM, DM, ids, 5, 2, Sampler(1.0), seed=-1)
    with pytest.raises(LimitError, match="empty"):
        speculative_generate(TM, DM, [], 5, 2)
    other = random_gpt(GPTConfig(vocab_size=90, n_layer=1, n_head=2, n_embd=32))
    with pytest.raises(LimitError, match="vocabulary"):
        speculative_generate(TM, GPTModel(other), ids, 5, 2)


# ---- the expected speed-up (kvviz.cost) -----------------------------------------------------------

def test_tokens_per_target_pass_is_the_papers_geometric_sum_and_its_limits():
    for a in (0.0, 0.3, 0.6, 0.8, 0.95):
        for g in range(0, 9):
            closed = (1 - a ** (g + 1)) / (1 - a)
            assert cost.speculative_tokens_per_pass(a, g) == pytest.approx(closed, rel=1e-12)
            assert cost.speculative_tokens_per_pass(a, g) == pytest.approx(sum(a ** k for k in range(g + 1)))
    assert cost.speculative_tokens_per_pass(0.0, 7) == 1.0            # nothing accepted: the target's own token
    assert cost.speculative_tokens_per_pass(1.0, 7) == 8.0            # everything accepted: γ + 1
    assert cost.speculative_tokens_per_pass(0.5, 1000) == pytest.approx(2.0)   # γ → ∞: 1 / (1 − α)
    assert cost.speculative_tokens_per_pass(0.8, 5) == pytest.approx(3.68928)
    # a simulation of the rounds (independent acceptances, α = 0.7, γ = 4) agrees with Eq. 1
    g = torch.Generator().manual_seed(0)
    acc = torch.rand(40_000, 4, generator=g) < 0.7
    per_round = acc.int().cumprod(dim=1).sum(dim=1) + 1
    assert float(per_round.double().mean()) == pytest.approx(cost.speculative_tokens_per_pass(0.7, 4), rel=0.01)


def test_expected_speedup_is_theorem_3_8_with_its_corollary_and_limits():
    a, c = 0.8, 0.05
    assert cost.speculative_speedup(a, 5, c) == pytest.approx((1 - a ** 6) / ((1 - a) * (5 * c + 1)))
    assert cost.speculative_speedup(a, 5, 0.0) == cost.speculative_tokens_per_pass(a, 5)   # a free draft
    for a in (0.2, 0.5, 0.9):
        for c in (0.0, 0.1, 0.4):
            # Corollary 3.9: γ = 1 gives (1 + α) / (1 + c); speculation pays for some γ exactly when α > c
            assert cost.speculative_speedup(a, 1, c) == pytest.approx((1 + a) / (1 + c))
            assert (max(cost.speculative_speedup(a, g, c) for g in range(1, 30)) > 1) == (a > c)
    assert cost.speculative_speedup(0.0, 3, 0.2) == pytest.approx(1 / 1.6)      # nothing accepted: pure loss
    # the verification pass's own cost v divides the round's time
    assert cost.speculative_speedup(0.8, 4, 0.1, verify_cost=2.0) == pytest.approx(
        cost.speculative_tokens_per_pass(0.8, 4) / (0.4 + 2.0))
    assert cost.best_gamma(0.8, 0.05) == 8 and cost.best_gamma(0.6, 0.1) == 3 and cost.best_gamma(0.95, 0.0, 12) == 12
    for bad in ((1.2, 3, 0.1), (-0.1, 3, 0.1), (0.5, -1, 0.1), (0.5, 3, -1), (float("nan"), 3, 0.1), (0.5, 2.5, 0.1)):
        with pytest.raises(LimitError):
            cost.speculative_speedup(*bad)


# ---- the measurement (kvviz.speculative) ----------------------------------------------------------------

def test_measure_speedup_times_both_loops_and_puts_the_formula_beside_it():
    ids = TOK.encode("Today the weather is so")
    steps = []
    m = measure_speedup(TM, DM, ids, gammas=[2, 1], new_tokens=8, runs=1, progress=lambda f, s: steps.append(f))
    assert [p.gamma for p in m.points] == [1, 2] and steps[-1] == 1.0
    assert 0 < m.c < 1 and 0 < m.c_flops < 0.2 and m.target_ms > 0
    for p in m.points:
        assert p.speculative_s > 0 and p.plain_s > 0 and p.measured == p.plain_s / p.speculative_s
        assert p.expected == pytest.approx(cost.speculative_speedup(p.acceptance_rate, p.gamma, m.c))
        assert p.expected_with_verify == pytest.approx(
            cost.speculative_speedup(p.acceptance_rate, p.gamma, m.c, p.verify_ms / m.target_ms))
        assert 1 <= p.tokens_per_target_pass <= p.gamma + 1
        assert p.rounds >= 8 / (p.gamma + 1) and p.run_draft_ms > 0 and p.run_verify_ms > 0 and p.run_other_ms > 0
    cpu = measure_speedup(TM, DM, ids, gammas=[1], new_tokens=4, runs=1, clock="cpu")
    assert cpu.clock == "cpu" and cpu.points[0].plain_s > 0
    for kw in (dict(gammas=[9]), dict(gammas=[]), dict(new_tokens=65), dict(new_tokens=1), dict(runs=11),
               dict(clock="sundial")):
        with pytest.raises(LimitError):
            measure_speedup(TM, DM, ids, **kw)


# ---- the command line --------------------------------------------------------------------------------

def test_speculate_prints_the_documented_json(capsys):
    code, out, err = cli(capsys, "speculate", "--prompt", "Today the weather is so", "--new-tokens", "24",
                         "--gamma", "4")
    assert code == 0, err
    d = json.loads(out)
    assert list(d) == ["tokens", "rounds", "acceptance_rate", "target_passes", "draft_passes"]
    plain = generate_cached(TM, TOK.encode("Today the weather is so"), 24).tokens
    assert d["tokens"] == [TOK.vocab[i] for i in plain]
    assert all(list(r) == ["draft", "accepted", "emitted", "target_cache_len", "draft_cache_len"] for r in d["rounds"])
    assert sum(len(r["emitted"]) for r in d["rounds"]) == 24
    assert d["rounds"][-1]["target_cache_len"] == 5 + 24 - 1
    assert d["target_passes"] == 1 + len(d["rounds"])


def test_speculate_samples_with_a_seed_and_refuses_bad_arguments_in_one_line(capsys):
    args = ["speculate", "--prompt", "Today the weather is so", "--new-tokens", "12", "--gamma", "3",
            "--temperature", "0.9", "--top-k", "8", "--seed", "4"]
    assert cli_main(args) == 0
    out = json.loads(capsys.readouterr().out)
    spec = speculative_generate(TM, DM, TOK.encode("Today the weather is so"), 12, 3, Sampler(0.9, top_k=8), seed=4)
    assert out == speculation_dict(spec, TOK.vocab)
    for bad in (["--gamma", "0"], ["--gamma", "9"], ["--new-tokens", "0"], ["--new-tokens", "500"],
                ["--prompt", "Today the weather is hello"], ["--prompt", "  "], ["--top-p", "1.5"],
                ["--temperature", "-1"], ["--seed", "-3"], ["--gamma", "x"]):
        argv = ["speculate", "--prompt", "Today the weather is so"] + bad
        with pytest.raises(SystemExit) as e:
            cli_main(argv)
        assert e.value.code == 2, bad
        err = capsys.readouterr()
        assert err.out == "" and len(err.err.strip().splitlines()) == 1, (bad, err.err)


def test_the_pages_json_adds_every_proposals_numbers_to_the_commands():
    spec = speculative_generate(TM, DM, TOK.encode(DISAGREE), 10, 3, Sampler(1.0), seed=5)
    d = speculation_dict(spec, TOK.vocab, detail=True)
    plain = speculation_dict(spec, TOK.vocab)
    assert {k: d[k] for k in plain} == {k: v for k, v in plain.items() if k != "rounds"} | {"rounds": d["rounds"]}
    assert d["prompt"] == DISAGREE.split() and d["gamma"] == 3 and d["seed"] == 5 and d["rule"]["name"] == "sample"
    for r, row in zip(spec.rounds, d["rounds"]):
        assert {k: row[k] for k in plain["rounds"][0]} == plain["rounds"][r.index]
        assert [p["accepted"] for p in row["proposals"]] == [pr.accepted for pr in r.proposals]
        assert [(p["q"], p["p"], p["u"]) for p in row["proposals"]] == [(pr.q, pr.p, pr.u) for pr in r.proposals]
        assert row["target_removed"] == list(r.target_cache.removed) and row["start"] == r.start
    json.dumps(d)                                    # plain JSON
