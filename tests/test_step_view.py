"""The stepper's pure parts: frame builders (engine records in, dicts out), the payload's pooling and
markdown, and the Python side of the component (the step from the address, the debounced report).
What the browser does with a payload is tested in tests/browser/test_stepper.py."""
import json

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.decoding.sampling import Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.decoding.trace import cache_table
from kvviz.models.abc import ABCModel
from kvviz.models.weather import DEFAULT_VALUES, WeatherModel
from kvviz.ui.app.pages import script
from kvviz.ui.frames import Payload, md, translator
from kvviz.ui.frames import abc as frames_abc
from kvviz.ui.frames import weather as frames_weather
from tests.conftest import frame_of, frame_table, frame_text

EN = translator("en")


def test_md_escapes_first_then_formats():
    assert md("**A** <b>x</b> & `q<k>`") == "<strong>A</strong> &lt;b&gt;x&lt;/b&gt; &amp; <code>q&lt;k&gt;</code>"
    assert md("*so* it is") == "<em>so</em> it is"
    assert md("2 * 3 * 4") == "2 * 3 * 4"                                  # not emphasis
    assert md("Title\n\n- one\n- **two**") == "<p>Title</p><ul><li>one</li><li><strong>two</strong></li></ul>"
    assert md("a  \nb") == "<p>a<br>b</p>"


def test_abc_frames_come_from_the_run():
    run = run_generation(ABCModel(), ["A", "B"], 3)
    p = frames_abc.build(run, EN).to_dict()
    assert len(p["frames"]) == len(run.events) == 6
    for ev in run.events:
        f = frame_of(p, ev.index)
        assert f["heading"] == f"Event {ev.index} of 5: {ev.phase}"
        assert [c[1] for c in f["top"][0]["strip"]["chips"]] == ev.sequence
        table = frame_table(p, ev.index)
        expected = cache_table(ev.cache)
        assert table.values.tolist() == expected.astype(str).values.tolist()
        src = ev if ev.record is not None else run.events[ev.index - 1]
        heat = f["figs"][0]["data"][0]
        assert heat["z"][-1] == [round(x, 4) for x in src.record.attention[0, 0, -1].tolist()]
        bars = f["figs"][1]["data"][0]
        assert bars["y"] == [round(x, 4) for x in ev.logits.tolist()]
        assert str(ev.kv_recompute) in [m[1] for m in f["metrics"]["items"]]
    # a choose event shows the pass before it: the same figure and the same rows, stored once
    assert p["frames"][1]["main"][0]["fig"] == p["frames"][0]["main"][0]["fig"]
    assert p["frames"][1]["table"]["ids"] == p["frames"][0]["table"]["ids"] and p["frames"][1]["table"]["new"] == []
    assert len(p["table"]["rows"]) == 4                    # positions 0..3, each row sent once
    assert p["frames"][2]["table"]["new"] == [2]
    assert json.loads(frames_abc.build(run, EN).to_json()) == json.loads(json.dumps(p))


def test_sampled_run_names_the_draw_and_greys_removed_tokens():
    run = run_generation(ABCModel(), ["A", "B"], 4, rule=Sampler(1.5, top_k=2), seed=3)
    p = frames_abc.build(run, EN).to_dict()
    f = frame_of(p, 1)
    c = run.events[1].choice
    assert f"Sampling drew {run.events[1].chosen} (p = {c.probs[c.index]:.3f})" in frame_text(f)
    colors = f["figs"][1]["data"][0]["marker"]["color"]
    assert colors.count("#BBBBBB") == 1                   # top-k 2 of 3: one token removed


def test_weather_repair_rewrites_a_row_and_flags_nothing():
    model = WeatherModel(dict(DEFAULT_VALUES))
    stale = run_generation(model, ["Today", "weather", "is", "so"], 2)
    fixed = run_generation(model, ["Today", "weather", "is", "so"], 2, repair=model.repair)
    ps = frames_weather.build(stale, dict(DEFAULT_VALUES), EN).to_dict()
    pf = frames_weather.build(fixed, dict(DEFAULT_VALUES), EN).to_dict()
    assert [ps["table"]["csv_cols"][c] for _, c in ps["frames"][2]["table"]["flagged"]] == ["k (H2)"]
    assert pf["frames"][2]["table"]["flagged"] == [] and pf["frames"][2]["table"]["rewritten"] == [3]
    # the rewritten row is another row version: frames before it keep the old one
    before, after = frame_table(pf, 1), frame_table(pf, 2)
    assert before["k (H2)"][3] == "(+1 × 64)" and after["k (H2)"][3] == "(-1 × 64)"
    k = pf["table"]["csv_cols"].index("k (H2)")            # shown with a typeset minus, the CSV's stays "-"
    assert pf["table"]["rows"][pf["frames"][2]["table"]["ids"][3]][k] == "(\u22121 × 64)"
    assert "differs by 1.0" in frame_text(frame_of(ps, 2)) and "differs" not in frame_text(frame_of(pf, 2))


