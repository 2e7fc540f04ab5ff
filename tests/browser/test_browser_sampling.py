"""The sampling page and the A/B/C page's rule controls in a real browser."""
import pytest
from playwright.sync_api import expect

from tests.browser.axe_check import assert_accessible

pytestmark = pytest.mark.browser


def chart_text(tab, key: str) -> str:
    """The text of the chart drawn with ``key=`` (Streamlit marks its container .st-key-<key>): the
    n-th chart on the page is not stable, since each chart appears once plotly has drawn it."""
    chart = tab.page.locator(f".st-key-{key} .kvc-chart")
    chart.scroll_into_view_if_needed()          # a chart is drawn when it comes near the screen
    expect(chart).to_have_attribute("data-drawn", "1")
    return chart.inner_text()


def test_sampling_deep_link_slider_keys_and_the_quiz_question(server, tab):
    tab.goto(f"{server}/Sampling?sampling_top_p=0.8")
    tab.assert_clean()
    # the accessibility scan of this page
    assert_accessible(tab.page, "/Sampling?sampling_top_p=0.8", dark=True)
    top_p = chart_text(tab, "stage_3")
    assert "4 · Top-p" in top_p and "0.706" in top_p and "0.294" in top_p and "p = 0.8" in top_p
    # the keyboard moves the top-p slider to its minimum: only A is left, with probability 1
    tab.page.get_by_role("slider", name="Top-p").focus()
    tab.page.keyboard.press("Home")
    tab.settle()
    assert "top_p=0.01" in tab.page.url
    assert "1.000" in chart_text(tab, "stage_3") and "0.294" not in chart_text(tab, "stage_3")
    # the reader answers question 2 before the explanation appears; the engine checks it
    assert tab.page.get_by_text("keeps {A, B}").count() == 0
    tab.page.get_by_text("{A, B}", exact=True).first.click()
    tab.settle()
    assert tab.page.get_by_text("Right.", exact=True).count() == 1
    assert tab.page.get_by_text("keeps {A, B}").count() == 1
    tab.page.get_by_role("button", name="Show this on the charts above").click()
    tab.settle()
    assert "top_p=0.8" in tab.page.url and "0.706" in chart_text(tab, "stage_3")
    tab.assert_clean()


def test_abc_page_switches_to_sampling_and_keeps_it_in_the_url(server, tab):
    tab.goto(f"{server}/ABC_miniature")
    tab.page.get_by_text("Sample", exact=True).click()
    tab.settle()
    assert "abc_rule=sample" in tab.page.url
    tab.page.locator("h1").first.click()
    tab.page.keyboard.press("ArrowRight")
    tab.wait_heading(r"^Event 1 of 11: choose")
    tab.settle()
    assert tab.page.get_by_text("Sampling drew").count() == 1
    # the same link in a fresh tab opens the same rule
    url = tab.page.url
    tab.goto(url)
    tab.wait_heading(r"^Event 1 of 11: choose")               # the stepper has drawn the linked step
    assert tab.page.get_by_text("Sampling drew").count() == 1
    tab.assert_clean()
