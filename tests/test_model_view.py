"""The model view (every layer × head of a pass as small heatmaps): its pure figure builder and the
tiny GPT frames that carry it, with the pick grid the browser turns into buttons."""
import plotly.graph_objects as go
import pytest
import torch

from kvviz.decoding.stepper import run_generation
from kvviz.models.gpt import GPTModel
from kvviz.ui.frames import gpt as frames_gpt
from kvviz.ui.frames import translator
from kvviz.viz.attention import attention_model_view, attention_model_view_spec
from kvviz.viz.theme import COLORS
from tests.conftest import frame_of


def _weights(layers: int, heads: int, n: int, t: int) -> torch.Tensor:
    """Causal attention-like weights [L, H, N, T]: the N queries are the last N positions."""
    torch.manual_seed(0)
    w = torch.rand(layers, heads, n, t)
    for i in range(n):
        w[:, :, i, t - n + i + 1:] = 0.0
    return w / w.sum(-1, keepdim=True)


def _tile(trace: dict) -> tuple[float, float, float, float]:
    """A tile's box in data coordinates: x0 - 0.5 .. x0 + T - 0.5, y0 - 0.5 .. y0 + N - 0.5."""
    n, t = len(trace["z"]), len(trace["z"][0])
    return trace["x0"] - 0.5, trace["x0"] + t - 0.5, trace["y0"] - 0.5, trace["y0"] + n - 0.5


def test_model_view_tiles_every_layer_and_head_on_one_colour_scale():
    w = _weights(2, 3, 2, 4)
    spec = attention_model_view_spec(w, "all heads", selected=(1, 2), layer_word="layer", head_word="head")
    data, layout = spec["data"], spec["layout"]
    assert len(data) == 6 and all(d["type"] == "heatmap" and d["coloraxis"] == "coloraxis" for d in data)
    assert (layout["coloraxis"]["cmin"], layout["coloraxis"]["cmax"]) == (0.0, 1.0)
    for layer in range(2):
        for head in range(3):
            z = data[layer * 3 + head]["z"]                  # trace i = layer · H + head
            assert z[0][3] is None and z[1][3] is not None    # query 0 (position 2) cannot read key 3
            assert z[1] == [round(float(v), 2) for v in w[layer, head, 1]]
            assert f"layer {layer + 1}, head {head + 1}" in data[layer * 3 + head]["hovertemplate"]
    boxes = [_tile(d) for d in data]
    for i, a in enumerate(boxes):                             # tiles never overlap
        for b in boxes[i + 1:]:
            assert a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2]
    assert boxes[1][0] > boxes[0][1] and boxes[3][2] > boxes[0][3]   # heads left to right, layers downwards
    labels = [a["text"] for a in layout["annotations"]]
    assert labels == ["layer 1", "head 1", "head 2", "head 3", "layer 2"]
    go.Figure(spec)                                           # valid plotly
    assert len(attention_model_view(w, "t").data) == 6


def test_model_view_outlines_exactly_the_selected_tile():
    w = _weights(4, 4, 1, 7)
    for sel in ((0, 0), (2, 3), (3, 1)):
        spec = attention_model_view_spec(w, "t", selected=sel)
        (shape,) = spec["layout"]["shapes"]
        assert shape["line"]["color"] == COLORS["focus"]
        inside = [i for i, d in enumerate(spec["data"]) if shape["x0"] <= _tile(d)[0] and _tile(d)[1] <= shape["x1"]
                  and shape["y0"] <= _tile(d)[2] and _tile(d)[3] <= shape["y1"]]
        touched = [i for i, d in enumerate(spec["data"])
                   if not (_tile(d)[1] <= shape["x0"] or shape["x1"] <= _tile(d)[0]
                           or _tile(d)[3] <= shape["y0"] or shape["y1"] <= _tile(d)[2])]
        assert inside == touched == [sel[0] * 4 + sel[1]]
    assert attention_model_view_spec(w, "t")["layout"]["shapes"] == []


