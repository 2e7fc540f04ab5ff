"""What to notice and the key moments (kvviz/ui/frames: ``notice_block``, ``Payload.moment``,
kvviz/ui/frames/moments.py), and each screen's place in the lecture script (kvviz/ui/pages/lecture.py):
engine records in, frames out, without a browser. What the browser does with them (the notice first,
the ticks under the slider, key M) is walked by tests/browser/test_presenter.py."""
import functools
import html
import re
import tempfile
from pathlib import Path

import pytest

from kvviz.decoding.batching import compare_with_solo, run_batch, solo_runs
from kvviz.decoding.stepper import run_generation
from kvviz.models.abc import ABCModel
from kvviz.models.gpt import GPTModel
from kvviz.models.weather import DEFAULT_VALUES, WeatherModel
from kvviz.ui.app import fmt
from kvviz.ui.app.pages import PAGES
from kvviz.ui.frames import abc as frames_abc
from kvviz.ui.frames import batching as frames_batching
from kvviz.ui.frames import compress as frames_compress
from kvviz.ui.frames import gpt as frames_gpt
from kvviz.ui.frames import moments, translator
from kvviz.ui.frames import paged as frames_paged
from kvviz.ui.frames import weather as frames_weather
from tests.conftest import frame_of as _frame_of

LANGS = ("en", "es", "de")
GPT = GPTModel()


def _abc(tr):
    return frames_abc.build(run_generation(ABCModel(), ["A", "B"], 3), tr)


def _weather(tr, repair=False):
    model = WeatherModel(dict(DEFAULT_VALUES))
    run = run_generation(model, ["Today", "weather", "is", "so"], 3, repair=model.repair if repair else None)
    return frames_weather.build(run, dict(DEFAULT_VALUES), tr)


def _gpt(tr):
    return frames_gpt.build(run_generation(GPT, GPT.tokenize("It was"), 2), GPT, 0, 0, tr)


def _batching(tr):
    m = ABCModel()
    prompts = [["A", "B"], ["C", "A", "B", "B"]]
    run = run_batch(m, prompts, 3)
    return frames_batching.build(run, compare_with_solo(run, solo_runs(m, run, 3)), m, 0, 0, tr)


@functools.cache
def _comparison(kind: str):
    """The Smaller caches page's three views on the tiny GPT, short runs: a window of 4 plus 2 sinks
    (first eviction at event 4), int4 codes in groups of 8 (first codes at event 6, read from event 8),
    2 K/V heads of 4 (different from the first pass)."""
    from kvviz.compress import Variant, compare_steps
    variant = {"window": Variant.of("window", window=4, sinks=2),
               "quant": Variant.of("quant", bits=4, group_size=8, key_axis="channel", residual=0),
               "gqa": Variant.of("gqa", kv_heads=2)}[kind]
    return compare_steps(variant, ["Today", "the", "weather", "is", "so"], 5, GPT)


def _compress(kind):
    return lambda tr: frames_compress.build(_comparison(kind), GPT, 0, 0, tr)


@functools.cache
def _served():
    """A served stream whose pool is too small (preempts), with a shared prefix (kvviz.serving)."""
    from kvviz.serving import request_stream, serve
    return serve(GPT, request_stream(6, 0, 10, 8), 4, 8, "continuous", 4, prefix_caching=True, check=True)


def _paged(tr):
    return frames_paged.build(_served(), tr)


def _prefix(tr):
    """The Paged cache page's prefix-caching view: a chat trace through block hashing and a radix tree."""
    from kvviz.cache.radix import trace_prefix_caches
    from kvviz.models.base import encode
    from kvviz.serving import conversation_trace, request_stream
    from kvviz.ui.frames import paged_serving
    prompts = conversation_trace(request_stream(6, 0, 12, 8), 0)
    trace = trace_prefix_caches([encode(GPT, p) for p in prompts], 4, 4 * 16)
    return paged_serving.build(trace, lambda ids: " ".join(map(str, ids)), tr)



@functools.cache
def _spec_run(sampled: bool):
    """A draft model's run on the tiny GPT (sampled: a rejection, a correction from the residual and a
    bonus; greedy: a greedy rejection and a bonus), kept for the three languages."""
    from kvviz.decoding.sampling import Greedy, Sampler
    from kvviz.models.gpt import load_draft_gpt, load_tiny_gpt
    from kvviz.speculative.decoding import speculative_generate
    tiny = load_tiny_gpt()
    rule, seed = (Sampler(1.0), 2) if sampled else (Greedy(), 0)
    return speculative_generate(GPTModel(tiny), GPTModel(load_draft_gpt()), tiny.tokenizer.encode(
        "It is rainy in London , so we"), 12, 4, rule, seed, keep_attention=True), tiny.tokenizer.vocab


