"""Benchmark: Gemma 3 270M on this machine (a benchmark, not a test; figures in docs/measured-gemma3.md).

- **convert**: the first assembly and conversion of the package's GGUF (transformers dequantizes
  Q4_K_M to float32) into a fresh cache directory, its peak memory; then a load of the converted
  directory in a fresh process;
- **memory**: resident memory of a process with Gemma 3's float32 weights loaded, and with
  SmolLM2's too (a server that loads both real models);
- **greedy**: "The capital of France is", 12 greedy tokens through kvviz's stepper, and the time;
- **cache**: the hybrid cache's bytes after T = 136, 520 and 1,032 positions (kvviz's
  ``dense_cache``, the tensors' storages), against 2·1·256·4·(3·T + 15·min(T, 511)) and an
  all-global cache, and the prefill's time;
- **long**: kvviz/data/hybrid_long_text.txt (727 tokens) through the stepper as the Real LLM page runs it,
  recording everything, then with ``Keep`` (kvviz.models.base): time, resident memory, the run's tensors;
- **decode**: kvviz's cached decode loop (kvviz.decoding.loops.generate_cached) against transformers'
  ``generate`` on the same weights in the same process, alternating, several runs;
- **prefill**: a 512-token prefill, kvviz's fast path against transformers' ``generate`` of one token;
- **dtypes**: float32 against bfloat16, the same greedy decode steps timed in turns, where the tokens differ.

Every process here uses torch's default threads (2 on this machine), as a server does.

usage: python bench/gemma3.py [--runs 3] [--steps 16]
                              [--sections convert,memory,greedy,cache,decode,prefill,dtypes,long]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONVERT = r"""
import json, resource, sys, time
from pathlib import Path
from kvviz.models import gemma3 as g, real
src = real.find_source(g.SPEC)
t0 = time.perf_counter()
d = real.converted_dir(src.location, Path(sys.argv[1]), prefix=g.SPEC.dir_prefix, quantization="Q4_K_M", spec=g.SPEC)
t1 = time.perf_counter()
m = json.loads((d / real.MANIFEST).read_text())
print(json.dumps({"convert_s": t1 - t0, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "timings": m["timings"], "files": m["files"], "dir": str(d)}))
"""

LOAD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import torch
from kvviz.models import gemma3 as g, real
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
t1 = time.perf_counter()
m = g.Gemma3(source=real.Source("dir", sys.argv[1], ""))
t2 = time.perf_counter()
out = {"import_s": t1 - t0, "load_s": t2 - t1, "rss_loaded_mb": rss(), "weight_mb": m.weight_bytes() / 2**20}
def step(model):   # one prefill and one decode step: every weight read once (the files are mapped lazily)
    from kvviz.decoding.loops import generate_cached
    generate_cached(model, model.ids(model.prompt("The capital of France is", chat=False)), 2)
step(m)
out["rss_gemma3_mb"] = rss()
if "--both" in sys.argv:
    from kvviz.models.smollm2 import SmolLM2
    step(SmolLM2())
    out["rss_both_mb"] = rss()
out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""

LONG = r"""
import json, resource, sys, time
from pathlib import Path
from kvviz.decoding.stepper import run_bytes, run_generation
from kvviz.models import gemma3 as g
from kvviz.models.base import Keep
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20
m = g.Gemma3()
prompt = m.prompt((Path(sys.argv[2]) / "kvviz/data/hybrid_long_text.txt").read_text(), chat=False)
before = rss()
t0 = time.perf_counter()
run = run_generation(m, prompt, 10, recheck="final", keep=None if sys.argv[1] == "everything" else Keep())
took = time.perf_counter() - t0
from kvviz.ui.frames import llm as frames_llm, translator
t1 = time.perf_counter()
payload = frames_llm.build(run, m, 0, 0, translator("en")).to_json()     # the page's default frames (layer 1, head 1)
frames_s = time.perf_counter() - t1
chosen = [e.chosen for e in run.events if e.phase == "choose"]
print(json.dumps({"tokens": len(prompt), "text": m.decode(chosen), "run_s": took, "frames_s": frames_s,
                  "payload_mb": len(payload) / 1e6, "rss_before_mb": before,
                  "rss_after_mb": rss(), "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "records_mb": run_bytes(run) / 2**20,
                  "check": max(e.check.max_abs_diff for e in run.events if e.check is not None)}))
