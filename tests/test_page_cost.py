"""The Cost and scale page in AppTest: the lesson's memory figures (docs/design.md §4) on screen, presets filling every
field, bad inputs getting a message (never a traceback), the counted FLOPs agreeing, batching
stepped event by event, the serving numbers, and a measurement behind its button."""
import pytest

from kvviz import cost
from kvviz.ui.app.pages import script
from tests.conftest import frame, frame_table, no_exception, open_page, plotly_specs

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("cost")


def metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def errors(at) -> str:
    return " ".join(e.value for e in at.error)


def test_cost_page_lists_the_real_models_from_their_configs_without_loading_their_weights(smollm2_installed):
    """The Compute tab's real models (SmolLM2, Gemma 3) need their layers and heads, not their weights:
    a fresh server's Cost page loaded a gigabyte and two tokenizers before drawing (19 s here)."""
    from kvviz.models import real
    from kvviz.ui.pages import cost as page

    page._stepper_configs.cache_clear()
    calls = lambda: sum(real.load_network.cache_info()[:2]) + sum(real.load_tokenizer.cache_info()[:2])  # noqa: E731
    before = calls()
    at = open_page(PAGE, {"tab": "Compute (FLOPs)"})
    no_exception(at)
    assert calls() == before
    labels = " ".join(str(o) for o in at.selectbox(key="fl_model").options)
    assert "SmolLM2-135M" in labels and "Gemma 3 270M" in labels


def test_memory_tab_shows_the_gpt2_seed_figures():
    at = open_page(PAGE)
    no_exception(at)
    assert metric(at, "Bytes per token") == "36,864 B"
    assert metric(at, "Cache size") == "37.7 MB"
    assert any("37,748,736 bytes" in m.value for m in at.markdown)
    fig = next(s for s in plotly_specs(at) if s["data"][0]["type"] == "scatter")
    assert {tr["name"] for tr in fig["data"]} >= {"batch 1", "batch 8", "batch 64", "your setting"}
    lines = [sh["y0"] for sh in fig["layout"]["shapes"]]
    # accelerator memory as sold: a card's "80 GB" is 80 GiB (2³⁰ bytes each), not 80 × 10⁹ bytes
    assert {24 * 2**30, 40 * 2**30, 80 * 2**30} <= set(lines) and not {24e9, 40e9, 80e9} & set(lines)
    fits = next(d.value for d in at.dataframe if "Accelerator memory" in d.value.columns)
    assert list(fits["Accelerator memory"]) == ["24 GiB", "40 GiB", "80 GiB"]
    free = 80 * 2**30 - cost.weight_bytes(cost.GPT2_SMALL, "fp16")
    assert fits.iloc[2, 1] == f"{cost.tokens_that_fit(cost.GPT2_SMALL, free, 1, 'fp16'):,}"
    # what memory alone would allow, and what GPT-2 small's context of 1,024 positions lets it use
    assert list(fits.iloc[:, 2]) == ["1,024"] * 3 and any("1,024 positions" in c.value for c in at.caption)
    assert "7.4% more than 80 × 10⁹" in next(m.help for m in at.metric if m.label == "Cache size")
    assert cost.weight_bytes(cost.GPT2_SMALL, "fp16") in lines  # and the weights beside the cache


def test_presenter_mode_memory_tab_says_what_to_notice_first_under_one_folded_introduction_each():
    """Presenter mode folds the page's introduction ("About this page") and the tab's own ("About this
    section": not a second "About this page"), and shows the tab's what-to-notice line before its numbers."""
    at = open_page(PAGE, {"present": "1"})
    no_exception(at)
    assert [e.label for e in at.expander][:3] == ["About this page", "About this section", "Settings"]
    notice = next(i.value for i in at.info if i.value.startswith("**Notice:**"))
    assert "1,024 tokens × batch 1" in notice and "37.7 MB" in notice

    def walk(node):                 # the page's elements in the order they are drawn
        for child in getattr(node, "children", {}).values():
            yield child
            yield from walk(child)
    order = [("notice" if el.type == "info" and el.value == notice else el.type) for el in walk(at.main)]
    assert order.index("notice") < order.index("metric")


