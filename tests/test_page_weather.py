"""The weather page in AppTest: the prefill tables and notes, stepping to the stale decode, the repair,
invalid values and prompts get a message, every language renders."""
import pytest

from kvviz.ui.app.i18n import LANGS, strings
from kvviz.ui.app.pages import script
from tests.conftest import frame, frame_table, frame_text, no_exception, open_page, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("weather")


def heading(at) -> str:
    return frame(at)["heading"]


def _tables(f: dict) -> list[dict]:
    return [b["tbl"] for r in ("top", "lead", "main", "side", "wide", "more") for b in f.get(r, []) if "tbl" in b]


def frame_with(at, column: str, i: int | None = None):
    """The first table of the stepper's frame that has ``column`` (found by content, not order),
    as numbers where its cells are numbers; the first column (the head) is the index."""
    import pandas as pd
    t = next(t for t in _tables(frame(at, i)) if column in t["cols"])
    def cell(x: str):
        try:
            return float(x)
        except ValueError:
            return x
    return pd.DataFrame([[cell(x) for x in r[1:]] for r in t["rows"]], columns=t["cols"][1:],
                        index=[r[0] for r in t["rows"]])


def comparison(at, i: int | None = None) -> dict[str, list[str]]:
    """The cached-vs-recomputed table: head -> [cached, recomputed, |Δ|], a red cell as "!x"."""
    t = next(t for t in _tables(frame(at, i)) if t["cols"][:2] == ["head", "cached pass"])
    bad = {(r, c) for r, c, cls in t["marks"] if cls == "bad"}
    return {row[0]: [("!" if (r, c + 1) in bad else "") + x for c, x in enumerate(row[1:])]
            for r, row in enumerate(t["rows"])}


def alerts(at, kind: str, i: int | None = None) -> list[str]:
    f = frame(at, i)
    out = [b["text"] for r in ("top", "lead", "main", "side", "wide", "more") for b in f.get(r, [])
           if b.get("alert") == kind]
    badge = (f.get("metrics") or {}).get("badge")
    return out + ([badge[1]] if badge and badge[0] == kind else [])


def click(at, label: str):
    next(b for b in at.button if b.label == label).click().run()


def edit_value(at, word: str, value, version: int = 0):
    """Type ``value`` into the word's number input (a new set after each *Source values*)."""
    at.number_input(key=f"weather_value_{version}_{word}").set_value(value).run()


