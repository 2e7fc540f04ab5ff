"""The trace CLI: the JSON shape the README documents, and one-line errors with exit code 2.

The CLI's ``main()`` runs in this process (a fresh interpreter per case cost ≈ 2 s, mostly
importing torch); one test runs ``python -m kvviz`` for real, end to end, one runs kvviz/__main__.py as
``python -m`` does, in this process."""
import json
import runpy
import subprocess
import sys

import pytest

from kvviz.cli.main import main
from tests.conftest import ROOT


def cli(capsys, *args) -> tuple[int, str, str]:
    """``python -m kvviz ARGS`` in this process: (exit code, stdout, stderr)."""
    try:
        code = main(list(args))
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_error(capsys, *args) -> str:
    """Run a bad command: exit code 2, nothing on stdout, one line on stderr (returned)."""
    code, out, err = cli(capsys, *args)
    assert code == 2 and out == "", (args, code, out)
    assert len(err.strip().splitlines()) == 1 and err.startswith("kvviz: error:"), (args, err)
    return err


def test_trace_abc_shape_and_values(capsys):
    code, out, err = cli(capsys, "trace", "abc", "--prompt", "A B", "--new-tokens", "4")
    assert code == 0, err
    d = json.loads(out)
    assert d["model"] == "abc" and d["prompt"] == ["A", "B"]
    ev = d["events"]
    assert [e["phase"] for e in ev] == ["prefill", "choose"] + ["decode", "choose"] * 3
    keys = {"index", "phase", "tokens", "positions", "cache_len", "attention", "output", "logits", "chosen",
            "kv_computed", "kv_recompute", "recompute_max_abs_diff"}
    assert all(keys <= set(e) for e in ev)
    assert ev[0]["logits"] == {"A": 0.669762, "B": 0.330238, "C": -1.0}
    assert [e["chosen"] for e in ev if e["phase"] == "choose"] == ["A", "B", "A", "B"]
    assert [e["cache_len"] for e in ev] == [2, 2, 3, 3, 4, 4, 5, 5]
    assert len(ev[0]["attention"]) == 1 and len(ev[0]["attention"][0]) == 2   # heads × queries × keys
    assert [round(w, 3) for w in ev[2]["attention"][0][0]] == [0.401, 0.198, 0.401]  # A reads 0..2
    assert ev[-1]["kv_computed"] == 5 and ev[-1]["kv_recompute"] == 2 + 3 + 4 + 5


@pytest.mark.parametrize("args", [["trace", "abc", "--prompt", "A Z"],
                                  ["trace", "abc", "--prompt", "A", "--new-tokens", "0"],
                                  ["trace", "nope", "--prompt", "A"], ["trace", "abc", "--prompt", ""],
                                  ["trace", "abc", "--prompt", "A", "--new-tokens", "x"], ["trace"], []],
                         ids=["unknown-token", "zero-tokens", "unknown-model", "empty-prompt", "not-a-number",
                              "no-model", "no-command"])
def test_bad_arguments_give_one_line_and_exit_2(capsys, args):
    one_line_error(capsys, *args)


def test_python_m_kvviz_prints_the_same_trace_as_main(capsys):
    """End to end in a fresh interpreter, sampling with a seed: the same trace as in this process."""
    args = ["trace", "abc", "--prompt", "A B", "--new-tokens", "6", "--temperature", "1.5", "--top-p", "0.9",
            "--seed", "3"]
    p = subprocess.run([sys.executable, "-m", "kvviz", *args], cwd=ROOT, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert p.stdout == cli(capsys, *args)[1] and json.loads(p.stdout)["seed"] == 3


def test_python_m_kvviz_refuses_a_bad_argument_with_one_line_and_exit_2(capsys, monkeypatch):
    # ``python -m kvviz`` runs kvviz/__main__.py as ``__main__``: run so here, its SystemExit caught (the
    # fresh interpreter of the test above shows the module runs as a command at all)
    monkeypatch.setattr(sys, "argv", ["kvviz", "trace", "abc", "--prompt", "A Z"])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_module("kvviz", run_name="__main__")
    err = capsys.readouterr()
    assert exit_.value.code == 2 and err.out == "" and len(err.err.strip().splitlines()) == 1, err.err
    assert "Z" in err.err
