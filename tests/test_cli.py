"""The trace CLI: the JSON shape the issue specifies, and one-line errors with exit code 2."""
import json
import subprocess
import sys

from tests.conftest import ROOT


def cli(*args):
    return subprocess.run([sys.executable, "-m", "kvviz", *args], cwd=ROOT, capture_output=True, text=True)


def test_trace_abc_shape_and_values():
    p = cli("trace", "abc", "--prompt", "A B", "--new-tokens", "4")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
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


def test_bad_arguments_give_one_line_and_exit_2():
    for args in (["trace", "abc", "--prompt", "A Z"], ["trace", "abc", "--prompt", "A", "--new-tokens", "0"],
                 ["trace", "nope", "--prompt", "A"], ["trace", "abc", "--prompt", ""],
                 ["trace", "abc", "--prompt", "A", "--new-tokens", "x"]):
        p = cli(*args)
        assert p.returncode == 2, args
        assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
