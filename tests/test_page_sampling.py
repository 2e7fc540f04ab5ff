"""The sampling page in AppTest: stages drawn from the engine, every logits source, bad input, the
three questions, draws; and the A/B/C page switched from greedy to sampling."""
import pytest
import torch

from kvviz.decoding.logit_sources import quiz_distribution
from kvviz.decoding.sampling import Sampler, draw_counts
from kvviz.decoding.stepper import run_generation
from kvviz.models.abc import ABCModel
from kvviz.ui.app.i18n import strings
from kvviz.ui.app.pages import script
from tests.conftest import frame, frame_text, no_exception, open_page, plotly_specs

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("sampling")
QUIZ = quiz_distribution()


def stage_charts(at) -> dict[str, dict]:
    """Stage name (from the chart title) → plotly spec."""
    out = {}
    for s in plotly_specs(at):
        title = s["layout"]["title"]["text"]
        if " · H = " in title:
            out[title.split(" · ")[1]] = s
    return out


def kept(spec) -> list[str]:
    bars = spec["data"][0]
    return [x for x, y in zip(bars["x"], bars["y"]) if y is not None]


def histogram(at) -> dict:
    return next(s for s in plotly_specs(at) if "draws with seed" in s["layout"]["title"]["text"])


def test_opens_on_the_quiz_with_four_stages_and_the_engines_entropy():
    at = open_page(PAGE)
    no_exception(at)
    charts = stage_charts(at)
    assert list(charts) == ["Input", "Temperature", "Top-k", "Top-p"]
    assert charts["Input"]["data"][0]["x"] == QUIZ.tokens                      # most likely first
    assert [round(y, 3) for y in charts["Input"]["data"][0]["y"]] == [0.6, 0.25, 0.1] + [0.01] * 5
    want = Sampler(1.0, None, 1.0).stages(QUIZ.logits)
    assert [m.value for m in at.metric] == [f"{s.entropy_bits:.3f} bits" for s in want]
    assert "H = 1.607 bits" in charts["Input"]["layout"]["title"]["text"]


def test_top_p_08_on_the_quiz_keeps_a_and_b_on_the_chart():
    at = open_page(PAGE)
    at.slider(key="sampling_top_p").set_value(0.8).run()
    no_exception(at)
    top_p = stage_charts(at)["Top-p"]
    assert kept(top_p) == ["A", "B"]
    removed = [x for x, y in zip(top_p["data"][1]["x"], top_p["data"][1]["y"]) if y is not None]
    assert removed == ["C", "D", "E", "F", "G", "H"]
    assert [round(y, 2) for y in top_p["data"][2]["y"][:3]] == [0.0, 0.6, 0.85]   # mass before A, B, C
    assert any("kept {A, B}" in c.value and "**C**" in c.value for c in at.caption)
    # the draws follow the renormalised distribution, with the engine's counts
    counts = draw_counts(Sampler(1.0, None, 0.8).stages(QUIZ.logits)[-1].probs, 1000, 0)
    assert histogram(at)["data"][0]["text"][:3] == [f"{c:,}" for c in counts[:3]]
    assert counts[2:] == [0] * 6


def test_temperature_and_top_k_move_the_mass():
    at = open_page(PAGE)
    at.slider(key="sampling_tau").set_value(0.5).run()
    at.number_input(key="sampling_top_k").set_value(2).run()
    no_exception(at)
    charts = stage_charts(at)
    want = Sampler(0.5, 2, 1.0).stages(QUIZ.logits)
    assert [round(y, 4) for y in charts["Temperature"]["data"][0]["y"]] == [round(p, 4) for p in want[1].probs]
    assert kept(charts["Top-k"]) == ["A", "B"]
    assert charts["Top-k"]["data"][0]["y"][0] == pytest.approx(want[2].probs[0])
    assert any("k = 2: removed C, D, E, F, G, and H" in c.value for c in at.caption)


