"""The served run's figures (kvviz.viz.paged), built from real records without a browser: what
a user sees in each cell, line and bar is the record's number."""
import dataclasses

import plotly.graph_objects as go
import pytest

from kvviz.models.gpt import GPTModel
from kvviz.serving import block_size_sweep, compare_policies, request_stream
from kvviz.viz.paged import (
    ROLE_COLORS,
    block_pool_figure,
    block_pool_spec,
    block_size_figure,
    block_size_spec,
    latency_figure,
    latency_spec,
    memory_figure,
    memory_spec,
    timeline_figure,
    timeline_spec,
    timeline_states,
)
from kvviz.viz.theme import COLORS

M = GPTModel()
STREAM = request_stream(4, seed=3, max_new_tokens=5, shared_prefix=4)


@pytest.fixture(scope="module")
def runs():
    return compare_policies(M, STREAM, block_size=4, num_blocks=12, prefix_caching=True)


def _cells(fig):
    """(z, text) of the pool grid with the gap columns dropped: one entry per slot, block by block."""
    hm = fig.data[0]
    z = [v for row in hm.z for v in row]
    text = [v for row in hm.text for v in row] if hm.text is not None else [""] * len(z)
    return [(a, b) for a, b in zip(z, text) if a is not None]


def test_pool_grid_shows_owners_filled_and_free_slots_and_shared_counts(runs):
    run = runs["continuous"]
    step = next(s for s in run.steps if any(n > 1 for n in s.refcounts) and len(s.block_tables) > 1)
    prompt_lens = {r.id: len(r.request.prompt) for r in run.requests}
    fig = block_pool_figure(step, run.block_size, columns=4, prompt_lens=prompt_lens)
    cells = _cells(fig)
    assert len(cells) == run.num_blocks * run.block_size
    filled = [c for c in cells if c[0] >= 2 and c[0] % 2 == 0]
    pale = [c for c in cells if c[0] >= 2 and c[0] % 2 == 1]
    held = [b for b, n in enumerate(step.refcounts) if n]
    assert len(filled) == sum(step.filled) and len(pale) == len(held) * run.block_size - sum(step.filled)
    assert sum(1 for c in cells if c[0] in (0, 1)) == len(step.free_blocks) * run.block_size
    # block b's slots are cells b*bs..; the role's colour (prompt or generated, as the token chips:
    # requests are told apart by label, not hue); each filled slot shows its token
    contexts = dict(step.contexts)
    roles = set()
    for rid, table in step.block_tables:
        for pos, tok in enumerate(contexts[rid]):
            z, text = cells[table[pos // run.block_size] * run.block_size + pos % run.block_size]
            role = 0 if pos < prompt_lens[rid] else 1
            roles.add(role)
            assert z == 2 + 2 * role and tok.startswith(text.rstrip("…"))
            assert fig.data[0].colorscale[2 * z][1] == ROLE_COLORS[role] == COLORS[("prompt", "generated")[role]]
    assert roles == {0, 1}
    holders = {a.text for a in fig.layout.annotations if a.name == "holders"}
    shared = {n for n in step.refcounts if n > 1}
    assert {int(t.rsplit("×", 1)[1]) for t in holders if "×" in t} == shared
    assert {h for t in holders for h in t.split(" ") if h.startswith("r")} == {f"r{r}" for r, _ in step.block_tables}
    labelled = block_pool_figure(step, run.block_size, columns=4, block_ids=True).layout.annotations
    assert [a.text for a in labelled if a.name == "block id"] == [str(b) for b in range(run.num_blocks)]


def test_pool_grid_outlines_blocks_taken_copied_and_freed():
    run = compare_policies(M, STREAM[:2], block_size=4, num_blocks=8)["continuous"]
    step = dataclasses.replace(run.steps[1], blocks=dataclasses.replace(run.steps[1].blocks, taken=(3, 5),
                                                                        copied=((2, 5),), freed=(6,)))
    shapes = block_pool_figure(step, 4).layout.shapes
    assert sorted((s.name, s.line.color) for s in shapes) == sorted(
        [("taken", "#000000"), ("copied", COLORS["focus"]), ("freed", "#777777")])


def test_memory_lines_are_the_allocators_counts(runs):
    run = runs["continuous"]
    fig = memory_figure(run, step=2, words={"paged": "paginiert"})
    by_name = {t.name: list(t.y) for t in fig.data}
    assert by_name["paginiert"] == [s.memory.bytes("paged") for s in run.steps]
    assert by_name["holding K/V"] == [s.memory.bytes("used") for s in run.steps]
    assert max(by_name["reserved, contiguous"]) == run.peak("contiguous")
    assert "reserved, contiguous (max length per request)" in fig.data[2].hovertemplate      # all of it on hover
    assert fig.data[1].fill == "tonexty"                      # the slack between used and paged is shaded


def test_timeline_cells_are_the_records_states_and_tokens(runs):
    for run in runs.values():
        fig = timeline_figure(run)
        hm = fig.data[0]
        states = timeline_states(run)
        for row, rid in zip(hm.z, [r.id for r in run.requests]):
            assert [None if v is None else ["waiting", "prefill", "decode", "preempted"][v] for v in row] == states[rid]
        n_decode = sum(len(s.decode) for s in run.steps)
        assert sum(v == 2 for row in hm.z for v in row) == n_decode
        tokens = [t for row in hm.text for t in row if t]
        assert tokens == [t for r in run.requests for t in r.tokens]   # row by row: each request's tokens
    assert [t.name for t in timeline_figure(runs["static"]).data[1:]] == ["waiting", "prefill", "decode", "preempted"]


def test_latency_bars_are_ttft_per_request(runs):
    fig = latency_figure(runs)
    assert [list(t.y) for t in fig.data] == [[r.ttft for r in run.requests] for run in runs.values()]
    assert fig.data[0].name.startswith(f"continuous: {runs['continuous'].total_steps} steps")


def test_block_size_figure_and_blocks_of_one_have_no_slack():
    points = block_size_sweep(M, STREAM, sizes=(1, 8), pool_positions=64)
    assert points[0].waste_paged == 0.0 and points[0].used == points[0].paged
    assert points[1].paged > points[1].used
    fig = block_size_figure(points)
    assert list(fig.data[1].y) == [p.paged for p in points] and list(fig.data[0].x) == [1, 8]


def test_specs_are_valid_plotly_json_and_what_the_figures_show(runs):
    """The plain-JSON twins the stepper sends: plotly accepts them as they are, with the traces,
    colours, titles, legend and step marker of the figures."""
    run = runs["continuous"]
    step = run.steps[2]
    pool = block_pool_spec(step, run.block_size, columns=4, block_ids=True, title="pool")
    memory = memory_spec(run, step=2)
    timeline = timeline_spec(run, step=2, words={"decode": "Dekodierung"})
    points = block_size_sweep(M, STREAM, sizes=(1, 8), pool_positions=64)
    specs = [pool, memory, timeline, latency_spec(runs), block_size_spec(points)]
    for spec in specs:
        go.Figure(spec)                                        # raises on any invalid property
    assert pool["layout"]["title"]["text"] == "pool" and pool["data"][0]["type"] == "heatmap"
    assert pool["data"][0]["z"] == list(block_pool_figure(step, run.block_size, columns=4).data[0].z)
    assert [a["text"] for a in pool["layout"]["annotations"] if a.get("name") == "block id"] == [
        str(b) for b in range(run.num_blocks)]
    assert [t["line"]["color"] for t in memory["data"]] == [COLORS["processed"], COLORS["prompt"], COLORS["focus"]]
    assert memory["data"][1]["y"] == [s.memory.bytes("paged") for s in run.steps]
    for spec in (memory, timeline):                             # legend in one row above the plot, step marked
        assert spec["layout"]["legend"]["orientation"] == "h" and spec["layout"]["legend"]["yanchor"] == "bottom"
        assert [(s["x0"], s["type"]) for s in spec["layout"]["shapes"]] == [(2, "line")]
    assert [t["name"] for t in timeline["data"][1:]] == ["waiting", "prefill", "Dekodierung", "preempted"]
    assert [t["marker"]["color"] for t in timeline["data"][1:]] == [
        COLORS["waiting"], COLORS["prompt"], COLORS["generated"], COLORS["focus"]]
    # the roles' colours are the chips' (prompt / generated / pending) and none is a request's hue
    assert COLORS["waiting"] not in (COLORS["prompt"], COLORS["generated"], COLORS["pending"], COLORS["removed"])
