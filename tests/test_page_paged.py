"""The Paged cache page in AppTest: what a user sees at each step equals the engine's records
(kvviz.serving.serve on the same stream), settings come from the address, bad input gets a message."""
import pytest

from kvviz.models.gpt import GPTModel
from kvviz.serving import compare_policies, fork_run, request_stream, serve
from kvviz.ui.app import fmt
from kvviz.ui.app.pages import script
from kvviz.ui.frames.paged import PRESENT_STRIP_TAIL, STRIP_TAIL
from tests.conftest import frame, frame_table, frame_text, no_exception, open_page, plotly_specs, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

PAGE = script("paged")
M = GPTModel()


def _run(blocks=16, policy="continuous"):
    """The page's defaults: 6 requests, seed 0, ≤ 12 new tokens, shared prefix 8, blocks of 4, batch 4."""
    return serve(M, request_stream(6, 0, 12, 8), 4, blocks, policy, 4, prefix_caching=True, check=True)


@pytest.fixture(scope="module")
def default_page():
    at = open_page(PAGE)
    no_exception(at)
    return at


def test_defaults_share_a_prefix_at_step_1_and_cross_a_block_boundary_at_step_2(default_page):
    at, run = default_page, _run()
    frames = stepper(at)["payload"]["frames"]
    assert len(frames) == run.total_steps == 18
    one, two = frame(at, 1), frame(at, 2)
    assert one["heading"] == "Event 1 of 17: prefill of request 1 · decode of request 0"
    s1 = run.steps[1]
    assert s1.shared == (0, 1) and s1.prefill_saved == 8
    assert "blocks 0 and 1 were already in the pool" in frame_text(one)
    assert "8 prefill positions saved" in frame_text(one)
    tables = next(b["tbl"] for b in one["side"] if "tbl" in b)
    assert tables["rows"] == [["0", "0 ×2", "1 ×2", "2", ""], ["1", "0 ×2", "1 ×2", "3", "4"]]
    pool = one["figs"][0]
    # over each held block its requests (told apart by label, not hue), ×2 on the two shared ones
    assert {a["text"] for a in pool["layout"]["annotations"] if a.get("name") != "block id"} == {"r0 r1 ×2", "r0", "r1"}
    assert "position 12 starts its logical block 3" in frame_text(two) and "took block 5" in frame_text(two)
    assert run.steps[2].tables[0] == (0, 1, 2, 5)
    rows = frame_table(at, 2)                                # the logical cache read through the table
    r0 = rows[rows["request"] == "0"]
    assert list(r0["block"]) == [str(b) for b in (0,) * 4 + (1,) * 4 + (2,) * 4 + (5,)]
    assert list(r0["slot"])[-1] == "0"
    assert frame(at, 2)["table"]["new"] == [12, 13 + 13]      # each decode wrote one row: 0's 12, 1's 13
    shared = rows[rows["block"] == "0"]                      # the same physical block: the same keys
    assert shared.groupby("position")["k (h1)"].nunique().max() == 1


def test_every_step_shows_the_engines_check_and_memory(default_page):
    at, run = default_page, _run()
    for i in (0, 2, 9):
        s = run.steps[i]
        m = frame(at, i)["metrics"]
        kind, text = m["badge"]
        assert kind == "ok"
        if s.max_abs_diff == 0.0:
            assert "bit for bit" in text
        else:
            assert fmt.sci(s.max_abs_diff, 1) in text and "1\xa0×\xa010⁻⁴" in text
        items = {label: (value, delta) for label, value, _, delta in m["items"]}
        used = fmt.nbytes(s.memory.bytes("used"))
        assert items["KV held, paged"] == (fmt.nbytes(s.memory.bytes("paged")), f"in use {used}")
        assert items["KV reserved, contiguous"][0] == fmt.nbytes(s.memory.bytes("contiguous"))
        assert items["Free blocks"][0] == f"{len(s.free_blocks)} / 16"
    success = " ".join(x.value for x in at.success)
    assert "All 6 requests got exactly the tokens of their solo greedy runs" in success
    worst = max(r.max_abs_diff for r in run.requests)
    assert fmt.sci(worst, 1) in success