def test_greedy_mode_shows_one_kept_token_and_draws_it_every_time():
    at = open_page(PAGE, {"sampling_rule": "greedy"})
    no_exception(at)
    charts = stage_charts(at)
    assert list(charts) == ["Input", "Greedy"] and kept(charts["Greedy"]) == ["A"]
    assert histogram(at)["data"][0]["text"][0] == "1,000"
    assert any("Greedy: **A** every time" in m.value for m in at.markdown)


def test_same_seed_same_draw_and_new_seed_changes_it():
    at = open_page(PAGE)
    first = histogram(at)["data"][0]["text"]
    at.run()
    assert histogram(at)["data"][0]["text"] == first
    next(b for b in at.button if b.label == "New seed").click().run()
    assert at.number_input(key="sampling_seed").value == 1
    assert histogram(at)["data"][0]["text"] != first
    assert any("One draw with seed 1:" in m.value for m in at.markdown)


@pytest.mark.parametrize("text, needle", [
    ("A 1, B nan", "NaN"), ("A 1, B inf", "+inf"), ("A 1, B x", "is not a number"), ("", "at least one token"),
    (", ".join(f"T{i} 1" for i in range(60)), "more than the 50"), ("A 1, A 2", "appears twice"),
    ("A -inf, B -inf", "no token is left"), ("A 1 2", "token value"), ("A 1e9", "too large"),
])
def test_typed_logits_bad_input_gets_a_message(text, needle):
    at = open_page(PAGE, {"sampling_source": "typed"})
    at.text_area(key="sampling_typed_logits").set_value(text).run()
    no_exception(at)
    assert any(needle in e.value for e in at.error), [e.value for e in at.error]
    assert not stage_charts(at)


def test_typed_logits_and_probabilities_are_drawn():
    at = open_page(PAGE, {"sampling_source": "typed"})
    at.text_area(key="sampling_typed_logits").set_value("x 0, y 1, z -inf").run()
    no_exception(at)
    inp = stage_charts(at)["Input"]
    assert inp["data"][0]["x"] == ["y", "x", "z"] and kept(inp) == ["y", "x"]
    assert inp["data"][0]["y"][0] == pytest.approx(float(torch.sigmoid(torch.tensor(1.0))))
    at.radio(key="sampling_kind").set_value("probs").run()
    at.text_area(key="sampling_typed_probs").set_value("p 2, q 6").run()
    no_exception(at)
    assert any("add up to 8" in i.value for i in at.info)
    assert [round(y, 3) for y in stage_charts(at)["Input"]["data"][0]["y"]] == [0.75, 0.25]


def test_model_source_uses_the_abc_step_and_refuses_a_bad_prompt():
    at = open_page(PAGE, {"sampling_source": "model"})
    at.text_input(key="sampling_prompt").set_value("C A B").run()
    at.number_input(key="sampling_after").set_value(1).run()
    no_exception(at)
    run = run_generation(ABCModel(), ["C", "A", "B"], 2)
    ev = [e for e in run.events if e.phase == "choose"][1]
    probs = torch.softmax(ev.logits, 0).tolist()
    inp = stage_charts(at)["Input"]
    assert sorted(inp["data"][0]["y"], reverse=True) == pytest.approx(sorted(probs, reverse=True))
    assert any(f"Text so far: **{' '.join(ev.sequence[:-1])}**" in c.value for c in at.caption)
    at.text_input(key="sampling_prompt").set_value("A Z").run()
    no_exception(at)
    assert any("Unknown token" in e.value for e in at.error)


def test_questions_reveal_only_after_an_answer_and_top_p_is_checked_by_the_engine():
    at = open_page(PAGE)
    assert sum("Pick an answer" in c.value for c in at.caption) == 3
    q2 = at.radio(key="sampling_q2")
    assert q2.value is None
    q2.set_value(("A", "B", "C")).run()
    assert any("{A, B}" in e.value for e in at.error)                       # wrong: the engine's set is named
    q2 = at.radio(key="sampling_q2").set_value(("A", "B")).run()
    assert any(s.value == "Right." for s in at.success)
    assert any("keeps **{A, B}**" in m.value and "0.85" in m.value for m in at.markdown)
    next(b for b in at.button if b.label == "Show this on the charts above").click().run()
    no_exception(at)
    assert at.slider(key="sampling_top_p").value == 0.8
    assert kept(stage_charts(at)["Top-p"]) == ["A", "B"]
    at.radio(key="sampling_q1").set_value("same").run()
    assert any("**A B A B A B A B** and **A B A B A B A B** (identical: yes)" in m.value for m in at.markdown)
    at.radio(key="sampling_q3").set_value("no_kv").run()
    assert any("right answer" in e.value for e in at.error)


