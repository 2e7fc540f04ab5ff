"""The A/B/C page in AppTest: the stepper's frames (heading, sentences, figure data, cache rows from
the engine), the URL step, a bad prompt's message, no exception. Pressing keys needs a browser
(tests/browser)."""
import pytest

from kvviz.ui.app.pages import script
from tests.conftest import frame, frame_table, frame_text, no_exception, open_page, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("abc")


def test_home_links_every_page():
    at = open_page()
    no_exception(at)
    assert "A/B/C" in " ".join(str(p.proto.label) for p in at.get("page_link"))


def test_the_stepper_carries_every_event():
    at = open_page(PAGE)
    no_exception(at)
    data = stepper(at)
    assert data["start"] == 0 and len(data["payload"]["frames"]) == 12
    assert [frame(at, i)["heading"] for i in range(3)] == [
        "Event 0 of 11: prefill", "Event 1 of 11: choose", "Event 2 of 11: decode"]
    assert "chosen but not processed" in frame_text(frame(at, 1))
    assert [c[1] for c in frame(at, 1)["top"][0]["strip"]["chips"]] == ["A", "B", "A"]
    assert [c[2] for c in frame(at, 1)["top"][0]["strip"]["chips"]] == ["prompt", "prompt", "pending"]
    # choose events show the pass before them: the same figure, sent once
    assert frame(at, 1)["main"][0]["fig"] == frame(at, 0)["main"][0]["fig"]
    assert len(frame_table(at, 1)) == 2 and len(frame_table(at, 2)) == 3      # chosen is not processed
    assert frame(at, 2)["table"]["new"] == [2]
    items = {m[0]: m[1] for m in frame(at, 2)["metrics"]["items"]}
    assert items == {"Cache length": "3", "K/V computed (with cache)": "3", "K/V computed (no cache)": "5"}
    assert frame(at, 2)["metrics"]["badge"][0] == "ok"


def test_url_step_opens_that_event_with_heatmap_and_cache_table():
    at = open_page(PAGE, {"step": "2"})
    no_exception(at)
    f = frame(at)
    assert f["heading"].startswith("Event 2 of 11: decode")
    heat = next(s for s in f["figs"] if s["data"][0]["type"] == "heatmap")
    assert [round(w, 3) for w in heat["data"][0]["z"][0]] == [0.401, 0.198, 0.401]
    table = frame_table(at)
    assert list(table["token"]) == ["A", "B", "A"] and list(table["phase"]) == ["prefill", "prefill", "decode"]
    bars = next(s for s in f["figs"] if s["data"][0]["type"] == "bar")
    assert [round(y, 3) for y in bars["data"][0]["y"]] == [0.198, 0.802, -1.0]


def test_out_of_range_url_step_falls_back_with_a_notice():
    at = open_page(PAGE, {"step": "999"})
    no_exception(at)
    assert frame(at)["heading"].startswith("Event 0")
    assert any("999" in w.value for w in at.warning)


def test_bad_prompt_gets_a_message_and_the_page_keeps_working():
    at = open_page(PAGE)
    for bad in ("A D", "", "   ", "A " * 500):
        at.text_input[0].set_value(bad).run()
        no_exception(at)
        assert at.error, bad
        assert stepper(at) is None
    at.text_input[0].set_value("C A B").run()
    assert not at.error and frame(at)["heading"].startswith("Event 0")
    bars = next(s for s in frame(at)["figs"] if s["data"][0]["type"] == "bar")
    assert bars["data"][0]["x"] == ["A", "B", "C"]