# ---- the tiny GPT's frames ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def run_and_model():
    model = GPTModel()
    return run_generation(model, model.tokenize("Today the weather is so"), 2), model


def test_every_frame_shows_the_model_view_of_its_pass_with_the_shown_head_outlined(run_and_model):
    run, model = run_and_model
    p = frames_gpt.build(run, model, 2, 3, translator("en")).to_dict()
    assert p["pick"]["rows"] == p["pick"]["cols"] == 4 and p["pick"]["sel"] == [2, 3]
    assert p["pick"]["cells"][2][3] == "Layer 3, head 4"
    for ev in run.events:
        f = frame_of(p, ev.index)
        picks = [b for b in f["main"] if b.get("pick")]
        assert len(picks) == 1
        spec = p["figs"][picks[0]["fig"]]
        assert spec["layout"]["title"]["text"].startswith("Model view: all 16 heads of this ")
        src = ev if ev.record is not None else run.events[ev.index - 1]     # a choose event: the pass before
        for layer in range(4):
            for head in range(4):
                want = src.record.attention[layer][head].tolist()          # [N, T]
                got = spec["data"][layer * 4 + head]["z"]
                n, t = len(want), len(want[0])
                for i in range(n):       # future keys blank, every other weight the engine's (2 decimals)
                    assert [g is None for g in got[i]] == [j > t - n + i for j in range(t)]
                    assert [g for g in got[i] if g is not None] == [round(v, 2) for v in want[i][: t - n + i + 1]]
        (shape,) = spec["layout"]["shapes"]
        sel = spec["data"][2 * 4 + 3]
        assert shape["x0"] < sel["x0"] and shape["y0"] < sel["y0"]
    choose = next(e for e in run.events if e.phase == "choose")
    picked = [next(b["fig"] for b in frame_of(p, i)["main"] if b.get("pick")) for i in (choose.index - 1, choose.index)]
    assert picked[0] == picked[1]                                     # the same figure, sent once


def test_model_view_speaks_the_page_language(run_and_model):
    run, model = run_and_model
    p = frames_gpt.build(run, model, 0, 0, translator("de")).to_dict()
    spec = p["figs"][next(b["fig"] for b in frame_of(p, 0)["main"] if b.get("pick"))]
    assert spec["layout"]["title"]["text"] == "Modellansicht: alle 16 Heads dieses Prefill-Durchlaufs"
    assert [a["text"] for a in spec["layout"]["annotations"]][:2] == ["Schicht 1", "Head 1"]
    assert p["pick"]["cells"][1][0] == "Schicht 2, Head 1" and p["pick"]["fold"].startswith("Modellansicht")


def test_presenter_mode_shows_the_top_five_probabilities_and_the_page_the_top_ten(run_and_model):
    """Presenter mode sizes charts to the projector's screen, where ten bars are slivers: each frame
    carries the top-10 chart for the page (an explanation, left out there) and a top-5 one shown only
    there, both of the engine's probabilities, the chosen token highlighted in both."""
    run, model = run_and_model
    p = frames_gpt.build(run, model, 0, 0, translator("es")).to_dict()
    for ev in run.events:
        f = frame_of(p, ev.index)
        bars = [b for region in ("lead", "main", "side", "wide") for b in f.get(region, [])
                if "fig" in b and p["figs"][b["fig"]]["data"][0]["type"] == "bar"]
        page = [b for b in bars if b.get("x")]
        present = [b for b in bars if b.get("p")]
        assert len(page) == len(present) == 1, bars
        ten, five = (p["figs"][b["fig"]]["data"][0] for b in (page[0], present[0]))
        assert len(five["y"]) in (5, 6) and five["y"] == [y for y in ten["y"] if y in five["y"]]
        assert five["y"][-5:] == ten["y"][-5:]                    # the largest on top in both
        assert "5" in p["figs"][present[0]["fig"]]["layout"]["title"]["text"]
        assert present[0]["alt"].startswith("Gráfico de barras de los cinco")
