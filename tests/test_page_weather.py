"""The weather page in AppTest: the prefill tables and notes, stepping to the stale decode, the repair,
invalid values and prompts get a message, every language renders."""
import pytest

from kvviz.ui.i18n import LANGS, strings
from tests.conftest import no_exception, open_page, plotly_specs

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = "pages/2_Weather_heads.py"
EDITOR = "weather_values_0"


def heading(at) -> str:
    return at.subheader[0].value


def frame_with(at, column: str):
    """The first table on the page that has ``column`` (tables are found by content, not order)."""
    return next(d.value for d in at.dataframe if column in d.value.columns)


def comparison(at) -> dict[str, list[str]]:
    """The cached-vs-recomputed markdown table: head -> [cached, recomputed, |Δ|] cell texts."""
    table = next(m.value for m in at.markdown if m.value.startswith("| head | cached pass"))
    rows = [line.strip("| ").split(" | ") for line in table.splitlines()[2:]]
    return {r[0]: r[1:] for r in rows}


def click(at, label: str):
    next(b for b in at.button if b.label == label).click().run()


def edit_value(at, row: int, value, editor: str = EDITOR):
    """Seed a cell edit the way the browser sends it (AppTest cannot type into the grid)."""
    at.session_state[editor] = {"edited_rows": {row: {"value": value}}, "added_rows": [], "deleted_rows": []}
    at.run()


def test_prefill_then_step_to_the_stale_decode():
    at = open_page(PAGE)
    no_exception(at)
    assert heading(at).startswith("Event 0 of 5: prefill")
    contexts = frame_with(at, "4:so")
    assert contexts.round(4).values.tolist() == [[10, 20, 20, 12.5], [10, 15, 10.3333, 5],
                                                  [10, 10, 10, 10], [10, 15, 10.3333, 9]]
    note = at.warning[0].value                       # the seed's prose vs its tensor, with the true numbers
    assert "no even token" in note and "10.0000" in note and "15.0000" in note and "10.3333" in note
    specs = plotly_specs(at)
    heads = next(s for s in specs if len(s["data"]) == 4)
    assert [tr["type"] for tr in heads["data"]] == ["heatmap"] * 4
    assert {tr["coloraxis"] for tr in heads["data"]} == {"coloraxis"}
    bars = next(s for s in specs if s["data"][0]["type"] == "bar")
    assert [round(y, 3) for y in bars["data"][0]["y"]] == [15.3, 14.2, 8.15]
    click(at, "Next")
    assert heading(at).startswith("Event 1 of 5: choose")
    assert any("**nice** is chosen but not processed" in m.value for m in at.markdown)
    assert frame_with(at, "phase")["token"].tolist() == ["Today", "weather", "is", "so"]   # 4 rows, no nice
    click(at, "Next")
    assert heading(at).startswith("Event 2 of 5: decode")
    cmp = comparison(at)
    assert cmp["Head 1 · even positions"] == ["12.5000", "12.5000", "0.0000"]
    assert cmp["Head 2 · last token"] == [f":red-background[**{x}**]" for x in ("6.0000", "7.0000", "1.0000")]
    assert cmp["Head 3 · first token"] == ["10.0000", "10.0000", "0.0000"]
    assert cmp["Head 4 · all tokens"] == ["8.6000", "8.6000", "0.0000"]
    errors = [e.value for e in at.error]
    assert any("Head 2 · last token differs by 1.0" in e for e in errors)
    assert any("Recompute check" in e and "|Δ| = 1" in e for e in errors)
    assert any("key of position 4 (so)" in m.value and "**+1**" in m.value and "**-1**" in m.value
               for m in at.markdown)
    assert frame_with(at, "phase")["k (H2)"].tolist()[3:] == ["(+1 × 64)", "(+1 × 64)"]
    assert any("BERT" in m.value for m in at.markdown) and at.expander[0].label.startswith("Think first")
    decode_heads = next(s for s in plotly_specs(at) if len(s["data"]) == 4)
    assert [round(w, 2) for w in decode_heads["data"][1]["z"][0]] == [0, 0, 0, 0.5, 0.5]   # one row per head
    no_exception(at)


def test_url_step_with_repair_restores_agreement():
    at = open_page(PAGE, {"step": "2", "repair": "true"})
    no_exception(at)
    assert heading(at).startswith("Event 2 of 5: decode")
    assert [c[0] for c in comparison(at).values()] == ["12.5000", "7.0000", "10.0000", "8.6000"]   # none red
    assert any(s.value.startswith("Repaired") for s in at.success)
    assert any("Recompute check: the cached pass equals" in s.value for s in at.success)
    cache = frame_with(at, "phase")
    assert cache["phase"].tolist()[3] == "prefill, rewritten at event 2" and cache["k (H2)"].tolist()[3] == "(-1 × 64)"
    assert not at.error


def test_invalid_values_and_prompts_get_a_message_then_edits_take_effect():
    at = open_page(PAGE)
    for bad, words in (("abc", "not a number"), (None, "not a number"), ("inf", "finite"), (1e9, "between")):
        edit_value(at, 1, bad)                        # row 1 = weather
        no_exception(at)
        assert any(words in e.value and "'weather'" in e.value for e in at.error), (bad, [e.value for e in at.error])
        assert not at.subheader                       # nothing runs on a bad table
    click(at, "Seed values")                          # a fresh table with the seed's values
    assert not at.error and frame_with(at, "4:so").round(4).values.tolist()[0] == [10, 20, 20, 12.5]
    edit_value(at, 1, 40, editor="weather_values_1")  # the reset gave the editor a new key
    assert not at.error and heading(at).startswith("Event 0")
    assert frame_with(at, "4:so").round(4).values.tolist()[0] == [10, 40, 40, 22.5]
    for bad in ("Today sunny", "", "so " * 100):
        at.text_input[0].set_value(bad).run()
        no_exception(at)
        assert at.error, bad
    at.text_input[0].set_value("today WEATHER so").run()
    assert not at.error and heading(at).startswith("Event 0 of 5")
    assert frame_with(at, "3:so").round(4).values.tolist()[1] == [10, 25, 5]   # head 2, weather = 40


@pytest.mark.parametrize("lang", [lang for lang in LANGS if lang != "en"])
def test_page_renders_in_every_language(lang):
    at = open_page(PAGE, {"lang": lang, "step": "2"})
    no_exception(at)
    assert at.title[0].value == strings(lang)["weather.title"]
    assert at.expander[0].label == strings(lang)["weather.bert_reveal"]
