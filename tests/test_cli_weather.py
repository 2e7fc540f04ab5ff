"""The trace CLI covers the weather model with the same JSON shape as abc."""
import json

from tests.test_cli import cli


def test_trace_weather_shape_and_seed_numbers(capsys):
    code, out, err = cli(capsys, "trace", "weather", "--prompt", "Today weather is so", "--new-tokens", "1")
    assert code == 0, err
    d = json.loads(out)
    assert d["model"] == "weather" and d["prompt"] == ["Today", "weather", "is", "so"]
    pre, choose = d["events"]
    assert pre["phase"] == "prefill" and choose["phase"] == "choose" and choose["chosen"] == "nice"
    # output: the four head contexts of each new position; logits keyed by word
    assert [[round(x, 4) for x in row] for row in pre["output"]] == [
        [10, 10, 10, 10], [20, 15, 10, 15], [20, 10.3333, 10, 10.3333], [12.5, 5, 10, 9]]
    assert {k: round(v, 3) for k, v in pre["logits"].items()} == {"nice": 15.3, "warm": 14.2, "delicious": 8.15}
    assert len(pre["attention"]) == 4 and len(pre["attention"][0]) == 4        # heads × queries × keys
    assert pre["recompute_max_abs_diff"] == 0


def test_trace_weather_decode_shows_the_stale_cache(capsys):
    d = json.loads(cli(capsys, "trace", "weather", "--prompt", "Today weather is so", "--new-tokens", "2")[1])
    dec = d["events"][2]
    assert dec["phase"] == "decode" and dec["tokens"] == ["nice"] and dec["cache_len"] == 5
    assert [round(x, 4) for x in dec["output"][0]] == [12.5, 6.0, 10, 8.6]
    assert round(dec["recompute_max_abs_diff"], 4) == 1.0