def test_preset_fills_every_field_and_gqa_saving_shows():
    at = open_page(PAGE)
    at.selectbox(key="mem_preset").set_value("llama3-8b").run()
    no_exception(at)
    got = {k: at.number_input(key=k).value for k in ("mem_layers", "mem_heads", "mem_kv", "mem_hd")}
    assert got == {"mem_layers": 32, "mem_heads": 32, "mem_kv": 8, "mem_hd": 128}
    assert metric(at, "Bytes per token") == "131,072 B" and metric(at, "Attention kind") == "GQA"
    bars = next(s for s in plotly_specs(at) if s["data"][0]["type"] == "bar")
    assert bars["data"][0]["x"] == ["MQA 1", "GQA 2", "GQA 4", "GQA 8", "GQA 16", "MHA 32"]
    # every field stays editable: two KV heads instead of eight quarters the cache
    at.number_input(key="mem_kv").set_value(2).run()
    assert metric(at, "Bytes per token") == "32,768 B"
    assert any("Edited shape" in c.value for c in at.caption)


BAD_MEMORY = [
    ("mem_layers", 0, "Layers must be between 1"),
    ("mem_hd", -64, "Head size must be between 1"),
    ("mem_kv", 5, "divisible by KV heads"),
    ("mem_kv", 0, "KV heads must be between 1"),
    ("mem_heads", 18, "divisible by KV heads"),
    ("mem_heads", 7, "cannot exceed attention heads"),
    ("mem_tokens", 0, "Tokens must be between 1"),
    ("mem_batch", -2, "Batch size must be between 1"),
    ("mem_tokens", 10**11, "Tokens must be between 1 and 10000000"),
]


def test_bad_memory_inputs_get_a_message():
    at = open_page(PAGE)
    for key, value, words in BAD_MEMORY:
        good = at.number_input(key=key).value
        at.number_input(key=key).set_value(value).run()
        no_exception(at)
        assert words in errors(at), (key, value)
        assert not any(m.label == "Cache size" for m in at.metric)   # no half-computed numbers
        at.number_input(key=key).set_value(good).run()
        assert not at.error and metric(at, "Bytes per token") == "36,864 B"


def test_largest_allowed_inputs_still_draw():
    """Exact byte and FLOP counts beyond 64 bits must still reach the charts."""
    at = open_page(PAGE)
    for key, value in (("mem_layers", 1000), ("mem_heads", 1024), ("mem_kv", 1024), ("mem_hd", 4096),
                       ("mem_tokens", 10_000_000), ("mem_batch", 100_000)):
        at.number_input(key=key).set_value(value).run()
    at.selectbox(key="mem_dtype").set_value("fp32").run()
    no_exception(at)
    assert not at.error and metric(at, "Bytes per token") == f"{2 * 1000 * 1024 * 4096 * 4:,} B"
    at = open_page(PAGE, {"tab": "Compute (FLOPs)"})
    at.selectbox(key="fl_model").set_value("llama3.1-70b").run()
    at.number_input(key="fl_n").set_value(1_000_000).run()
    no_exception(at)
    u = cost.generation_flops(cost.LLAMA31_70B, 2, 1_000_000, False)
    assert u.total > 2**64 and at.dataframe[0].value["FLOPs without cache"][2] == f"{u.total:,}"


