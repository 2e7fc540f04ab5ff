"""docs/design.md §2: every number of "Today weather is so" against the engine, the stale head-2 key,
the lesson's repair, and edited values."""
import json

import pytest
import torch

from kvviz.decoding.staleness import comparison_table, diagnose
from kvviz.decoding.stepper import run_generation
from kvviz.decoding.trace import cache_table, run_dict
from kvviz.limits import LimitError
from kvviz.models.base import UnknownTokenError
from kvviz.models.weather import D_K, DEFAULT_VALUES, SEED_PROMPT, VOCAB, WeatherModel, check_values
from kvviz.models.weather_notes import (
    LESSON_CACHED,
    LESSON_UNCACHED,
    lesson_account,
    plus_one_positions,
    prose_vs_tensor,
    reads,
)
from kvviz.viz.attention import attention_heads_figure, causal_mask_figure

M = WeatherModel()


def r4(t):
    return [[round(x, 4) for x in row] for row in t.tolist()]


def seed_run(new_tokens=2, model=M, **kw):
    return run_generation(model, SEED_PROMPT, new_tokens, **kw)


def test_prefill_contexts_table_to_4_decimals():
    pre = seed_run(1).events[0]
    assert pre.phase == "prefill" and pre.positions == [0, 1, 2, 3]
    contexts = pre.record.output.T                                  # [heads, positions]
    assert r4(contexts) == [[10, 20, 20, 12.5], [10, 15, 10.3333, 5], [10, 10, 10, 10], [10, 15, 10.3333, 9]]


def test_shared_query_pm1_keys_and_scores_of_pm8():
    rec = seed_run(1).events[0].record
    assert rec.q.shape == (1, 4, 4, D_K) and D_K == 64 and torch.all(rec.q == 1)
    assert set(rec.k.unique().tolist()) == {-1.0, 1.0} and rec.k.shape == (1, 4, 4, 64)
    scores = rec.q[0] @ rec.k[0].transpose(-2, -1) / D_K ** 0.5     # [H, N, N]
    assert set(scores.unique().tolist()) == {-8.0, 8.0}
    # key signs per head at positions 1..4: even / last of the prompt / first / all
    assert rec.k[0, :, :, 0].tolist() == [[-1, 1, -1, 1], [-1, -1, -1, 1], [1, -1, -1, -1], [1, 1, 1, 1]]
    assert rec.v.flatten().tolist() == [10, 20, 1, 5]
    assert torch.all(rec.attention[0].triu(1) == 0)                 # the causal mask


def test_logits_of_the_last_prompt_position_and_the_choice():
    run = seed_run(1)
    pre, choose = run.events
    assert [round(x, 4) for x in pre.record.output[-1].tolist()] == [12.5, 5, 10, 9]
    assert [round(x, 3) for x in pre.logits.tolist()] == [15.300, 14.200, 8.150]
    assert choose.chosen == "nice" and choose.pending == "nice" and choose.cache_len == 4


def test_decode_of_nice_cached_vs_recomputed():
    dec = seed_run(2).events[2]
    assert dec.phase == "decode" and dec.tokens == ["nice"] and dec.positions == [4]
    assert dec.record.v.flatten().tolist() == [7.0]                 # value of nice
    assert dec.record.attention.shape == (1, 4, 1, 5)               # one row per head over the cache
    assert [round(x, 4) for x in dec.record.output[0].tolist()] == [12.5, 6.0, 10, 8.6]   # append-only
    assert [round(x, 4) for x in dec.check.output[0].tolist()] == [12.5, 7.0, 10, 8.6]    # recomputed
    assert round(dec.check.output_max_abs_diff, 4) == 1.0
    assert round(dec.check.max_abs_diff, 4) == 1.0                  # the stepper's check flags it
    per_head = (dec.record.output[0] - dec.check.output[0]).abs()
    assert per_head.argmax().item() == 1 and per_head[[0, 2, 3]].max() < 1e-6


