"""The trace CLI on the tiny GPT: the trace JSON, and --no-cache printing the same tokens."""
import json

from tests.test_cli import cli


def chosen(trace: dict) -> list[str]:
    return [e["chosen"] for e in trace["events"] if e["phase"] == "choose"]


def test_trace_gpt_and_no_cache_print_the_same_tokens():
    p = cli("trace", "gpt", "--prompt", "Today the weather is so", "--new-tokens", "8")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["model"] == "gpt" and d["prompt"] == ["Today", "the", "weather", "is", "so"]
    ev = d["events"]
    assert [e["phase"] for e in ev] == ["prefill", "choose"] + ["decode", "choose"] * 7
    assert len(ev[0]["attention"]) == 4 and len(ev[0]["attention"][0]) == 4      # layers × heads × N × T
    assert len(ev[2]["attention"][0][0]) == 1 and len(ev[2]["attention"][0][0][0]) == 6
    assert [e["cache_len"] for e in ev[:4]] == [5, 5, 6, 6]
    assert all(e["recompute_max_abs_diff"] < 1e-4 for e in ev if e["recompute_max_abs_diff"] is not None)
    q = cli("trace", "gpt", "--prompt", "Today the weather is so", "--new-tokens", "8", "--no-cache")
    assert q.returncode == 0, q.stderr
    nc = json.loads(q.stdout)
    assert nc["cache"] is False and nc["prompt"] == d["prompt"]
    assert nc["tokens"] == chosen(d) and len(nc["tokens"]) == 8


def test_gpt_prompt_errors_are_one_line():
    for args in (["trace", "gpt", "--prompt", "Today the weather is hello"],
                 ["trace", "gpt", "--prompt", "   "],
                 ["trace", "gpt", "--prompt", "Today", "--no-cache", "--new-tokens", "9999"],
                 ["trace", "abc", "--prompt", "A B", "--no-cache"]):
        p = cli(*args)
        assert p.returncode == 2, (args, p.stdout)
        assert p.stdout == "" and len(p.stderr.strip().splitlines()) == 1, (args, p.stderr)
    assert "hello" in cli("trace", "gpt", "--prompt", "Today the weather is hello").stderr