def test_payload_pools_long_texts_and_identical_figures():
    import plotly.graph_objects as go
    pl = Payload(EN)
    fig = go.Figure(go.Bar(x=["a"], y=[1 / 3]))
    a, b = pl.fig(fig, "alt"), pl.fig(go.Figure(go.Bar(x=["a"], y=[1 / 3])), "alt")
    assert a["fig"] == b["fig"] == 0 and pl.figs[0]["data"][0]["y"] == [0.3333]
    assert "template" not in pl.figs[0]["layout"]
    long = "word " * 50
    pl.add("h", top=[{"html": long}], more=[{"html": long}])
    pl.add("h2", top=[{"html": long}])
    assert pl.texts == [long] and pl.frames[1]["top"][0]["html"] == 0


def test_every_word_the_component_shows_is_translated():
    from kvviz.ui.frames import words
    en, es, de = words(EN), words(translator("es")), words(translator("de"))
    assert set(en) == set(es) == set(de)
    assert en["play"] == "Play" and es["play"] != "Play" and de["play"] != "Play"


# ---- the Python side of the component (AppTest of a small script) ------------------------------------

def _app():
    import streamlit as st

    from kvviz.ui.app.runs import cached_run
    from kvviz.ui.components import step_view
    from kvviz.ui.frames import abc as fa
    from kvviz.ui.frames import translator

    run = cached_run("abc", ("A", "B"), 3)
    payload = fa.build(run, translator("en")).to_json()
    step_view.url_step_notice(len(run.events))
    if "report" in st.session_state:   # what the browser's setStateValue does: new state, then the callback
        st.session_state["kvs_t"] = {"step": st.session_state.pop("report")}
        step_view._reported("kvs_t", len(run.events))
    step_view.stepper(payload, len(run.events), key="kvs_t", run_id="run")
    st.write(f"python knows step {st.session_state['step']}")


def _data(at) -> dict:
    el = next(e for e in at.get("bidi_component") if e.proto.component_name == "kvviz_stepper")
    return json.loads(el.proto.json)


@pytest.mark.app
@pytest.mark.parametrize("raw, start, notice", [("3", 3, False), ("5", 5, False), ("6", 0, True), ("-1", 0, True),
                                                 ("x", 0, True), (None, 0, False)])
def test_the_address_decides_the_first_step(raw, start, notice):
    at = AppTest.from_function(_app)
    if raw is not None:
        at.query_params["step"] = raw
    at.run()
    assert not at.exception
    assert _data(at)["start"] == start and at.session_state["step"] == start
    assert bool(at.warning) == notice


@pytest.mark.app
def test_a_step_report_reaches_python_and_the_address_without_a_redraw():
    at = AppTest.from_function(_app)
    at.query_params["step"] = "1"
    at.run()
    first = _data(at)
    at.session_state["report"] = 4
    at.run()
    assert not at.exception
    assert at.session_state["step"] == 4 and at.query_params["step"] == "4"
    assert _data(at) == first          # the same data as before: the browser redraws nothing
    at.session_state["report"] = 0
    at.run()
    assert at.session_state["step"] == 0 and "step" not in at.query_params
    at.run()                           # a rerun for another reason opens where Python now is
    assert _data(at)["start"] == 0


def test_every_figure_a_payload_sends_is_valid_plotly():
    """The frames send the builders' plain ``*_spec`` dicts (no validated go.Figure, ten times
    cheaper): plotly validates each of them here."""
    import plotly.graph_objects as go

    from kvviz.models.gpt import GPTModel
    from kvviz.ui.frames import gpt as frames_gpt
    model = GPTModel()
    runs = [frames_abc.build(run_generation(ABCModel(), ["C", "A", "B"], 3, rule=Sampler(1.2), seed=1), EN),
            frames_weather.build(run_generation(WeatherModel(dict(DEFAULT_VALUES)), ["Today", "weather", "is", "so"],
                                                2), dict(DEFAULT_VALUES), EN),
            frames_gpt.build(run_generation(model, model.tokenize("It was"), 2), model, 1, 2, EN)]
    for pl in runs:
        for spec in pl.figs:
            go.Figure(spec)           # raises on any property plotly does not know


@pytest.mark.app
def test_a_browser_s_first_page_waits_below_its_stepper_and_a_button_shows_the_rest(monkeypatch):
    # AppTest sends no browser User-Agent and gets whole pages; as a browser, the first page with a
    # stepper stops below it (the stepper's first drawing then reruns it whole: browser test)
    from kvviz.ui.components import step_view
    from tests.conftest import no_exception, open_page
    monkeypatch.setattr(step_view, "_is_browser", lambda: True)
    at = open_page(script("paged"))
    no_exception(at)
    assert _data(at)["payload"] and at.button(key=step_view.REST_KEY).label.startswith("The rest of the page")
    assert [h.value for h in at.header] == []                 # no section below the stepper yet
    assert any(s.value.startswith("All ") for s in at.success)  # the run's check, just below it, is there
    at.button(key=step_view.REST_KEY).click().run()
    no_exception(at)
    assert "Memory: paging against contiguous reservation" in [h.value for h in at.header]
    assert not [b for b in at.button if b.key == step_view.REST_KEY]
    at.switch_page(script("gpt")).run()                # the rest of the session: whole pages
    assert not [b for b in at.button if b.key == step_view.REST_KEY] and at.header
