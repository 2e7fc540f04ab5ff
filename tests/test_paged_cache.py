"""The paged cache (kvviz.cache.PagedCache): the tiny GPT and the A/B/C model compute bit for bit
what they compute with a contiguous cache, blocks are taken, shared, copied and freed as vLLM does,
and a prefix found in the cache gives the logits of a cold run."""
import pytest
import torch

from kvviz import cost
from kvviz.cache import DynamicCache, PagedCache, PoolExhausted, block_hash
from kvviz.decoding.loops import generate_cached
from kvviz.decoding.sampling import Sampler
from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models.abc import ABCModel
from kvviz.models.gpt import GPTModel

M = GPTModel()
PROMPT = M.tokenize("Today the weather in London is")            # 6 words
SAMPLER = Sampler(temperature=1.2, top_k=20)
FP32_TOL = 1e-4          # the project's float32 tolerance (kvviz.decoding.batching.BatchRun.tolerance)


def _ids(text: str) -> list[int]:
    return M.tokenizer.encode(text)


@pytest.fixture(scope="module")
def contiguous():
    """The stepper with its default contiguous cache: greedy and sampled."""
    return {"greedy": run_generation(M, PROMPT, 6), "sampled": run_generation(M, PROMPT, 6, rule=SAMPLER, seed=5)}


def _same_events(a, b) -> None:
    assert len(a.events) == len(b.events)
    for x, y in zip(a.events, b.events):
        assert torch.equal(x.logits, y.logits), x.index
        assert x.tokens == y.tokens
        if x.record is not None:
            assert torch.equal(x.record.attention, y.record.attention)
            assert all(torch.equal(k1, k2) for k1, k2 in zip(x.cache.keys, y.cache.keys))
            assert all(torch.equal(v1, v2) for v1, v2 in zip(x.cache.values, y.cache.values))


@pytest.mark.parametrize("block_size", [1, 4, 5, 16])    # 4 and 5 do not divide the 6-word prompt
def test_gpt_stepper_through_blocks_is_bit_identical(contiguous, block_size):
    paged = run_generation(M, PROMPT, 6, cache=PagedCache(M.n_layers, block_size, 16))
    _same_events(contiguous["greedy"], paged)


def test_gpt_sampled_stepper_through_blocks_is_bit_identical(contiguous):
    paged = run_generation(M, PROMPT, 6, rule=SAMPLER, seed=5, cache=PagedCache(M.n_layers, 3, 8))
    _same_events(contiguous["sampled"], paged)


def test_abc_stepper_through_blocks_is_bit_identical():
    m = ABCModel()
    for rule, seed in ((None, 0), (Sampler(1.5), 3)):
        a = run_generation(m, ["A", "B", "C"], 8, rule=rule, seed=seed)
        for bs in (1, 2):
            _same_events(a, run_generation(m, ["A", "B", "C"], 8, rule=rule, seed=seed, cache=PagedCache(1, bs, 16)))


