"""Deep links: every link of the lecture script opens its page in the state it names, and each
page's settings are restored from the address (the other half, the address following the widgets,
needs a browser: tests/browser/test_deep_links_browser.py)."""
from urllib.parse import parse_qsl, urlsplit

import pytest

from kvviz.ui.app.pages import places, script
from kvviz.ui.pages.lecture import SCRIPT
from tests.conftest import frame, no_exception, open_page, stepper, tiny_as

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

LINKS = [(page, params, key) for _, steps in SCRIPT for page, params, key in steps]
PLACE = {p.screen.key: p for p in places()}
SHOWS_PLACE = ("sampling", "gpt", "cost", "speculative")    # pages that show a place without a stepper (lecture.title)
# screens opened with the tiny random Gemma 3 in Gemma 3's place (``tiny_as_gemma3``): what a link opens
# does not depend on the weights, and the real ones cost a load (≈ 4 s) and runs: Gemma's long text is a
# 728-token run on them (≈ 25 s here), which a server makes at its start (llm.warm_late)
TINY_GEMMA = {"llm_long", "llm_hybrid", "compress_gemma"}
# and SmolLM2's class on tiny weights in SmolLM2's layout in SmolLM2's place (``tiny_real_smollm2``): its
# default run and loop views, a bfloat16 copy, another loop prompt and a prompt-lookup run each cost
# seconds of SmolLM2 runs that the named state does not depend on
TINY_SMOLLM2 = {"llm_prefill", "llm_bf16", "llm_one_word", "llm_greedy_loop", "speculative_lookup"}
# the links that name one of SmolLM2's layers or heads: the tiny model in SmolLM2's layout
TINY_SMOLLM2_LAYOUT = {"llm_gqa", "llm_whole_run", "compress_llm_keys"}


@pytest.fixture
def tiny_as_gemma3(tiny_gemma_dir, monkeypatch):
    """Gemma 3's class on the tiny random Gemma 3 (conftest's ``tiny_gemma_dir``: three sliding layers of
    window 8, one global; ``tiny_as``), and the long text cut to its first paragraph (the detail) and
    its last (the question): the same page and code path (a hybrid model offers the long text, a run
    past its window) in a second. (The whole text is 2,587 tokens for the tiny model's byte-level
    tokenizer, over Gemma's cap of 1,100.)"""
    from kvviz.models import real
    paragraphs = real.long_text().split("\n\n")
    short = f"{paragraphs[0]}\n\n{paragraphs[-1]}"
    monkeypatch.setattr(real, "long_text", lambda: short)
    yield from tiny_as("gemma3", tiny_gemma_dir, monkeypatch)


def _notices(at) -> list[str]:
    return [w.value for w in at.warning if "address" in w.value or "link" in w.value.lower()]


@pytest.mark.parametrize("page,params,key", LINKS, ids=[k for _, _, k in LINKS])
def test_lecture_link_opens_the_named_state(page, params, key, request):
    if key in TINY_GEMMA:
        request.getfixturevalue("tiny_as_gemma3")
    elif key in TINY_SMOLLM2:
        request.getfixturevalue("tiny_real_smollm2")
    elif key in TINY_SMOLLM2_LAYOUT:
        request.getfixturevalue("tiny_real_smollm2_layout")
    at = open_page(page, {k: str(v) for k, v in params.items()})
    no_exception(at)
    assert not _notices(at), _notices(at)          # nothing in the link was refused
    if "step" in params:
        heading = frame(at)["heading"]
        assert heading.startswith(f"Event {params['step']} of"), heading
    # the screen says its place in the script ("Lecture script, section 2: screen 8 of 53 · next →", the
    # number the exported lecture gives it): the stepper at its event
    place = PLACE[key]
    said = f"Lecture script, section {place.section}: screen {list(PLACE).index(key) + 1} of {len(PLACE)}"
    if "step" in params:
        assert [params["step"], said] in [row[:2] for row in stepper(at)["lecture"]]
    elif place.page.key in SHOWS_PLACE:
        assert any(said in m.value for m in at.markdown), said
    for k, v in params.items():                      # every named widget shows the linked value
        if k in ("step", "tab", "lang", "present"):
            continue
        values = [w.value for kind in ("slider", "number_input", "segmented_control", "toggle", "text_input",
                                       "selectbox")
                  for w in at.get(kind) if getattr(w, "key", None) == k]
        assert values, (k, "no widget")
        expected = v if isinstance(v, str) else float(v)
        got = str(values[0]).lower() if isinstance(v, str) else float(values[0])
        assert got == expected, (k, values[0], v)


