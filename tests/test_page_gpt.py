"""The Tiny GPT page in AppTest: stepping with layer/head selectors, verification, memory, timing, bad input."""
import pytest

from kvviz.models.gpt.corpus import WEATHER
from kvviz.ui.app.i18n import LANGS, strings
from kvviz.ui.app.pages import script
from kvviz.viz.theme import COLORS
from tests.conftest import frame, frame_table, frame_text, no_exception, open_page, plotly_specs, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("gpt")
WEATHER_WORDS = {w for ws in WEATHER.values() for w in ws}


def heading(at) -> str:
    return frame(at)["heading"]


def heat(at, i: int | None = None) -> dict:
    return next(s for s in frame(at, i)["figs"] if s["data"][0]["type"] == "heatmap")["data"][0]


def bars(at, i: int | None = None) -> dict:
    return next(s for s in frame(at, i)["figs"] if s["data"][0]["type"] == "bar")["data"][0]


def shapes(at, i: int | None = None) -> dict[str, list[str]]:
    """The per-layer cache table (K/V shapes and bytes) of a frame: column -> cells."""
    t = next(b["tbl"] for b in frame(at, i)["more"] if "tbl" in b)
    return {c: [r[k] for r in t["rows"]] for k, c in enumerate(t["cols"])}


def click(at, label):
    next(b for b in at.button if b.label == label).click().run()


def test_prefill_shows_attention_probabilities_and_per_layer_cache():
    at = open_page(PAGE)
    no_exception(at)
    assert heading(at) == "Event 0 of 15: prefill"
    h = heat(at)
    assert h["y"] == ["0:Today", "1:the", "2:weather", "3:is", "4:so"] and len(h["x"]) == 5
    assert h["z"][0][1] is None                                   # the causal mask, left blank
    b = bars(at)
    assert len(b["y"]) == 10 and b["y"][-1] in WEATHER_WORDS       # most probable on top: a weather word
    assert COLORS["choice"] not in b["marker"]["color"]             # nothing is chosen yet on a pass
    b1 = bars(at, 1)
    chosen = [y for y, c in zip(b1["y"], b1["marker"]["color"]) if c == COLORS["choice"]]
    assert chosen == [b1["y"][-1]] == [b["y"][-1]]                 # greedy picks it on the choose event
    sh = shapes(at)
    assert sh["K shape"] == ["[1, 4, 5, 32]"] * 4 and sh["bytes (K + V)"] == ["5,120"] * 4
    assert "20,480 bytes" in frame_text(frame(at)) and "✓" in frame_text(frame(at))


def test_next_choose_keeps_the_token_pending_then_decode_appends_it():
    at = open_page(PAGE)
    assert frame(at, 1)["heading"] == "Event 1 of 15: choose"
    assert "Pending:" in frame_text(frame(at, 1))
    assert len(frame_table(at, 1)) == 5                            # still only the prompt
    assert frame(at, 2)["heading"] == "Event 2 of 15: decode"
    h = heat(at, 2)
    assert len(h["y"]) == 1 and len(h["x"]) == 6                   # one query reads positions 0..5
    assert shapes(at, 2)["K shape"] == ["[1, 4, 6, 32]"] * 4
    assert len(frame_table(at, 2)) == 6 and frame(at, 2)["table"]["new"] == [5]
    no_exception(at)


def test_layer_and_head_selectors_change_the_heatmap():
    at = open_page(PAGE)
    first = heat(at)["z"]
    at.selectbox(key="gpt_layer").set_value(3).run()          # numbered from 1, as shown
    at.selectbox(key="gpt_head").set_value(4).run()
    no_exception(at)
    spec = next(s for s in frame(at)["figs"] if s["data"][0]["type"] == "heatmap")
    assert "layer 3, head 4" in spec["layout"]["title"]["text"]
    assert heat(at)["z"] != first
    assert stepper(at)["payload"]["table"]["cols"][:4] == ["position", "token", "k (h1)", "v (h1)"]
    assert shapes(at)["layer"] == ["1", "2", "3", "4"]