def _speculative(tr, sampled=True):
    from kvviz.ui.frames import speculative as frames_speculative
    spec, vocab = _spec_run(sampled)
    return frames_speculative.build(spec, vocab, 0, 0, tr)


@functools.cache
def _hf(kind: str):
    """A tiny random transformers model (tests/tiny_models.py) behind the Real LLM page's model class
    (what a host names), loaded once: the llama (4 query heads over 2 K/V heads), the gemma3 (4 over 1,
    three sliding-window layers of window 8)."""
    from kvviz.models import real
    from kvviz.models.base import ModelLimits
    from tests import tiny_models
    with tempfile.TemporaryDirectory() as d:
        return real.host_model(str(tiny_models.save(kind, Path(d) / kind)), ModelLimits())()


@functools.cache
def _llm_run(kind: str):
    m = _hf(kind)
    return run_generation(m, m.tokenize("Today the weather is so nice"), 4), m


def _llm(tr, kind="llama", layer=0):
    from kvviz.ui.frames import llm as frames_llm
    run, m = _llm_run(kind)
    return frames_llm.build(run, m, layer, 0, tr)


@functools.cache
def _self_run(method: str):
    from kvviz.speculative.early_exit import early_exit_generate
    from kvviz.speculative.prompt_lookup import prompt_lookup_generate
    m = _hf("llama")
    ids = m.ids(m.tokenize("the cat sat on the mat . the cat sat on the mat . the cat"))
    if method == "prompt-lookup":        # rounds whose draft all fails, and rounds it all passes
        return prompt_lookup_generate(m, ids, 12, 3, 2), m
    return early_exit_generate(m, ids, 8, 1, 3), m       # round 1 has no draft (the prefill)


def _self(tr, method="prompt-lookup"):
    from kvviz.ui.frames import speculative as frames_speculative
    run, m = _self_run(method)
    return frames_speculative.build(run, m.vocab, 0, 0, tr, n_layers=m.n_layers)


BUILDERS = {"abc": _abc, "weather": _weather, "gpt": _gpt, "batching": _batching,
            "compress_window": _compress("window"), "compress_quant": _compress("quant"),
            "compress_gqa": _compress("gqa"), "paged": _paged, "paged_prefix": _prefix,
            "speculative": _speculative, "speculative_greedy": lambda tr: _speculative(tr, sampled=False),
            "prompt_lookup": _self, "early_exit": lambda tr: _self(tr, "early-exit"),
            "llm": _llm, "llm_gemma_sliding": lambda tr: _llm(tr, "gemma3", 0),
            "llm_gemma_global": lambda tr: _llm(tr, "gemma3", 3)}


def frame_of(p: dict, i: int) -> dict:
    """Frame ``i`` resolved (tests/conftest.py), its notice's pooled text too."""
    from kvviz.ui.frames import resolve
    f = _frame_of(p, i)
    if f.get("notice"):
        f["notice"] = dict(f["notice"], notice=resolve(p, f["notice"]["notice"]))
    return f


def _plain(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html)


@pytest.mark.parametrize("page", list(BUILDERS))
def test_every_event_says_what_to_notice_in_every_language(page):
    payloads = {lang: BUILDERS[page](translator(lang)).to_dict() for lang in LANGS}
    n = len(payloads["en"]["frames"])
    for i in range(n):
        texts = {lang: _plain(frame_of(p, i)["notice"]["notice"]) for lang, p in payloads.items()}
        assert all(len(t) > 40 for t in texts.values()), (i, texts)
        assert texts["es"] != texts["en"] != texts["de"], (i, texts)      # translated, not English fallbacks
    first = [m for m, _ in payloads["en"]["moments"]]
    assert first and first == sorted(first) and all(0 <= m < n for m in first)


def test_a_choice_points_at_the_row_it_has_not_added_and_a_decode_at_the_one_it_has():
    run = run_generation(ABCModel(), ["A", "B"], 3)
    p = frames_abc.build(run, translator("en")).to_dict()
    for ev in run.events:
        text = _plain(frame_of(p, ev.index)["notice"]["notice"])
        if ev.phase != "decode":
            assert f"{ev.cache_len} rows" in text
        else:
            assert f"position {ev.positions[0]}" in text and f"{ev.kv_computed} K/V" in text
            assert f"{ev.kv_recompute} when" in text
        if ev.phase == "choose":
            assert f"{ev.chosen} is chosen" in text
    assert p["moments"] == [[1, "Chosen, not processed"], [2, "First decode from the cache"]]