def test_abc_state_restored_from_the_address():
    at = open_page(script("abc"),
                   {"prompt": "C A B", "new": "4", "abc_rule": "sample", "abc_tau": "0.7", "abc_seed": "9",
                    "step": "3", "lang": "es"})
    no_exception(at)
    assert at.text_input(key="prompt").value == "C A B"
    assert at.number_input(key="new").value == 4
    assert at.slider(key="abc_tau").value == 0.7 and at.number_input(key="abc_seed").value == 9
    assert frame(at)["heading"].startswith("Evento 3 de 7")


def test_weather_state_restored_from_the_address():
    at = open_page(script("weather"), {"prompt": "Today weather is", "new": "2", "repair": "true",
                                                 "values": "is:3", "step": "2"})
    no_exception(at)
    assert at.text_input(key="prompt").value == "Today weather is"
    assert at.toggle(key="repair").value is True
    assert at.number_input(key="weather_value_0_is").value == 3                  # ?values=is:3
    assert at.number_input(key="weather_value_0_so").value == 5                  # the default, not in the address
    assert frame(at)["heading"].startswith("Event 2 of 3")


def test_home_links_carry_language_and_presenter_mode():
    at = open_page(None, {"lang": "de", "present": "1"})
    no_exception(at)
    html = " ".join(m.value for m in at.markdown)
    hrefs = [h for h in html.split("href='")[1:]]
    assert len(hrefs) >= 5
    for h in hrefs:
        query = dict(parse_qsl(urlsplit(h.split("'")[0].replace("&amp;", "&")).query))
        assert query.get("lang") == "de" and query.get("present") == "1", h


def test_gpt_layer_and_head_restored_from_the_address():
    at = open_page(script("gpt"), {"step": "2", "gpt_layer": "4", "gpt_head": "2"})
    no_exception(at)
    assert at.selectbox(key="gpt_layer").value == 4 and at.selectbox(key="gpt_head").value == 2
    titles = _chart_titles(at)
    assert any("4" in x and "2" in x for x in titles), titles
    bad = open_page(script("gpt"), {"gpt_layer": "99"})
    no_exception(bad)
    assert bad.selectbox(key="gpt_layer").value == 1 and any("gpt_layer" in w.value for w in bad.warning)


def test_smaller_caches_state_restored_from_the_address():
    at = open_page(script("compress"),
                   {"sc_prompt": "It was", "sc_new": "6", "sc_kind": "quant", "sc_bits": "8", "sc_group": "16",
                    "sc_axis": "token", "sc_residual": "4", "sc_layer": "2", "sc_head": "3", "sc_prompts": "4",
                    "sc_tokens": "10", "sc_seed": "5", "step": "5", "lang": "es"})
    no_exception(at)
    assert not _notices(at), _notices(at)
    assert at.text_input(key="sc_prompt").value == "It was" and at.number_input(key="sc_new").value == 6
    assert at.segmented_control(key="sc_kind").value == "quant" and at.segmented_control(key="sc_bits").value == 8
    assert at.number_input(key="sc_group").value == 16 and at.segmented_control(key="sc_axis").value == "token"
    assert at.number_input(key="sc_residual").value == 4
    assert at.selectbox(key="sc_layer").value == 2 and at.selectbox(key="sc_head").value == 3
    assert [at.number_input(key=k).value for k in ("sc_prompts", "sc_tokens", "sc_seed")] == [4, 10, 5]
    assert frame(at)["heading"].startswith("Evento 5 de 11")
    assert any("int8, K por token, G 16, residual 4" in t for t in _chart_titles(at))


def test_spec_state_restored_from_the_address():
    at = open_page(script("speculative"),
                   {"sd_prompt": "Today the weather is so", "sd_new": "8", "sd_gamma": "3", "sd_rule": "sample",
                    "sd_tau": "0.8", "sd_seed": "4", "sd_head": "2", "sd_c": "0.3", "step": "5", "lang": "de"})
    no_exception(at)
    assert at.text_input(key="sd_prompt").value == "Today the weather is so"
    assert at.number_input(key="sd_new").value == 8 and at.number_input(key="sd_gamma").value == 3
    assert at.slider(key="sd_tau").value == 0.8 and at.number_input(key="sd_seed").value == 4
    assert at.selectbox(key="sd_head").value == 2 and at.number_input(key="sd_c").value == 0.3
    assert frame(at)["heading"].startswith("Ereignis 5 von") and not _notices(at)


def _chart_titles(at) -> list[str]:
    """Titles of the charts the page shows: its own and the stepper's current frame's."""
    from tests.conftest import plotly_specs
    return [str(s["layout"].get("title", {}).get("text", "")) for s in plotly_specs(at) + frame(at)["figs"]]


COST = script("cost")


def _warnings(at) -> str:
    return " ".join(w.value for w in at.warning)


