"""The Cost and scale page in a real browser: deep links into a tab, a bad number typed by hand,
the batching stepper driven by the keyboard, and a measurement with its progress bar."""
import re

import pytest

pytestmark = pytest.mark.browser


def test_memory_numbers_and_a_bad_field(server, tab):
    tab.goto(f"{server}/Cost_and_scale")
    main = tab.page.locator("[data-testid='stMain']")
    assert "36,864 B" in main.inner_text() and "37,748,736 bytes" in main.inner_text()
    tab.page.locator("[data-testid='stPlotlyChart']").nth(1).wait_for()     # plotly loads lazily
    tab.assert_clean()
    layers = tab.page.get_by_label("Layers", exact=True)
    layers.fill("0")
    layers.press("Enter")
    tab.settle()
    alert = tab.page.locator("[data-testid='stAlert']").filter(has_text="Layers must be between 1")
    assert alert.count() == 1
    tab.assert_clean()
    heads, kv = tab.page.get_by_label("Attention heads", exact=True), tab.page.get_by_label("KV heads", exact=True)
    layers.fill("12")
    layers.press("Enter")
    tab.settle()
    kv.fill("5")
    kv.press("Enter")
    tab.settle()
    assert "divisible by KV heads" in main.inner_text()
    assert heads.input_value() == "12"
    tab.assert_clean()


def test_batching_tab_deep_link_and_keyboard(server, tab):
    tab.goto(f"{server}/Cost_and_scale?tab=Batching&step=2")
    h3 = tab.page.locator("h3").first
    assert h3.inner_text().startswith("Event 2 of 7: decode (3 sequences)")
    same = tab.page.locator("[data-testid='stAlert']").filter(has_text="Same as running this prompt alone")
    assert same.count() == 3
    tab.assert_clean()
    tab.page.locator("h1").first.click()
    tab.page.keyboard.press("ArrowRight")
    tab.settle()
    assert tab.page.locator("h3").first.inner_text().startswith("Event 3 of 7: choose")
    assert re.search(r"step=3", tab.page.url) and "tab=Batching" in tab.page.url
    # another tab and back: the inputs and the step survive
    tab.page.get_by_role("tab", name="Memory").click()
    tab.settle()
    assert "Bytes per token" in tab.page.locator("[data-testid='stMain']").inner_text()
    tab.page.get_by_role("tab", name="Batching").click()
    tab.settle()
    assert tab.page.locator("h3").first.inner_text().startswith("Event")
    tab.assert_clean()


def test_measurement_behind_the_button(server, tab):
    tab.goto(f"{server}/Cost_and_scale?tab=Measured+here")
    tab.page.locator("[data-testid='stPlotlyChart']").first.wait_for()       # the intensity chart
    n = tab.page.locator("[data-testid='stPlotlyChart']").count()
    tab.page.get_by_role("button", name="Measure on this machine").click()
    tab.settle(timeout=120_000)
    tab.page.locator("[data-testid='stPlotlyChart']").nth(n + 2).wait_for()
    assert tab.page.locator("[data-testid='stPlotlyChart']").count() == n + 3
    assert "Tokens/s at batch 1" in tab.page.locator("[data-testid='stMain']").inner_text()
    tab.assert_clean()
