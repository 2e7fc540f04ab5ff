"""The "A real LLM" page in a real browser: a visitor's hostile text shown literally everywhere (the
token view, the stepper's strip and cache table, chart labels, the address, the trace download),
keyboard stepping and a model-view pick over SmolLM2's 270 heads."""
import json
from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect

from tests.browser.axe_check import assert_accessible

pytestmark = pytest.mark.browser

HOSTILE = "<img src=x onerror=alert(1)> **bold**"
LINK = "/Real_LLM?" + urlencode({"llm_mode": "plain", "llm_prompt": HOSTILE, "llm_new": "3", "step": "1"})
# the accessibility scan's address, written out (tests/test_accessibility_rules.py looks for it)
assert LINK == ("/Real_LLM?llm_mode=plain&llm_prompt=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E+%2A%2Abold%2A%2A"
                "&llm_new=3&step=1")


def test_hostile_text_stays_text_and_the_stepper_keys_and_picks_work(server, tab, smollm2_installed):
    dialogs = []
    tab.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    tab.goto(server + LINK)
    assert tab.heading().startswith("Event 1 of 5: choose")
    tab.wait_drawn(1)
    # written out whole on one line: tests/test_accessibility_rules.py finds the scanned address by this call
    assert_accessible(tab.page, "/Real_LLM?llm_mode=plain&llm_prompt=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E+%2A%2Abold%2A%2A&llm_new=3&step=1")  # noqa: E501
    page = tab.page
    assert not dialogs and page.locator("img[src='x']").count() == 0
    assert page.locator("strong:text-is('bold')").count() == 0
    tokens = page.locator(".kv-toks").first.inner_text()
    assert "<" in tokens and "Ġ**" in tokens and "bold" in tokens                # the token view
    strip = page.locator(".kvs-root .kv-chip").all_inner_texts()
    assert any(t.endswith("<") for t in strip) and any(t.endswith("Ġ**") for t in strip)
    expect(tab.charts.first).to_contain_text("0:<")        # plotly's tick label, as text
    expect(page.locator(".kvs-root table").first).to_contain_text("Ġ**")       # the cache table
    assert "llm_prompt=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E+%2A%2Abold%2A%2A" in page.url
    with page.expect_download() as got:
        page.get_by_role("button", name="Trace (JSON)").click()
    trace = json.loads(open(got.value.path(), encoding="utf-8").read())
    assert trace["model"] == "smollm2" and "".join(trace["prompt"]).replace("Ġ", " ") == HOSTILE
    # keys and the model view's pick grid over 30 × 9 heads
    page.locator("h1").first.click()
    page.keyboard.press("ArrowRight")
    tab.wait_heading(r"^Event 2 of 5: decode")
    grid = page.get_by_role("grid", name="Choose the layer and head shown large")
    expect(grid.get_by_role("gridcell")).to_have_count(270)
    grid.get_by_role("gridcell", name="Layer 2, head 3").click()
    expect(tab.charts.first).to_contain_text("Layer 2: queries of position 15 (head 3 outlined)", timeout=30_000)
    tab.settle()
    assert "llm_layer=2" in page.url and "llm_head=3" in page.url and tab.heading().startswith("Event 2 of 5")
    tab.assert_clean()
    assert not dialogs