def test_cost_memory_and_compute_settings_restored_from_the_address():
    at = open_page(COST, {"mem_preset": "llama3-8b", "mem_kv": "2", "mem_tokens": "8192", "mem_dtype": "fp8"})
    no_exception(at)
    assert at.selectbox(key="mem_preset").value == "llama3-8b" and at.selectbox(key="mem_dtype").value == "fp8"
    assert at.number_input(key="mem_layers").value == 32          # the preset's own, not GPT-2's 12
    assert at.number_input(key="mem_kv").value == 2 and at.number_input(key="mem_tokens").value == 8192
    # the address follows the widgets: a new preset rewrites the shape fields and drops them from it
    at.selectbox(key="mem_preset").set_value("gpt2").run()
    assert at.query_params.get("mem_preset") is None and at.query_params.get("mem_kv") is None
    at.number_input(key="mem_batch").set_value(8).run()
    assert at.query_params["mem_batch"] == "8" and at.query_params["mem_dtype"] == "fp8"

    fl = open_page(COST, {"tab": "Compute (FLOPs)", "fl_model": "run:gpt", "fl_n": "5"})
    no_exception(fl)
    assert fl.selectbox(key="fl_model").value == "run:gpt" and fl.number_input(key="fl_n").value == 5
    assert any("kvviz tiny GPT" in s.value and "equal the formulas" in s.value for s in fl.success)


def test_cost_batching_measure_and_serving_settings_restored_from_the_address():
    bt = open_page(COST, {"tab": "Batching", "bt_model": "gpt", "bt_p1": "It was", "bt_p2": "Today",
                          "bt_p3": "", "bt_new": "3", "bt_head": "2", "step": "2"})
    no_exception(bt)
    assert frame(bt)["heading"].startswith("Event 2 of 5: decode (2 sequences)")
    assert bt.selectbox(key="bt_head").value == 2
    ms = open_page(COST, {"tab": "Measured here", "ms_shape": "gpt2", "ms_batches": "1,4", "ms_context": "64"})
    no_exception(ms)
    assert ms.multiselect(key="ms_batches").value == [1, 4] and ms.select_slider(key="ms_context").value == 64
    assert ms.multiselect(key="ms_prompts").value == [8, 32, 128]     # the GPT-2 shape's default
    # the address follows the widgets: a list in any order, its default dropped again
    ms.multiselect(key="ms_batches").set_value([4, 2, 1]).run()
    assert ms.query_params["ms_batches"] == "1,2,4"
    ms.multiselect(key="ms_batches").set_value([8, 4, 2, 1]).run()
    assert "ms_batches" not in ms.query_params                       # the GPT-2 shape's default
    ai = open_page(COST, {"tab": "Measured here", "ai_model": "gpt2", "ai_context": "512", "ai_ridge": "150.5"})
    no_exception(ai)
    assert ai.selectbox(key="ai_model").value == "gpt2" and ai.number_input(key="ai_context").value == 512
    assert ai.number_input(key="ai_ridge").value == 150.5 and not _warnings(ai)
    sv = open_page(COST, {"tab": "Disaggregated serving", "sv_model": "mistral-7b", "sv_link": "25",
                          "sv_prompt": "2048"})
    no_exception(sv)
    assert sv.number_input(key="sv_link").value == 25.0 and sv.number_input(key="sv_prompt").value == 2048
    assert not _warnings(sv)
    sv.number_input(key="sv_link").set_value(1234567.0).run()
    assert sv.query_params["sv_link"] == "1234567"                  # every digit, so a link reopens it


@pytest.mark.parametrize("tab, params, key", [
    ("Memory", {"mem_tokens": "-5"}, "mem_tokens"),
    ("Memory", {"mem_heads": "nan"}, "mem_heads"),
    ("Compute (FLOPs)", {"fl_n": "1e99"}, "fl_n"),
    ("Batching", {"bt_new": "inf"}, "bt_new"),
    ("Batching", {"bt_model": "gpt", "bt_layer": "9"}, "bt_layer"),
    ("Measured here", {"ms_batches": "1,3"}, "ms_batches"),
    ("Disaggregated serving", {"sv_link": "-inf"}, "sv_link"),
    ("Disaggregated serving", {"sv_bw": "0"}, "sv_bw"),
    ("Memory", {"mem_preset": "gpt5"}, "mem_preset"),
    ("Batching", {"bt_model": "llama"}, "bt_model"),
    ("Measured here", {"ms_context": "100"}, "ms_context"),
    ("Measured here", {"ms_context": "abc"}, "ms_context"),
    ("Measured here", {"ai_ridge": "nan"}, "ai_ridge"),
    ("Lotes", {}, "Lotes"),
])
def test_cost_bad_address_values_fall_back_with_a_notice(tab, params, key):
    at = open_page(COST, {"tab": tab, **params})
    no_exception(at)
    assert key in _warnings(at) and ("instead" in _warnings(at) or "showing Memory" in _warnings(at)), _warnings(at)
