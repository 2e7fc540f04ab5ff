"""Numbers on the pages follow the page's language (kvviz.ui.app.fmt): 0,330 and 36.864 on a Spanish or
German page, 0.330 and 36,864 in English; charts carry plotly's separators; downloads stay
machine-readable (the same bytes in every language)."""
from __future__ import annotations

import io
import json
import re

import pandas as pd
import pytest

from kvviz import cost
from kvviz.ui.app import fmt
from kvviz.ui.app.pages import script
from tests.conftest import frame, frame_table, frame_text, no_exception, open_page, plotly_specs

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

COST = script("cost")
SAMPLING = script("sampling")
WEATHER = script("weather")
GPT = script("gpt")
ABC = script("abc")


def _metrics(at) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


@pytest.mark.parametrize("lang", ["en", "es", "de"])
def test_cost_memory_tab_writes_bytes_the_local_way(lang):
    at = open_page(COST, {"lang": lang})
    no_exception(at)
    per_token = cost.cache_bytes_per_token(cost.GPT2_SMALL, "fp16")
    values = set(_metrics(at).values())
    assert {f"{fmt.integer(per_token, lang)} B", fmt.nbytes(per_token * 1024, lang)} <= values
    assert {"en": "36,864 B", "es": "36.864 B", "de": "36.864 B"}[lang] in values
    assert {"en": "37.7 MB", "es": "37,7 MB", "de": "37,7 MB"}[lang] in values
    exact = fmt.integer(per_token * 1024, lang)                      # 37,748,736 | 37.748.736 bytes
    assert any(exact in m.value for m in at.markdown)
    for spec in plotly_specs(at):                                    # every chart: the language's marks
        assert spec["layout"]["separators"] == fmt.plotly_separators(lang)
    hovers = [tr.get("hovertemplate") or "" for tr in plotly_specs(at)[0]["data"]]
    assert any(f": {fmt.nbytes(per_token * 1024, lang)}<" in h for h in hovers)     # "your setting: 37,7 MB"
    sizes = [c for tr in plotly_specs(at)[0]["data"] for c in (tr.get("customdata") or [])]
    assert "36,9 kB" in sizes if lang != "en" else "36.9 kB" in sizes               # the lines' hover texts


def test_cost_compute_tab_factor_and_flops_in_german():
    at = open_page(COST, {"lang": "de", "tab": "Compute (FLOPs)"})
    no_exception(at)
    table = at.dataframe[0].value
    c = cost.generation_flops(cost.ABC_CONFIG, 2, 32, True)
    assert list(table["FLOPs mit Cache"]) == [fmt.integer(c.linear, "de"), fmt.integer(c.attention, "de"),
                                             fmt.integer(c.total, "de")]
    assert all(re.fullmatch(r"[\d.]+,\d×", x) for x in table["Ohne ÷ mit"]), list(table["Ohne ÷ mit"])
    text = next(m.value for m in at.markdown if "so viel" in m.value)
    assert "× so viel" in text and "×× " not in text


def test_sampling_page_in_spanish():
    at = open_page(SAMPLING, {"lang": "es"})
    no_exception(at)
    assert any("H = 1,607 bits" in s["layout"]["title"]["text"] for s in plotly_specs(at))
    assert "1,607 bits" in [m.value for m in at.metric]
    at = open_page(SAMPLING, {"lang": "es", "sampling_rule": "greedy"})
    hist = next(s for s in plotly_specs(at) if "sorteos con semilla" in s["layout"]["title"]["text"])
    assert hist["data"][0]["text"][0] == "1.000"                      # "1,000" drawn by the builder
    bars = [s for s in plotly_specs(at) if s["data"][0]["type"] == "bar"]
    labels = [t for s in bars for tr in s["data"] for t in (tr.get("text") or []) if t]
    assert labels and all("." not in t or t == "1.000" for t in labels), labels   # 0,600 not 0.600