def test_prefill_then_step_to_the_stale_decode():
    at = open_page(PAGE)
    no_exception(at)
    assert heading(at).startswith("Event 0 of 5: prefill")
    contexts = frame_with(at, "4:so")
    assert contexts.round(4).values.tolist() == [[10, 20, 20, 12.5], [10, 15, 10.3333, 5],
                                                  [10, 10, 10, 10], [10, 15, 10.3333, 9]]
    note = alerts(at, "warn")[0]                     # the lesson's prose vs its tensor, with the true numbers
    assert "no even token" in note and "10.0000" in note and "15.0000" in note and "10.3333" in note
    specs = frame(at)["figs"]
    heads = next(s for s in specs if len(s["data"]) == 4)
    assert [tr["type"] for tr in heads["data"]] == ["heatmap"] * 4
    assert {tr["coloraxis"] for tr in heads["data"]} == {"coloraxis"}
    bars = next(s for s in specs if s["data"][0]["type"] == "bar")
    assert [round(y, 3) for y in bars["data"][0]["y"]] == [15.3, 14.2, 8.15]
    assert frame(at, 1)["heading"].startswith("Event 1 of 5: choose")
    assert "nice is chosen but not processed" in frame_text(frame(at, 1))
    assert frame_table(at, 1)["token"].tolist() == ["Today", "weather", "is", "so"]   # 4 rows, no nice
    f = frame(at, 2)
    assert f["heading"].startswith("Event 2 of 5: decode")
    cmp = comparison(at, 2)
    assert cmp["Head 1 · even positions"] == ["12.5000", "12.5000", "0.0000"]
    assert cmp["Head 2 · last token"] == ["!6.0000", "!7.0000", "!1.0000"]
    assert cmp["Head 3 · first token"] == ["10.0000", "10.0000", "0.0000"]
    assert cmp["Head 4 · all tokens"] == ["8.6000", "8.6000", "0.0000"]
    errors = alerts(at, "bad", 2)
    assert any("Head 2 · last token differs by 1.0" in e for e in errors)
    assert any("Recompute check" in e and "|Δ| = 1" in e for e in errors)
    assert "key of position 4 (so)" in frame_text(f)
    assert any("<strong>+1</strong>" in b.get("html", "") and "<strong>\u22121</strong>" in b.get("html", "")
               for b in f["main"])                 # the page shows −1 with a typeset minus
    table = frame_table(at, 2)
    assert table["k (H2)"].tolist()[3:] == ["(+1 × 64)", "(+1 × 64)"]
    assert [table.columns[c] for _, c in f["table"]["flagged"]] == ["k (H2)"]         # the stale key, flagged
    assert "BERT" in frame_text(f) and any(b.get("details", "").startswith("Think first") for b in f["main"])
    decode_heads = next(s for s in f["figs"] if len(s["data"]) == 4)
    assert [round(w, 2) for w in decode_heads["data"][1]["z"][0]] == [0, 0, 0, 0.5, 0.5]   # one row per head
    # the lesson's own code, said exactly: its repair line gives 7.0, its printout 6.0 is the code without it
    account = frame_text(f).split("What the lesson's own decode code does", 1)[1]
    assert "K2[-1] = -torch.ones(d_k)" in account and "gives 7.0 for this head" in account
    assert "prints for that code, 6.0, is what the code gives without the line" in account
    # the heads are not averaged: the logits are the contexts times W_vocab (their mean 9.125 is in no logit)
    assert "Their average, 9.125, is in no logit" in frame_text(frame(at, 0))
    no_exception(at)


def test_url_step_with_repair_restores_agreement():
    at = open_page(PAGE, {"step": "2", "repair": "true"})
    no_exception(at)
    assert heading(at).startswith("Event 2 of 5: decode")
    assert [c[0] for c in comparison(at).values()] == ["12.5000", "7.0000", "10.0000", "8.6000"]   # none red
    assert any(a.startswith("Repaired") for a in alerts(at, "ok"))
    assert any("Recompute check: the cached pass equals" in a for a in alerts(at, "ok"))
    cache = frame_table(at)
    assert cache["phase"].tolist()[3] == "prefill, rewritten at event 2" and cache["k (H2)"].tolist()[3] == "(-1 × 64)"
    assert frame(at)["table"]["rewritten"] == [3]
    assert not alerts(at, "bad")


def test_invalid_values_and_prompts_get_a_message_then_edits_take_effect():
    at = open_page(PAGE)
    assert [n.value for n in at.number_input if n.key.startswith("weather_value_")] == [10, 20, 1, 5, 7, 8, 2]
    for bad in (1e9, -1e9):                           # a number input sends numbers: out of range is what can go wrong
        edit_value(at, "weather", bad)
        no_exception(at)
        errors = [e.value for e in at.error]
        assert any("between" in e and "'weather'" in e for e in errors), (bad, errors)
        assert stepper(at) is None                    # nothing runs on bad values
    click(at, "Source values")                        # fresh inputs with the source text's values
    assert not at.error and frame_with(at, "4:so").round(4).values.tolist()[0] == [10, 20, 20, 12.5]
    assert "values" not in at.query_params
    edit_value(at, "weather", 40, version=1)          # the reset gave the inputs new keys
    table = next(h.proto.body for h in at.get("html") if "kv-prompt-table" in h.proto.body)
    assert "<th scope='row'>value</th><td>10</td><td>40</td><td>1</td><td>5</td>" in table   # the prompt view follows
    assert at.query_params["values"] == "weather:40"          # the address follows the inputs
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
    assert any(b.get("details") == strings(lang)["weather.bert_reveal"] for b in frame(at)["main"])