@pytest.mark.parametrize("lang, title", [("es", "Muestreo"), ("de", "Sampling")])
def test_page_renders_in_other_languages(lang, title):
    at = open_page(PAGE, {"lang": lang, "sampling_top_p": "0.8"})
    no_exception(at)
    assert at.title[0].value.startswith(title)
    assert len(stage_charts_any(at)) == 4
    # the sliders write their value as the language does (Streamlit's own slider numbers use a point)
    assert [w.label for w in at.slider] == [f"{strings(lang)['rule.temperature']}: **1,00**", "Top-p: **0,80**"]
    if lang == "es":
        at.slider(key="sampling_tau").set_value(0.7).run()
        assert at.slider(key="sampling_tau").label == "Temperatura τ: **0,70**"


def stage_charts_any(at):
    return [s for s in plotly_specs(at) if " · H = " in s["layout"]["title"]["text"]]


# ---------------------------------------------------------------- the A/B/C page with a sampling rule

def test_abc_page_switches_to_sampling_and_says_so():
    at = open_page(script("abc"), {"step": "1"})
    assert "Greedy chose A," in frame_text(frame(at))
    at.button_group(key="abc_rule").set_value("sample").run()
    at.slider(key="abc_tau").set_value(2.0).run()
    at.number_input(key="abc_seed").set_value(4).run()
    no_exception(at)
    run = run_generation(ABCModel(), ["A", "B"], 6, rule=Sampler(2.0, None, 1.0), seed=4)
    ev = run.events[1]
    p = ev.choice.probs[ev.choice.index]
    f = frame(at)                                  # the stepper still opens at event 1
    assert f"Sampling drew {ev.chosen} (p = {p:.3f}) from the kept set {{A, B, C}}" in frame_text(f)
    assert "The draw used these probabilities" in frame_text(f)
    # the last event: the text is the engine's seeded run
    assert f"The text is now {' '.join(run.events[-1].sequence)}" in frame_text(frame(at, len(run.events) - 1))


def test_the_long_tail_on_smollm2_sure_and_open(smollm2):
    """The engine's numbers for SmolLM2's two default contexts; k from the address; chart and CSV."""
    from kvviz.decoding.tail import next_token_logits, tail_draws, tail_of
    from kvviz.ui.app import fmt
    from kvviz.ui.pages.sampling_tail import CONTEXTS

    at = open_page(PAGE, {"sampling_tail_k": "20"})
    no_exception(at)
    assert any(h.value == "The long tail, on a real model" for h in at.header)
    text = " ".join(m.value for m in at.markdown)
    tails = []
    for context in CONTEXTS.values():
        tail = tail_of(next_token_logits(smollm2, smollm2.prompt(context, False)), 20, 0.9)
        assert f"Top-k = 20 keeps 20 tokens and cuts **{fmt.percent(tail.mass_beyond_k, 1)}**" in text
        assert f"Top-p = 0.9 keeps {tail.top_p_size:,} tokens" in text
        tails.append(tail)
    notice = next(i.value for i in at.info if "top-p = 0.9 keeps" in i.value)        # the section's point
    assert (f"keeps {tails[0].top_p_size:,} tokens where the model is sure and {tails[1].top_p_size:,} tokens"
            in notice and f"top-k = 20 keeps {tails[0].top_k_size} and {tails[1].top_k_size}" in notice)
    for tail in tails:
        d = tail_draws(tail, 1000, 0)
        assert f"{d.outside_p:,} land in that tail" in text or f"{d.outside_p:,} lands in that tail" in text
    assert any(s["layout"]["title"]["text"].startswith("The most likely tokens") for s in plotly_specs(at))
    assert any(b.label.startswith("Both distributions") for b in at.get("download_button"))
