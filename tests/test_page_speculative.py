"""The speculative decoding page in AppTest: its events are the engine's rounds (proposals, the one
verification pass, each test, correction or bonus, the rollback), its numbers are the records', the
summary and the exactness check are what the engine gives, bad input gets a message."""
import pytest

from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import Greedy, Sampler
from kvviz.limits import SPECULATIVE_MAX_GAMMA
from kvviz.models.gpt import GPTModel, load_draft_gpt, load_tiny_gpt
from kvviz.speculative.decoding import speculative_generate
from kvviz.ui.app import fmt
from kvviz.ui.app.i18n import LANGS, strings
from kvviz.ui.app.pages import script
from kvviz.ui.frames import measure_notice, translator
from kvviz.ui.frames import speculative as frames_speculative
from tests.conftest import frame, frame_table, frame_text, no_exception, open_page, plotly_specs, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("speculative")
TARGET, DRAFT = load_tiny_gpt(), load_draft_gpt()
VOCAB = TARGET.tokenizer.vocab
PROMPT = TARGET.tokenizer.encode("It is rainy in London , so we")


def engine(new=12, gamma=4, rule=None, seed=0):
    return speculative_generate(GPTModel(TARGET), GPTModel(DRAFT), PROMPT, new, gamma, rule or Greedy(), seed,
                                keep_attention=True)


def metrics(f) -> dict[str, str]:
    return {label: value for label, value, _, _ in f["metrics"]["items"]}


def test_every_round_steps_through_proposals_verification_tests_and_rollback():
    at = open_page(PAGE)
    no_exception(at)
    spec = engine()
    steps = frames_speculative.plan(spec)
    payload = stepper(at)["payload"]
    assert len(payload["frames"]) == len(steps) and steps[0].kind == "draft"
    kinds = [s.kind for s in steps if s.r == 0]
    r0 = spec.rounds[0]
    assert kinds == ["draft"] * r0.gamma + ["verify"] + ["test"] * r0.n_tested + ["fix", "rollback"]
    assert frame(at, 0)["heading"] == f"Event 0 of {len(steps) - 1}: round 1, the draft proposes"
    # the draft's proposals one by one: its cache grows by each pass, the target's stays
    for k, pr in enumerate(r0.proposals):
        f = frame(at, k)
        table = frame_table(payload, k)
        assert (table["draft"] != "—").sum() == pr.draft_cache_len
        assert (table["target"] != "—").sum() == r0.target_cache.before
        assert f"proposes {VOCAB[pr.token]} for position {r0.start + 1 + k}" in frame_text(f)
        chips = f["top"][0]["strip"]["chips"]               # the text, then the proposals so far (pending)
        assert [c[1:] for c in chips[-(k + 1):]] == [[VOCAB[p.token], "pending"] for p in r0.proposals[: k + 1]]
        assert len(chips) == r0.start + 1 + k + 1
    # one verification pass: the target cache grows by γ + 1 rows, its attention covers them
    v = steps.index(frames_speculative.Step(0, "verify"))
    table = frame_table(payload, v)
    assert (table["target"] == "written this round").sum() == r0.gamma + 1
    assert frame(at, v)["table"]["new"] == list(range(r0.start, r0.start + r0.gamma + 1))
    lead, heat = (x["data"][0] for x in frame(at, v)["figs"][:2])      # both caches, then the attention
    assert lead["y"] == ["draft cache", "target cache"]
    assert len(heat["y"]) == r0.gamma + 1 and len(heat["x"]) == r0.start + r0.gamma + 1
    assert heat["y"][0] == f"{r0.start}:{VOCAB[r0.pending]}"
    # the rollback: the removed rows struck out, then gone from both caches
    rb = steps.index(frames_speculative.Step(0, "rollback"))
    f = frame(at, rb)
    table = frame_table(payload, rb)
    struck = [int(table["position"][i]) for i in f["table"]["struck"]]
    assert struck == list(r0.target_cache.removed) and r0.n_accepted < r0.gamma
    assert (table["target"] == "✗ removed").sum() == len(r0.target_cache.removed)
    assert (table["draft"] == "✗ removed").sum() == len(r0.draft_cache.removed)
    assert f["metrics"]["badge"][0] == "ok"
    after = frame_table(payload, rb + 1)
    assert (after["target"] != "—").sum() == r0.target_cache.after
    # gone, except the correction: the next round's first draft pass writes it at the first struck position
    assert list(after["position"].astype(int)) == list(range(r0.target_cache.after + 1))
    assert after["token"].iloc[-1] == VOCAB[r0.emitted[-1]] != table["token"].iloc[r0.target_cache.after]
    m = metrics(f)
    assert m["Target cache rows"] == str(r0.target_cache.after) and m["Tokens emitted"] == str(len(r0.emitted))
    # the last event: every counter is the run's
    m = metrics(frame(at, len(steps) - 1))
    assert m["Tokens emitted"] == "12" and m["Target passes"] == str(spec.target_passes)
    assert m["Draft passes"] == str(spec.draft_passes)
    assert m["Accepted / tested"].startswith(f"{spec.accepted} / {spec.tested}")