def test_the_weather_page_points_at_the_stale_key_and_offers_the_jump_to_it():
    p = _weather(translator("en")).to_dict()
    flagged = [i for i, f in enumerate(p["frames"]) if f["table"]["flagged"]]
    stale = flagged[0]
    assert [stale, "The stale key"] in p["moments"]
    before = frame_of(p, 0)["notice"]
    assert before["jump"] == stale and "Nothing is stale yet" in _plain(before["notice"])
    at = _plain(frame_of(p, stale)["notice"]["notice"])
    # the flagged cell of the table is the one the sentence names: head 2, position 4 (so), +1 cached
    assert "head 2's cached key at position 4 (so) is still +1" in at and "6.0 instead of 7.0" in at
    assert "recomputed now it is \u22121" in at and "-1" not in at           # a typeset minus, as on a slide
    table = frame_of(p, stale)["table"]
    row, col = table["flagged"][0]
    assert p["table"]["cols"][col] == "k (H2)" and p["table"]["rows"][table["ids"][row]][1] == "so"
    fixed = _weather(translator("en"), repair=True).to_dict()       # repaired: nothing stale, nothing to jump to
    assert all(f["notice"]["jump"] is None for f in fixed["frames"])
    assert "rewritten rows" in _plain(frame_of(fixed, 2)["notice"]["notice"])


def test_smaller_caches_say_nothing_differs_until_the_first_eviction_then_point_at_the_row_kept_in_view():
    cmp = _comparison("window")
    p = _compress("window")(translator("en")).to_dict()
    evicted = next(e for e in cmp.compressed.events if any(r.evicted_at == e.index for r in e.cache.rows))
    first = cmp.first_difference()
    assert evicted.index == first == 4
    for i in range(evicted.index):          # identical so far: said, with the jump to the eviction
        n = frame_of(p, i)["notice"]
        assert "Nothing differs yet" in _plain(n["notice"]) and n["jump"] == evicted.index
        assert n["jl"] == f"Go to the first eviction (event {evicted.index})"
    (row, pos), = [(k, r.position) for k, r in enumerate(evicted.cache.rows) if r.evicted_at == evicted.index]
    at = frame_of(p, evicted.index)
    text = _plain(at["notice"]["notice"])
    assert f"greyed row of the cache table: this pass evicted position {pos} ({evicted.sequence[pos]})" in text
    score = cmp.score_at(evicted.index + 1)
    kl = fmt.sci(score.kl, 1) if 0 < score.kl < 1e-3 else f"{score.kl:.3g}"     # prose: never 6.18e-05
    assert f"KL {kl}" in text and f"rank {score.full_top1} first" in text
    # the row the notice names is greyed, and presenter mode never folds it away (step_view.js "keep")
    assert at["table"]["evicted"] == [row] and at["table"]["keep"] == [row]
    assert "keep" not in frame_of(p, evicted.index + 1)["table"]            # a choice evicts nothing
    assert [evicted.index, "First eviction"] in p["moments"]


def test_a_quantized_cache_jumps_to_its_first_codes_and_then_to_the_first_pass_that_reads_them():
    cmp = _comparison("quant")
    p = _compress("quant")(translator("en")).to_dict()
    coded = next(e.index for e in cmp.compressed.events if any(r.quantized_at is not None for r in e.cache.rows))
    first = cmp.first_difference()
    assert coded < first
    assert frame_of(p, 0)["notice"]["jump"] == coded and [coded, "First quantized rows"] in p["moments"]
    assert "error heatmap" in _plain(frame_of(p, coded)["notice"]["notice"])
    assert frame_of(p, coded)["notice"]["jump"] == first == frame_of(p, coded + 1)["notice"]["jump"]
    assert all(frame_of(p, i)["notice"]["jump"] is None for i in range(first, len(p["frames"])))
    tiny = next(s for s in cmp.scores if 0 < s.kl < 1e-3)
    assert f"KL {fmt.sci(tiny.kl, 1)}" in _plain(frame_of(p, tiny.event)["notice"]["notice"])


def test_the_paged_cache_points_at_the_block_shared_preempted_or_taken():
    run = _served()
    p = _paged(translator("en")).to_dict()
    texts = [_plain(frame_of(p, s.step)["notice"]["notice"]) for s in run.steps]
    pre = next(s for s in run.steps if s.preempted)
    r = pre.preempted[0]
    held = run.steps[pre.step - 1].tables[r]
    assert f"blocks {', '.join(map(str, held[:-1]))}, and {held[-1]} in the pool: request {r} has just given" \
        in texts[pre.step]
    back = next(s.step for s in run.steps if r in s.recomputed)
    assert frame_of(p, pre.step)["notice"]["jump"] == back and f"preempted at event {pre.step}" in texts[back]
    shared = next(s for s in run.steps if s.shared)
    assert f"first {shared.prefill_saved} positions of its prompt already cached" in texts[shared.step]
    quiet = [s for s in run.steps if s.decode and not (s.taken or s.freed or s.shared or s.preempted or s.prefill)]
    for s in quiet:                       # nothing changes in the pool: said, with the jump to where it does
        j = frame_of(p, s.step)["notice"]["jump"]
        assert "The pool does not change" in texts[s.step] and j > s.step
        t = run.steps[j]
        assert t.taken or t.freed or t.shared or t.preempted


