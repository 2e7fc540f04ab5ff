"""The A/B/C page in a real browser: a fresh server opened directly at a deep link."""
import pytest

pytestmark = pytest.mark.browser


def test_deep_link_on_fresh_server_then_right_key(server, tab):
    # first visit of the freshly started server goes straight to the page with ?step=3
    tab.goto(f"{server}/ABC_miniature?step=3")
    assert tab.heading().startswith("Event 3 of 11")
    tab.wait_drawn(3)
    heat = tab.charts.first
    assert "0.401" in heat.inner_text() and "1:B" in heat.inner_text()   # the decode row of event 2
    assert tab.page.locator(".kvs-cachetbl tbody tr").count() == 3
    tab.assert_clean()
    tab.page.locator("h1").first.click()   # focus the page, not a widget
    tab.page.keyboard.press("ArrowRight")
    tab.wait_heading(r"^Event 4 of 11: decode")
    tab.wait_url(r"[?&]step=4\b")
    tab.page.keyboard.press("ArrowLeft")
    tab.wait_heading(r"^Event 3 of 11")
    tab.settle()
    tab.assert_clean()
    # the key-moment button says which of the run's moments M goes to: past both (events 1 and 2), the first again
    moment = tab.page.locator(".kvs-bar [data-act='moment'] .kvs-mtext")
    assert moment.inner_text().strip() == "Key moment 1/2"
    tab.page.keyboard.press("m")
    tab.wait_heading(r"^Event 1 of 11")
    assert moment.inner_text().strip() == "Key moment 2/2"
