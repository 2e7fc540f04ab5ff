"""The speculative-decoding figure builders: a record in, a figure out, without a browser."""
import json

import pytest

from kvviz import cost
from kvviz.decoding.sampling import Sampler
from kvviz.models.gpt import GPTModel, load_draft_gpt, load_tiny_gpt
from kvviz.speculative import SpeedMeasurement, SpeedPoint
from kvviz.speculative.decoding import speculative_generate
from kvviz.viz.speculative import cache_figure, position_figure, proposals_figure, residual_figure, speedup_figure
from kvviz.viz.theme import COLORS

TINY, DRAFT = load_tiny_gpt(), load_draft_gpt()
VOCAB = TINY.tokenizer.vocab
SPEC = speculative_generate(GPTModel(TINY), GPTModel(DRAFT), TINY.tokenizer.encode("It is rainy in London , so we"),
                            24, 4,
                            Sampler(1.0), seed=2)
REJECTED = next(r for r in SPEC.rounds if r.rejected_at is not None and r.rejected_at < r.gamma - 1)
ALL_IN = next((r for r in SPEC.rounds if r.bonus and r.gamma), None)


def _spec(fig) -> dict:
    return json.loads(fig.to_json())


def test_proposals_figure_shows_q_p_acceptance_and_u_per_proposal():
    r = REJECTED
    d = _spec(proposals_figure(r, VOCAB, "Round"))
    q, p, acc, u, untested = d["data"]
    labels = [f"{i + 1} · {VOCAB[pr.token]}" for i, pr in enumerate(r.proposals)]
    assert q["x"] == p["x"] == acc["x"] == labels
    assert q["y"] == [pr.q for pr in r.proposals] and p["y"] == [pr.p for pr in r.proposals]
    assert q["marker"]["color"] == COLORS["pending"] and p["marker"]["color"] == COLORS["prompt"]
    k = r.rejected_at
    assert acc["y"][:k + 1] == pytest.approx([min(1, pr.p / pr.q) for pr in r.proposals[:k + 1]])
    # the proposals after the rejection were never tested: no bar (it would read as min(1, p/q) = their
    # chance), an empty marker labelled so
    assert acc["y"][k + 1:] == [None] * (r.gamma - k - 1)
    assert untested["x"] == labels[k + 1:] and all(y < 0.2 for y in untested["y"])
    assert untested["marker"]["symbol"] == "square-open" and all(t == "not<br>tested –" for t in untested["text"])
    assert acc["marker"]["color"][:k] == [COLORS["processed"]] * k
    assert acc["marker"]["color"][k] == COLORS["focus"] and acc["marker"]["color"][k + 1] == COLORS["removed"]
    assert u["y"] == [pr.u for pr in r.proposals[:k + 1]]          # only the tested proposals had a u
    assert all(uu >= a for uu, a in zip(u["y"][k:], acc["y"][k:k + 1]))   # the rejected u lies above its bar


def test_greedy_round_has_no_u_and_an_empty_round_says_so():
    g = speculative_generate(GPTModel(TINY), GPTModel(DRAFT), TINY.tokenizer.encode("Today the weather is so"), 10, 3)
    d = _spec(proposals_figure(g.rounds[0], VOCAB, "Greedy"))
    tested = [y for y in d["data"][2]["y"] if y is not None]
    assert not any(t["marker"].get("symbol") == "diamond" for t in d["data"]) and set(tested) <= {0.0, 1.0}
    last = g.rounds[-1] if g.rounds[-1].gamma == 0 else None
    if last is not None:
        assert "plain step" in _spec(proposals_figure(last, VOCAB, "x"))["layout"]["annotations"][0]["text"]


def test_residual_figure_shows_p_q_and_the_normalised_residual_at_the_rejection():
    r = REJECTED
    d = _spec(residual_figure(r, VOCAB, "Residual", top=8))
    q, p, res = d["data"]
    k = r.rejected_at
    tokens = [VOCAB.index(x) for x in p["x"]]
    assert r.proposals[k].token in tokens and r.emitted[-1] in tokens
    assert p["y"] == [float(r.p[k, t]) for t in tokens] and q["y"] == [float(r.q[k, t]) for t in tokens]
    assert res["y"] == [float(r.residual[t]) for t in tokens] and res["marker"]["color"] == COLORS["focus"]
    # its hatch drawn over its colour (plotly's default fill mode leaves the bar's own colour out)
    assert res["marker"]["pattern"]["fillmode"] == "overlay"
    assert all(abs(x - max(0.0, a - b) / float((r.p[k] - r.q[k]).clamp(min=0).sum())) < 1e-9
               for x, a, b in zip(res["y"], p["y"], q["y"]))
    notes = [a["text"] for a in d["layout"]["annotations"]]
    assert any("proposed" in t for t in notes) and any("drawn" in t for t in notes)
    if ALL_IN is not None:
        with pytest.raises(ValueError):
            residual_figure(ALL_IN, VOCAB, "x")
        bonus = _spec(position_figure(ALL_IN, ALL_IN.gamma, VOCAB, "Bonus"))
        assert len(bonus["data"]) == 1                 # only p at the bonus position
    with pytest.raises(ValueError):
        position_figure(r, r.gamma + 1, VOCAB, "x")