def test_weather_page_formula_and_contexts_in_spanish():
    at = open_page(WEATHER, {"lang": "es", "step": "0"})
    no_exception(at)
    f = frame(at)
    text = frame_text(f)
    assert "15,300" in text and "14,200" in text and "12,5" in text          # logits = context × W_vocab
    assert "15.300" not in text and "12.5" not in text
    heat = next(s for s in f["figs"] if s["data"][0]["type"] == "heatmap")
    assert heat["layout"]["separators"] == ",."


def test_tiny_gpt_memory_in_german():
    at = open_page(GPT, {"lang": "de"})
    no_exception(at)
    metrics = _metrics(at)
    measured = metrics["Gemessene Bytes"]
    assert measured == metrics["2 · L · T · d · 4 Bytes"] and measured.endswith(" B") and "," not in measured
    body = next(m.value for m in at.markdown if "GPT-2 small" in m.value)
    assert "**36.864 Bytes pro Token**" in body and "37,7 MB" in body


def _downloads(monkeypatch, lang: str) -> dict[str, str]:
    """The files behind the page's download buttons, built as a click would build them, and the
    per-step cache CSV's rows as the stepper's payload carries them (the browser writes that file)."""
    from streamlit.runtime.media_file_manager import MediaFileManager

    made: dict[str, object] = {}
    original = MediaFileManager.add_deferred

    def record(self, data_callable, mimetype, coordinates, file_name=None, **kw):
        made[file_name] = data_callable
        return original(self, data_callable, mimetype, coordinates, file_name, **kw)

    monkeypatch.setattr(MediaFileManager, "add_deferred", record)
    at = open_page(ABC, {"lang": lang, "step": "2"})
    no_exception(at)
    files = {name: make() for name, make in made.items()}
    files["abc_cache_step2.csv"] = frame_table(at, 2).to_csv(index=False)
    return files


def test_downloads_stay_machine_readable_in_every_language(monkeypatch):
    files = {lang: _downloads(monkeypatch, lang) for lang in ("en", "es", "de")}
    assert set(files["en"]) == {"abc_trace.json", "abc_cache_step2.csv"}
    for lang in ("es", "de"):
        assert files[lang] == files["en"], lang                      # the same bytes, whatever the language

    def floats(x):
        if isinstance(x, float):
            yield x
        elif isinstance(x, dict):
            for v in x.values():
                yield from floats(v)
        elif isinstance(x, list):
            for v in x:
                yield from floats(v)
    assert any(True for _ in floats(json.loads(files["de"]["abc_trace.json"])))   # JSON numbers, not text
    table = pd.read_csv(io.StringIO(files["de"]["abc_cache_step2.csv"]))
    assert list(table.columns[:2]) == ["position", "token"]           # stable English headers
    assert table["position"].tolist() == [0, 1, 2]                      # numbers a program reads back


def test_the_cache_table_shows_local_numbers_and_its_csv_stays_the_engines():
    from tests.conftest import stepper
    en, de = (stepper(open_page(ABC, {"lang": lang, "step": "2"}))["payload"]["table"] for lang in ("en", "de"))
    assert en["csv_rows"] is None and de["csv_rows"] == en["rows"]            # the CSV: the same bytes
    cells = [c for r in de["rows"] for c in r if c.startswith("(")]
    assert cells and all("." not in c and ";" in c for c in cells), cells  # (0,3302; 0,6698)


def test_the_cache_tables_words_follow_the_language_too():
    from tests.conftest import stepper
    table = stepper(open_page(WEATHER, {"lang": "de", "step": "2", "repair": "true"}))["payload"]["table"]
    shown = [c for r in table["rows"] for c in r]
    assert any("überschrieben bei Ereignis" in c for c in shown) and not any("rewritten" in c for c in shown)
    assert any("rewritten at event" in c for r in table["csv_rows"] for c in r)      # the CSV: the engine's text