def test_compute_tab_counts_agree_and_table_has_current_numbers():
    at = open_page(PAGE, {"tab": "Compute (FLOPs)"})
    no_exception(at)
    assert any("equal the formulas exactly" in s.value for s in at.success)
    table = at.dataframe[0].value
    c = cost.generation_flops(cost.ABC_CONFIG, 2, 32, True)
    u = cost.generation_flops(cost.ABC_CONFIG, 2, 32, False)
    assert list(table["FLOPs with cache"]) == [f"{c.linear:,}", f"{c.attention:,}", f"{c.total:,}"]
    assert list(table["FLOPs without cache"]) == [f"{u.linear:,}", f"{u.attention:,}", f"{u.total:,}"]
    fig = plotly_specs(at)[0]
    assert fig["layout"]["yaxis"]["type"] == "log"
    assert sum(1 for tr in fig["data"] if tr["mode"] == "markers") == 2     # counted with / without
    # the recorded speed-up beside the FLOP ratio the engine counts for the same two loops (docs/measured.md)
    more = next(e for e in at.expander if e.label.startswith("Why a measured speed-up"))
    text = " ".join(m.value for m in more.markdown)
    assert "248 new tokens after a prompt of 8 tokens" in text and "= **4.9×**" in text
    assert "FLOP ratio of **121×**" in text and "4% of it" in text
    at.selectbox(key="fl_model").set_value("gpt2").run()
    at.number_input(key="fl_n").set_value(1024).run()
    no_exception(at)
    assert any("too large to run here" in i.value for i in at.info)
    g = cost.generation_flops(cost.GPT2_SMALL, 2, 1024, True)
    assert at.dataframe[0].value["FLOPs with cache"][2] == f"{g.total:,}"
    at.number_input(key="fl_n").set_value(0).run()
    assert "New tokens must be between 1" in errors(at)


def heading(at, i: int | None = None) -> str:
    return frame(at, i)["heading"]


def step_metric(at, label: str, i: int | None = None) -> str:
    return next(m[1] for m in frame(at, i)["metrics"]["items"] if m[0] == label)


def same_alerts(at, i: int | None = None) -> list[str]:
    """The per-sequence checks against running each prompt alone (one alert per sequence)."""
    cols = next(b["cols"] for b in frame(at, i)["top"] if "cols" in b)
    return [b["text"] for col in cols for b in col if "alert" in b]


def grid_spec(at, i: int | None = None) -> dict:
    """The padded-cache grid: the heatmap whose cells are labelled with tokens."""
    return next(s for s in frame(at, i)["figs"] if s["data"][0]["type"] == "heatmap" and s["data"][0].get("text")
                and "pad" in str(s["data"][0]["text"]))


def test_batching_tab_steps_one_pass_for_all():
    at = open_page(PAGE, {"tab": "Batching"})
    no_exception(at)
    assert heading(at).startswith("Event 0 of 7: prefill (3 sequences)")
    assert step_metric(at, "Forward passes (batched)") == "1" and step_metric(at, "Passes if run one by one") == "3"
    assert len(same_alerts(at)) == 3 and all("Same as running this prompt alone" in s for s in same_alerts(at))
    assert grid_spec(at)["data"][0]["text"][0] == ["pad", "pad", "A", "B"]
    assert heading(at, 1).startswith("Event 1 of 7: choose")
    assert heading(at, 2).startswith("Event 2 of 7: decode")
    assert step_metric(at, "Forward passes (batched)", 2) == "2"
    assert step_metric(at, "Passes if run one by one", 2) == "6"
    assert list(frame_table(at, 2)["Sequence 3 mask"]) == ["0", "0", "0", "1", "1"]
    assert frame(at, 2)["table"]["new"] == [4]


def test_batching_bad_prompts_get_a_message():
    at = open_page(PAGE, {"tab": "Batching"})
    at.text_input(key="bt_p2").set_value("").run()
    no_exception(at)
    assert "at least two prompts" in errors(at)
    at.text_input(key="bt_p2").set_value("A X").run()
    assert "Unknown token" in errors(at)
    at.text_input(key="bt_p2").set_value("B A").run()
    assert not at.error and heading(at).startswith("Event 0")


def test_serving_tab_numbers_and_bad_link():
    at = open_page(PAGE, {"tab": "Disaggregated serving"})
    no_exception(at)
    tr = cost.cache_transfer(cost.LLAMA3_8B, 4096, 1, "bf16", 100)
    assert metric(at, "Cache to send") == "537 MB" and tr.bytes == 536_870_912
    assert metric(at, "Transfer time") == f"{tr.seconds * 1e3:,.3g} ms"
    notice = next(i.value for i in at.info if i.value.startswith("**Notice:**"))        # what to look at
    assert "(537 MB)" in notice and f"takes {tr.seconds * 1e3:,.3g} ms" in notice
    assert f"{metric(at, '≈ decode steps')} times the" in notice
    at.number_input(key="sv_link").set_value(0.0).run()
    no_exception(at)
    assert "Link speed must be between" in errors(at)