"""


def child(code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def load() -> float:
    return os.getloadavg()[0]


def convert() -> str:
    with tempfile.TemporaryDirectory() as root:
        r = child(CONVERT, root)
        tm = r["timings"]
        print(f"convert: {r['convert_s']:.1f} s into a fresh cache directory (assemble {tm['assemble_s']:.1f} s, "
              f"tokenizer {tm['tokenizer_s']:.1f} s, model {tm['model_s']:.1f} s, "
              f"save {tm['save_s']:.1f} s), peak RSS {r['peak_mb']:.0f} MB; files "
              + ", ".join(f"{k} {v / 1e6:,.0f} MB" for k, v in sorted(r["files"].items())) + f"; load {load():.1f}")
        reload = child(LOAD, r["dir"])
        print(f"reload: {reload['load_s']:.1f} s (imports {reload['import_s']:.1f} s)")
    return r["dir"]


def memory(directory: str) -> None:
    r = child(LOAD, directory, "--both")
    print(f"memory: weights {r['weight_mb']:.0f} MiB; RSS with Gemma 3 float32 loaded {r['rss_loaded_mb']:.0f} MB, "
          f"after its first steps {r['rss_gemma3_mb']:.0f} MB, "
          f"with SmolLM2 too {r['rss_both_mb']:.0f} MB (peak {r['peak_mb']:.0f} MB); load {load():.1f}")


def greedy(m) -> None:
    from kvviz.decoding.stepper import run_generation
    t0 = time.perf_counter()
    run = run_generation(m, m.prompt("The capital of France is", chat=False), 12, recheck=False)
    chosen = [e.chosen for e in run.events if e.phase == "choose"]
    print(f"greedy: {m.decode(chosen)!r} in {time.perf_counter() - t0:.1f} s (stepper, 12 tokens); load {load():.1f}")


def cache(m) -> None:
    import torch
    text = "The river runs past the old mill and the children play on the bridge. " * 100
    ids = m.ids(m.start_tokens() + m.tokenize(text))          # past the prompt cap: the cache's growth only
    for t in (136, 520, 1032):
        c = m.dense_cache()
        t0 = time.perf_counter()
        with torch.inference_mode():
            m.model(input_ids=torch.tensor([ids[:t]]), past_key_values=c, use_cache=True, logits_to_keep=1)
        took = time.perf_counter() - t0
        formula = 2 * 1 * 256 * 4 * (3 * t + 15 * min(t, 511))
        lengths = sorted({layer.keys.shape[-2] for layer in c.layers})
        print(f"cache T={t}: {c.nbytes():,} B measured, formula {formula:,} B, all-global {36_864 * t:,} B; "
              f"rows held {lengths}; prefill {took:.2f} s; load {load():.1f}")


def decode(m, runs: int, steps: int) -> None:
    import torch

    from kvviz.decoding.loops import generate_cached
    from kvviz.measure.clock import interleaved
    ids = m.ids(m.prompt("The capital of France is", chat=False))
    x = torch.tensor([ids])
    with torch.inference_mode():        # the project's one timing helper: turns taken, the median reported
        times = interleaved({"kvviz": lambda: generate_cached(m, ids, steps, stop=False),
                             "transformers": lambda: m.model.generate(x, max_new_tokens=steps, min_new_tokens=steps,
                                                                      do_sample=False)}, runs)
    ours, theirs = steps / times["kvviz"].median, steps / times["transformers"].median
    print(f"decode ({steps} tokens, {runs} runs, prefill included): kvviz {ours:.2f} tok/s, "
          f"transformers generate {theirs:.2f} tok/s, ratio {ours / theirs:.2f}; load {load():.1f}")


def long_text() -> None:
    """The long text through the stepper as the Real LLM page runs it (6 new tokens, the final check),
    each way in a fresh process: every map and logit recorded, then only what the views draw (Keep)."""
    for how in ("everything", "keep"):
        r = child(LONG, how, str(ROOT))
        print(f"long text ({r['tokens']} tokens, 10 new, recording {how}): {r['text']!r} in {r['run_s']:.1f} s "
              f"+ frames {r['frames_s']:.1f} s ({r['payload_mb']:.1f} MB of JSON); RSS "
              f"{r['rss_before_mb']:.0f} MB before, {r['rss_after_mb']:.0f} MB after, peak {r['peak_mb']:.0f} MB; "
              f"the run's tensors {r['records_mb']:.0f} MiB; check max |Δ| {r['check']:.1e}; load {load():.1f}")


def prefill(m, runs: int) -> None:
    """A prefill of 512 tokens: kvviz's fast path (``logits``, the last position's logits, into a fresh
    cache) against transformers' ``generate`` of one token (its prefill and one choice), alternating."""
    import torch

    from kvviz.measure.clock import interleaved
    text = "The river runs past the old mill and the children play on the bridge. " * 60
    ids = m.ids(m.start_tokens() + m.tokenize(text))[:512]
    x = torch.tensor([ids])
    with torch.inference_mode():
        times = interleaved({"kvviz": lambda: m.logits(ids, m.new_cache("dense"), 0, keep=1),
                             "transformers": lambda: m.model.generate(x, max_new_tokens=1, min_new_tokens=1,
                                                                      do_sample=False)}, runs)
    ours, theirs = times["kvviz"].median, times["transformers"].median
    print(f"prefill (512 tokens, {runs} runs): kvviz {ours:.2f} s, transformers generate(max_new_tokens=1) "
          f"{theirs:.2f} s, speed ratio {theirs / ours:.2f}; load {load():.1f}")


