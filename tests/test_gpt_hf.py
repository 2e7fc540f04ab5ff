"""The shipped checkpoint in Hugging Face transformers' GPT2LMHeadModel: same logits, same tokens."""
import pytest
import torch

from kvviz.decoding.loops import generate, generate_cached
from kvviz.models.gpt import GPTModel, from_hf_state_dict, load_tiny_gpt, plain_state_dict, to_transformers

TINY = load_tiny_gpt()
M, TOK = TINY.model, TINY.tokenizer


@pytest.fixture(scope="module")
def hf():
    from transformers.utils import logging
    logging.set_verbosity_error()
    return to_transformers(M)


PROMPTS = ["Today the weather is so", "It is windy in Dublin , so we", "Yesterday the weather in Rome was",
           "Today it is cold . In Oslo the sky"]


def test_converter_round_trips_and_transposes_conv1d(hf):
    sd = hf.state_dict()
    ours = plain_state_dict(M)
    w = "transformer.h.0.attn.c_attn.weight"
    assert sd[w].shape == (128, 384) and ours[w].shape == (384, 128)    # Conv1D [in, out] vs Linear [out, in]
    back = from_hf_state_dict(sd)
    assert set(back) == set(ours) and all(torch.equal(back[k], ours[k]) for k in ours)


def test_same_logits_without_cache(hf):
    for prompt in PROMPTS:
        ids = torch.tensor([TOK.encode(prompt)])
        with torch.no_grad():
            ours, theirs = M(ids), hf(ids).logits
        assert ours.shape == theirs.shape
        assert float((ours - theirs).abs().max()) < 1e-4


def test_same_logits_with_cache_step_by_step(hf):
    ids = TOK.encode("Today the weather is so nice . It is")
    with torch.no_grad():
        full = hf(torch.tensor([ids])).logits[0]                       # [T, V] no cache
        out = hf(torch.tensor([ids[:4]]), use_cache=True)              # prefill 4 tokens
        past, steps = out.past_key_values, [out.logits[0]]
        for i in range(4, len(ids)):                                   # decode one token at a time
            out = hf(torch.tensor([[ids[i]]]), past_key_values=past, use_cache=True)
            past = out.past_key_values
            steps.append(out.logits[0])
        theirs_cached = torch.cat(steps)
        ours_full = M(torch.tensor([ids]))[0]
    assert float((theirs_cached - ours_full).abs().max()) < 1e-4
    assert float((full - ours_full).abs().max()) < 1e-4


@pytest.mark.parametrize("use_cache", [True, False])
def test_same_greedy_continuation(hf, use_cache):
    for prompt in PROMPTS:
        ids = TOK.encode(prompt)
        n = 24
        with torch.no_grad():
            x = torch.tensor([ids])
            out = hf.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=n, min_new_tokens=n,
                              do_sample=False, use_cache=use_cache, pad_token_id=0)
        theirs = out[0, len(ids):].tolist()
        assert theirs == generate_cached(GPTModel(M), ids, n).tokens == generate(M, ids, n).tokens