def test_policies_sizes_and_copy_on_write_sections_show_the_engines_numbers(default_page):
    at = default_page
    runs = compare_policies(M, request_stream(6, 0, 12, 8), block_size=4, num_blocks=16, prefix_caching=True)
    metrics = {m.label: m.value for m in at.metric}
    for name, run in runs.items():
        assert metrics[f"Steps, {name}"] == str(run.total_steps)
        assert metrics[f"Mean TTFT, {name} (steps)"] == fmt.fixed(run.mean_ttft, 2)
    assert runs["continuous"].total_steps < runs["static"].total_steps
    titles = [s["layout"]["title"]["text"] for s in plotly_specs(at)]
    assert "Requests over the steps (static batching)" in titles and "Time to first token per request" in titles
    fork = fork_run(M, request_stream(6, 0, 12, 8)[0].prompt, 4, 4, 16, samples=2, seed=0)
    (_, src, dst), = fork.copies
    text = " ".join(m.value for m in at.markdown)
    assert f"block {src} is still shared, so its content goes to block {dst}" in text
    assert any("bit for bit (torch.equal)" in s.value for s in at.success) and all(fork.identical)


def test_a_small_pool_from_the_address_preempts_the_newest_request():
    at = open_page(PAGE, {"pg_blocks": "8", "step": "6"})
    no_exception(at)
    assert at.number_input(key="pg_blocks").value == 8
    run = _run(blocks=8)
    (victim,) = run.steps[6].preempted
    assert run.preemptions == 2 and victim == max(run.steps[5].running, key=lambda r: run.requests[r].admitted_step)
    f = frame(at)
    assert f["heading"].startswith(f"Event 6 of {run.total_steps - 1}: request {victim} preempted")
    assert f"Preempted: request {victim}, the newest running one" in frame_text(f)
    later = next(i for i, x in enumerate(run.steps) if victim in x.recomputed)
    assert f"Recompute: request {victim} is admitted again" in frame_text(frame(at, later))


def test_static_policy_and_spanish_from_the_address():
    at = open_page(PAGE, {"pg_policy": "static", "lang": "es", "step": "2"})
    no_exception(at)
    assert at.segmented_control(key="pg_policy").value == "static"
    run = _run(policy="static")
    assert frame(at)["heading"].startswith(f"Evento 2 de {run.total_steps - 1}")
    assert frame(at)["figs"][-1]["layout"]["title"]["text"] == "Peticiones a lo largo de los pasos (batching estático)"


@pytest.mark.parametrize("query,shown", [
    ({"pg_blocks": "1"}, "cannot be served"),               # no request fits a pool of 4 positions
    ({"pg_blocks": "nan", "pg_block": "1e9", "pg_policy": "<b>x</b>", "step": "99"}, None),
])
def test_bad_settings_give_a_message_not_a_traceback(query, shown):
    at = open_page(PAGE, query)
    no_exception(at)
    assert at.title[0].value == "Paged cache"
    if shown:
        assert any(shown in e.value for e in at.error) and stepper(at) is None
    else:                                                   # every refused value named, defaults used
        notices = " ".join(w.value for w in at.warning)
        for key in query:
            assert (key if key != "step" else "99") in notices, key
        assert at.number_input(key="pg_blocks").value == 16 and stepper(at)["start"] == 0


def test_presenter_mode_shows_each_request_on_one_short_line(default_page):
    """Every step's strips come twice: the page's (newest 8 positions, left out in presenter mode)
    and presenter mode's (the newest 3 and the pending token, so the charts keep their height on a
    1280×720 projector); both end with the same tokens."""
    def chips(block):
        cols = block["cols"] if "cols" in block else [[block]]
        return [[c[1] for c in b["strip"]["chips"]] for col in cols for b in col]

    frames = stepper(default_page)["payload"]["frames"]
    checked = 0
    for f in frames:
        full = [b for b in f["top"] if b.get("x") and ("cols" in b or "strip" in b)]
        short = [b for b in f["top"] if b.get("p")]
        if not full:
            assert not short
            continue
        assert len(full) == len(short) == 1
        for long_chips, short_chips in zip(chips(full[0]), chips(short[0])):
            assert len(long_chips) <= STRIP_TAIL + 1
            assert len(short_chips) == min(len(long_chips), PRESENT_STRIP_TAIL + 1)
            assert long_chips[-len(short_chips):] == short_chips
        checked += 1
    assert checked >= 10


# ---- a real LLM: ?pg_model=smollm2 (chat requests), ?pg_model=gemma3 (a base model: plain text) -------

LLM_QUERY = {"pg_model": "smollm2", "pg_llm_requests": "2", "pg_llm_new": "2"}


def _real_page(query: dict):
    """A real model's case from the address, its run made with the button."""
    at = open_page(PAGE, query, timeout=300)
    no_exception(at)
    before = ([i.value for i in at.info], stepper(at))
    at.button(key="pg_llm_go").click().run(timeout=300)
    no_exception(at)
    return at, before


