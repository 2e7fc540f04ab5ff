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
    assert nc["repeat"] is None and nc["cropped_steps"] == 0         # 8 tokens: no loop yet, no crop


def test_no_cache_names_greedys_loop_and_counts_the_cropped_steps(capsys):
    """48 greedy tokens loop ("… so windy ! Today the weather is so windy …"); a prompt of 22 tokens
    and 248 new ones pass the 256 learned positions: step t sees a cropped text once 22 + t > 256."""
    from kvviz.decoding.long_runs import repeated_span

    code, out, err = cli(capsys, "trace", "gpt", "--prompt", "Today the weather is so", "--new-tokens", "48",
                         "--no-cache")
    assert code == 0, err
    nc = json.loads(out)
    rep = repeated_span(nc["tokens"])
    assert nc["repeat"] == {"span": list(rep.span), "count": rep.count, "starts": list(rep.starts),
                            "covered": rep.covered}
    assert "windy" in nc["repeat"]["span"] and nc["repeat"]["covered"] > 24 and nc["cropped_steps"] == 0
    prompt = " ".join(["Today the weather is so windy !"] * 3 + ["Today"])
    code, out, err = cli(capsys, "trace", "gpt", "--prompt", prompt, "--new-tokens", "248", "--no-cache")
    assert code == 0, err
    nc = json.loads(out)
    assert len(nc["prompt"]) == 22 and nc["cropped_steps"] == 248 - (256 - 22 + 1)


@pytest.mark.parametrize("args", [["trace", "gpt", "--prompt", "   "],
                                  ["trace", "gpt", "--prompt", "Today", "--no-cache", "--new-tokens", "9999"],
                                  ["trace", "abc", "--prompt", "A B", "--no-cache"]])
def test_gpt_prompt_errors_are_one_line(capsys, args):
    one_line_error(capsys, *args)


def test_an_unknown_word_is_named_in_the_one_line(capsys):
    assert "hello" in one_line_error(capsys, "trace", "gpt", "--prompt", "Today the weather is hello")