def test_sampled_tests_show_p_q_u_and_the_residual_the_correction_is_drawn_from():
    at = open_page(PAGE, {"sd_rule": "sample", "sd_seed": "1", "step": "5"})
    no_exception(at)
    spec = engine(rule=Sampler(1.0), seed=1)
    steps = frames_speculative.plan(spec)
    assert steps[5] == frames_speculative.Step(0, "test", 0)
    r0 = spec.rounds[0]
    pr = r0.proposals[0]
    assert pr.accepted is False
    text = frame_text(frame(at))
    for x in (pr.p, pr.q, pr.acceptance_probability, pr.u):
        assert f"{x:.3f}" in text, (x, text)
    assert "rejected" in text
    pq = next(s for s in frame(at)["figs"] if len(s["data"]) >= 3 and s["data"][0]["type"] == "bar")
    assert pq["data"][3]["y"] == pytest.approx([pr.u], abs=1e-4)             # only the tested proposal's u
    # the correction: p, q and the normalised residual at the rejection, the drawn token marked
    f = frame(at, 6)
    assert f["heading"].endswith("correction from the residual")
    bars = next(s for s in f["figs"] if any(d.get("name", "").startswith("residual") for d in s["data"]))
    res = next(d for d in bars["data"] if d["name"].startswith("residual"))
    assert res["y"] == pytest.approx([float(r0.residual[VOCAB.index(x)]) for x in res["x"]], abs=1e-4)
    drawn = next(a for a in bars["layout"]["annotations"] if "drawn" in a["text"])
    assert res["x"][drawn["x"]] == VOCAB[r0.emitted[-1]] and f"{VOCAB[r0.emitted[-1]]} (residual" in frame_text(f)
    # the summary's numbers are the run's
    metric = {m.label: m.value for m in at.metric}
    assert metric["Acceptance rate α"] == fmt.percent(spec.acceptance_rate, 1)
    alpha_help = next(m for m in at.metric if m.label == "Acceptance rate α").proto.help   # the rule, defined once
    assert "**Acceptance rule (speculative decoding):** A proposal x is accepted" in alpha_help
    assert metric["Tokens per target pass"] == fmt.fixed(spec.tokens_per_target_pass, 2)
    assert metric["Target passes"] == str(spec.target_passes) and metric["Draft passes"] == str(spec.draft_passes)
    # plain decoding's passes beside it are a comparison, not a change: grey, and no arrow (no "up is good")
    passes = next(m for m in at.metric if m.label == "Target passes").proto
    assert passes.delta.startswith("plain decoding: ") and (passes.direction, passes.color) == (2, 2)  # NONE, GRAY


def test_exactness_greedy_tokens_equal_plain_greedy_and_sampling_says_what_is_exact():
    at = open_page(PAGE)
    plain = generate_cached(GPTModel(TARGET), PROMPT, 12).tokens
    shown = [c.value for c in at.text]
    assert shown[:2] == [" ".join(VOCAB[i] for i in plain)] * 2
    assert any(s.value.startswith("Identical: all 12 tokens are the target's own greedy tokens") for s in at.success)
    at.segmented_control(key="sd_rule").set_value("sample").run()
    no_exception(at)
    assert any("test_sampled_first_token_is_distributed_as_the_target_alone_chi_square" in i.value for i in at.info)
    assert any(s.value.startswith("Identical") for s in at.success)      # the greedy check stays
    assert len(at.text) == 4