@pytest.fixture(scope="module")
def llm_page(smollm2):
    """The SmolLM2 case from the address, its run made with the button (2 chat requests of 2 tokens)."""
    return _real_page(LLM_QUERY)


@pytest.fixture(scope="module")
def gemma_page(gemma3):
    """Gemma 3 through the same body: 2 plain-text requests of 2 tokens."""
    return _real_page(LLM_QUERY | {"pg_model": "gemma3"})


@pytest.mark.parametrize("case", ["llm_page", "gemma_page"])
def test_a_real_model_runs_behind_a_button_from_the_address_and_is_checked(case, request):
    at, (infos, mounted) = request.getfixturevalue(case)
    assert mounted is None and any("No run of these settings yet" in i for i in infos)
    assert at.segmented_control(key="pg_model").value == {"llm_page": "smollm2", "gemma_page": "gemma3"}[case]
    assert at.number_input(key="pg_llm_requests").value == 2 and at.number_input(key="pg_llm_block").value == 8
    assert len(stepper(at)["payload"]["frames"]) == 3
    success = " ".join(x.value for x in at.success)
    assert "All 2 requests got exactly the tokens of their solo greedy runs" in success
    assert "bit for bit (torch.equal)" in success                                   # the fork


def test_smollm2_shares_the_system_prompt_and_shows_the_engines_checks(smollm2, llm_page):
    at, _ = llm_page
    frames = stepper(at)["payload"]["frames"]         # tests/test_serving.py checks the engine's run
    assert len(frames) == 3
    assert frames[1]["heading"] == "Event 1 of 2: prefill of request 1 · decode of request 0 · request 0 done"
    assert "blocks 0, 1, and 2 were already in the pool" in frame_text(frame(at, 1))
    assert "24 prefill positions saved" in frame_text(frame(at, 1))
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Blocks shared"] == "3" and metrics["Prefill positions saved"] == "24"
    assert metrics["Prompt positions in all"] == "69"                                # 32 + 37
    success = " ".join(x.value for x in at.success)
    assert "All 2 requests got exactly the tokens of their solo greedy runs" in success
    assert metrics["Largest |Δ| against solo runs"] in success
    assert "bit for bit (torch.equal)" in success                                   # the fork
    text = " ".join(m.value for m in at.markdown)
    assert "Every prompt begins with the same 24 tokens" in text and "3 full blocks and 0 tokens more" in text
    assert "its content goes to block" in text                                       # copy-on-write
    table = at.dataframe[0].value
    assert list(table["blocks shared"]) == [0, 3] and list(table["same as solo"]) == ["yes", "yes"]
    assert list(table["answer (greedy)"]) == ["Hello!", "The answer"]
    assert list(table["message"])[1].startswith("What is 2+2?")


def test_a_finished_smollm2_run_opens_at_once_for_the_next_visitor(llm_page):
    at = open_page(PAGE, LLM_QUERY | {"step": "1", "lang": "de"})                   # a new session
    no_exception(at)
    assert frame(at)["heading"].startswith("Ereignis 1 von 2") and all(b.key != "pg_llm_go" for b in at.button)


@pytest.mark.parametrize("model", ["smollm2", "gemma3"])
def test_real_model_settings_beyond_the_caps_give_a_message(model, request):
    request.getfixturevalue(model)
    at = open_page(PAGE, {"pg_model": model, "pg_llm_block": "32", "pg_llm_blocks": "64"})
    no_exception(at)
    assert any("the limit for this model is 1,024" in e.value for e in at.error)
    assert stepper(at) is None


def test_smollm2_bad_values_in_the_address_fall_back_with_a_notice(smollm2):
    at = open_page(PAGE, {"pg_model": "smollm2", "pg_llm_requests": "1e9", "pg_llm_new": "nan",
                          "pg_llm_block": "<b>x</b>", "step": "99"})
    no_exception(at)
    assert at.number_input(key="pg_llm_requests").value == 4 and at.number_input(key="pg_llm_new").value == 4
    assert any("pg_llm_requests" in w.value for w in at.warning)


def test_smollm2_without_weights_says_how_to_install_them(monkeypatch):
    monkeypatch.setenv("KVVIZ_SMOLLM2", "none")
    at = open_page(PAGE, {"pg_model": "smollm2"})
    no_exception(at)
    assert any("weights are not installed" in w.value for w in at.warning) and stepper(at) is None