def test_the_weather_heatmaps_print_their_weights_beyond_five_keys():
    p = _weather(translator("en")).to_dict()
    last_decode = max(i for i, f in enumerate(p["frames"]) if "decode" in f["heading"])
    fig = frame_of(p, last_decode)["figs"][0]
    assert len(fig["data"][0]["x"]) == 6 and fig["data"][0]["texttemplate"] == "%{text}"


def _notices(p: dict) -> list[dict]:
    """Every frame's notice, its text as read (tags dropped, entities unescaped)."""
    shown = (frame_of(p, i)["notice"] for i in range(len(p["frames"])))
    return [dict(n, text=html.unescape(_plain(n["notice"]))) for n in shown]


@pytest.mark.parametrize("sampled", [True, False])
def test_speculative_notices_name_the_records_numbers_at_each_kind_of_event(sampled):
    from kvviz.ui.frames.speculative import plan
    spec, vocab = _spec_run(sampled)
    steps = plan(spec)
    notes = _notices(_speculative(translator("en"), sampled).to_dict())
    kinds = set()
    for s, note in zip(steps, notes):
        rd, text = spec.rounds[s.r], note["text"]
        kinds.add((s.kind, rd.bonus) if s.kind == "fix" else s.kind)
        if s.kind == "draft":          # nothing checked yet: the jump goes to this round's one verification pass
            assert steps[note["jump"]] == type(s)(s.r, "verify") and "Nothing is checked yet" in text
            assert f"to {rd.proposals[s.i].draft_cache_len} rows" in text
            assert f"stays at {rd.target_cache.before}" in text
        else:
            assert note["jump"] is None
        if s.kind == "verify" and rd.gamma:
            assert f"by {rd.gamma + 1} rows in one pass" in text and "saving" in text
        if s.kind == "test" and rd.proposals[s.i].accepted is False:
            pr = rd.proposals[s.i]
            assert f"proposal {s.i + 1}'s bar" in text and vocab[pr.token] in text
            if sampled:                # the rejected bar: p < q, u above min(1, p/q), the residual keeps p
                assert pr.p < pr.q and f"p = {pr.p:.3f} < q = {pr.q:.3f}" in text and f"u = {pr.u:.3f}" in text
                assert "residual distribution" in text and "target's alone" in text
            else:
                assert vocab[int(rd.p[s.i].argmax())] in text
        if s.kind == "fix" and rd.bonus and rd.gamma:
            assert f"bonus token {vocab[rd.emitted[-1]]} is free" in text and f"emits {len(rd.emitted)} tokens" in text
        if s.kind == "fix" and rd.rejected_at is not None and sampled:
            assert f"residual bars at position {rd.start + 1 + rd.rejected_at}" in text
        if s.kind == "rollback" and len(rd.target_cache.removed):
            assert f"{len(rd.target_cache.removed)} target row" in text
    assert {"draft", "verify", "test", ("fix", True), ("fix", False), "rollback"} <= kinds     # every kind was read


def test_a_self_drafted_round_without_a_draft_offers_the_next_round_that_has_one():
    run, _ = _self_run("early-exit")
    notes = _notices(_self(translator("en"), "early-exit").to_dict())
    plain = [i for i, r in enumerate(run.rounds) if not r.draft]
    assert plain and all(notes[i]["jump"] == next(k for k in range(i + 1, len(run.rounds)) if run.rounds[k].draft)
                         for i in plain)
    lookup, _ = _self_run("prompt-lookup")
    for r, note in zip(lookup.rounds, _notices(_self(translator("en")).to_dict())):
        assert f"emits {len(r.emitted)} token" in note["text"] or "emits that one token" in note["text"]
        if r.n_accepted < len(r.draft):
            assert f"{len(r.target_cache.removed)} row" in note["text"]


