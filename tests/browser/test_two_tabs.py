"""Two tabs of one browser window on the same page, stepped with the keyboard in turn: each tab is
its own Streamlit session, so a key pressed in one never moves the other (many more sessions at
once, without a browser: tests/test_many_visitors.py)."""
import re

from playwright.sync_api import expect

from kvviz.decoding.stepper import run_generation
from kvviz.models.abc import ABCModel
from tools.browser import Page


def _press(tab: Page, key: str, heading: str) -> None:
    tab.page.bring_to_front()                          # the user switches to this tab
    tab.page.locator("h1").first.click()               # focus the page, not a widget
    tab.page.keyboard.press(key)
    tab.wait_heading(heading)
    tab.settle()


def _chips(tab: Page) -> list[str]:
    return [c.split()[-1] for c in tab.page.locator(".kvs-root .kv-chip").all_inner_texts()]


def test_keys_in_one_tab_leave_the_other_tab_alone(server, browser):
    one = Page(browser)
    two = Page(browser, beside=one)
    run_one = run_generation(ABCModel(), ["C", "A", "B"], 4)      # events 0..7
    run_two = run_generation(ABCModel(), ["A", "B"], 6)           # events 0..11
    try:
        one.goto(f"{server}/ABC_miniature?prompt=C+A+B&new=4&step=1")
        two.goto(f"{server}/ABC_miniature?step=2")
        one.wait_drawn(1)                                          # the stepper has mounted its keys
        two.wait_drawn(2)
        _press(one, "ArrowRight", r"^Event 2 of 7")
        _press(one, "ArrowRight", r"^Event 3 of 7")
        assert two.heading().startswith("Event 2 of 11")           # untouched by the other tab's keys
        _press(two, "End", r"^Event 11 of 11")
        _press(one, "ArrowLeft", r"^Event 2 of 7")
        _press(two, "ArrowLeft", r"^Event 10 of 11")
        for tab, heading, step, run in ((one, "Event 2 of 7", 2, run_one), (two, "Event 10 of 11", 10, run_two)):
            assert tab.heading().startswith(heading)
            assert _chips(tab) == run.events[step].sequence
            expect(tab.page).to_have_url(re.compile(rf"step={step}\b"))
            tab.assert_clean()
    finally:
        two.close()
        one.close()
