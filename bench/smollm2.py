"""Benchmark: SmolLM2-135M-Instruct on this machine (a benchmark, not a test; figures in
docs/measured-smollm2.md).

- **conversion**: the first conversion of the GGUF file (transformers dequantizes Q4_1 to float32)
  into a fresh cache directory, its peak memory, then later loads of the converted directory, and
  whether the reloaded model's logits equal the GGUF-loaded model's (``torch.equal``);
- **memory**: resident memory of a process with the float32 weights loaded, and with both dtypes;
- **decode**: kvviz's cached decode loop (kvviz.decoding.loops.generate_cached with kvviz's
  DynamicCache) against transformers' ``generate(use_cache=True)`` on the same weights in the same
  process, alternating, several runs: tokens per second and their ratio;
- **dtypes**: a float32 decode step against a bfloat16 one (kvviz.measure.timing.measure_dtypes);
- **page**: the page's default run (generation with its recompute check, then its frames), as the
  server's warm-up makes it; with ``--browser`` also first visits of the page on a fresh, warmed
  ``streamlit run`` (until its stepper has drawn event 0) and step presses there
  (bench/step_clicks.py's measurement).

Every process here uses torch's default threads (2 on this machine), as a server does.

usage: python bench/smollm2.py [--runs 3] [--steps 32] [--convert] [--browser] [--sections decode,dtypes,page,memory]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONVERT = r"""
import json, resource, sys, time, torch
from pathlib import Path
from kvviz.models import smollm2 as s
src = s.Source("gguf", str(s.gguf_path()), "")
t0 = time.perf_counter(); d = s.converted_dir(src.location, Path(sys.argv[1])); t1 = time.perf_counter()
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
from transformers import AutoModelForCausalLM
g = Path(src.location)
# the same attention code as kvviz loads it with (eager): another kernel would round differently
ref = AutoModelForCausalLM.from_pretrained(g.parent, gguf_file=g.name, dtype=torch.float32,
                                           attn_implementation="eager").eval()
ids = torch.tensor([[1, 9690, 198, 2683, 359, 253, 5356, 5646]])
with torch.no_grad():
    torch.save(ref(ids).logits, Path(sys.argv[1]) / "reference_logits.pt")
print(json.dumps({"convert_s": t1 - t0, "peak_mb": peak, "dir": str(d)}))
"""

LOAD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import torch
from kvviz.models import smollm2 as s
t1 = time.perf_counter()
d = sys.argv[1]
tok = s.load_tokenizer(d); t2 = time.perf_counter()
net = s.load_network(d, "float32"); t3 = time.perf_counter()
out = {"import_s": t1 - t0, "tokenizer_s": t2 - t1, "model_s": t3 - t2}
ref = sys.argv[2] if len(sys.argv) > 2 else ""
if ref:
    ids = torch.tensor([[1, 9690, 198, 2683, 359, 253, 5356, 5646]])
    with torch.no_grad():
        out["logits_equal"] = bool(torch.equal(net(ids).logits, torch.load(ref)))
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
def touch(model):                       # one pass reads every weight: all of them resident
    with torch.no_grad():
        model(torch.tensor([[1, 9690, 198]]))
touch(net)
out["rss_fp32_mb"] = rss()
if "--both" in sys.argv:
    touch(s.load_network(d, "bfloat16"))
    out["rss_both_mb"] = rss()
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, capture_output=True, text=True, timeout=900)
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def conversion(runs: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="kvviz-bench-"))
    got = child(CONVERT, str(tmp))
    print(f"conversion: {got['convert_s']:.1f} s, peak RSS {got['peak_mb']:.0f} MB -> {got['dir']}")
    for i in range(runs):
        r = child(LOAD, got["dir"], str(tmp / "reference_logits.pt"))
        print(f"  later load {i + 1}: tokenizer {r['tokenizer_s']:.2f} s, model {r['model_s']:.2f} s "
              f"(import {r['import_s']:.2f} s), logits torch.equal to the GGUF-loaded model: {r['logits_equal']}")


def memory(directory: str) -> None:
    r = child(LOAD, directory, "", "--both")
    print(f"memory: RSS with float32 weights {r['rss_fp32_mb']:.0f} MB, "
          f"with float32 + bfloat16 {r['rss_both_mb']:.0f} MB (peak {r['peak_mb']:.0f} MB)")


def decode(runs: int, steps: int) -> None:
    """Both loops' decode steps timed one by one (transformers' through a StoppingCriteria that
    only reads the clock at each step), so a burst of others' load spoils a few steps, not a run:
    per run the median step of each, and the runs' best."""
    import torch
    from transformers import StoppingCriteria, StoppingCriteriaList

    from kvviz.cache import DynamicCache
    from kvviz.decoding.loops import generate_cached
    from kvviz.models.smollm2 import SmolLM2

    class Clock(StoppingCriteria):
        def __init__(self) -> None:
            self.at: list[float] = []

        def __call__(self, input_ids, scores, **kwargs):
            self.at.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    m = SmolLM2("float32")
    ids = m.ids(m.chat("What is the capital of France?")[0])
    x = torch.tensor([ids])
    n = steps + 1                                    # the prefill's token, then `steps` decode steps
    ours, theirs = [], []
    with torch.inference_mode():
        generate_cached(m, ids, 4, stop=False)           # warm-up of both paths
        m.model.generate(x, max_new_tokens=4, min_new_tokens=4, do_sample=False)
        for r in range(runs):
            for who in (("kvviz", "hf") if r % 2 == 0 else ("hf", "kvviz")):
                if who == "kvviz":
                    g = generate_cached(m, ids, n, cache=DynamicCache(m.n_layers), stop=False, keep_logits=False)
                    ours.append(1e3 * statistics.median(g.step_seconds[1:]))
                    kv_tokens = g.tokens
                else:
                    clock = Clock()
                    out = m.model.generate(x, max_new_tokens=n, min_new_tokens=n, do_sample=False, use_cache=True,
                                           stopping_criteria=StoppingCriteriaList([clock]))
                    gaps = [b - a for a, b in zip(clock.at, clock.at[1:])]       # one decode step each
                    theirs.append(1e3 * statistics.median(gaps))
                    hf_tokens = out[0, len(ids):].tolist()
    print(f"decode, {steps} steps after the 37-token chat prompt, {torch.get_num_threads()} threads, {runs} runs "
          f"(median step of each run, ms):")
    print(f"  kvviz generate_cached (kvviz DynamicCache): {', '.join(f'{v:.1f}' for v in ours)}")
    print(f"  transformers generate(use_cache=True):  {', '.join(f'{v:.1f}' for v in theirs)}")
    best_ours, best_theirs = min(ours), min(theirs)
    print(f"  best run: kvviz {best_ours:.1f} ms = {1e3 / best_ours:.1f} tok/s, transformers {best_theirs:.1f} ms = "
          f"{1e3 / best_theirs:.1f} tok/s; kvviz / transformers tok/s {best_theirs / best_ours:.3f} "
          f"(per run: {', '.join(f'{b / a:.2f}' for a, b in zip(ours, theirs))})")
    # min_new_tokens keeps transformers from choosing the end of turn, so compare up to it
    end = m.vocab.index("<|im_end|>")
    upto = kv_tokens.index(end) if end in kv_tokens else len(kv_tokens)
    print(f"  same {upto} tokens before the end of turn: {kv_tokens[:upto] == hf_tokens[:upto]}")