def model_view(at, i: int | None = None) -> dict:
    """The model view of a frame: the figure the browser makes a pick grid of."""
    f, p = frame(at, i), stepper(at)["payload"]
    return p["figs"][next(b["fig"] for b in f["main"] if b.get("pick"))]


def test_model_view_shows_every_head_and_outlines_the_one_shown_large():
    at = open_page(PAGE, {"gpt_layer": "2", "gpt_head": "3", "step": "2"})
    no_exception(at)
    assert stepper(at)["payload"]["pick"]["sel"] == [1, 2]                  # 0-based: layer 2, head 3
    mv = model_view(at)
    assert len(mv["data"]) == 16 and {d["coloraxis"] for d in mv["data"]} == {"coloraxis"}
    assert mv["layout"]["title"]["text"] == "Model view: all 16 heads of this decode pass"
    large = heat(at)
    assert "layer 2, head 3" in frame(at)["figs"][0]["layout"]["title"]["text"]
    tile = mv["data"][1 * 4 + 2]["z"]                                       # the same head, in small
    assert tile[0] == pytest.approx(large["z"][0], abs=0.0051)
    (outline,) = mv["layout"]["shapes"]
    assert outline["x0"] < mv["data"][6]["x0"] < outline["x1"] and outline["y0"] < mv["data"][6]["y0"] < outline["y1"]
    at.selectbox(key="gpt_head").set_value(1).run()                         # the selectbox still works
    assert stepper(at)["payload"]["pick"]["sel"] == [1, 0] and "layer 2, head 1" in heat_title(at)


def test_a_choose_event_keeps_the_figures_in_their_places():
    """The stepper keeps a figure drawn in its place and draws one that moves again: a choose
    event's note (the pass before it) comes after both figures of the column, not between them."""
    at = open_page(PAGE)
    places = {}
    for i in range(len(stepper(at)["payload"]["frames"])):
        main = frame(at, i)["main"]
        places[i] = [k for k, b in enumerate(main) if "fig" in b]
        if frame(at, i)["heading"].endswith("choose"):
            assert "Choosing runs no attention" in frame_text({"heading": "", "main": main[2:]})
    assert set(map(tuple, places.values())) == {(0, 1)}, places


def heat_title(at) -> str:
    return frame(at)["figs"][0]["layout"]["title"]["text"]


def _pick_app():

    import streamlit as st

    from kvviz.models.gpt import GPTModel
    from kvviz.ui.components import step_view
    from kvviz.ui.pages import gpt as gpt_page

    if "browser_pick" in st.session_state:   # what the browser's setTriggerValue does, then the callback
        st.session_state["kvs_gpt"] = {"pick": st.session_state.pop("browser_pick")}
        step_view._picked("kvs_gpt", gpt_page.picker(GPTModel(gpt_page._tiny())).pick)
    st.write(f"layer {st.session_state.get('gpt_layer')} head {st.session_state.get('gpt_head')}")


def test_a_model_view_pick_becomes_the_layer_and_head_and_goes_into_the_address():
    from streamlit.testing.v1 import AppTest
    at = AppTest.from_function(_pick_app, default_timeout=60)
    at.session_state["browser_pick"] = [1, 2]
    at.run()
    no_exception(at)
    assert at.markdown[-1].value == "layer 2 head 3"
    assert (at.query_params["gpt_layer"], at.query_params["gpt_head"]) == ("2", "3")
    for bad in ([4, 0], [0, -1], ["x", 1], [1], None, "12"):               # out of range or not two numbers
        at.session_state["browser_pick"] = bad
        at.run()
        no_exception(at)
        assert at.markdown[-1].value == "layer 2 head 3", bad
    at.session_state["browser_pick"] = [0, 0]                               # the defaults leave the address
    at.run()
    assert at.markdown[-1].value == "layer 1 head 1"
    assert "gpt_layer" not in at.query_params and "gpt_head" not in at.query_params


