"""A sampling rule in the stepper, the trace and the CLI: rule, seed and kept set at every choose event."""
import json

import pytest
import torch

from kvviz.cli.main import main
from kvviz.decoding.sampling import Greedy, Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.decoding.trace import run_dict
from kvviz.limits import LimitError
from kvviz.models.abc import ABCModel

M = ABCModel()


def chosen(run):
    return [e.chosen for e in run.events if e.phase == "choose"]


def test_sampling_run_keeps_the_stepper_invariants_and_records_every_choice():
    rule = Sampler(1.5, top_p=0.95)
    run = run_generation(M, ["A", "B"], 8, rule=rule, seed=3)
    assert run.rule == rule.describe() and run.seed == 3
    for e in run.events:
        if e.phase == "choose":
            c = e.choice
            assert c.rule == {"name": "sample", "temperature": 1.5, "top_k": None, "top_p": 0.95}
            assert c.index in c.kept and sum(c.probs) == pytest.approx(1.0)
            assert c.probs == pytest.approx(rule.stages(e.logits)[-1].probs)
            assert e.pending == e.chosen and e.cache_len == len(e.sequence) - 1   # chosen, not processed
        else:
            assert e.check.max_abs_diff <= 1e-6
    passes = [e for e in run.events if e.record is not None]
    assert [e.kv_computed for e in passes] == list(range(2, 10))


def test_same_seed_same_tokens_and_seeds_differ():
    rule = Sampler(2.0)
    a = chosen(run_generation(M, ["A", "B"], 12, rule=rule, seed=11))
    assert a == chosen(run_generation(M, ["A", "B"], 12, rule=rule, seed=11))
    # the seed really drives the draws: another seed soon gives another text
    assert any(chosen(run_generation(M, ["A", "B"], 12, rule=rule, seed=s)) != a for s in range(12, 18))
    # greedy ignores the seed: A B A B … whatever it is
    assert {tuple(chosen(run_generation(M, ["A", "B"], 6, seed=s))) for s in (0, 5, 99)} == {tuple("ABABAB")}


def test_tiny_temperature_run_equals_the_greedy_run():
    assert chosen(run_generation(M, ["C", "A", "B"], 10, rule=Sampler(1e-6), seed=4)) == \
        chosen(run_generation(M, ["C", "A", "B"], 10, rule=Greedy()))


def test_top_k_one_run_is_greedy_and_keeps_one_token():
    run = run_generation(M, ["A", "B"], 6, rule=Sampler(3.0, top_k=1), seed=9)
    assert chosen(run) == list("ABABAB")
    assert all(e.choice.kept == [e.choice.index] for e in run.events if e.phase == "choose")


def test_bad_seed_is_refused():
    for seed in (-1, 2**40, 1.5, "x"):
        with pytest.raises(LimitError, match="Seed"):
            run_generation(M, ["A"], 2, rule=Sampler(1.0), seed=seed)


def test_trace_records_rule_seed_and_kept_set_at_every_choose_event():
    run = run_generation(M, ["A", "B"], 4, rule=Sampler(1.0, top_k=2), seed=5)
    d = run_dict(run, M.logit_tokens)
    assert d["seed"] == 5 and d["rule"] == {"name": "sample", "temperature": 1.0, "top_k": 2, "top_p": None}
    choose = [e for e in d["events"] if e["phase"] == "choose"]
    assert len(choose) == 4
    for e, ev in zip(choose, [e for e in run.events if e.phase == "choose"]):
        assert e["rule"] == d["rule"]
        # top-k 2 over [A, B, C]: C always has the smallest logit here, so the kept set is {A, B}
        assert e["kept"] == ["A", "B"] and e["probs"]["C"] == 0
        logits = torch.tensor([e_ for e_ in ev.logits.tolist()[:2]], dtype=torch.float64)
        assert [e["probs"]["A"], e["probs"]["B"]] == pytest.approx(torch.softmax(logits, 0).tolist(), abs=1e-6)
    json.dumps(d)


def test_cli_sampling_is_reproducible_and_records_the_rule(capsys):
    """(The same command in a fresh interpreter prints the same trace: tests/test_cli.py.)"""
    args = ("--new-tokens", "10", "--temperature", "2", "--top-p", "0.9", "--seed", "7")
    (code, out, err), again = in_process(capsys, *args), in_process(capsys, *args)
    assert code == 0, err
    assert out == again[1]
    d = json.loads(out)
    assert d["seed"] == 7 and d["rule"] == {"name": "sample", "temperature": 2.0, "top_k": None, "top_p": 0.9}
    want = chosen(run_generation(M, ["A", "B"], 10, rule=Sampler(2.0, None, 0.9), seed=7))
    assert [e["chosen"] for e in d["events"] if e["phase"] == "choose"] == want
    assert all("kept" in e for e in d["events"] if e["phase"] == "choose")


def in_process(capsys, *args):
    """The CLI's main() in this process (cheaper than a subprocess): exit code, stdout, stderr."""
    try:
        code = main(["trace", "abc", "--prompt", "A B", *args])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_filter_alone_samples_at_temperature_one_and_no_flags_is_greedy(capsys):
    assert json.loads(in_process(capsys, "--top-k", "2")[1])["rule"]["temperature"] == 1.0
    assert json.loads(in_process(capsys, "--temperature", "0", "--top-k", "2")[1])["rule"] == {"name": "greedy"}
    assert json.loads(in_process(capsys)[1])["rule"] == {"name": "greedy"}


@pytest.mark.parametrize("args", [("--temperature", "-1"), ("--temperature", "nan"), ("--top-p", "0"),
                                  ("--top-p", "1.5"), ("--top-k", "0"), ("--top-k", "2.5"), ("--seed", "-3"),
                                  ("--seed", "x")])
def test_cli_invalid_rule_values_print_one_line_and_exit_2(capsys, args):
    code, out, err = in_process(capsys, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("kvviz: error:"), err