def test_cache_figure_strikes_out_the_rows_the_rollback_removes():
    r = REJECTED
    d = _spec(cache_figure(SPEC.cache_rows(r.index, "target"), SPEC.cache_rows(r.index, "draft"), VOCAB,
                           "Caches", window=10))
    heat = d["data"][0]
    assert heat["y"] == ["draft cache", "target cache"] and len(heat["x"]) == 10
    target_text = heat["text"][1]
    struck = [t for t in target_text if t.startswith("<s>")]
    assert len(struck) == r.gamma - r.n_accepted == len(r.target_cache.removed)
    assert heat["z"][1][-len(struck):] == [2] * len(struck)
    assert [t["name"] for t in d["data"][1:]] == ["cached before", "written, kept", "written, removed"]


def test_speedup_figure_puts_formula_and_measurement_side_by_side():
    pts = [SpeedPoint(48, 0.02, 0.03, 0.018, 0.028, gamma=g, acceptance_rate=0.8, tokens_per_target_pass=2.5,
                      verify_ms=0.5 + 0.1 * g, expected=cost.speculative_speedup(0.8, g, 0.3),
                      expected_with_verify=cost.speculative_speedup(0.8, g, 0.3, 1 + 0.2 * g))
           for g in (1, 2, 3)]
    m = SpeedMeasurement(pts, 48, 3, 1, 2.0, target_ms=0.5, draft_ms=0.15, context=30, c_flops=0.06,
                         rule={"name": "greedy"}, prompt_len=5)
    d = _spec(speedup_figure([1, 2, 3, 4], "Speed-up", alpha=0.8, c=0.3, measurement=m,
                             labels={"measured": "gemessen"}))
    names = [t["name"] for t in d["data"]]
    assert names == ["expected (α = 0.80, c = 0.30)", "expected, measured α and c",
                     "expected with the verification pass's measured cost", "gemessen"]
    assert d["data"][0]["y"] == pytest.approx([cost.speculative_speedup(0.8, g, 0.3) for g in (1, 2, 3, 4)])
    assert d["data"][3]["y"] == pytest.approx([1.5] * 3)
    assert d["data"][2]["y"] == pytest.approx([p.expected_with_verify for p in pts])
    only_formula = _spec(speedup_figure(range(1, 7), "x", alpha=0.5, c=0.1))
    assert len(only_formula["data"]) == 1 and only_formula["layout"]["shapes"][0]["y0"] == 1.0


@pytest.mark.parametrize("source", ["prompt-lookup", "early-exit"])
def test_a_self_drafted_run_on_the_tiny_gpt_is_one_stepper_event_per_round(source):
    """The page's one set of frames takes a run of any draft source: the model drafting for itself
    (SmolLM2 on the page; the tiny GPT here, where no weights need installing) is one event per
    round, its verification pass and its cache full width, nothing measured in any frame."""
    from kvviz.speculative import early_exit_generate, prompt_lookup_generate
    from kvviz.ui.frames import speculative as frames_speculative
    from kvviz.ui.frames import translator
    ids = TINY.tokenizer.encode("It is rainy in London , so it is rainy in")
    model = GPTModel(TINY)

    def run():
        if source == "early-exit":
            return early_exit_generate(model, ids, 8, exit_layer=1, draft_tokens=2)
        return prompt_lookup_generate(model, ids, 8, lookup_tokens=3, max_ngram=2)
    a = run()
    assert a.source == source
    pl = frames_speculative.build(a, VOCAB, 0, 0, translator("en"), n_layers=model.n_layers)
    frames = pl.to_dict()["frames"]
    assert frames_speculative.plan(a) == [frames_speculative.Step(r.index, "round") for r in a.rounds]
    assert [f["heading"] for f in frames] == [f"Round {i + 1} of {len(a.rounds)}" for i in range(len(a.rounds))]
    for f, r in zip(frames, a.rounds):
        assert not f["main"] and not f["side"] and f["table"] is None
        figs = [pl.figs[b["fig"]] for b in f["wide"] if "fig" in b and not b.get("p")]
        verify, cache, rounds = figs
        assert verify["data"][0]["x"][0] == str(r.start + len(r.fed))
        assert cache["layout"]["title"]["text"].endswith(f"{r.target_cache.after} after the rollback")
        assert {m[0]: m[1] for m in f["metrics"]["items"]}["Draft tokens"] == str(len(r.draft))
    # the frames say nothing measured: a second run's frames are the same, byte for byte
    assert frames_speculative.build(run(), VOCAB, 0, 0, translator("en"), n_layers=model.n_layers).to_json() \
        == pl.to_json()


def test_a_greedy_drafts_table_shows_the_probability_its_chart_draws_beside_q_one():
    """A greedy draft proposes its largest: q(x) = 1 (one-hot), while the chart beside the table draws
    the draft's softmax (0.998, say). The table shows both, so the numbers on screen agree."""
    from kvviz.ui.frames import speculative as frames
    from kvviz.ui.frames import translator
    from kvviz.viz.logits import top_probs_bar_spec

    target, draft = load_tiny_gpt(), load_draft_gpt()
    vocab = target.tokenizer.vocab
    spec = speculative_generate(GPTModel(target), GPTModel(draft), target.tokenizer.encode("It is rainy in London"),
                                6, 3, keep_attention=True)
    rd, tr = spec.rounds[0], translator("en")
    tbl = frames.proposals_table(spec, rd, len(rd.proposals) - 1, vocab, tr)["tbl"]
    assert tbl["cols"][-2:] == ["q(x)", "probability"]
    for k, (row, pr) in enumerate(zip(tbl["rows"], rd.proposals)):
        assert row[3] == "1.000"                                      # greedy's q is one-hot
        probs = frames.next_token_probs(rd.draft_logits[k])
        bars = top_probs_bar_spec(probs, vocab, pr.token, "")["data"][0]
        drawn = dict(zip(bars["y"], bars["text"]))[vocab[pr.token]]
        assert row[4] == drawn