@pytest.mark.parametrize("block_size, rule", [(1, None), (7, None), (4, SAMPLER)])
def test_fast_loop_through_blocks_is_bit_identical(block_size, rule):
    ids = _ids("Yesterday it was so cold in Oslo that we")                # 9 words
    a = generate_cached(M, ids, 12, rule, seed=2)
    cache = PagedCache(M.n_layers, block_size, 32)
    b = generate_cached(M, ids, 12, rule, seed=2, cache=cache)
    assert a.tokens == b.tokens and torch.equal(a.logits, b.logits)
    assert cache.block_table(0) == tuple(range(-(-20 // block_size)))    # 9 + 12 − 1 positions, in order
    assert b.cache_bytes == cache.nbytes()


def test_blocks_are_taken_when_the_last_one_is_full_and_the_pool_is_sized_from_the_first_key():
    cache = PagedCache(M.n_layers, 4, 6)
    assert cache.nbytes() == 0 and cache.slot_bytes() == 0
    with torch.no_grad():
        M.network(torch.tensor([_ids("Today the weather is so")]), cache, 0)          # 5 positions
        assert cache.block_table(0) == (0, 1) and cache.seq_length(0) == 5
        cfg = M.config
        assert cache.layers[0].keys.shape == (6, cfg.kv_heads, 4, cfg.head_dim)   # [blocks, kv_heads, size, dim]
        events = cache.drain_events()
        assert [(e.kind, e.block) for e in events] == [("take", 0), ("take", 1)]
        for pos in range(5, 8):                                                    # fill block 1
            M.network(torch.tensor([[3]]), cache, pos)
        assert cache.block_table(0) == (0, 1) and not cache.drain_events()
        M.network(torch.tensor([[3]]), cache, 8)                                   # position 8: a new block
        assert cache.block_table(0) == (0, 1, 2) and [e.kind for e in cache.drain_events()] == ["take"]
    assert cache.refcounts() == (1, 1, 1, 0, 0, 0) and cache.filled() == (4, 4, 1, 0, 0, 0)
    assert cache.free_blocks() == (3, 4, 5)
    # nbytes counts the whole pool, whatever is filled: the cost model's bytes per position × slots
    per_token = cost.cache_bytes_per_token(M.cost_config, "fp32")
    assert cache.slot_bytes() == per_token and cache.nbytes() == 6 * 4 * per_token


def test_a_full_pool_refuses_before_touching_anything():
    cache = PagedCache(1, 2, 2)
    k = torch.randn(1, 1, 4, 2, dtype=torch.float64)
    cache.update(k, k, 0)
    with pytest.raises(PoolExhausted, match="needs 1 free blocks; 0 of 2"):
        cache.update(k[:, :, :1], k[:, :, :1], 0)
    assert cache.seq_length(0) == 4 and cache.block_table(0) == (0, 1)
    with pytest.raises(LimitError, match="Block size"):
        PagedCache(1, 0, 4)
    with pytest.raises(LimitError, match="positions; the limit"):
        PagedCache(1, 64, 1024)


def test_crop_and_free_give_blocks_back_per_sequence():
    cache = PagedCache(2, 2, 8)
    k = torch.arange(10.0).view(1, 1, 5, 2)
    for seq in (0, 1):
        cache.set_active([seq])
        for layer in range(2):
            cache.update(k + seq, k + seq, layer)
    assert cache.block_table(0) == (0, 1, 2) and cache.block_table(1) == (3, 4, 5)
    cache.set_active([0])
    cache.crop(2)
    assert cache.seq_length(0) == 2 and cache.block_table(0) == (0,) and cache.block_table(1) == (3, 4, 5)
    keys, _ = cache.update(k[:, :, :1] + 100, k[:, :, :1], 0)                # lands at position 2
    assert keys[0, 0, :, 0].tolist() == [0.0, 2.0, 100.0]
    cache.free_sequence(1)
    assert cache.block_table(1) == () and cache.num_free_blocks == 8 - 2
    cache.reset()
    assert cache.num_free_blocks == 8 and cache.get_seq_length() == 0


def test_rows_of_a_batch_are_sequences_right_aligned_with_a_key_mask():
    """Two sequences of different lengths in one pass: row b reads its own blocks, the shorter one
    left-padded, and the last N columns are the new ones (models.base.allowed_keys' layout)."""
    cache = PagedCache(1, 2, 8)
    for seq, n in ((7, 3), (9, 1)):
        cache.set_active([seq])
        x = torch.full((1, 1, n, 2), float(seq))
        cache.update(x, x, 0)
    mask = cache.set_active([7, 9], [1, 2])                                 # 7 decodes 1, 9 adds 2
    assert mask.tolist() == [[True, True, True, True], [False, True, True, True]]
    new = torch.tensor([[[[0.0, 0.0], [70.0, 70.0]]], [[[90.0, 90.0], [91.0, 91.0]]]])   # [2, 1, N=2, 2]
    keys, _ = cache.update(new, new, 0)
    assert keys[0, 0, :, 0].tolist() == [7, 7, 7, 70]                       # row 0's padding column not written
    assert keys[1, 0, 1:, 0].tolist() == [9, 90, 91]                        # column 0 is padding (masked)
    assert cache.seq_length(7) == 4 and cache.seq_length(9) == 3


def test_fork_shares_every_block_and_the_first_write_copies_the_partial_one():
    """Parallel sampling: two continuations of one prefilled prompt. The prompt's 5 positions fill
    block 0 and one slot of block 1; both sequences hold both blocks. The first decode of each
    sequence writes into block 1: the first writer copies it, the second then owns the original.
    Each continuation's logits equal, bit for bit, a cold contiguous run of the same tokens."""
    ids = _ids("Today the weather is so")
    cache = PagedCache(M.n_layers, 4, 8)
    with torch.no_grad():
        M.network(torch.tensor([ids]), cache, 0)
        cache.fork(0, 1)
        assert cache.refcounts()[:2] == (2, 2) and cache.drain_events()[-1].kind == "share"
        before = cache.gather(0)[0].clone()
        cache.set_active([1])
        a = M.network(torch.tensor([_ids("cold")]), cache, 5, last_only=True)
        copies = [e for e in cache.drain_events() if e.kind == "copy"]
        assert [(e.source, e.block, e.seq) for e in copies] == [(1, 2, 1)]
        assert cache.block_table(0) == (0, 1) and cache.block_table(1) == (0, 2)
        assert cache.refcounts()[:3] == (2, 1, 1)
        cache.set_active([0])
        assert torch.equal(cache.gather(0)[0], before)                      # the other holder is untouched
        b = M.network(torch.tensor([_ids("nice")]), cache, 5, last_only=True)
        assert not [e for e in cache.drain_events() if e.kind == "copy"]    # block 1 is its own now
        for word, got in (("cold", a), ("nice", b)):
            ref = DynamicCache(M.n_layers)
            M.network(torch.tensor([ids]), ref, 0)
            assert torch.equal(M.network(torch.tensor([_ids(word)]), ref, 5, last_only=True), got)


def _prefill(cache: PagedCache, seq: int, ids: list[int]) -> torch.Tensor:
    """Prefill what the cache does not hold yet (after ``match_prefix``); the last position's logits."""
    cache.set_active([seq])
    start = cache.seq_length(seq)
    with torch.no_grad():
        out = M.network(torch.tensor([ids[start:]]), cache, start, last_only=True)[0]
    cache.register(seq, ids)
    return out


def test_prefix_caching_shares_full_blocks_named_by_their_tokens_and_everything_before():
    system = _ids("Today the weather is so nice . It is")                  # 9 words: 2 full blocks of 4
    cache = PagedCache(M.n_layers, 4, 16)
    _prefill(cache, 0, system + _ids("rainy"))
    assert cache.pool.hash_of[0] == block_hash(None, system[:4])
    assert cache.pool.hash_of[1] == block_hash(cache.pool.hash_of[0], system[4:8]) and cache.pool.hash_of[2] is None

    other = system + _ids("cold in Oslo")
    assert cache.match_prefix(1, other) == 8                                  # two blocks, 8 positions saved
    assert cache.block_table(1) == (0, 1) and cache.refcounts()[:2] == (2, 2)
    got = _prefill(cache, 1, other)
    with torch.no_grad():
        cold = M.network(torch.tensor([other]), None, 0, last_only=True)[0]
    assert float((got - cold).abs().max()) <= FP32_TOL
    assert cache.block_table(1)[2:] and set(cache.block_table(1)[2:]).isdisjoint(cache.block_table(0))

    # the same tokens after a different beginning share nothing: the name includes the prefix
    assert cache.prefix_hits(_ids("Yesterday") + system[1:] + _ids("wet")) == []
    # a prompt of exactly two full blocks hits only one: its last token must be computed
    assert cache.prefix_hits(system[:8]) == [0]


def test_freed_prefix_blocks_stay_findable_until_taken_again():
    ids = _ids("Today the weather is so nice .")                            # 7 words, 1 full block of 4
    cache = PagedCache(M.n_layers, 4, 3)
    _prefill(cache, 0, ids)
    cache.free_sequence(0)
    assert cache.num_free_blocks == 3 and cache.pool.hash_of[0] is not None
    assert cache.match_prefix(1, ids) == 4 and cache.refcounts() == (1, 0, 0)   # revived from the free list
    cache.free_sequence(1)
    cache.drain_events()
    cache.set_active([2])
    x = torch.zeros(1, 4, 9, 32)
    for layer in range(M.n_layers):                                          # 9 new positions: all 3 blocks
        cache.update(x, x, layer)
    taken = [e for e in cache.drain_events() if e.kind == "take"]
    assert [e.block for e in taken] == [2, 1, 0] and [e.evicted for e in taken] == [False, False, True]
    assert cache.prefix_hits(ids) == [] and cache.pool.hash_of[0] is None


def test_abc_prefix_hit_is_exact():
    """float64: the request with a cached prefix gives its cold run's logits to rounding (1e-9)."""
    m = ABCModel()
    cache = PagedCache(1, 2, 8)
    first, second = [0, 1, 1, 0, 2], [0, 1, 1, 0, 0, 1]
    for seq, ids in ((0, first), (1, second)):
        hit = cache.match_prefix(seq, ids)
        cache.set_active([seq])
        rec = m.forward(ids[hit:], cache, hit)
        cache.register(seq, ids)
    assert hit == 4
    cold = m.forward(second, None, 0)
    assert rec.logits.dtype == torch.float64
    assert float((rec.logits[-1] - cold.logits[-1]).abs().max()) <= 1e-9   # BatchRun.tolerance for float64