def test_diagnosis_names_head_2_and_the_stale_key_of_position_4():
    run = seed_run(2)
    assert diagnose(M, run.events[0]).exact                         # the prefill is exact
    assert diagnose(M, run.events[1]) is None                       # choosing runs no pass
    diag = diagnose(M, run.events[2])
    assert [(d.component, round(d.cached, 4), round(d.recomputed, 4)) for d in diag.differing()] == [(1, 6.0, 7.0)]
    assert len(diag.stale) == 1
    row = diag.stale[0]
    assert (row.kind, row.head, row.position, row.token, row.computed_at) == ("key", 1, 3, "so", 0)
    assert row.cached.tolist() == [1.0] * 64 and row.recomputed.tolist() == [-1.0] * 64
    # the recomputed head-2 query reads only nice; the cached one splits between so and nice
    assert [(r.token, round(r.weight, 2)) for r in reads(diag.recomputed_attention[0, 1], run.events[2].sequence)] \
        == [("nice", 1.0)]
    assert [(r.token, round(r.weight, 2)) for r in reads(run.events[2].record.attention[0, 1, 0],
                                                          run.events[2].sequence)] == [("so", 0.5), ("nice", 0.5)]
    assert diag.explain() == [
        "head 2 (last token) differs by 1: cached pass 6, recomputed 7.",
        "The cached key of 0-based position 3 (so) in head 2, written in event 0, differs from the one a recompute "
        "gives now (max |Δ| 2): it depends on tokens after position 3, which an append-only cache never revisits."]
    table = comparison_table(diag)
    assert table["|Δ|"].round(4).tolist() == [0.0, 1.0, 0.0, 0.0]


def test_without_repair_the_staleness_accumulates():
    run = seed_run(3)
    diag = diagnose(M, run.events[4])                               # decode at position 6
    assert [(r.head, r.position) for r in diag.stale] == [(1, 3), (1, 4)]
    assert plus_one_positions(run.events[4].cache.keys[0][0])[1] == [3, 4, 5]


def test_the_seeds_repair_restores_agreement():
    run = seed_run(3, repair=M.repair)
    dec = run.events[2]
    assert dec.repaired and dec.check.max_abs_diff < 1e-9
    assert [round(x, 4) for x in dec.record.output[0].tolist()] == [12.5, 7.0, 10, 8.6]
    assert dec.cache.rows[3].rewritten_at == 2 and dec.cache.keys[0][0, 1, 3].tolist() == [-1.0] * 64
    assert run.events[0].cache.keys[0][0, 1, 3, 0] == 1.0           # earlier snapshots keep their history
    later = run.events[4]
    assert later.repaired and later.check.max_abs_diff < 1e-9 and later.cache.rows[4].rewritten_at == 4
    assert diagnose(M, later).exact
    assert json.loads(json.dumps(run_dict(run, M.logit_tokens)))["events"][2]["repaired"] is True


def test_the_lessons_printout_is_its_code_without_its_repair_line():
    """The lesson's cached decode code holds the repair line (K2[-1] = -1): run as written it gives the
    uncached 7.0; the 6.0 it prints is the append-only cache's, the code without that line."""
    plain, repaired = seed_run(2).events[2], seed_run(2, repair=M.repair).events[2]
    assert [round(x, 4) for x in plain.record.output[0].tolist()] == list(LESSON_CACHED)
    assert [round(x, 4) for x in repaired.record.output[0].tolist()] == list(LESSON_UNCACHED)
    diag = diagnose(M, plain)
    acc = lesson_account(plain.sequence[:5], M.values, [d.cached for d in diag.outputs],
                         [d.recomputed for d in diag.outputs])
    assert acc.head == 1 and acc.position == 3
    assert acc.printed == round(acc.without_line, 4) == 6.0
    assert acc.printed_uncached == round(acc.with_line, 4) == 7.0
    # another run is not the lesson's: nothing to compare with
    assert lesson_account(plain.sequence[:5], {**M.values, "so": 6.0}, [0] * 4, [0] * 4) is None
    assert lesson_account(["Today", "weather", "is", "nice"], M.values, [0] * 4, [0] * 4) is None


def test_counters_grow_as_n_with_the_cache_and_n_squared_without():
    passes = [e for e in seed_run(4).events if e.record is not None]
    assert [e.kv_computed for e in passes] == [4, 5, 6, 7]
    assert [e.kv_recompute for e in passes] == [4, 4 + 5, 4 + 5 + 6, 4 + 5 + 6 + 7]


def test_edited_values_change_the_contexts_and_logits():
    m = WeatherModel({"weather": 40, "nice": 9})
    run = seed_run(2, model=m)
    assert r4(run.events[0].record.output.T)[0] == [10, 40, 40, 22.5]   # head 1: (40 + 5) / 2 at position 4
    assert r4(run.events[0].record.output.T)[3][3] == 14.0               # head 4: (10 + 40 + 1 + 5) / 4
    assert round(run.events[0].logits[0].item(), 3) == round(0.8 * 22.5 + 0.5 * 5 + 0.1 * 10 + 0.2 * 14, 3)
    dec = run.events[2]
    assert round(dec.record.output[0, 1].item(), 4) == 7.0 and round(dec.check.output[0, 1].item(), 4) == 9.0
    assert M.values == DEFAULT_VALUES and DEFAULT_VALUES["weather"] == 20      # nothing shared was mutated


