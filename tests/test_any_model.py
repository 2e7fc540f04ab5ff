"""Any transformers causal LM a host names (``KVVIZ_MODELS``), on tiny random models of four
architectures saved to temporary folders (tests/tiny_models.py): Llama-style (GQA, RoPE), Qwen2
(q/k/v biases), GPT-2 (learned positions, fused QKV) and Gemma 3 (hybrid sliding/global cache).
Each loads by name through the registry, runs through kvviz's stepper, ``trace``, prompt lookup, early
exit and paged serving (prompts longer than Gemma's window of 8) with greedy tokens equal to transformers'
own ``generate``; a model whose cache kvviz cannot represent is refused with a message."""
import json

import pytest
import torch
from transformers import AutoModelForCausalLM

from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models import real, registry
from kvviz.serving.scheduler import serve
from kvviz.serving.workload import Request
from kvviz.speculative.early_exit import early_exit_generate
from kvviz.speculative.prompt_lookup import prompt_lookup_generate
from tests import tiny_models
from tests.test_cli import cli, one_line_error

KINDS = ["llama", "qwen2", "gpt2", "gemma3"]
TEXT = "Today the weather is so nice that we walk in the park. It is rainy"
NEW = 6


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("host-models")
    return {kind: str(tiny_models.save(kind, root / kind)) for kind in KINDS + ["mamba", "mlp_layers"]}


def test_the_host_names_the_models_in_its_environment_or_its_secrets(tmp_path):
    assert real.host_entries({real.ENV_MODELS: " a/b , /srv/model ,, "}, tmp_path) == ["a/b", "/srv/model"]
    assert real.host_entries({}, tmp_path) == []
    (tmp_path / ".streamlit").mkdir()
    (tmp_path / ".streamlit" / "secrets.toml").write_text('KVVIZ_MODELS = "org/one,org/two"\n')
    assert real.host_entries({}, tmp_path) == ["org/one", "org/two"]
    assert real.host_entries({real.ENV_MODELS: ""}, tmp_path) == []          # the environment decides first
    assert set(registry.host_models(["smollm2", "org/x"])) == {"org/x"}      # kvviz's own names stay kvviz's
    with pytest.raises(real.ModelUnavailable):
        registry.host_models(["../nowhere"])["../nowhere"]()


@pytest.mark.parametrize("kind", KINDS)
def test_a_host_model_steps_like_transformers_generate_and_traces(kind, folders, capsys, monkeypatch):
    name = folders[kind]
    monkeypatch.setitem(registry.MODELS, name, registry.host_models([name])[name])
    m = registry.get_model(name)
    prompt = m.tokenize(TEXT)
    run = run_generation(m, prompt, NEW, recheck="final")
    chosen = m.ids([e.chosen for e in run.events if e.phase == "choose"])
    assert all(e.check.max_abs_diff < 1e-4 for e in run.events if e.record is not None)
    reference = AutoModelForCausalLM.from_pretrained(name, dtype=torch.float32)
    ids = torch.tensor([m.ids(prompt)])
    greedy = reference.generate(ids, max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False)[0, ids.shape[1]:]
    assert chosen == greedy.tolist()

    from kvviz.cli import trace
    from kvviz.models.base import Keep
    monkeypatch.setattr(trace, "KEEP", Keep(rows=4, map_side=4, logits=1))    # the prompt: a long pass here
    code, out, err = cli(capsys, "trace", name, "--prompt", TEXT, "--new-tokens", "3")
    assert code == 0, err
    d = json.loads(out)
    assert d["prompt_ids"] == m.ids(prompt) and d["new_ids"] == chosen[:3]
    prefill = d["events"][0]                         # recorded as the page records it: capped
    assert prefill["attention_positions"] == [len(prompt) - 1] and len(prefill["output"]) == 1
    assert len(prefill["attention"][0][0]) == 1 and len(d["events"][2]["output"]) == 1
    t = len(prompt) + 2
    layers = d["cache_layers"]
    assert len(layers) == m.n_layers and all(x["positions"] == t for x in layers)
    if kind == "gemma3":
        w = tiny_models.SLIDING_WINDOW
        assert [(x["kind"], x["window"], x["length"]) for x in layers] == [("sliding", w, w - 1)] * 3 + [
            ("global", None, t)]
    else:
        assert all((x["kind"], x["length"]) == ("global", t) for x in layers)
    code, out, _ = cli(capsys, "trace", name, "--prompt", TEXT, "--new-tokens", "3", "--no-cache")
    assert code == 0 and json.loads(out)["new_ids"] == chosen[:3]


@pytest.mark.parametrize("kind", KINDS)
def test_a_host_model_serves_from_the_paged_cache_and_drafts_by_prompt_lookup_and_early_exit(kind, folders):
    name = folders[kind]
    m = registry.host_models([name])[name]()
    prompt = m.tokenize(TEXT + " " + TEXT)                  # a repeated text: drafts get accepted
    greedy = m.ids([e.chosen for e in run_generation(m, prompt, NEW, recheck=False).events if e.phase == "choose"])
    assert prompt_lookup_generate(m, m.ids(prompt), NEW).tokens == greedy
    assert early_exit_generate(m, m.ids(prompt), NEW, 1, 3).tokens == greedy      # its first layer drafts
    other = m.tokenize("What is the capital of France? The capital of France is Paris.")
    run = serve(m, [Request(0, prompt, 4), Request(1, other, 4, 1)], block_size=4, num_blocks=64, check=True)
    assert all(r.tokens == r.solo_tokens and r.max_abs_diff < 1e-4 for r in run.requests)


@pytest.mark.parametrize("kind", ["mamba", "mlp_layers"])
def test_a_model_whose_cache_kvviz_cannot_hold_is_refused_with_a_message(kind, folders, capsys, monkeypatch):
    name = folders[kind]
    cls = registry.host_models([name])[name]
    with pytest.raises(LimitError, match="kvviz cannot show this model's cache"):
        cls()
    monkeypatch.setitem(registry.MODELS, name, cls)
    assert "keep a state" in one_line_error(capsys, "trace", name, "--prompt", TEXT)