def test_expected_speedup_is_the_formula_and_the_measurement_runs_behind_the_button():
    from kvviz import cost
    at = open_page(PAGE, {"sd_c": "0.25", "sd_runs": "1"})
    no_exception(at)
    spec = engine()
    metric = {m.label: m.value for m in at.metric}
    expected = fmt.factor(cost.speculative_speedup(spec.acceptance_rate, 4, 0.25), 2)
    assert metric["Expected speed-up at γ = 4"] == expected
    assert metric["Best γ for this α and c"] == str(cost.best_gamma(spec.acceptance_rate, 0.25, SPECULATIVE_MAX_GAMMA))
    chart = next(s for s in plotly_specs(at) if s["data"][0]["type"] == "scatter")
    assert chart["data"][0]["y"] == pytest.approx([cost.speculative_speedup(spec.acceptance_rate, g, 0.25)
                                                   for g in range(1, SPECULATIVE_MAX_GAMMA + 1)])
    assert any("No measurement" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Measure γ = 1 to 6").click().run()
    no_exception(at)
    table = at.dataframe[-1].value
    assert list(table["γ"]) == [1, 2, 3, 4, 5, 6]
    chart = next(s for s in plotly_specs(at) if s["data"][0]["type"] == "scatter")
    assert [d["name"] for d in chart["data"]][-1] == "measured" and len(chart["data"][-1]["y"]) == 6
    assert any("Why the formula and the measurement differ" in m.value for m in at.markdown)
    # what to notice: the best γ's row, from the record
    measured = at.session_state["speculative_measured"][1]
    notices = [i.value for i in at.info if i.value.startswith("**Notice:**")]
    assert f"**Notice:** {measure_notice.draft_notice(measured, translator('en'))}" in notices


def test_bad_input_gets_a_message_and_the_address_is_checked():
    at = open_page(PAGE)
    for bad, needle in (("It is rainy in Narnia", "Narnia"), ("", "empty"), ("   ", "empty"), ("so " * 80, "limit")):
        at.text_input(key="sd_prompt").set_value(bad).run()
        no_exception(at)
        assert at.error and needle in at.error[0].value, bad
        settings = next(e for e in at.expander if e.label == "Settings")       # folded: the step first
        assert settings.text_input(key="sd_prompt").value == bad and not settings.error   # the message outside
    assert at.segmented_control(key="sd_draft").value == "model"                       # the draft's choice: open
    assert not [w for w in settings.segmented_control if w.key == "sd_draft"]
    at = open_page(PAGE, {"sd_gamma": "99", "sd_new": "inf", "sd_c": "nan", "step": "9999"})
    no_exception(at)
    warnings = " ".join(w.value for w in at.warning)
    assert all(k in warnings for k in ("sd_gamma", "sd_new", "sd_c", "9999")), warnings
    assert stepper(at)["start"] == 0 and at.number_input(key="sd_gamma").value == 4


def test_settings_and_step_come_from_the_address_in_every_language():
    for lang in LANGS:
        at = open_page(PAGE, {"lang": lang, "sd_prompt": "Today the weather is so", "sd_new": "6", "sd_gamma": "2",
                              "sd_layer": "3", "step": "2"})
        no_exception(at)
        assert at.title[0].value == strings(lang)["speculative.title"]
        spec = speculative_generate(GPTModel(TARGET), GPTModel(DRAFT),
                                    TARGET.tokenizer.encode("Today the weather is so"), 6, 2,
                                    keep_attention=True)
        assert len(stepper(at)["payload"]["frames"]) == len(frames_speculative.plan(spec))
        assert stepper(at)["start"] == 2 and at.selectbox(key="sd_layer").value == 3
    present = open_page(PAGE, {"present": "1"})
    no_exception(present)
    assert stepper(present)["present"] is True
    # a late round on a projector (1280×720 at 14 px): the strip's newest chips, the round's proposals
    # among them, saying how many it leaves out; the verification map's keys by position, upright and
    # untitled; the proposals' figure without its title, its bar values at full size
    spec = engine()
    steps = frames_speculative.plan(spec)
    last = len(spec.rounds) - 1
    f = frame(present, steps.index(frames_speculative.Step(last, "verify")))
    full, tail = (b for b in f["top"] if "strip" in b)
    assert full.get("x") and tail.get("p") and "earlier tokens not shown" in tail["strip"]["label"]
    kept = tail["strip"]["chips"]
    assert 5 < len(kept) < len(full["strip"]["chips"]) and kept == full["strip"]["chips"][-len(kept):]
    assert [c[2] for c in kept[-spec.rounds[last].gamma:]] == ["pending"] * spec.rounds[last].gamma
    normal, shown = shown_figs(present, f), shown_figs(present, f, present=True)
    (_, heat, pq), (heat_p, pq_p) = normal, shown        # the caches' figure: the normal view's only
    keys = heat["data"][0]["x"]
    every = -(-len(keys) // frames_speculative.PRESENT_TICKS)
    assert heat_p["data"][0]["x"] == keys and heat_p["layout"]["xaxis"]["tickvals"] == keys[::every]  # hover: the token
    assert heat_p["layout"]["xaxis"]["ticktext"] == [str(i) for i in range(0, len(keys), every)]
    assert heat["layout"]["xaxis"]["title"]["text"] and heat_p["layout"]["xaxis"]["title"] is None
    assert pq["layout"]["title"]["text"] == "Each proposal: q (draft), p (target), and the test"
    assert pq_p["layout"]["title"] is None and pq_p["data"][0]["y"] == pq["data"][0]["y"]
    assert {d.get("constraintext") for d in pq_p["data"] if d["type"] == "bar"} == {"none"}
    assert set(pq["data"][2]["text"]) == {"not tested yet –"} and set(pq_p["data"][2]["text"]) == {"not tested –"}


# ---- the real LLM without a second model (?sd_draft=prompt-lookup | early-exit) -------------------------
# the same stepper and frames as the tiny GPT's: one event per round (the old ?sd_round=N opens step N - 1)

LLM_NEW = 6          # few tokens: every run of SmolLM2 here costs ≈ 0.1-0.4 s a pass


@pytest.fixture(scope="module")
def lookup_page(smollm2):
    """The page on prompt lookup, the repeat case, at round 2 (one AppTest for the module)."""
    at = open_page(PAGE, {"sd_draft": "prompt-lookup", "sd_llm_new": str(LLM_NEW), "sd_round": "2"}, timeout=120)
    return at


def page_run(smollm2, method="prompt-lookup", case="repeat", new=LLM_NEW, k=10, extra=2):
    """The engine's record the page drew (its read-only cached run: no second generation here; the
    engine's own tests check it against plain greedy and transformers)."""
    from kvviz.ui.pages.speculative import PRESETS, self_drafted_run
    return self_drafted_run((tuple(smollm2.ids(smollm2.prompt(PRESETS[case], chat=True))), method, new, k, extra))


def shown_figs(at, f: dict, present: bool = False) -> list[dict]:
    """The figures frame ``f`` draws, in or out of presenter mode (each has a presenter form)."""
    figs = stepper(at)["payload"]["figs"]
    return [figs[b["fig"]] for r in ("lead", "main", "side", "wide") for b in f[r]
            if "fig" in b and not b.get("x" if present else "p")]


@pytest.mark.parametrize("address", [{"sd_round": "2"}, {"step": "1"}])
def test_a_smollm2_round_is_a_step_of_the_stepper_and_the_old_round_address_opens_it(smollm2, address):
    at = open_page(PAGE, {"sd_draft": "prompt-lookup", "sd_llm_new": str(LLM_NEW), **address}, timeout=120)
    no_exception(at)
    run = page_run(smollm2)
    data = stepper(at)
    assert data["start"] == 1 and len(data["payload"]["frames"]) == len(run.rounds)
    assert frames_speculative.plan(run) == [frames_speculative.Step(r.index, "round") for r in run.rounds]
    assert frame(at)["heading"] == f"Round 2 of {len(run.rounds)}"
    assert "sd_round" not in at.query_params and at.query_params.get("step") == "1"


def test_another_model_opens_its_run_at_the_first_step(tiny_real_smollm2):
    """The draft switch's path (SmolLM2's class on tiny weights)."""
    at = open_page(PAGE, {"step": "7"}, timeout=120)
    assert stepper(at)["start"] == 7
    at.segmented_control(key="sd_draft").set_value("prompt-lookup").run(timeout=120)
    no_exception(at)
    assert stepper(at)["start"] == 0 and frame(at)["heading"].startswith("Round 1 of ")
    assert dict(at.query_params) == {"sd_draft": "prompt-lookup"}
    at.segmented_control(key="sd_draft").set_value("model").run(timeout=120)
    assert stepper(at)["start"] == 0 and not dict(at.query_params)


def test_an_old_round_address_beyond_the_run_or_malformed_opens_a_round_of_it(smollm2):
    run = page_run(smollm2)
    at = open_page(PAGE, {"sd_draft": "prompt-lookup", "sd_llm_new": str(LLM_NEW), "sd_round": "99"}, timeout=120)
    no_exception(at)
    assert stepper(at)["start"] == len(run.rounds) - 1          # a shorter run than the address's: its last round
    at = open_page(PAGE, {"sd_draft": "prompt-lookup", "sd_llm_new": str(LLM_NEW), "sd_round": "two"}, timeout=120)
    no_exception(at)
    assert stepper(at)["start"] == 0 and any("sd_round" in w.value for w in at.warning)


def test_prompt_lookup_on_smollm2_shows_the_draft_the_verification_and_the_rollback(smollm2, lookup_page):
    from kvviz.ui.pages.speculative import self_drafted_greedy
    at = lookup_page
    no_exception(at)
    run = page_run(smollm2)
    assert at.segmented_control(key="sd_draft").value == "prompt-lookup" and stepper(at)["start"] == 1
    r = run.rounds[1]
    f = frame(at)
    verify, cache, rounds = shown_figs(at, f)
    heat = verify["data"][0]
    n_pass = len(r.fed) + len(r.draft)
    assert verify["layout"]["title"]["text"].startswith(f"Round 2: one verification pass over {n_pass}")
    assert len(heat["x"]) == len(r.draft) + 1 and heat["x"][0] == str(r.start + 1)
    assert heat["text"][0][:len(r.draft)] == [f"{smollm2.token_text(smollm2.vocab[x]).replace(' ', '␣')} "
                                              f"{'✓' if i < r.n_accepted else '✗' if i == r.n_accepted else '–'}"
                                              for i, x in enumerate(r.draft)]
    # the target's cache: rows before, written and kept, written for rejected draft tokens (removed)
    strip = cache["data"][0]
    assert strip["y"] == ["model's cache"] and len(strip["x"]) == min(14, r.target_cache.grown)
    after = f"{r.target_cache.grown} after the pass, {r.target_cache.after} after the rollback"
    assert cache["layout"]["title"]["text"].endswith(after)
    assert sum(z == 2 for z in strip["z"][0]) == len(r.target_cache.removed)
    assert [d["y"] for d in rounds["data"][:1]] == [[x.n_accepted for x in run.rounds]]
    m = metrics(f)
    assert m["Draft tokens"] == str(len(r.draft)) and m["Accepted"] == str(r.n_accepted)
    metric = {m.label: m.value for m in at.metric}
    assert metric["Acceptance rate"] == fmt.percent(run.accepted_fraction, 1)
    assert metric["Passes of the model"] == str(run.target_passes) < str(LLM_NEW)
    # the exactness check: the same tokens as plain greedy, visible
    assert run.tokens == list(self_drafted_greedy(tuple(run.prompt), LLM_NEW))
    from tests.test_prompt_lookup import transformers_prompt_lookup
    assert run.tokens == transformers_prompt_lookup(smollm2, run.prompt, LLM_NEW, 10, 2)     # and transformers' own
    assert any(s.value.startswith(f"Identical: all {LLM_NEW} tokens are the model's own greedy choice")
               for s in at.success)
    # both kinds of prompt: the repeat prompt is accepted more often than the open question
    cases = plotly_specs(at)[0]
    table = at.dataframe[0].value
    open_run = page_run(smollm2, case="open")
    assert list(table["proposed"]) == [run.proposed, open_run.proposed]
    assert cases["data"][0]["y"] == pytest.approx([run.accepted_fraction, open_run.accepted_fraction or 0.0])
    assert run.accepted_fraction > (open_run.accepted_fraction or 0.0)
    assert any("Not measured yet" in i.value for i in at.info)
    labels = [b.proto.label for b in at.get("download_button")]
    assert labels == ["Download the run (JSON)", "Download the acceptance rates (CSV)"]


def test_early_exit_on_smollm2_is_greedy_and_says_it_is_slower(smollm2):
    from kvviz.ui.pages.speculative import PRESETS, self_drafted_greedy
    at = open_page(PAGE, {"sd_draft": "early-exit", "sd_case": "open", "sd_llm_new": "4", "sd_exit": "20",
                          "sd_ee_k": "2", "sd_round": "2"}, timeout=120)
    no_exception(at)
    run = page_run(smollm2, "early-exit", "open", 4, 2, 20)
    assert run.source == "early-exit" and run.tokens == list(self_drafted_greedy(tuple(run.prompt), 4))
    r = run.rounds[1]
    f = frame(at)
    assert metrics(f)["Draft tokens"] == str(len(r.draft))
    assert at.text_area(key="sd_text").value == PRESETS["open"] and at.number_input(key="sd_exit").value == 20
    assert any(s.value.startswith("Identical: all 4 tokens") for s in at.success)
    assert any("slower than plain decoding" in i.value for i in at.info)
    cache = shown_figs(at, f)[1]["data"][0]
    assert cache["y"] == ["layers 1–20, draft", "model's cache"]        # the draft's rows in the shared layers
    assert "Layers 1 to 20 of 30" in frame_text(f)


def test_real_model_bad_text_missing_weights_and_the_measure_button(tiny_real_smollm2, monkeypatch):
    """What the page does with bad text, the measure button and missing weights (SmolLM2's class on
    tiny weights: the page's paths, not the real model's numbers)."""
    from kvviz.ui.pages import speculative, speculative_speed
    at = open_page(PAGE, {"sd_draft": "prompt-lookup", "sd_llm_new": "2"}, timeout=120)
    for bad, needle in (("   ", "empty"), ("word " * 600, "limit")):
        at.text_area(key="sd_text").set_value(bad).run()
        no_exception(at)
        assert at.error and needle in at.error[0].value, bad
    at.segmented_control(key="sd_case").set_value("open").run()           # the case brings its own text back
    assert not at.error and at.text_area(key="sd_text").value == speculative.PRESETS["open"]
    monkeypatch.setattr(speculative_speed, "MEASURE_DEFAULT_TOKENS", 2)     # a short measurement
    next(b for b in at.button if b.label == "Measure the speed-up").click().run()
    no_exception(at)
    table = at.dataframe[-1].value
    assert list(table["draft"]) == ["prompt lookup", "early exit"] * 2 and set(table["same tokens"]) == {"✓"}
    assert plotly_specs(at)[-1]["layout"]["title"]["text"] == "Measured speed-up over plain greedy decoding"
    # what to notice: the bars, from the record
    cases = {"repeat": "repeat a text", "open": "open question"}
    notice = measure_notice.self_notice(at.session_state["specllm_measured"][1], "prompt-lookup", cases,
                                        translator("en"))
    assert f"**Notice:** {notice}" in [i.value for i in at.info] and "prompt lookup bars" in notice
    present = open_page(PAGE, {"sd_draft": "prompt-lookup", "sd_llm_new": "2", "present": "1"})
    no_exception(present)          # presenter mode: the round's two figures (in the stepper), the settings folded
    data = stepper(present)
    assert data["present"] is True and not plotly_specs(present)
    assert not any(h.value == "The whole run" for h in present.header)
    verify, cache = shown_figs(present, frame(present), present=True)
    assert verify["layout"]["xaxis"]["title"] is None and cache["layout"]["height"] < 190
    monkeypatch.setenv("KVVIZ_SMOLLM2", "none")
    at = open_page(PAGE, {"sd_draft": "early-exit"})
    no_exception(at)
    assert any("weights are not installed" in w.value for w in at.warning)


def test_another_real_model_drafts_for_itself_through_the_same_page(host_gemma):
    """?sd_model=: a base model with a hybrid cache drafts by early exit (its default exit layer: four
    fifths of its layers) and its tokens are its own greedy ones; its text is plain (no chat template)."""
    from kvviz.ui.app import models
    from kvviz.ui.pages.speculative import PRESETS, self_drafted_greedy, self_drafted_run
    at = open_page(PAGE, {"sd_draft": "early-exit", "sd_model": host_gemma, "sd_llm_new": "4"}, timeout=120)
    no_exception(at)
    model = models.real_model(host_gemma)
    ids = tuple(model.ids(model.prompt(PRESETS["repeat"], chat=False)))
    assert at.number_input(key="sd_exit").value == 3 == round(4 * 24 / 30)
    run = self_drafted_run((ids, "early-exit", 4, 4, 3, host_gemma))
    assert run.tokens == list(self_drafted_greedy(ids, 4, host_gemma))
    assert any(s.value.startswith("Identical: all 4 tokens") for s in at.success)
    assert "is a base model" in at.text_area(key="sd_text").label


def test_speculate_takes_gemma3_and_checks_its_exit_layer_before_loading(capsys):
    from tests.test_cli import one_line_error
    err = one_line_error(capsys, "speculate", "--model", "gemma3", "--draft", "early-exit", "--exit-layer", "18",
                         "--prompt", "The cat sat")
    assert "between 1 and 17" in err