def test_a_token_budget_from_the_address_prefills_in_chunks_and_shows_what_filled_each_step():
    """?pg_budget=6 (the lecture's screen): request 0's decode first, then 5 of request 1's prompt;
    the budget chart under the timeline, the step's budget line and what to notice, all from the run."""
    at = open_page(PAGE, {"pg_budget": "6", "step": "2"})
    no_exception(at)
    run = serve(M, request_stream(6, 0, 12, 8), 4, 16, "continuous", 4, prefix_caching=True, check=True,
                chunk_budget=6)
    assert run.steps[2].chunks == ((0, 1), (1, 5)) and run.steps[2].decode == (0,)
    f = frame(at)
    assert len(stepper(at)["payload"]["frames"]) == run.total_steps
    text = frame_text(f)
    assert "Budget: 6 tokens this step: 1 decode first, then prompt chunks request 1 +5 (cache up to 6)" in text
    assert "Request 1 processed only 5 prompt positions" in f["notice"]["notice"]
    budget = next(g for g in f["figs"] if g["layout"]["title"]["text"].startswith("Each step's token budget (6)"))
    assert budget["data"][0]["y"] == [sum(n for r, n in s.chunks if r in s.decode) for s in run.steps]
    assert budget["data"][1]["y"] == [sum(n for r, n in s.chunks if r not in s.decode) for s in run.steps]
    assert "All 6 requests got exactly the tokens of their solo greedy runs" in " ".join(x.value for x in at.success)


def test_a_budget_below_the_batch_is_refused_with_a_message():
    at = open_page(PAGE, {"pg_budget": "2"})
    no_exception(at)
    assert any("Chunk budget" in e.value for e in at.error) and stepper(at) is None


def test_prefix_caching_two_ways_steps_through_the_chat_trace_with_the_engines_numbers():
    """?pg_view=prefix: one frame per request of the stream's chat trace; each frame's hits, what to
    notice and the tree's nodes are kvviz.cache.radix's trace of the same prompts."""
    from kvviz.cache.radix import trace_prefix_caches
    from kvviz.models.base import encode
    from kvviz.serving import conversation_trace
    at = open_page(PAGE, {"pg_view": "prefix", "step": "3"})
    no_exception(at)
    prompts = conversation_trace(request_stream(6, 0, 12, 8), 0)
    trace = trace_prefix_caches([encode(M, p) for p in prompts], 4, 4 * 16)
    assert len(stepper(at)["payload"]["frames"]) == len(prompts)
    s = trace.steps[3]
    assert s.radix_hit > s.hash_hit and s.hash_hit % 4 == 0               # the tree goes on to the token
    text = frame_text(frame(at))
    assert f"the radix tree found {s.radix_hit} positions of request 3, block hashing {s.hash_hit}" in text
    assert len(frame_table(at)) == len(s.tree)
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Found by block hashing"] == str(trace.result("hash").total)
    assert metrics["Found by the radix tree"] == str(trace.result("radix").total)


@pytest.mark.parametrize("wrong", [False, True])
def test_prefill_and_decode_apart_show_the_shipped_records_behind_a_button(wrong, monkeypatch):
    """The page's table and check read each request's Shipped record (the two processes themselves:
    tests/test_serving_disagg.py; here a record per request, one of them wrong on demand, so the
    page's check is seen to fail too) and scale the formula to large models, labelled."""
    from kvviz import cost
    from kvviz.models.base import encode
    from kvviz.serving.disagg import Shipped
    from kvviz.ui.pages import paged_serving
    seed = 3 if wrong else 2                                # a run of its own
    stream = request_stream(6, seed, 12, 8)
    run = serve(M, stream, 4, 16, prefix_caching=True)
    calls = []

    def shipped(name, ids, new):
        calls.append((name, list(ids), new))
        i = len(calls) - 1
        nbytes = cost.cache_bytes(M.cost_config, len(ids), 1, "fp32") + (1 if wrong and i == 1 else 0)
        return Shipped(tuple(M.logit_tokens.index(x) for x in run.requests[i].tokens), nbytes, 0.001)
    monkeypatch.setattr(paged_serving, "serve_disaggregated", shipped)
    at = open_page(PAGE, {"pg_view": "disagg", "pg_seed": str(seed)})
    no_exception(at)
    assert not at.success and any(b.key == "pg_dg_go" for b in at.button) and not calls
    first = cost.cache_bytes(M.cost_config, len(stream[0].prompt), 1, "fp32")     # what to notice: the formula
    assert any(i.value.startswith("**Notice:** Look at the formula") and f"**{first:,} bytes**" in i.value
               for i in at.info)
    (before,) = plotly_specs(at)                            # the formula over the links, before any run
    assert [d["y"] for d in before["data"]] == [["100G", "400G", "NVLink"]] * 2
    at.button(key="pg_dg_go").click().run(timeout=300)
    no_exception(at)
    (after,) = plotly_specs(at)                             # and this socket's measured rate, scaled
    rate = (sum(cost.cache_bytes(M.cost_config, len(ids), 1, "fp32") for _, ids, _ in calls) + wrong) / (0.001 * 2)
    big = cost.cache_bytes(cost.PRESETS["llama3-8b"], 32_768, 1, "fp16")
    assert after["data"][0]["y"][0] == "socket here (measured rate)"
    assert after["data"][0]["x"][0] == pytest.approx(big / rate, rel=1e-3)
    assert calls == [("gpt", encode(M, stream[i].prompt), len(run.requests[i].tokens)) for i in range(2)]
    assert any("bytes shipped equal the cache formula" in s.value for s in at.success) != wrong
    assert any("differs from the cache formula" in e.value for e in at.error) == wrong
    notice = next(i.value for i in at.info if i.value.startswith("**Notice:**"))     # then the bytes shipped
    assert ("Look at the table's first row" in notice) != wrong and ("Look at request 1's row" in notice) == wrong
    assert list(at.dataframe[1].value["model"]) == ["Llama-3-8B", "Llama-3.1-70B"]


