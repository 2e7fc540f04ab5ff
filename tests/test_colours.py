"""The colour language (docs/colours.md, kvviz.viz.theme.COLORS): the chosen token's colour only once
a choose event has picked it, an attention scale with no grey in it (grey is masked / free), and
the same role colours in the stepper's chips, the block pool and the timeline. Pure builders, no page."""
from types import SimpleNamespace

import pytest

from kvviz.decoding.sampling import make_rule
from kvviz.decoding.stepper import run_generation
from kvviz.models.abc import ABCModel
from kvviz.ui.frames import Payload, translator
from kvviz.ui.frames.abc import LOGIT_TOKENS
from kvviz.ui.frames.steps import logits_blocks, next_choice
from kvviz.viz.attention import attention_heatmap_spec
from kvviz.viz.logits import logits_bar_spec, top_probs_bar_spec
from kvviz.viz.theme import ATTENTION_SCALE, COLORS

TR = translator("en")
PL = SimpleNamespace(fig=lambda fig, alt, **_: fig, lang="en")      # the spec itself, not a payload block


@pytest.mark.parametrize("rule", [None, make_rule(1.5, None, 1.0)], ids=["greedy", "sample"])
def test_the_logits_mark_a_token_only_on_the_choose_event_that_picked_it(rule):
    run = run_generation(ABCModel(), ["A", "B"], 3, rule=rule, seed=3)
    phases = set()
    for ev in run.events:
        bars = logits_blocks(PL, ev, LOGIT_TOKENS, next_choice(run, ev), TR)[0]["data"][0]["marker"]["color"]
        phases.add(ev.phase)
        if ev.phase == "choose":
            assert [i for i, c in enumerate(bars) if c == COLORS["choice"]] == [ev.choice.index]
        else:                                           # prefill / decode: nothing is chosen yet
            assert COLORS["choice"] not in bars and COLORS["focus"] not in bars
    assert phases == {"prefill", "choose", "decode"}


def test_chosen_is_its_own_colour_and_means_the_chip_of_the_same_token():
    roles = ("prompt", "generated", "choice", "waiting", "removed", "bar", "focus")
    assert len({COLORS[r] for r in roles}) == len(roles)              # one colour, one meaning
    assert COLORS["choice"] == COLORS["pending"]                       # the chosen bar and its dashed chip
    assert logits_bar_spec([1.0, 2.0], ["a", "b"], None, "t")["data"][0]["marker"]["color"] == [COLORS["bar"]] * 2
    probs = top_probs_bar_spec([0.2, 0.8], ["a", "b"], 0, "t")["data"][0]
    assert dict(zip(probs["y"], probs["marker"]["color"])) == {"a": COLORS["choice"], "b": COLORS["bar"]}


def _rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))


def test_the_attention_scale_has_no_grey_and_darkens_monotonically():
    import torch
    spec = attention_heatmap_spec(torch.tensor([[1.0, 0.0], [0.4, 0.6]]), ["0", "1"], ["0", "1"], "t")
    assert spec["data"][0]["colorscale"] == ATTENTION_SCALE
    stops = [_rgb(c) for _, c in ATTENTION_SCALE]
    assert [p for p, _ in ATTENTION_SCALE][0] == 0.0 and ATTENTION_SCALE[-1][0] == 1.0
    for a, b in zip(stops, stops[1:]):
        for k in range(11):                    # every blend plotly draws between two stops
            c = [round(x + (y - x) * k / 10) for x, y in zip(a, b)]
            assert max(c) - min(c) >= 40, c    # tinted: grey (masked, free) has R ≈ G ≈ B
    luma = [0.2126 * r + 0.7152 * g + 0.0722 * b for r, g, b in stops]
    assert luma == sorted(luma, reverse=True)  # light = small weight, dark = large, in any colour vision
    assert COLORS["removed"] not in [c for _, c in ATTENTION_SCALE]


def test_chips_pool_and_timeline_use_the_same_role_colours():
    from kvviz.viz.paged import ROLE_COLORS
    chips = Payload(TR).colors                 # the stepper's token chips (step_view.css --kvs-*)
    assert ROLE_COLORS == [chips["prompt"], chips["processed"]]
    assert (COLORS["prefill"], COLORS["decode"]) == (chips["prompt"], chips["processed"])