def test_verification_memory_and_the_stepper_agree():
    at = open_page(PAGE)
    assert any(s.value.startswith("Identical: all 8 tokens match") for s in at.success)
    shown = [c.value for c in at.text]
    assert len(shown) == 2 and shown[0] == shown[1]
    assert shown[0].replace('!', ' ').replace('.', ' ').split()[0] in WEATHER_WORDS
    assert any("chose the same tokens" in c.value for c in at.caption)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Cached positions T"] == "12"
    assert metrics["Measured bytes"] == metrics["2 · L · T · d · 4 bytes"] == "49,152 B"
    measured = next(m for m in at.metric if m.label == "Measured bytes")
    assert "**KV cache:**" in measured.proto.help and "(Glossary#kv_cache)" in measured.proto.help


def test_verification_times_are_medians_of_repeated_runs_with_their_range():
    """What the two captions say is the engine's LoopTimes record (7 interleaved runs each), and the
    page says the difference is within noise exactly when the two ranges overlap."""
    from kvviz.ui.app import fmt
    from kvviz.ui.components.rule_controls import default_rule, rule_cache_key
    from kvviz.ui.pages import gpt as gpt_page

    at = open_page(PAGE)
    model = gpt_page.GPTModel(gpt_page._tiny())
    ids = tuple(model.tokenizer.index[w] for w in gpt_page.prompt_tokens(model, gpt_page.DEFAULT_PROMPT))
    rule, seed = default_rule("gpt")
    loops = gpt_page._loop_times(ids, gpt_page.DEFAULT_NEW, rule_cache_key(rule), seed)   # the page's record
    captions = [c.value for c in at.caption if c.value.startswith("8 new tokens: median")]
    assert len(captions) == 2
    for text, timing in zip(captions, (loops.uncached, loops.cached)):
        assert len(timing.samples) == 7
        assert text == (f"8 new tokens: median **{gpt_page._ms(timing.median)} ms** of 7 runs "
                        f"(fastest {gpt_page._ms(timing.low)} ms, slowest {gpt_page._ms(timing.high)} ms)")
    noise = [i.value for i in at.info if "cannot tell the loops apart" in i.value]
    verdict = [c.value for c in at.caption if "do not overlap" in c.value]
    assert (len(noise), len(verdict)) == ((1, 0) if loops.within_noise else (0, 1))
    if not loops.within_noise and loops.ratio > 1:
        assert f"**{fmt.factor(loops.ratio)}**" in verdict[0]


def test_sampling_controls_change_the_run_and_the_loops_still_agree():
    at = open_page(PAGE)
    assert at.slider(key="gpt_tau").disabled
    at.segmented_control(key="gpt_rule").set_value("sample").run()
    at.slider(key="gpt_tau").set_value(1.5).run()
    texts = set()
    for seed in (1, 2, 3):
        at.number_input(key="gpt_seed").set_value(seed).run()
        no_exception(at)
        assert any(s.value.startswith("Identical") for s in at.success)
        texts.add(at.text[0].value)
    assert len(texts) > 1


def test_a_second_visitor_measuring_is_told_to_wait_and_nothing_is_measured():
    """Two sweeps at once would time each other: while another visitor's holds the server's lock,
    Measure says so at once, measures nothing, and works again once the lock is free."""
    from kvviz.ui.app.turns import server_lock
    from kvviz.ui.pages.gpt import TIMING

    at = open_page(PAGE)
    at.select_slider(key="gpt_sweep_max").set_value(8).run()
    lock = server_lock(TIMING)
    assert lock.acquire(blocking=False)
    try:
        click(at, "Measure")
    finally:
        lock.release()
    no_exception(at)
    assert any("Another visitor is measuring" in w.value for w in at.warning)
    assert "gpt_sweep" not in at.session_state
    click(at, "Measure")
    no_exception(at)
    assert not any("Another visitor is measuring" in w.value for w in at.warning)
    assert [p.n for p in at.session_state["gpt_sweep"][1].points] == [8]