def test_the_real_llm_notice_says_why_grouped_kv_heads_make_the_cache_smaller_and_which_row_a_window_greys():
    for kind in ("llama", "gemma3"):
        run, m = _llm_run(kind)
        first = _notices(_llm(translator("en"), kind).to_dict())[0]["text"]
        assert f"{m.n_kv_heads} K/V head" in first and f"{m.n_heads} query heads share" in first
        assert f"{m.n_heads // m.n_kv_heads}× smaller" in first
    p = _llm(translator("en"), "gemma3", 0).to_dict()            # layer 1: a sliding-window layer of window 8
    run, m = _llm_run("gemma3")
    notes = _notices(p)
    drop = [m_ for m_, label in p["moments"] if label == "First eviction"][0]
    assert all(n["jump"] == drop for n in notes[:drop]) and all(n["jump"] is None for n in notes[drop:])
    ev = run.events[drop]
    gone = [r.position for r in ev.cache.rows if r.evicted_at == drop]
    assert gone and f"row {gone[-1]} turns grey" in notes[drop]["text"] and "last 8 positions" in notes[drop]["text"]
    table = frame_of(p, drop)["table"]
    assert [int(p["table"]["rows"][table["ids"][i]][0]) for i in table["evicted"]][-1] == gone[-1]
    assert all(n["jump"] is None for n in _notices(_llm(translator("en"), "gemma3", 3).to_dict()))   # the global layer


# ---- views without a stepper: the Paged cache's stall and disaggregation, the Cost page's tabs ----------------

@functools.cache
def _stall():
    """The stall view's record on the tiny GPT, small: a 16-token prompt, one budget, one repeat."""
    from kvviz.serving.stall import measure_stall, stall_stream
    return measure_stall(GPT, stall_stream(GPT, 16), (4,), repeats=1)


@functools.cache
def _shipped():
    """The disaggregation view's rows on the tiny GPT: two prompts through the two workers (in threads,
    over a local socket, as the page's two processes), against the cache formula and one process."""
    from kvviz import cost
    from kvviz.models.base import encode
    from kvviz.serving.disagg import ship_in_threads
    from kvviz.ui.frames.paged_notice import ShipRow
    rows = []
    for r, text in enumerate(("Today the weather is so nice", "It was")):
        ids = encode(GPT, GPT.tokenize(text))
        shipped = ship_in_threads(GPT, ids, 3)
        solo = run_generation(GPT, GPT.tokenize(text), 3)
        same = [GPT.logit_tokens[i] for i in shipped.tokens] == [e.chosen for e in solo.events if e.phase == "choose"]
        rows.append(ShipRow(r, len(ids), cost.cache_bytes(GPT.cost_config, len(ids), 1, "fp32"), shipped.bytes_sent,
                            same))
    return tuple(rows)


def _disagg(tr, ran=True):
    from kvviz import cost
    from kvviz.ui.frames.paged_notice import ShipRow, disagg_notice
    rows = _shipped() if ran else tuple(ShipRow(r.request, r.prompt_tokens, r.formula_bytes) for r in _shipped())
    return disagg_notice(rows, GPT.cost_config, cost.DTYPE_BITS["fp32"] // 8, tr)


def _cost(tab: str):
    """A Cost tab's notice, from the numbers the tab shows at its defaults (kvviz/ui/pages/cost*.py)."""
    from kvviz import cost
    from kvviz.ui.frames import cost_notice

    def build(tr):
        if tab == "memory":           # GQA (the shared-K/V sentence) and MHA
            return " ".join(cost_notice.memory(cost.memory_report(cost.PRESETS[m], 1024, 1, "fp16"), tr)
                            for m in ("llama3-8b", "gpt2"))
        if tab == "compute":
            cfg = cost.PRESETS["gpt2"]
            return cost_notice.compute(32, cost.generation_flops(cfg, 2, 32, True),
                                       cost.generation_flops(cfg, 2, 32, False), cost.step_flops(cfg, 33, True),
                                       cost.step_flops(cfg, 33, False), tr)
        if tab == "serving":
            cfg = cost.PRESETS["llama3-8b"]
            return cost_notice.serving(cost.cache_transfer(cfg, 4096, 1, "bf16", 100.0),
                                       cost.decode_step_floor(cfg, 4096, 1, "bf16", 3.35), tr)
        xs, cfg = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096], cost.PRESETS["llama3-8b"]
        return cost_notice.intensity(xs, [cost.prefill_intensity(cfg, x, 1).flops_per_byte for x in xs],
                                     [cost.decode_intensity(cfg, 4096, x).flops_per_byte for x in xs], 300.0, 4096,
                                     cost.decode_intensity_limit(cfg, 4096), tr)
    return build


def _stall_notice(tr):
    from kvviz.ui.frames.paged_notice import stall_notice
    return stall_notice(_stall(), tr)


@functools.cache
def _one_word(a: str, b: str):
    """The Real LLM page's one-word view on the tiny GPT: "rainy" / "sunny" part at new token 2,
    "is" / "was" never (6 greedy tokens each)."""
    from kvviz.decoding.one_word import one_word
    from kvviz.models.base import encode
    return one_word(GPT, (encode(GPT, GPT.tokenize(a)), encode(GPT, GPT.tokenize(b))), 6)


