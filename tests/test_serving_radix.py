"""Prefix caching two ways on one trace (kvviz.cache.radix): a radix tree at token granularity with
LRU leaf eviction (SGLang's RadixAttention) beside full-block hashing (vLLM's names, block_pool)."""
import pytest

from kvviz.cache.radix import RadixTree, compare_prefix_caches, trace_prefix_caches


def test_match_is_token_granular_and_insert_splits_an_edge():
    t = RadixTree(100)
    assert t.match([1, 2, 3]) == 0
    assert t.insert([1, 2, 3, 4, 5]) == 5
    assert t.match([1, 2, 3, 9]) == 3 and t.match([1, 2, 3, 4, 5, 6]) == 5 and t.match([2]) == 0
    assert t.insert([1, 2, 3, 9, 9]) == 2                       # the edge splits after 1 2 3
    assert t.sequences() == [(1, 2, 3, 4, 5), (1, 2, 3, 9, 9)]
    assert t.tokens_held == 7 and len(t.nodes()) == 3
    assert t.insert([1, 2, 3, 4, 5]) == 0                       # already held


def test_over_capacity_the_least_recently_used_leaf_goes_and_its_parent_merges():
    t = RadixTree(8)
    t.insert([1, 2, 3, 4])
    t.insert([1, 2, 5, 6])
    t.match([1, 2, 3, 4])                                       # A is now the more recent
    t.insert([7, 8, 9])
    assert t.evicted == [(1, 2, 5, 6)]
    assert t.sequences() == [(1, 2, 3, 4), (7, 8, 9)] and t.tokens_held == 7
    assert len(t.nodes()) == 2                                  # 1 2 and 3 4 merged back into one edge
    with pytest.raises(ValueError):
        RadixTree(0)


def test_the_same_chat_trace_hits_whole_blocks_under_hashing_and_every_token_under_the_radix_tree():
    system, turn = list(range(100, 110)), [7, 7, 7]                 # 10 shared tokens, then a shared turn
    prompts = [system + [1], system + turn + [2], system + turn + [3, 4], system + [5]]
    hashed, radix = compare_prefix_caches(prompts, block_size=4, capacity_tokens=1000)
    assert radix.hits == (0, 10, 13, 10)                            # to the token
    assert hashed.hits == (0, 8, 12, 8)                             # full blocks of 4 only
    assert all(h <= r for h, r in zip(hashed.hits, radix.hits)) and radix.total > hashed.total
    one, = compare_prefix_caches(prompts, block_size=1, capacity_tokens=1000)[:1]
    assert one.hits == radix.hits                                   # blocks of one token: the same hits
    small_h, small_r = compare_prefix_caches(prompts, block_size=4, capacity_tokens=12)
    assert small_r.held <= 12 and small_h.held <= 3 and small_r.evicted + small_h.evicted > 0


def test_the_trace_draws_the_tree_as_the_stream_arrives_and_marks_what_each_prompt_reused():
    system, turn = list(range(100, 110)), [7, 7, 7]
    prompts = [system + [1], system + turn + [2], system + turn + [3, 4]]
    trace = trace_prefix_caches(prompts, block_size=4, capacity_tokens=1000)
    assert (trace.result("hash"), trace.result("radix")) == compare_prefix_caches(prompts, 4, 1000)
    first, second, third = (s.tree for s in trace.steps)
    assert [(n.tokens, n.reused) for n in first] == [(tuple(system + [1]), False)]
    root, = (n for n in second if n.parent == -1)                   # the split: a new node above the old one
    assert root.tokens == tuple(system) and root.reused
    assert next(n for n in second if n.uid == first[0].uid).tokens == (1,)    # the old node keeps its tail
    assert sorted(n.tokens for n in second if n.parent == root.uid) == [(1,), (7, 7, 7, 2)]
    assert {n.tokens for n in third if n.reused} == {tuple(system), (7, 7, 7)}
    assert [s.radix_tokens for s in trace.steps] == [11, 15, 17] and [s.hash_blocks for s in trace.steps] == [2, 3, 3]