def test_timing_sweep_plots_speedup_beside_flop_ratio_and_explains_the_gap():
    """What the page shows equals the Sweep it measured (the numbers themselves depend on the
    machine's load: no assertion on how fast anything ran); the FLOP ratios are kvviz.cost's."""
    import re

    from kvviz import cost
    from kvviz.models.gpt import cost_config, load_tiny_gpt
    from kvviz.ui.app import fmt

    at = open_page(PAGE)
    assert any("Press **Measure**" in i.value for i in at.info)
    at.select_slider(key="gpt_sweep_max").set_value(16).run()
    click(at, "Measure")
    no_exception(at)
    _, sweep = at.session_state["gpt_sweep"]                       # the engine's record of this measurement
    assert [p.n for p in sweep.points] == [8, 16] and all(p.same_tokens for p in sweep.points)
    shape = cost_config(load_tiny_gpt().model.config)
    flops = [cost.loop_flops(shape, 5, n, False).total / cost.loop_flops(shape, 5, n, True).total for n in (8, 16)]
    assert [p.flop_ratio for p in sweep.points] == pytest.approx(flops) and 1 < flops[0] < flops[1]
    chart = next(s for s in plotly_specs(at) if s["data"][0]["type"] == "scatter")
    series = {d["name"]: d for d in chart["data"]}
    assert list(series) == ["measured speed-up", "time model", "FLOP ratio"]
    assert all(d["x"] == [8, 16] for d in chart["data"])
    assert series["measured speed-up"]["y"] == pytest.approx([p.speedup for p in sweep.points])
    assert series["time model"]["y"] == pytest.approx([sweep.predicted_speedup(n) for n in (8, 16)])
    assert series["FLOP ratio"]["y"] == pytest.approx(flops)
    table = at.dataframe[-1].value
    assert list(table["N"]) == [8, 16] and list(table["same tokens"]) == ["✓", "✓"]
    assert list(table["speed-up"]) == pytest.approx([p.speedup for p in sweep.points])
    assert list(table["FLOP ratio"]) == pytest.approx(flops)
    # the explanation: the English template with each {number} read back and compared with the sweep's
    template = re.sub(r"\{(\w+), plural, one \{[^{}]*\} other \{# ([^{}]*)\}\}", r"{\1} \2",
                      strings("en")["gpt.explain"])
    pattern = re.escape(template)
    for name in re.findall(r"\{(\w+)\}", template):
        pattern = pattern.replace(re.escape("{" + name + "}"), f"(?P<{name}>.+?)", 1)
    text = next(m.value for m in at.markdown if m.value.startswith("**Why the speed-up is far below the FLOP ratio"))
    got = re.fullmatch(pattern, text).groupdict()
    e = sweep.explanation()
    assert e["n"] == 16 and got["n"] == "16" and got["full_tokens"] == str(e["full_tokens"])
    assert got["speedup"] == fmt.fixed(e["speedup"], 1) and got["flops"] == fmt.fixed(e["flop_ratio"], 0)
    assert got["share"] == fmt.percent(e["speedup"] / e["flop_ratio"])
    assert got["step_ms"] == fmt.fixed(e["step_ms"], 2) and got["full_ms"] == fmt.fixed(e["full_ms"], 2)
    assert got["model"] == fmt.fixed(sweep.predicted_speedup(16), 1)
    assert got["weights_mb"] == fmt.fixed(e["weights_mb"], 1)


def test_bad_prompts_get_a_message_and_the_page_keeps_working():
    at = open_page(PAGE)
    for bad, needle in (("Today the weather is hello", "hello"), ("", "empty"), ("   ", "empty"),
                        ("so " * 80, "limit"), ("x" * 399, "Unknown")):
        at.text_input(key="gpt_prompt").set_value(bad).run()
        no_exception(at)
        assert at.error and needle in at.error[0].value, bad
        settings = next(e for e in at.expander if e.label == "Settings")       # folded: the step first
        assert settings.text_input(key="gpt_prompt").value == bad and not settings.error   # the message outside
    at.text_input(key="gpt_prompt").set_value("It is rainy in London , so we").run()
    assert not at.error and heading(at).startswith("Event 0")
    assert heat(at)["y"][-1] == "7:we"


def test_page_renders_in_every_language():
    for lang in LANGS:
        at = open_page(PAGE, {"lang": lang})
        no_exception(at)
        assert at.title[0].value == strings(lang)["gpt.title"]