def test_default_values_and_vocabulary():
    assert DEFAULT_VALUES == {"Today": 10, "weather": 20, "is": 1, "so": 5, "nice": 7, "warm": 8, "delicious": 2}
    assert VOCAB == ["Today", "weather", "is", "so", "nice", "warm", "delicious"]
    assert M.logit_tokens == ["nice", "warm", "delicious"] and M.n_heads == 4


@pytest.mark.parametrize("bad, message", [("abc", "must be a number"), (float("nan"), "not a number"),
                                          (None, "empty"), (float("inf"), "finite"), (1e9, "between"),
                                          (-1e300, "between"), (True, "empty")])
def test_bad_values_are_refused_with_a_message(bad, message):
    with pytest.raises(LimitError, match=message):
        WeatherModel({"so": bad})


def test_value_table_checks():
    assert check_values({"so": "2.5"})["so"] == 2.5
    with pytest.raises(LimitError, match="No token 'sunny'"):
        check_values({"sunny": 3})


def test_prompt_words_any_case_and_unknown_words():
    assert M.tokenize("today WEATHER,Is so") == ["Today", "weather", "is", "so"]
    with pytest.raises(UnknownTokenError, match="'sunny'") as err:
        M.tokenize("today sunny weather Sunny")
    assert err.value.tokens == ["sunny", "Sunny"]
    with pytest.raises(ValueError, match="Unknown token"):
        run_generation(M, ["Today", "sunny"], 1)
    run = run_generation(M, ["so", "warm", "delicious"], 2)          # any vocabulary word may be in a prompt
    assert run.events[0].record.v.flatten().tolist() == [5, 8, 2]


def test_prose_vs_tensor_notes_give_the_true_numbers():
    pre = seed_run(1).events[0]
    notes = prose_vs_tensor(SEED_PROMPT, pre.record.output, M.values)
    assert [(n.head, n.position, n.prose_token, n.prose_value, round(n.tensor_value, 4)) for n in notes] == [
        (0, 0, None, None, 10.0), (1, 1, "weather", 20.0, 15.0), (1, 2, "is", 1.0, 10.3333)]


def test_cache_table_shows_keys_per_head_and_one_shared_value():
    dec = seed_run(2).events[2]
    df = cache_table(dec.cache, ["H1", "H2", "H3", "H4"], position_base=1)
    assert list(df.columns) == ["position", "token", "k (H1)", "k (H2)", "k (H3)", "k (H4)", "v", "event", "phase"]
    assert df["position"].tolist() == [1, 2, 3, 4, 5]
    assert df["k (H2)"].tolist() == ["(-1 × 64)", "(-1 × 64)", "(-1 × 64)", "(+1 × 64)", "(+1 × 64)"]
    assert df["v"].tolist() == ["(10)", "(20)", "(1)", "(5)", "(7)"]


def test_heads_figure_has_one_colour_scale_and_a_blank_future():
    pre = seed_run(1).events[0]
    labels = [f"{i + 1}:{w}" for i, w in enumerate(SEED_PROMPT)]
    fig = attention_heads_figure(pre.record.attention[0], labels, labels, ["a", "b", "c", "d"], "t")
    heat = [tr for tr in fig.data if tr.type == "heatmap"]
    assert len(heat) == 4 and {tr.coloraxis for tr in heat} == {"coloraxis"}
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)
    assert heat[0].z[0][1] is None and heat[0].z[3][1] == pytest.approx(0.5)   # masked / weather for so
    assert "weight %{z:.4g}" in heat[1].hovertemplate
    mask = causal_mask_figure(labels, "mask")
    assert [list(r) for r in mask.data[0].z] == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]]
    assert [list(r) for r in mask.data[0].text][0] == ["✓", "−∞", "−∞", "−∞"]


def test_values_round_trip_through_text():
    from kvviz.models.weather import DEFAULT_VALUES, values_from_text, values_to_text
    assert values_to_text(DEFAULT_VALUES) == ""
    edited = dict(DEFAULT_VALUES, so=4.0, nice=9.5)
    assert values_to_text(edited) == "so:4,nice:9.5"
    assert values_from_text("so:4,nice:9.5") == edited
    for bad in ("so", "so:x", "so:nan", "so:inf", "moon:3", "so:1e9"):
        with pytest.raises(LimitError):
            values_from_text(bad)
