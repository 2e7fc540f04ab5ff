"""Batched decoding on the trained tiny GPT: prompts of different lengths, left-padded, one pass per
step; every sequence gives the tokens (and, to float32 rounding, the logits and attention) it gives
alone. Also the GPT's cost shape: FLOPs counted from its passes equal the formulas."""
import pytest
import torch

from kvviz import cost
from kvviz.decoding.batching import compare_with_solo, run_batch, solo_runs
from kvviz.decoding.sampling import Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models.gpt import GPTModel

M = GPTModel()
PROMPT_SETS = [
    ["Today the weather is so", "It was", "the"],
    ["Tomorrow", "Yesterday the sky was grey and"],
    ["It is so", "The wind is"],                          # equal lengths: no padding at all
]
# float32: a batched matmul sums in another order than a one-row one
LOGIT_TOL, ATT_TOL = 1e-4, 1e-5


def _prompts(texts):
    return [M.tokenize(x) for x in texts]


@pytest.mark.parametrize("texts", PROMPT_SETS)
def test_gpt_batched_equals_each_prompt_alone(texts):
    run = run_batch(M, _prompts(texts), 8)
    solo = solo_runs(M, run, 8)
    for b, (cmp, alone) in enumerate(zip(compare_with_solo(run, solo), solo)):
        assert cmp.same_tokens, (texts[b], run.events[-1].sequences[b], alone.events[-1].sequence)
        assert cmp.logits_max_abs_diff <= LOGIT_TOL and cmp.attention_max_abs_diff <= ATT_TOL, cmp
        assert [e.tokens[b][0] for e in run.events if e.phase == "choose"] == \
               [e.chosen for e in alone.events if e.phase == "choose"]


def test_gpt_sampled_batch_gives_every_sequence_its_solo_tokens():
    rule = Sampler(temperature=1.3, top_k=20)
    run = run_batch(M, _prompts(PROMPT_SETS[0]), 12, rule=rule, seed=11)
    solo = solo_runs(M, run, 12, rule=rule, seed=11)
    assert all(c.same_tokens and c.logits_max_abs_diff <= LOGIT_TOL for c in compare_with_solo(run, solo))


def test_gpt_batch_records_every_layer_and_head_and_masks_the_padding():
    run = run_batch(M, _prompts(["Today the weather is so", "It was"]), 3)
    assert run.pad == [0, 3]
    pre, _, dec = run.events[:3]
    L, H, hd = M.n_layers, M.n_heads, M.config.head_dim
    assert pre.record.q.shape == (2, L, H, 5, hd)                       # [B, L, H, N, d]
    assert pre.record.attention.shape == (2, L, H, 5, 5)                # [B, L, H, N, T]
    assert dec.record.attention.shape == (2, L, H, 1, 6)
    assert pre.cache.keys[0].shape == (2, H, 5, hd) and dec.cache.keys[L - 1].shape == (2, H, 6, hd)
    # sequence 2's decode query gives its three padding columns exactly zero weight in every head
    assert dec.record.attention[1, :, :, 0, :3].abs().max().item() == 0.0
    assert torch.allclose(dec.record.attention[1].sum(-1), torch.ones(L, H, 1))
    # padding query rows attend to nothing at all
    assert pre.record.attention[1, :, :, :3].abs().max().item() == 0.0
    assert pre.record.positions[1].tolist() == [-1, -1, -1, 0, 1]      # its own positions from 0


class ColumnPositionsGPT(GPTModel):
    """A broken batch forward that numbers positions by cache column, ignoring the padding."""

    def forward_batch(self, token_ids, positions, key_mask, cache):
        cols = torch.arange(key_mask.shape[1] - token_ids.shape[1], key_mask.shape[1])
        shifted = torch.where(positions >= 0, cols.expand_as(positions), positions)   # padding stays -1
        return super().forward_batch(token_ids, shifted, key_mask, cache)


def test_without_per_sequence_positions_a_padded_gpt_sequence_would_differ():
    broken = ColumnPositionsGPT(M.tiny)
    run = run_batch(broken, _prompts(["Today the weather is so", "It was"]), 4)
    cmp = compare_with_solo(run, solo_runs(M, run, 4))
    assert cmp[0].logits_max_abs_diff <= LOGIT_TOL        # the unpadded sequence is unaffected
    assert cmp[1].logits_max_abs_diff > 0.01              # learned positions shifted by 3


def test_gpt_batch_refuses_positions_past_block_size():
    n = M.config.block_size
    ids = torch.zeros(1, 1, dtype=torch.long)
    with pytest.raises(LimitError, match=f"learned only {n} positions"):
        M.network.hidden(ids, positions=torch.tensor([[n]]), allowed=torch.ones(1, 1, 1, dtype=torch.bool))


def test_gpt_cost_shape_matches_the_network():
    cfg = M.cost_config
    assert cost.config_of(M) is cfg
    assert cost.param_count(cfg) == M.network.n_params() == sum(p.numel() for p in M.network.parameters())
    assert (cfg.n_layers, cfg.n_heads, cfg.head_dim, cfg.vocab) == (4, 4, 32, len(M.vocab))


@pytest.mark.parametrize("prompt, new", [("Today the weather is so", 10), ("It", 6)])
def test_gpt_flops_counted_from_passes_equal_the_formulas(prompt, new):
    run = run_generation(M, M.tokenize(prompt), new)
    counted = cost.count_flops(run.events, M.cost_config)
    p = len(M.tokenize(prompt))
    assert counted.passes == new
    assert counted.cached == cost.generation_flops(M.cost_config, p, new, True)
    assert counted.uncached == cost.generation_flops(M.cost_config, p, new, False)