@functools.cache
def _loop(new: int, tau: float):
    """Greedy against sampling on the tiny GPT (kvviz.decoding.long_runs.loop_pair): over 48 tokens greedy
    loops; at τ = 0.1 sampling loops too, at τ = 1 it does not; over 6 tokens nothing repeats."""
    from kvviz.decoding.long_runs import loop_pair
    from kvviz.models.base import encode
    return loop_pair(GPT, encode(GPT, GPT.tokenize("It is rainy")), new, tau, 0)


def _word(i: int) -> str:
    return GPT.logit_tokens[i]


def _words(ids) -> str:
    return " ".join(map(_word, ids))


def _loop_notice(new: int, tau: float, try_prompt: str | None = None):
    from kvviz.ui.frames.loop_notice import loop_notice
    return lambda tr: loop_notice(_loop(new, tau), _words, tr, try_prompt)


def _one_word_notice(a: str, b: str):
    from kvviz.ui.frames.loop_notice import one_word_notice
    return lambda tr: one_word_notice(_one_word(a, b), 3, _word, tr)


@functools.cache
def _whole():
    from kvviz.decoding.whole_run import whole_run
    return whole_run(run_generation(GPT, GPT.tokenize("It was"), 3), 0, 0)


def _whole_notice(tr):
    from kvviz.ui.frames.loop_notice import whole_notice
    return whole_notice(_whole(), tr)


VIEWS = {"paged_stall": _stall_notice,
         "paged_disagg_before": lambda tr: _disagg(tr, ran=False), "paged_disagg": _disagg,
         **{f"cost_{tab}": _cost(tab) for tab in ("memory", "compute", "measure", "serving")},
         "loop_one_word": _one_word_notice("It is rainy", "It is sunny"),
         "loop_one_word_same": _one_word_notice("Today the weather is", "Today the weather was"),
         "loop_greedy": _loop_notice(48, 1.0), "loop_both": _loop_notice(48, 0.1),
         "loop_none": _loop_notice(6, 1.0, "Today the weather is"), "loop_whole": _whole_notice}


@pytest.mark.parametrize("view", list(VIEWS))
def test_every_view_without_a_stepper_says_what_to_notice_in_every_language(view):
    texts = {lang: html.unescape(VIEWS[view](translator(lang))) for lang in LANGS}
    assert all(len(t) > 40 and "{" not in t for t in texts.values()), texts
    assert texts["es"] != texts["en"] != texts["de"], texts             # translated, not English fallbacks


def test_the_stall_notice_names_the_gap_the_whole_prefill_opens_and_what_the_budget_costs():
    import dataclasses

    from kvviz.ui.frames.paged_notice import smoothest, stall_notice, stall_time
    run = _stall()
    whole, best = run.settings[0], smoothest(run)
    shown = stall_time(run, "en")
    text = stall_notice(run, translator("en"))
    assert f"arrives at step {run.arrival_step}" in text and f"prompt of {run.long_tokens} tokens" in text
    assert f"longest gap between two tokens is **{shown(whole.short_max_gap_s)}**" in text
    assert f"budget of {best.chunk_budget}" in text and f"**{shown(best.short_max_gap_s)}**" in text
    assert f"after {best.long.ttft_steps} steps" in text and best.long.ttft_steps > whole.long.ttft_steps
    smaller = best.short_max_gap_s < whole.short_max_gap_s         # measured: either way, the text says which
    assert ("smaller, because the decodes go first" in text) == smaller
    assert ("shows no smaller gap" in text) == (not smaller)
    # a measurement where the budget's gaps came out as large as the whole prompt's: said, never "smaller"
    same = dataclasses.replace(run, settings=(whole, dataclasses.replace(best, requests=whole.requests)))
    noisy = stall_notice(same, translator("en"))
    assert "shows no smaller gap" in noisy and "The steps do not" in noisy


def test_the_disaggregation_notice_equals_the_shipped_bytes_to_the_cache_formula():
    from kvviz import cost
    rows = _shipped()
    first = rows[0]
    assert all(r.bytes_sent == r.formula_bytes and r.same_tokens for r in rows)     # the engine's check
    cfg = GPT.cost_config
    assert first.formula_bytes == 2 * cfg.n_layers * cfg.n_kv_heads * cfg.head_dim * 4 * first.prompt_tokens
    formula = f"2 · {cfg.n_layers} layers · {cfg.n_kv_heads} K/V heads · {cfg.head_dim} dimensions · 4 bytes"
    before = _disagg(translator("en"), ran=False)
    assert formula + f" · {first.prompt_tokens} = **{fmt.integer(first.formula_bytes, lang='en')} bytes**" in before
    after = _disagg(translator("en"))
    assert f"shipped **{fmt.integer(first.bytes_sent, lang='en')} bytes**" in after and formula in after
    assert "same tokens as one process (both requests)" in after
    assert cost.DTYPE_BITS["fp32"] // 8 == 4
    from kvviz.ui.frames.paged_notice import ShipRow, disagg_notice
    off = (rows[0], ShipRow(1, rows[1].prompt_tokens, rows[1].formula_bytes, rows[1].bytes_sent + 4, True))
    assert "Look at request 1's row" in disagg_notice(off, cfg, 4, translator("en"))


