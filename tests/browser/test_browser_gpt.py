"""The Tiny GPT page in a real browser: deep link, keyboard stepping, layer/head selection, timing."""
import pytest
from playwright.sync_api import expect

from tests.browser.axe_check import assert_accessible

pytestmark = pytest.mark.browser


def test_deep_link_keys_selectors_and_timing(server, tab):
    """Every wait is for what the page shows (a heading, an address, a chart's title), never a fixed time:
    the test holds on a busy machine (it failed once while both real models were being converted)."""
    tab.goto(f"{server}/Tiny_GPT?step=2")
    assert tab.heading().startswith("Event 2 of 15: decode")
    tab.wait_drawn(2)
    heat = tab.charts.first
    assert "5:" in heat.inner_text()                        # the decoded token's query, at position 5
    tab.assert_clean()
    assert_accessible(tab.page, "/Tiny_GPT?step=2")          # the accessibility scan of this page
    tab.page.locator("h1").first.click()
    tab.page.keyboard.press("ArrowRight")
    tab.wait_heading(r"^Event 3 of 15: choose")
    tab.settle()
    tab.wait_url(r"step=3")                  # written once the step is drawn: later on a busy machine
    expect(tab.page.get_by_text("Pending:").first).to_be_visible()
    # pick layer 4 in the selectbox: the heatmap title follows
    box = tab.page.get_by_role("combobox", name="Layer")
    box.click()
    box.press_sequentially("4")          # type to filter the options, then take the match
    box.press("Enter")
    tab.settle()
    expect(tab.charts.first).to_contain_text("layer 4, head 1", timeout=30_000)
    tab.wait_heading(r"^Event 3 of 15")                       # the selector kept the step
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


def test_model_view_tile_chooses_the_layer_and_head_by_click_and_by_keys(server, tab):
    tab.goto(f"{server}/Tiny_GPT?step=2")
    tab.wait_drawn(2)
    expect(tab.charts.first).to_contain_text("layer 1, head 1")
    grid = tab.page.get_by_role("grid", name="Choose the layer and head shown large")
    expect(grid.get_by_role("gridcell")).to_have_count(16)
    grid.get_by_role("gridcell", name="Layer 2, head 3").click()
    expect(tab.charts.first).to_contain_text("layer 2, head 3", timeout=30_000)
    tab.settle()
    tab.wait_url(r"(?=.*gpt_layer=2)(?=.*gpt_head=3)(?=.*step=2)")
    tab.wait_heading(r"^Event 2 of 15")                                     # the step stayed
    expect(tab.page.get_by_role("combobox", name="Head")).to_have_value("3")
    tab.page.keyboard.press("ArrowRight")                                   # a click leaves → to the stepper
    tab.wait_heading(r"^Event 3 of 15")
    # keyboard: the chosen tile is the grid's one tab stop; arrows move, Enter chooses, focus stays
    chosen = grid.get_by_role("gridcell", name="Layer 2, head 3")
    expect(chosen).to_have_attribute("aria-selected", "true")
    chosen.focus()
    tab.page.keyboard.press("ArrowDown")
    tab.page.keyboard.press("Enter")
    expect(tab.charts.first).to_contain_text("layer 3, head 3", timeout=30_000)
    tab.settle()
    tab.wait_url(r"gpt_layer=3")
    tab.wait_heading(r"^Event 3 of 15")
    expect(tab.page.locator(":focus")).to_have_attribute("aria-label", "Layer 3, head 3")
    # presenter mode on a projector: folded behind a button (the step fits one screen), one press away
    tab.page.set_viewport_size({"width": 1280, "height": 720})
    tab.goto(f"{server}/Tiny_GPT?present=1&step=2")
    tab.page.locator(".kvs-root[data-fitted='2']").wait_for(state="attached", timeout=60_000)
    expect(tab.page.get_by_role("grid")).to_have_count(0)
    fold = tab.page.get_by_role("button", name="Model view: every head at once")
    fold.click()
    expect(fold).to_have_attribute("aria-expanded", "true")
    tab.page.get_by_role("gridcell", name="Layer 1, head 2").click()
    expect(tab.charts.first).to_contain_text("layer 1, head 2", timeout=30_000)
    tab.settle()
    tab.wait_url(r"^(?!.*gpt_layer)(?=.*gpt_head=2)")
    expect(tab.page.get_by_role("gridcell", name="Layer 1, head 2")).to_have_attribute("aria-selected", "true")
    tab.assert_clean()
