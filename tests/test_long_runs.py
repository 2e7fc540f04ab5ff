"""What only a long generation shows (kvviz.decoding.long_runs): greedy's loop on the tiny GPT, and the
uncached loop's crop past block_size beside the cached loop's stop."""
import pytest
import torch

from kvviz.decoding.long_runs import LOOP_TOKENS, crop_run, crop_windows, repeated_span
from kvviz.decoding.loops import generate, max_cached_new_tokens
from kvviz.decoding.sampling import Greedy, Sampler
from kvviz.limits import LimitError
from kvviz.models.gpt import GPTModel, load_tiny_gpt
from kvviz.models.gpt.config import GPTConfig
from kvviz.models.gpt.model import GPT


def test_repeated_span_counts_non_overlapping_occurrences_and_prefers_coverage():
    text = "x a b c a b c y a b c".split()
    rep = repeated_span(text)
    assert rep.span == ("a", "b", "c") and rep.starts == (1, 4, 8) and rep.covered == 9
    assert rep.positions() == {1, 2, 3, 4, 5, 6, 8, 9, 10}
    assert repeated_span("a b c d e f g h".split()) is None                 # nothing comes back
    assert repeated_span(["a"] * 8, min_len=3, min_count=3) is None          # overlapping runs are not repeats
    assert repeated_span(["a"] * 9).starts == (0, 3, 6)
    # spans of at least min_len tokens only: "u v" is too short, "u v u" overlaps itself
    long_once = "p q r s t p q r s t".split()                              # 5 tokens twice
    assert repeated_span(long_once + "u v u v u v".split(), min_count=2).span == tuple("pqrst")


@pytest.fixture(scope="module")
def tiny():
    return load_tiny_gpt()


def test_the_tiny_gpts_greedy_loops_and_sampling_leaves_the_loop(tiny):
    model = GPTModel(tiny)
    ids = [tiny.tokenizer.index[w] for w in model.tokenize("Today the weather is so")]
    greedy = [model.vocab[i] for i in generate(tiny.model, ids, LOOP_TOKENS, Greedy()).tokens]
    loop = repeated_span(greedy)
    assert loop is not None and loop.count >= 3 and loop.covered > LOOP_TOKENS / 2
    assert "windy" in loop.span and "weather" in loop.span     # "… so windy ! Today the weather is so windy …"
    for seed in range(3):
        sampled = [model.vocab[i] for i in generate(tiny.model, ids, LOOP_TOKENS, Sampler(1.0), seed).tokens]
        other = repeated_span(sampled)
        assert other is None or other.covered < loop.covered


def test_crop_windows_cut_the_text_to_its_last_block_size_tokens():
    w = crop_windows(prompt_len=3, new_tokens=6, block_size=5)
    assert [(x.step, x.start, x.end) for x in w] == [(0, 0, 3), (1, 0, 4), (2, 0, 5), (3, 1, 6), (4, 2, 7),
                                                      (5, 3, 8)]
    assert [x.dropped for x in w] == [0, 0, 0, 1, 2, 3]


def test_past_block_size_the_uncached_loop_crops_and_the_cached_one_stops():
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=11, block_size=12, n_layer=1, n_head=2, n_embd=16)).eval()
    prompt = [1, 2, 3, 4]
    run = crop_run(model, prompt, Greedy(), past=5)
    limit = max_cached_new_tokens(GPTModel(model), len(prompt))
    assert limit == 9 and len(run.cached.tokens) == limit and len(run.uncached.tokens) == limit + 5
    assert "block_size" in run.stop_reason and str(limit) in run.stop_reason
    with pytest.raises(LimitError):                     # the reason is generate_cached's own refusal
        from kvviz.decoding.loops import generate_cached
        generate_cached(GPTModel(model), prompt, limit + 1)
    assert run.same_tokens and run.first_cropped == limit          # the crop starts where the cache ends
    text = prompt + run.uncached.tokens
    for w in run.windows[limit:]:                                   # each cropped step saw exactly its window
        assert w.end - w.start == 12 and w.dropped == w.step - limit + 1
        with torch.inference_mode():
            logits = model(torch.tensor([text[w.start:w.end]]), last_only=True)[0]
        assert int(torch.argmax(logits)) == text[w.end]
