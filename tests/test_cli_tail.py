"""``python -m kvviz tail``: SmolLM2's next-token distribution through top-k and top-p, as on the Sampling page."""
import json

from kvviz.decoding.tail import next_token_logits, tail_draws, tail_of
from tests.test_cli import cli, one_line_error


def test_tail_prints_the_engines_numbers(capsys, smollm2):
    """On SmolLM2's real weights: the JSON's numbers are the engine's, computed again in this process."""
    code, out, err = cli(capsys, "tail", "--prompt", "The capital of France is", "--top-k", "50", "--top-p", "0.9",
                         "--draws", "500", "--seed", "2")
    assert code == 0, err
    d = json.loads(out)
    tail = tail_of(next_token_logits(smollm2, smollm2.prompt("The capital of France is", False)), 50, 0.9)
    assert d["top"][0]["token"] == " Paris" and d["vocab"] == tail.vocab
    assert (d["top_k_size"], d["top_p_size"], d["junk_in_k"], d["tail_size"]) == (
        tail.top_k_size, tail.top_p_size, tail.junk_in_k, tail.tail_size)
    assert d["mass_beyond_k"] == tail.mass_beyond_k and d["mass_beyond_p"] == tail.mass_beyond_p
    draws = tail_draws(tail, 500, 2)
    assert (d["draws"]["outside_k"], d["draws"]["outside_p"]) == (draws.outside_k, draws.outside_p)
    assert d["draws"]["first_tail"]["rank"] > d["top_p_size"]


def test_tail_errors_are_one_line(capsys):
    assert "Top-k" in one_line_error(capsys, "tail", "--prompt", "Hi", "--top-k", "0")
    assert "Top-p" in one_line_error(capsys, "tail", "--prompt", "Hi", "--top-p", "1.5")