def test_measure_runs_behind_its_button():
    at = open_page(PAGE, {"tab": "Measured here"})
    no_exception(at)
    assert any("Press **Measure" in i.value for i in at.info)
    n_before = len(plotly_specs(at))                      # only the intensity chart
    at.multiselect(key="ms_batches").set_value([1, 2]).run()
    at.multiselect(key="ms_contexts").set_value([16]).run()
    at.multiselect(key="ms_prompts").set_value([8]).run()
    next(b for b in at.button if b.label == "Measure on this machine").click().run()
    no_exception(at)
    assert not at.error
    assert len(plotly_specs(at)) == n_before + 3          # batch sweep, context sweep, TTFT vs TPOT
    assert any(m.label == "Tokens/s at batch 2" for m in at.metric)
    notice = next(i.value for i in at.info if i.value.startswith("**Notice:**"))
    assert "from batch 1 to batch 2" in notice and "grows" in notice


def test_page_renders_in_every_language_and_keeps_the_tab():
    from kvviz.ui.app.i18n import strings
    for lang in ("es", "de"):
        at = open_page(PAGE, {"lang": lang, "tab": strings(lang)["cost.tab_compute"]})
        no_exception(at)
        assert at.title[0].value == strings(lang)["cost.title"]
        assert at.subheader[0].value.startswith(strings(lang)["cost.table_title"].split("{")[0])
    # switching the language keeps the open tab although its label changes
    at = open_page(PAGE, {"tab": "Compute (FLOPs)"})
    at.selectbox(key="lang_select").set_value("de").run()
    no_exception(at)
    assert at.subheader[0].value.startswith("Die Komplexitätstabelle der Lektion")


def test_batching_tab_runs_the_tiny_gpt():
    from kvviz.decoding.batching import run_batch
    from kvviz.models.gpt import GPTModel

    at = open_page(PAGE, {"tab": "Batching"})
    at.segmented_control(key="bt_model").set_value("gpt").run()
    no_exception(at)
    # the A/B/C prompts are replaced by the GPT's own examples, so the run works straight away
    assert at.text_input(key="bt_p1").value == "Today the weather is so"
    assert heading(at).startswith("Event 0 of 7: prefill (3 sequences)")
    assert len(same_alerts(at)) == 3 and all("Same as running this prompt alone" in s for s in same_alerts(at))
    m = GPTModel()
    run = run_batch(m, [m.tokenize(at.text_input(key=k).value) for k in ("bt_p1", "bt_p2", "bt_p3")], 4)
    grid = grid_spec(at)
    assert grid["data"][0]["text"][1][:run.pad[1]] == ["pad"] * run.pad[1]
    # each sequence's bars are its own top tokens, its greedy choice among them
    bars = next(s for s in frame(at)["figs"] if s["data"][0]["type"] == "bar")["data"][0]
    for b, seq in enumerate(run.events[1].tokens):
        names = [tok for outer, tok in zip(*bars["x"]) if outer == f"Sequence {b + 1}"]
        assert seq[0] in names and 5 <= len(names) <= 6
    at.selectbox(key="bt_layer").set_value(3).run()
    at.selectbox(key="bt_head").set_value(4).run()
    table = frame_table(at)
    k = run.events[0].cache.keys[2][0, 3, 0, :4].tolist()                 # layer 3, head 4, column 0
    assert table["Sequence 1 k"][0] == "(" + ", ".join(f"{x:.4g}" for x in k) + ", …)"
    assert heading(at, 7).startswith("Event 7 of 7: choose (3 sequences)")
    assert all("Same as running this prompt alone" in s for s in same_alerts(at, 7))
    # back to the A/B/C model: its own prompts, and the GPT's layer/head leave the address
    at.segmented_control(key="bt_model").set_value("abc").run()
    assert at.text_input(key="bt_p1").value == "A B" and "bt_layer" not in at.query_params
    at.segmented_control(key="bt_model").set_value("gpt").run()
    at.text_input(key="bt_p2").set_value("It was purple").run()
    no_exception(at)
    assert "Unknown word(s) 'purple'" in errors(at)