def test_the_cost_notices_name_the_numbers_their_tab_shows():
    from kvviz import cost
    rep = cost.memory_report(cost.PRESETS["llama3-8b"], 1024, 1, "fp16")
    text = _cost("memory")(translator("es"))
    assert fmt.nbytes(rep.total, lang="es") in text and f"×{fmt.sig(rep.saving_vs_mha, lang='es')}" in text
    cfg = cost.PRESETS["llama3-8b"]
    dec = [cost.decode_intensity(cfg, 4096, x).flops_per_byte for x in (1, 4096)]
    ai = _cost("measure")(translator("en"))
    assert dec[-1] < 300 and "stays below it for every batch up to 4,096" in ai       # decode: memory-bound
    assert fmt.fixed(cost.decode_intensity_limit(cfg, 4096), 1, lang="en") in ai
    p = next(x for x in (2 ** i for i in range(13)) if cost.prefill_intensity(cfg, x, 1).flops_per_byte >= 300)
    assert f"from {p} tokens on" in ai


def test_the_one_word_notice_names_the_distance_the_shared_tokens_and_the_token_where_the_texts_part():
    got = _one_word("It is rainy", "It is sunny")
    assert got.first_differing_token == 1                     # the engine's: "in London" / "in Madrid"
    (a_top, a_p), (b_top, b_p) = got.a.top(1)[0], got.b.top(1)[0]
    for lang in LANGS:
        text = _one_word_notice("It is rainy", "It is sunny")(translator(lang))
        assert f"**{fmt.percent(got.total_variation(), 1, lang=lang)}**" in text
        assert fmt.percent(a_p, 1, lang=lang) in text and fmt.percent(b_p, 1, lang=lang) in text
    en = _one_word_notice("It is rainy", "It is sunny")(translator("en"))
    assert f"{len(got.shared_top(3))} tokens are in both charts" in en
    assert f"the most likely is “{_word(a_top)}” ({fmt.percent(a_p, 1, lang='en')}) after the first prompt and " \
           f"“{_word(b_top)}”" in en
    assert "look at new token 2 in the two tables: after 1 shared token the greedy texts part there," in en
    assert f"“{_word(got.a.generation.tokens[1])}” against “{_word(got.b.generation.tokens[1])}”" in en
    same = _one_word("Today the weather is", "Today the weather was")
    assert same.first_differing_token is None
    text = _one_word_notice("Today the weather is", "Today the weather was")(translator("en"))
    assert "the greedy texts are the same for all 6 new tokens" in text and "new token" in text


def test_the_loop_notice_points_at_greedys_bold_span_against_what_sampling_does():
    pair = _loop(48, 1.0)
    rep = pair.greedy_repeat
    assert rep is not None and pair.sampled_repeat is None           # the tiny GPT's greedy loops, τ = 1 leaves it
    en = _loop_notice(48, 1.0)(translator("en"))
    assert f"“{_words(rep.span)}” comes back **{rep.count} times** and fills {rep.covered} tokens of 48" in en
    assert f"({fmt.percent(rep.covered / 48, lang='en')})" in en
    assert "Sampled at τ = 1 (seed 0), no span comes back three times" in en and "no way out" in en
    both = _loop(48, 0.1)
    assert both.sampled_repeat is not None
    text = _loop_notice(48, 0.1)(translator("es"))
    assert f"«{_words(both.sampled_repeat.span)}» vuelve {both.sampled_repeat.count} veces" in text
    assert "τ = 0,1" in text
    none = _loop_notice(6, 1.0, "Today the weather is")(translator("de"))
    assert _loop(6, 1.0).greedy_repeat is None
    assert none.startswith("Sieh auf den Greedy-Text: In 6 neuen Tokens kommt kein Abschnitt dreimal wieder")
    assert none.endswith("Der Prompt „Today the weather is“ zeigt es.")
    assert "zeigt es" not in _loop_notice(6, 1.0)(translator("de"))       # no prompt to offer: none offered


def test_the_whole_run_notice_counts_the_prefills_rows_and_the_decode_passes():
    w = _whole()
    text = _whole_notice(translator("en"))
    assert f"the prefill's {w.prompt_len} rows at once, then one row per decode pass ({w.passes - 1} in all)" in text
    assert w.prompt_len == 2 and w.passes == 3          # 3 new tokens: the prefill, 2 decodes (the last is pending)