def test_greedys_loop_is_pointed_out_beside_a_sampled_run():
    """The engine's repeated span, in bold in the greedy text, counted; the sampled text leaves it."""
    from kvviz.decoding.long_runs import repeated_span

    at = open_page(PAGE)
    no_exception(at)
    assert any(h.value == "Greedy's loop" for h in at.header)
    greedy = next(m.value for m in at.markdown if m.value.startswith("**Greedy:**"))
    assert "**Today the weather is so windy**" in greedy
    found = next(c.value for c in at.caption if c.value.startswith("Greedy writes"))
    words = greedy.removeprefix("**Greedy:** “").removesuffix("”").replace("**", "").replace("\\", "").split()
    loop = repeated_span(words)
    assert f"**“{' '.join(loop.span)}”** {loop.count} times" in found and f"of {len(words)}" in found
    assert any(m.value.startswith("**Sampling, τ = 1, seed") for m in at.markdown)
    assert any("where greedy took" in m.value for m in at.markdown)
    assert any(b.label == "Both texts (CSV)" for b in at.get("download_button"))


def test_past_block_size_the_crop_and_the_stop_are_shown_behind_a_button():
    at = open_page(PAGE)
    assert any(i.value.startswith("Not run yet") for i in at.info)
    next(b for b in at.button if b.label == "Run past block_size").click().run(timeout=180)
    no_exception(at)
    _, run = at.session_state["gpt_crop"]                          # the engine's record (kvviz.decoding.long_runs)
    n, total = len(run.cached.tokens), len(run.uncached.tokens)
    text = " ".join(m.value for m in at.markdown)
    assert f"**With the cache:** {n} tokens, then it stops" in text
    assert any(run.stop_reason in c.value for c in at.caption)
    assert f"From new token {run.first_cropped + 1} on, the model sees only the last 256" in text
    assert f"(all {n})" in text and run.same_tokens
    table = next(d.value for d in at.dataframe if "positions it sees" in d.value.columns)
    p = len(run.prompt)                         # the last step sees positions p + total − 256 … p + total − 1
    assert list(table["new token"])[-1] == total
    assert list(table["positions it sees"])[-1] == f"{p + total - 256}–{p + total - 1}"
    assert any(b.label == "Every step's window (CSV)" for b in at.get("download_button"))


def test_the_whole_run_gains_one_row_per_pass_from_the_address():
    """The page's run as one matrix: ?gpt_passes= rows of it (the prompt's, then one per decode pass),
    the layer and head of the page's picker, the same weights as the engine's matrix, and a bad value refused."""
    from kvviz.decoding.stepper import run_generation
    from kvviz.decoding.whole_run import whole_run
    from kvviz.models.gpt import GPTModel, load_tiny_gpt
    from kvviz.ui.pages.gpt import DEFAULT_NEW, DEFAULT_PROMPT

    at = open_page(PAGE, {"gpt_passes": "3", "gpt_layer": "2", "gpt_head": "3"})
    no_exception(at)
    assert any(h.value == "The whole run: one matrix, one row per pass" for h in at.header)
    fig = next(f for f in plotly_specs(at) if f["layout"]["title"]["text"].startswith("Layer 2, head 3: after 3"))
    prompt = DEFAULT_PROMPT.split()
    model = GPTModel(load_tiny_gpt())
    w = whole_run(run_generation(model, prompt, DEFAULT_NEW), 1, 2)
    z = fig["data"][0]["z"]
    assert len(z) == len(prompt) + 2 and "7 rows" in fig["layout"]["title"]["text"]
    assert z[-1][:len(prompt) + 2] == pytest.approx(w.weights[len(prompt) + 1, :len(prompt) + 2].tolist(), abs=1e-6)
    assert all(v is None for v in z[0][1:])                          # the future is blank
    assert any("largest difference" in m.value for m in at.markdown)
    assert any(b.label == "The matrix (CSV)" for b in at.get("download_button"))
    from kvviz.ui.frames import translator
    from kvviz.ui.frames.loop_notice import whole_notice
    assert f"**Notice:** {whole_notice(w, translator('en'))}" in [i.value for i in at.info]
    bad = open_page(PAGE, {"gpt_passes": "99"})
    no_exception(bad)
    assert any("gpt_passes" in w.value for w in bad.warning)
    assert next(s.value for s in bad.slider if s.key == "gpt_passes") == DEFAULT_NEW
