"""A hybrid cache's formula (kvviz/cost/hybrid.py) and its figures (kvviz/viz/hybrid.py): the numbers
measured on Gemma 3 270M's tensors (docs/measured-gemma3.md), and figures that draw exactly the numbers given."""
import pytest

from kvviz.cost.hybrid import all_global_bytes, held_positions, hybrid_cache_bytes
from kvviz.viz.hybrid import cache_bytes_spec, cache_lengths_spec

GEMMA = ([512] * 5 + [None]) * 3            # five sliding layers, then a global one, three times


def test_the_formula_gives_the_bytes_measured_on_gemmas_tensors():
    assert [held_positions(512, T) for T in (136, 511, 520)] == [136, 511, 511]
    assert held_positions(None, 1032) == 1032
    assert hybrid_cache_bytes(GEMMA, 1, 256, 4, 520) == 18_892_800          # docs/measured-gemma3.md
    assert hybrid_cache_bytes(GEMMA, 1, 256, 4, 1032) == 22_038_528
    assert all_global_bytes(18, 1, 256, 4, 1032) == 38_043_648
    assert hybrid_cache_bytes(GEMMA, 1, 256, 4, 136) == all_global_bytes(18, 1, 256, 4, 136)   # within the window


def test_the_figures_draw_the_numbers_given_one_legend_entry_per_layer_kind():
    windows = [8, 8, None]
    spec = cache_lengths_spec([5, 10, 11], [[5, 5, 5], [7, 7, 10], [7, 7, 11]], windows, "rows")
    assert [d["y"] for d in spec["data"]] == [[5, 7, 7], [5, 7, 7], [5, 10, 11]]
    assert [d["showlegend"] for d in spec["data"]] == [True, False, True]
    assert spec["layout"]["xaxis"]["rangemode"] == "tozero"
    spec = cache_bytes_spec([5, 10], [10, 20], [10, 20], [10, 30], "bytes", {"measured": "gemessen"})
    assert [d["name"] for d in spec["data"]] == ["every layer global", "formula", "gemessen"]
    assert spec["data"][2]["y"] == [10, 20] and spec["data"][0]["y"] == [10, 30]


def test_far_reach_is_the_weight_beyond_every_window_and_the_global_heads_top_positions():
    import torch

    from kvviz.cache.hybrid import far_reach
    from kvviz.viz.hybrid import far_weights_spec
    row = torch.zeros(2, 1, 10)                  # [L, H, T]: the query at position 9; windows 4 (sliding), global
    row[0, 0, 6:] = 0.25                         # the sliding layer: only its band
    row[1, 0, torch.tensor([0, 2, 5, 9])] = torch.tensor([0.4, 0.1, 0.3, 0.2])
    reach = far_reach(row, 9, [4, None], k=2)
    assert reach.edge == 5 and reach.weights.tolist() == [[0.0], [pytest.approx(0.8)]]
    assert reach.first[1, 0] == pytest.approx(0.4) and reach.top[1, 0].tolist() == [5, 2]    # position 0 apart
    assert far_reach(row, 3, [4, None]).edge == -1                  # within the window: nothing beyond it
    spec = far_weights_spec(reach.weights.tolist(), [4, None], "far")
    assert [(d["name"], d["x"], d["y"]) for d in spec["data"]] == [("global layers", [2], [pytest.approx(0.8)]),
                                                                    ("sliding layers", [1], [0.0])]


def test_a_long_cache_table_draws_its_sinks_newest_written_and_window_edge_rows_and_a_map_pools_keys():
    import torch

    from kvviz.decoding.stepper import CacheRow
    from kvviz.ui.frames.llm import TABLE_FOLD, fold_rows, pooled_keys

    class Ev:                                    # the fields fold_rows reads of a stepper Event
        def __init__(self, n: int, written: list[int]):
            self.cache = type("C", (), {"rows": tuple(CacheRow(p, "t", 0, "prefill") for p in range(n))})()
            self.positions, self.record, self.index = written, object(), 1

    assert fold_rows(Ev(TABLE_FOLD, [TABLE_FOLD - 1]), None) is None          # short: every row
    shown = fold_rows(Ev(300, [299]), window=100)
    assert shown == [0, 1, 2, 3, 199, 200] + list(range(284, 300))          # sinks, the window's edge, newest
    assert fold_rows(Ev(300, list(range(300))), None) == [0, 1, 2, 3] + list(range(284, 300))   # a prefill
    ev = Ev(300, [299])
    ev.cache.rows = tuple(CacheRow(p, "t", 0, "prefill", evicted_at=1 if p < 150 else None) for p in range(300))
    assert fold_rows(ev, None) == [0, 1, 2, 3, 149, 150] + list(range(284, 300))   # the eviction's edge
    w = torch.softmax(torch.randn(4, 300), -1)
    pooled, ok, b = pooled_keys(w, torch.arange(300).expand(4, 300) >= 200, keys=128)
    assert b == 3 and pooled.shape == (4, 100) and torch.allclose(pooled.sum(-1), torch.ones(4))
    assert ok[0].tolist() == [False] * 66 + [True] * 34                     # cell 66 holds positions 198–200
    assert pooled_keys(w[:, :128], w[:, :128] > 0, keys=128)[2] == 1        # short: as it is
