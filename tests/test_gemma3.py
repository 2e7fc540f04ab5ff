"""Gemma 3 270M through kvviz: where its weights come from (no weights needed), and the numbers only
the real weights give, the engine's protocol checks of tests/test_engine_structure.py among them (one
module, the only one of the engine tests that loads the real weights: the conversion, ≈ 25-50 s on a
fresh machine, is paid once, the load, ≈ 4.5 s, once). Its hybrid cache on a tiny random Gemma 3:
tests/test_gemma3_hybrid.py, tests/test_any_model.py; serving it: tests/test_serving.py."""
import json

import pytest
import torch

from kvviz.decoding.stepper import run_generation
from kvviz.models import gemma3 as g
from kvviz.models import real, registry
from tests.test_cli import cli, one_line_error

FRANCE = "The capital of France is"
# a sentence of 13 tokens; 40 of them and the question make a text past the 512-position window
FILLER = "The river runs past the old mill and the children play on the bridge. "


# ---- where the weights come from (no model needed) --------------------------------------------------

def test_the_source_is_the_package_a_folder_or_on_community_cloud_the_same_gguf_on_the_hub(tmp_path, monkeypatch):
    spec = g.SPEC
    elsewhere = tmp_path / "checkout"
    none = lambda: None                                                      # noqa: E731 - not installed
    assert real.find_source(spec, {}, elsewhere, locate=none) is None
    hub = real.find_source(spec, {}, real.Path("/mount/src/kvviz"), locate=none)
    assert (hub.kind, hub.location) == ("hub", g.HUB_ID) and "Q4_K_M" in hub.description
    assert real.find_source(spec, {g.ENV_SOURCE: "none"}, elsewhere) is None   # the host turns it off
    (tmp_path / g.GGUF_NAME).write_bytes(b"gguf v1")
    local = real.find_source(spec, {g.ENV_SOURCE: str(tmp_path)}, elsewhere)
    assert (local.kind, local.location) == ("gguf", str(tmp_path / g.GGUF_NAME))
    assert "requirements-model.txt" in real.unavailable_message(spec)

    converted = []

    def fake_convert(src, out):
        converted.append(real.Path(src).read_bytes())
        (out / "config.json").write_text("{}")
        return {}

    import huggingface_hub
    asked = []

    def hf_hub_download(repo, filename, local_files_only):       # the Hub, as Community Cloud has it
        asked.append((repo, filename, local_files_only))
        if local_files_only and len(asked) == 1:
            raise OSError("not in the local cache")
        return str(tmp_path / filename)                           # a local folder stands in for the Hub

    monkeypatch.setattr(real, "convert", fake_convert)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setenv(real.ENV_CACHE, str(tmp_path / "cache"))
    with pytest.raises(real.ModelNotReady):                      # a page never downloads or converts
        real.model_dir(spec, hub, prepare=False)
    d = real.model_dir(spec, hub, prepare=True)                  # the server's start-up
    assert converted == [b"gguf v1"] and asked[-1] == (g.HUB_ID, g.GGUF_NAME, False)
    assert real.model_dir(spec, hub, prepare=False) == d and len(converted) == 1
    manifest = json.loads((real.Path(d) / real.MANIFEST).read_text())
    assert manifest["dequantized_from"] == "Q4_K_M"
    assert manifest["gguf_sha256"] == real.file_sha256(tmp_path / g.GGUF_NAME)


def test_the_cli_refuses_bad_arguments_before_loading(capsys, monkeypatch):
    monkeypatch.setitem(registry.MODELS, "gemma3", type("G", (), {"LIMITS": g.LIMITS, "SPEC": g.SPEC}))
    assert "--chat needs a chat model" in one_line_error(capsys, "trace", "gemma3", "--prompt", FRANCE, "--chat")
    assert "New tokens" in one_line_error(capsys, "trace", "gemma3", "--prompt", FRANCE, "--new-tokens", "0")
    assert "empty" in one_line_error(capsys, "trace", "gemma3", "--prompt", " ")
    assert "characters" in one_line_error(capsys, "trace", "gemma3", "--prompt", "x" * (g.LIMITS.max_prompt_chars + 1))
    monkeypatch.setitem(registry.MODELS, "gemma3", g.Gemma3)
    monkeypatch.setenv(g.ENV_SOURCE, "none")                # no weights here: how to get them, not a traceback
    assert "requirements-model.txt" in one_line_error(capsys, "trace", "gemma3", "--prompt", FRANCE)


# ---- the real model ------------------------------------------------------------------------------------

def test_the_converted_weights_are_gemma_3_270m_dequantized(gemma3):
    m = gemma3
    assert (m.n_layers, m.n_heads, m.n_kv_heads, m.head_dim, len(m.vocab)) == (18, 4, 1, 256, 262_144)
    assert m.model.num_parameters() == 268_098_176 and m.config.tie_word_embeddings
    assert m.windows == ([512] * 5 + [None]) * 3
    rope = m.config.rope_parameters
    assert (rope["sliding_attention"]["rope_theta"], rope["full_attention"]["rope_theta"]) == (10_000, 1_000_000)
    manifest = json.loads((real.Path(real.model_dir(g.SPEC, m.source)) / real.MANIFEST).read_text())
    assert manifest["gguf_sha256"] == g.package_sha256() and manifest["dequantized_from"] == "Q4_K_M"


def test_greedy_text_through_the_stepper_and_the_trace(gemma3, capsys, monkeypatch):
    m = gemma3
    prompt = m.prompt(FRANCE, chat=False)
    assert prompt[0] == "<bos>" and prompt[1:] == m.tokenize(FRANCE)             # as tokenizer(text) gives
    run = run_generation(m, prompt, 12, recheck="final")
    chosen = [e.chosen for e in run.events if e.phase == "choose"]
    assert m.decode(chosen) == " the capital of the country of France. It is the largest"
    assert all(e.check.max_abs_diff < 1e-3 for e in run.events if e.record is not None)
    monkeypatch.setitem(registry.MODELS, "gemma3", lambda: m)            # the worker's loaded model
    code, out, err = cli(capsys, "trace", "gemma3", "--prompt", FRANCE, "--new-tokens", "2")
    assert code == 0, err
    d = json.loads(out)
    assert d["prompt_ids"] == [2, 818, 5279, 529, 7001, 563] and m.decode(d["new_ids"]) == " the capital"
    assert [x["kind"] for x in d["cache_layers"]] == (["sliding"] * 5 + ["global"]) * 3


def test_it_follows_the_whole_protocol(gemma3):
    """tests/test_engine_structure.py's checks of every model, on the real Gemma 3 (loaded here only)."""
    from tests.test_engine_structure import check_limits, check_protocol
    check_protocol(gemma3, "gemma3")
    check_limits(gemma3, "gemma3")


@torch.no_grad()
def test_past_the_window_the_sliding_layers_keep_511_positions_and_the_bytes_follow_the_formula(gemma3):
    m = gemma3
    ids = m.ids(m.prompt(FILLER * 40, chat=False))[:520]
    t = len(ids)
    assert t == 520
    cache = m.new_cache("dense")
    m.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True, logits_to_keep=1)
    assert [layer.keys.shape[-2] for layer in cache.layers] == ([511] * 5 + [t]) * 3
    assert cache.nbytes() == 2 * 1 * 256 * 4 * (3 * t + 15 * min(t, 511)) == 18_892_800