def dtypes(m, steps: int, runs: int) -> None:
    """float32 against bfloat16: ``steps`` greedy decode steps after the same prompt, timed in turns
    (kvviz.measure.clock.interleaved: a shared machine's load falls on both alike), the weights' bytes,
    and the first token where the two greedy runs differ."""
    import torch

    from kvviz.decoding.loops import generate_cached
    from kvviz.measure.clock import interleaved
    from kvviz.models import gemma3 as g
    half = g.Gemma3(dtype="bfloat16")
    ids = m.ids(m.prompt("The capital of France is", chat=False))
    pair = {"float32": m, "bfloat16": half}
    with torch.inference_mode():
        for model in pair.values():
            generate_cached(model, ids, 3, stop=False, keep_logits=False)       # every weight read once
        times = interleaved({d: (lambda mm=mm: generate_cached(mm, ids, steps, stop=False, keep_logits=False))
                             for d, mm in pair.items()}, runs)
        tokens = {d: generate_cached(mm, ids, steps, stop=False, keep_logits=False).tokens for d, mm in pair.items()}
    first = next((i for i, (a, b) in enumerate(zip(tokens["float32"], tokens["bfloat16"])) if a != b), None)
    per = {d: 1000 * times[d].median / steps for d in pair}
    print("dtypes (" + f"{steps} tokens, {runs} runs in turns, prefill included): "
          + "; ".join(f"{d} {per[d]:.0f} ms a token, weights {mm.weight_bytes():,} B" for d, mm in pair.items())
          + f"; bfloat16 / float32 time {per['bfloat16'] / per['float32']:.2f}; tokens "
          + ("the same" if first is None else f"differ from token {first + 1}") + f"; load {load():.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--sections", default="convert,memory,greedy,cache,decode,prefill,dtypes,long")
    a = ap.parse_args()
    sections = a.sections.split(",")
    from kvviz.models import gemma3 as g
    from kvviz.models import real
    directory = convert() if "convert" in sections else real.model_dir(g.SPEC, real.find_source(g.SPEC))
    if "long" in sections:
        long_text()
    if "memory" in sections:
        memory(real.model_dir(g.SPEC, real.find_source(g.SPEC)))
    if {"greedy", "cache", "decode", "prefill", "dtypes"} & set(sections):
        m = g.Gemma3()
        if "greedy" in sections:
            greedy(m)
        if "cache" in sections:
            cache(m)
        if "decode" in sections:
            decode(m, a.runs, a.steps)
        if "prefill" in sections:
            prefill(m, a.runs)
        if "dtypes" in sections:
            dtypes(m, a.steps, a.runs)
    del directory


if __name__ == "__main__":
    main()
