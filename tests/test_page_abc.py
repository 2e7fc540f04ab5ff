"""The A/B/C page in AppTest: stepping, the URL step, a bad prompt's message, no exception."""
import pytest

from tests.conftest import no_exception, open_page, plotly_specs

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = "pages/1_ABC_miniature.py"


def heading(at) -> str:
    return at.subheader[0].value


def test_home_links_every_page():
    at = open_page()
    no_exception(at)
    assert "A/B/C" in " ".join(str(p.proto.label) for p in at.get("page_link"))


def test_next_and_prev_step_through_events():
    at = open_page(PAGE)
    no_exception(at)
    assert heading(at).startswith("Event 0 of 11: prefill")
    nxt = next(b for b in at.button if b.label == "Next")
    nxt.click().run()
    assert heading(at).startswith("Event 1 of 11: choose")
    assert any("chosen but not processed" in m.value for m in at.markdown)
    next(b for b in at.button if b.label == "Next").click().run()
    assert heading(at).startswith("Event 2 of 11: decode")
    next(b for b in at.button if b.label == "Prev").click().run()
    assert heading(at).startswith("Event 1")
    next(b for b in at.button if b.label == "Reset").click().run()
    assert heading(at).startswith("Event 0")
    no_exception(at)


def test_url_step_opens_that_event_with_heatmap_and_cache_table():
    at = open_page(PAGE, {"step": "2"})
    no_exception(at)
    assert heading(at).startswith("Event 2 of 11: decode")
    specs = plotly_specs(at)
    heat = next(s for s in specs if s["data"][0]["type"] == "heatmap")
    assert [round(w, 3) for w in heat["data"][0]["z"][0]] == [0.401, 0.198, 0.401]
    table = at.dataframe[0].value
    assert list(table["token"]) == ["A", "B", "A"] and list(table["phase"]) == ["prefill", "prefill", "decode"]


def test_out_of_range_url_step_falls_back_with_a_notice():
    at = open_page(PAGE, {"step": "999"})
    no_exception(at)
    assert heading(at).startswith("Event 0")
    assert any("999" in w.value for w in at.warning)


def test_bad_prompt_gets_a_message_and_the_page_keeps_working():
    at = open_page(PAGE)
    for bad in ("A D", "", "   ", "A " * 500):
        at.text_input[0].set_value(bad).run()
        no_exception(at)
        assert at.error, bad
    at.text_input[0].set_value("C A B").run()
    assert not at.error and heading(at).startswith("Event 0")
    bars = next(s for s in plotly_specs(at) if s["data"][0]["type"] == "bar")
    assert bars["data"][0]["x"] == ["A", "B", "C"]
