"""The Tiny GPT page in a real browser: deep link, keyboard stepping, layer/head selection, timing."""
import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_deep_link_keys_selectors_and_timing(server, tab):
    tab.goto(f"{server}/Tiny_GPT?step=2")
    assert tab.heading().startswith("Event 2 of 15: decode")
    tab.wait_drawn(2)
    heat = tab.charts.first
    assert "5:" in heat.inner_text()                        # the decoded token's query, at position 5
    tab.assert_clean()
    tab.page.locator("h1").first.click()
    tab.page.keyboard.press("ArrowRight")
    tab.wait_heading(r"^Event 3 of 15: choose")
    tab.settle()
    assert "step=3" in tab.page.url
    assert tab.page.get_by_text("Pending:").count() >= 1
    # pick layer 4 in the selectbox: the heatmap title follows
    box = tab.page.get_by_role("combobox", name="Layer")
    box.click()
    box.press_sequentially("4")          # type to filter the options, then take the match
    box.press("Enter")
    tab.settle()
    expect(tab.charts.first).to_contain_text("layer 4, head 1")
    assert tab.heading().startswith("Event 3 of 15")          # the selector kept the step
    # the smallest sweep (N = 8, one repeat; the sweep itself is tests/test_page_gpt.py's): what the
    # browser adds is the button, the progress bar and the drawn result
    tab.page.get_by_role("slider", name="Largest N").focus()
    tab.page.keyboard.press("Home")
    tab.settle()
    repeats = tab.page.get_by_role("spinbutton", name="Repeats")
    repeats.fill("1")
    repeats.press("Enter")
    tab.settle()
    tab.page.get_by_role("button", name="Measure", exact=True).click()
    tab.settle(timeout=120_000)
    tab.page.get_by_text("Why the speed-up is far below the FLOP ratio").wait_for(timeout=120_000)
    tab.assert_clean()