def test_the_stall_view_draws_the_engines_measured_token_times_with_and_without_a_budget(monkeypatch):
    """?pg_view=stall on the tiny GPT: the figure's strips, the table and the CSV read one StallRun
    (kvviz.serving.stall, here measured once with one repeat); the page's own budget joins the two."""
    from kvviz.ui.pages import paged_serving
    got, real = [], paged_serving.measure_stall

    def measured(*args, **kwargs):
        got.append(real(*args, **kwargs))
        return got[-1]
    monkeypatch.setattr(paged_serving, "measure_stall", measured)
    monkeypatch.setattr(paged_serving, "STALL_TINY", (40, (8, 24), 1))
    at = open_page(PAGE, {"pg_view": "stall", "pg_budget": "6"})        # a budget of its own: a fresh measurement
    no_exception(at)
    (run,) = got
    assert [s.chunk_budget for s in run.settings] == [None, 6, 8, 24] and run.all_same_as_solo
    spec = next(s for s in plotly_specs(at) if len(s["layout"].get("annotations", ())) == 4)
    whole, six = run.settings[:2]
    assert spec["layout"]["annotations"][0]["text"].startswith("<b>whole prompt</b>: largest gap ")
    assert [t["x"] for t in spec["data"][:4]] == [[x * 1e3 for x in r.token_s] for r in whole.requests]
    assert whole.long.ttft_steps == 1 < six.long.ttft_steps
    table = at.dataframe[0].value
    assert list(table["steps"]) == [s.steps for s in run.settings]
    assert list(table["long prompt's TTFT (steps)"]) == [s.long.ttft_steps for s in run.settings]
    assert any("equal its solo greedy run in all 4 settings" in s.value for s in at.success)
    best = min(run.settings[1:], key=lambda x: x.short_max_gap_s)       # what to notice: the smoothest budget
    notice = next(i.value for i in at.info if i.value.startswith("**Notice:**"))
    assert f"arrives at step {run.arrival_step}" in notice and f"budget of {best.chunk_budget}" in notice
    assert f"after {best.long.ttft_steps} steps" in notice
    assert any(b.proto.label == "Every request in every setting (CSV)" for b in at.get("download_button"))


def test_a_real_models_stall_is_measured_behind_a_button(tiny_real_smollm2, monkeypatch):
    """?pg_model=smollm2&pg_view=stall: nothing is measured until the button (a short long prompt
    here, one repeat, SmolLM2's class on tiny weights: the view's path, not its numbers); then the
    figure and every request's check."""
    from functools import partial

    from kvviz.ui.pages import paged_serving
    monkeypatch.setattr(paged_serving, "STALL_REAL", (24, (8,), 1))
    monkeypatch.setattr(paged_serving, "stall_stream", partial(paged_serving.stall_stream, new=3))
    at = open_page(PAGE, {"pg_model": "smollm2", "pg_view": "stall"}, timeout=300)
    no_exception(at)
    assert not plotly_specs(at) and any(b.key == "pg_stall_go" for b in at.button)
    at.button(key="pg_stall_go").click().run(timeout=300)
    no_exception(at)
    (spec,) = plotly_specs(at)
    assert len(spec["layout"]["annotations"]) == 2
    assert any("equal its solo greedy run in all 2 settings" in s.value for s in at.success)