# ---- moments of the other pages, from their records (kvviz/ui/frames/moments.py) ----------------------------

class _Pl:
    """A payload's moments only."""
    def __init__(self):
        from kvviz.ui.frames import Payload
        self.pl = Payload(translator("en"))

    def __getattr__(self, name):
        return getattr(self.pl, name)


def test_paged_moments_are_the_first_preemption_and_the_first_finish():
    from kvviz.serving import request_stream, serve
    run = serve(GPT, request_stream(6, seed=0, max_new_tokens=10), block_size=4, num_blocks=8)   # too small: preempts
    pl = _Pl().pl
    moments.paged(pl, run, translator("en"))
    got = dict((label, i) for i, label in pl.moments)
    assert run.preemptions > 0
    pre = got["First preemption"]
    assert run.steps[pre].preempted and not any(s.preempted for s in run.steps[:pre])
    fin = got["First request finished"]
    assert run.steps[fin].finished and not any(s.finished for s in run.steps[:fin])


def test_speculative_moments_are_the_first_rejected_proposal_and_the_first_bonus():
    from kvviz.decoding.sampling import Sampler
    from kvviz.models.gpt import load_draft_gpt, load_tiny_gpt
    from kvviz.speculative.decoding import speculative_generate
    from kvviz.ui.frames.speculative import plan
    tiny = load_tiny_gpt()
    spec = speculative_generate(GPTModel(tiny), GPTModel(load_draft_gpt()),
                                tiny.tokenizer.encode("It is rainy in London , so we"), 12, 4, Sampler(1.0), seed=2)
    pl = _Pl().pl
    moments.speculative(pl, spec, plan(spec), translator("en"))
    got = dict((label, i) for i, label in pl.moments)
    s = plan(spec)[got["First rejected proposal"]]
    rd = spec.rounds[s.r]
    assert s.kind == "test" and s.i == rd.rejected_at
    assert all(r.rejected_at is None for r in spec.rounds[:s.r])
    if "First bonus token" in got:
        s = plan(spec)[got["First bonus token"]]
        assert s.kind == "fix" and spec.rounds[s.r].rejected_at is None


def test_smaller_cache_moments_are_the_first_eviction_and_the_first_difference():
    from kvviz.compress import Variant, compare_steps
    cmp = compare_steps(Variant.of("window", window=4, sinks=2), ["Today", "the", "weather", "is", "so"], 3)
    pl = _Pl().pl
    moments.compress(pl, cmp, translator("en"))
    got = dict((label, i) for i, label in pl.moments)
    ev = got["First eviction"]
    evicted = [any(r.evicted_at is not None for r in e.cache.rows) for e in cmp.compressed.events]
    assert evicted[ev] and not any(evicted[:ev])
    if "First difference from the full cache" in got:
        at = got["First difference from the full cache"]
        assert next(s for s in cmp.scores if s.kl > 1e-6 or not s.agree).event == at


# ---- the lecture script: places, next screens, minutes -----------------------------------------------------

def test_each_screen_knows_its_place_and_the_next_one():
    from kvviz.ui.app import pages as lecture  # the script's places are part of the declaration
    from kvviz.ui.app.i18n import lookup
    every = lecture.places()
    assert [p.screen for p in every] == [s for page in PAGES for s in page.lecture]
    for p in every:                       # the place's section is the number the script's heading gives it
        assert lookup(f"lecture.h_{p.page.key}", "en").startswith(f"{p.section} ·")
    abc = lecture.matching("abc", {"step": "2", "lang": "es", "present": "1"})      # the stepper picks by step
    assert [(p.number, p.step, n.number) for p, n in abc] == [("1.1", 0, "1.2"), ("1.2", 1, "1.3"), ("1.3", 2, "1.4"),
                                                             ("1.4", 8, "1.5")]
    assert abc[0][0].of == 5
    (here, nxt), = lecture.matching("abc", {"abc_rule": "sample", "abc_tau": "1.5", "abc_seed": "3", "step": "1"})
    assert (here.number, nxt.number, nxt.page.key) == ("1.5", "2.1", "weather")
    assert lecture.matching("abc", {"abc_rule": "sample"}) == []             # another run: no screen of the script
    cost = lecture.matching("cost", {"tab": "Memory"})
    assert [p.number for p, _ in cost] == ["5.1"] and cost[0][0].step is None
    last, none = lecture.matching(every[-1].page.key, every[-1].screen.params)[-1]
    assert last == every[-1] and none is None


def test_the_lecture_script_gives_minutes_that_fill_ninety():
    assert sum(p.minutes for p in PAGES if p.lecture) == 90
    assert all(p.minutes > 0 for p in PAGES if p.lecture)
