"""The Cost and scale page in a real browser: deep links into a tab, a bad number typed by hand,
the batching stepper driven by the keyboard, and a measurement with its progress bar."""
import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_memory_numbers_and_a_bad_field(server, tab):
    tab.goto(f"{server}/Cost_and_scale")
    main = tab.page.locator("[data-testid='stMain']")
    # a fresh server streams the first page in pieces: wait for the metric itself
    main.get_by_text("36,864 B", exact=True).wait_for(timeout=60_000)
    assert "37,748,736 bytes" in main.inner_text()
    chart = tab.page.locator(".kvc-chart").nth(1)
    chart.scroll_into_view_if_needed()          # drawn when it comes near the screen
    expect(chart).to_have_attribute("data-drawn", "1")
    tab.assert_clean()
    # a chart whose figure changes is redrawn in place (a keyed element), not built anew
    first = tab.page.locator(".kvc-chart").first
    first.evaluate("(c) => { c.kvMark = 1; }")
    ys = "(c) => JSON.stringify(c.data.map((d) => d.y))"       # what plotly drew (the star moves)
    before = first.evaluate(ys)
    batch = tab.page.get_by_label("Batch size", exact=True)
    batch.fill("8")
    batch.press("Enter")
    tab.settle()
    assert first.evaluate("(c) => c.kvMark") == 1 and first.get_attribute("data-drawn") == "1"
    assert first.evaluate(ys) != before
    layers = tab.page.get_by_label("Layers", exact=True)
    layers.fill("0")
    layers.press("Enter")
    alert = tab.page.locator("[data-testid='stAlert']").filter(has_text="Layers must be between 1")
    alert.wait_for(timeout=30_000)
    tab.settle()
    tab.assert_clean()
    heads, kv = tab.page.get_by_label("Attention heads", exact=True), tab.page.get_by_label("KV heads", exact=True)
    layers.fill("12")
    layers.press("Enter")
    tab.settle()
    kv.fill("5")
    kv.press("Enter")
    main.get_by_text("divisible by KV heads").wait_for(timeout=30_000)
    tab.settle()
    assert heads.input_value() == "12"
    tab.assert_clean()


def test_batching_tab_deep_link_and_keyboard(server, tab):
    tab.goto(f"{server}/Cost_and_scale?tab=Batching&step=2")
    h3 = tab.page.locator("h3").first
    expect(h3).to_have_text(re.compile(r"^Event 2 of 7: decode \(3 sequences\)"), timeout=60_000)
    same = tab.page.locator(".kvs-alert").filter(has_text="Same as running this prompt alone")
    same.nth(2).wait_for(timeout=30_000)
    assert same.count() == 3
    tab.settle()
    tab.assert_clean()
    tab.page.locator("h1").first.click()
    tab.page.keyboard.press("ArrowRight")
    expect(tab.page.locator("h3").first).to_have_text(re.compile(r"^Event 3 of 7: choose"), timeout=30_000)
    tab.settle()
    assert re.search(r"step=3", tab.page.url) and "tab=Batching" in tab.page.url
    # another tab and back: the inputs and the step survive
    tab.page.get_by_role("tab", name="Memory").click()
    tab.page.get_by_text("Bytes per token", exact=True).wait_for(timeout=30_000)
    tab.settle()
    tab.page.get_by_role("tab", name="Batching").click()
    expect(tab.page.locator("h3").first).to_have_text(re.compile(r"^Event 3 of 7"), timeout=30_000)
    tab.settle()
    tab.assert_clean()


def test_measurement_behind_the_button(server, tab):
    tab.goto(f"{server}/Cost_and_scale?tab=Measured+here")
    intensity = tab.page.locator(".kvc-chart").first
    intensity.scroll_into_view_if_needed()
    expect(intensity).to_have_attribute("data-drawn", "1")
    n = tab.page.locator(".kvc-chart").count()
    tab.page.get_by_role("button", name="Measure on this machine").click()
    # the rerun may start a moment after the click: wait for its result, then for the app to settle
    tab.page.get_by_text("Tokens/s at batch 1").wait_for(timeout=120_000)
    tab.settle(timeout=120_000)
    assert tab.page.locator(".kvc-chart").count() == n + 3
    last = tab.page.locator(".kvc-chart").nth(n + 2)
    last.scroll_into_view_if_needed()           # drawn when it comes near the screen
    expect(last).to_have_attribute("data-drawn", "1")
    tab.assert_clean()
