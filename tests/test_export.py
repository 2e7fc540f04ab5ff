"""The static export's capture (kvviz/ui/export/capture.py): what a screen's live page draws, run from
its address, is the payload builders' own output for the settings the lecture script names, and
the screen names those settings as the page shows them; a refused address stops the export; the
command's wiring loads no Streamlit. (The pages themselves, in chromium: tests/browser/test_export.py.)"""
import subprocess
import sys

import pytest

from kvviz.cli.main import main
from kvviz.decoding.sampling import Sampler, make_rule
from kvviz.decoding.stepper import run_generation
from kvviz.models.abc import ABCModel
from kvviz.models.gpt import GPTModel, load_tiny_gpt
from kvviz.models.weather import DEFAULT_VALUES, SEED_PROMPT, VOCAB, WeatherModel, check_values
from kvviz.ui.app.pages import script
from kvviz.ui.export.capture import CaptureError, capture
from kvviz.ui.frames import abc as frames_abc
from kvviz.ui.frames import gpt as frames_gpt
from kvviz.ui.frames import translator
from kvviz.ui.frames import weather as frames_weather
from tests.conftest import ROOT

pytestmark = pytest.mark.app          # every capture runs a page (AppTest)


def test_a_sampled_abc_screen_is_the_builders_payload_and_names_its_settings():
    c = capture(script("abc"), {"abc_rule": "sample", "abc_tau": 1.5, "abc_seed": 3, "step": 1}, "en", False)
    run = run_generation(ABCModel(), ["A", "B"], 6, rule=make_rule(1.5, None, 1.0), seed=3)
    assert c.stepper["payload"] == frames_abc.build(run, translator("en")).to_json()
    assert (c.stepper["start"], c.stepper["n"]) == (1, len(run.events))
    assert c.title == "A/B/C miniature"
    assert c.settings == [("Prompt (tokens A, B, C)", "A B"), ("New tokens", "6"), ("Next token", "Sample"),
                          ("Temperature τ", "1.5"), ("Top-k", "all"), ("Top-p", "1"), ("Seed", "3")]
    assert "stepper" in c.blocks[-1]["group"][-1]            # the page's last block: nothing below the stepper


def test_repaired_weather_in_german_and_a_sampled_gpt_in_spanish_are_the_builders_payloads():
    c = capture(script("weather"), {"step": 2, "repair": "true"}, "de", False)
    values = check_values({w: DEFAULT_VALUES[w] for w in VOCAB})
    model = WeatherModel(values)
    run = run_generation(model, list(SEED_PROMPT), 3, repair=model.repair)
    assert c.stepper["payload"] == frames_weather.build(run, values, translator("de")).to_json()
    assert ("Veraltete Keys reparieren", "an") in c.settings, c.settings
    c = capture(script("gpt"), {"gpt_rule": "sample", "gpt_tau": 0.8, "gpt_seed": 7, "step": 1}, "es", False)
    gpt = GPTModel(load_tiny_gpt())
    run = run_generation(gpt, ["Today", "the", "weather", "is", "so"], 8, Sampler(0.8, None, 1.0), 7)
    assert c.stepper["payload"] == frames_gpt.build(run, gpt, 0, 0, translator("es")).to_json()
    assert ("Capa", "1") in c.settings and ("Cabeza", "1") in c.settings


def test_the_command_knows_the_apps_languages():
    from kvviz.ui.app.i18n import LANGS as APP_LANGS
    from kvviz.ui.export import LANGS
    assert LANGS == tuple(APP_LANGS)


def test_an_address_the_page_refuses_stops_the_export():
    with pytest.raises(CaptureError, match="999"):
        capture(script("abc"), {"step": 999}, "en", False)


def test_the_command_loads_no_streamlit_until_it_exports_and_keeps_a_folder_of_other_files(tmp_path, capsys):
    code = "import sys, kvviz.cli.main; print('streamlit' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    (tmp_path / "notes.txt").write_text("mine")
    assert main(["export", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err and (tmp_path / "notes.txt").exists()