def dtypes(runs: int, steps: int) -> None:
    from kvviz.measure.timing import measure_dtypes
    from kvviz.models.smollm2 import SmolLM2
    models = [(d, SmolLM2(d)) for d in ("float32", "bfloat16")]
    ids = models[0][1].ids(models[0][1].chat("What is the capital of France?")[0])
    print(f"float32 vs bfloat16, {steps} decode steps each, {runs} runs:")
    for r in range(runs):
        got = measure_dtypes(models if r % 2 == 0 else models[::-1], ids, steps)
        by = {x.dtype: x for x in got.runs}
        f32, b16 = by["float32"].step_ms, by["bfloat16"].step_ms
        first = got.first_difference()
        print(f"  run {r + 1}: float32 {f32:.1f} ms, bfloat16 {b16:.1f} ms per step, ratio {f32 / b16:.2f}; "
              f"tokens part ways at new token {'never' if first is None else first + 1}")


def page(runs: int) -> None:
    from kvviz.ui.frames import llm as frames_llm
    from kvviz.ui.frames import translator
    from kvviz.ui.pages import llm as llm_page
    m = llm_page._model("float32")                 # loaded once, as the server's warm-up does
    key = llm_page._default_key(m)
    print("page default run (chat question, 10 new tokens, float32):")
    for r in range(runs):
        t0 = time.perf_counter()
        run = llm_page._generate(key)               # the stepper's run and its recompute check, never cached
        t1 = time.perf_counter()
        payload = frames_llm.build(run, m, 0, 0, translator("en")).to_json()
        t2 = time.perf_counter()
        print(f"  run {r + 1}: generation + recompute check {t1 - t0:.2f} s, frames {t2 - t1:.2f} s "
              f"({len(payload) / 1e3:.0f} kB), ready in {t2 - t0:.2f} s; {len(run.events)} events")


def browser_visits(runs: int, clicks: int) -> None:
    import step_clicks  # bench/step_clicks.py: its server, clock and presses

    from tools.browser import Page
    with step_clicks.app_in_browser() as (browser, base):
        times = []
        for _ in range(runs):
            tab = Page(browser)
            t0 = time.perf_counter()
            tab.page.goto(f"{base}/Real_LLM", timeout=120_000)
            tab.wait_drawn(0, timeout=120_000)
            times.append(time.perf_counter() - t0)
            tab.close()
        print(f"first visits of /Real_LLM (warmed server, new tab each): "
              f"{', '.join(f'{x:.2f}' for x in times)} s until event 0 is drawn")
        tab = Page(browser)
        tab.page.add_init_script(step_clicks.KEY_CLOCK)
        tab.goto(f"{base}/Real_LLM")
        tab.wait_drawn(0, timeout=120_000)
        time.sleep(1.0)
        tab.page.locator("h1").first.click()
        got = [x for x in (step_clicks.time_press(tab, i) for i in range(clicks)) if x is not None]
        drawn = [x[1] for x in got]
        print(f"step presses on /Real_LLM: {len(got)}/{clicks} drawn, median {statistics.median(drawn):.1f} ms, "
              f"p90 {step_clicks.pct(drawn, 0.9):.1f} ms")
        tab.assert_clean()
        tab.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--convert", action="store_true", help="also time a first conversion (≈ 30 s, 2 GB)")
    ap.add_argument("--sections", default="memory,decode,dtypes,page")
    ap.add_argument("--browser", action="store_true", help="also first visits and step presses in chromium")
    a = ap.parse_args()
    from kvviz.models import smollm2
    print(f"load average {os.getloadavg()[0]:.2f} at start")
    if a.convert:
        conversion(a.runs)
    wanted = a.sections.split(",")
    if "memory" in wanted:
        memory(smollm2.model_dir(smollm2.current_source()))
    if "decode" in wanted:
        decode(a.runs, a.steps)
    if "dtypes" in wanted:
        dtypes(a.runs, a.steps)
    if "page" in wanted:
        page(a.runs)
    if a.browser:
        sys.path.insert(0, str(ROOT / "bench"))
        browser_visits(a.runs, 10)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
