"""The trace CLI on the tiny GPT: the trace JSON, and --no-cache printing the same tokens."""
import json

import pytest

from tests.test_cli import cli, one_line_error


def chosen(trace: dict) -> list[str]:
    return [e["chosen"] for e in trace["events"] if e["phase"] == "choose"]


def test_trace_gpt_and_no_cache_print_the_same_tokens(capsys):
    code, out, err = cli(capsys, "trace", "gpt", "--prompt", "Today the weather is so", "--new-tokens", "8")
    assert code == 0, err
    d = json.loads(out)
    assert d["model"] == "gpt" and d["prompt"] == ["Today", "the", "weather", "is", "so"]
    ev = d["events"]
    assert [e["phase"] for e in ev] == ["prefill", "choose"] + ["decode", "choose"] * 7
    assert len(ev[0]["attention"]) == 4 and len(ev[0]["attention"][0]) == 4      # layers × heads × N × T
    assert len(ev[2]["attention"][0][0]) == 1 and len(ev[2]["attention"][0][0][0]) == 6
    assert [e["cache_len"] for e in ev[:4]] == [5, 5, 6, 6]
    assert all(e["recompute_max_abs_diff"] < 1e-4 for e in ev if e["recompute_max_abs_diff"] is not None)
    code, out, err = cli(capsys, "trace", "gpt", "--prompt", "Today the weather is so", "--new-tokens", "8",
                         "--no-cache")
    assert code == 0, err
    nc = json.loads(out)
    assert nc["cache"] is False and nc["prompt"] == d["prompt"]
    assert nc["tokens"] == chosen(d) and len(nc["tokens"]) == 8


@pytest.mark.parametrize("args", [["trace", "gpt", "--prompt", "   "],
                                  ["trace", "gpt", "--prompt", "Today", "--no-cache", "--new-tokens", "9999"],
                                  ["trace", "abc", "--prompt", "A B", "--no-cache"]])
def test_gpt_prompt_errors_are_one_line(capsys, args):
    one_line_error(capsys, *args)


def test_an_unknown_word_is_named_in_the_one_line(capsys):
    assert "hello" in one_line_error(capsys, "trace", "gpt", "--prompt", "Today the weather is hello")
