"""axe-core on every page, in the light and the dark theme (rules: tests/browser/axe_check.py).

Each page is opened once (at a state worth looking at: a pending token, the stale key, a sampled
draw) and scanned by axe-core in the light theme; one page of each kind (``DARK``) again after
switching the browser to a dark colour scheme (Streamlit follows it without a rerun). The whole page
is scanned, sidebar included, so whatever a page draws (also a custom component) is covered. The
Cost page is opened once and each of its tabs chosen in turn (a tab runs without reloading the
page). Presenter mode is scanned by tests/browser/test_presenter.py, in the views it opens anyway.
"""
from __future__ import annotations

import pytest

from tests.browser.axe_check import axe_problems
from tools.browser import Page

pytestmark = pytest.mark.browser

# every page, each at a state worth checking (the lecture script's own screens)
PAGES = [
    "/",
    "/ABC_miniature?step=1",                     # chosen, not yet processed; sampling widgets disabled
    "/Paged_cache?pg_blocks=8&step=6",          # a preemption: the pool grid, block tables, waiting requests
    "/Smaller_caches?step=17",                   # evicted rows greyed, sink columns outlined
    "/Speculative_decoding?step=7",               # the rollback: struck rows and chips, the badge
    "/Lecture_script",
    "/Glossary",                                 # headings with anchors, captions
]
# the dark theme's colours come from the theme and kvviz/ui/app/style.css, the same on every page: one
# page of each kind (home, a stepper with its chips and tables, widgets, the block pool; a Cost tab
# below, a speculative round in presenter mode in test_presenter.py). A dark scan comes last in its tab.
DARK = {"/", "/ABC_miniature?step=1", "/Paged_cache?pg_blocks=8&step=6"}
# scanned where other tests open them anyway (same address, axe_check.assert_accessible at load):
# test_browser_weather.py the stale key (alerts, red cells, the contexts table), test_browser_gpt.py
# /Tiny_GPT?step=2, test_browser_sampling.py the sampling widgets enabled (dark theme too)
ELSEWHERE = ["/Weather_heads?step=2", "/Tiny_GPT?step=2", "/Sampling?sampling_top_p=0.8",
             "/Real_LLM?llm_mode=plain&llm_prompt=%3Cimg+src%3Dx+onerror%3Dalert%281%29%3E+%2A%2Abold%2A%2A&llm_new=3&step=1"]
COST_TABS = ["Memory", "Compute (FLOPs)", "Batching", "Measured here", "Disaggregated serving"]


def _open(browser, server: str, path: str) -> Page:
    """A tab (it records page errors) on ``path`` in the light theme, not yet settled."""
    tab = Page(browser)
    tab.page.emulate_media(color_scheme="light")
    tab.page.goto(server + path, timeout=90_000)
    return tab


@pytest.mark.parametrize("path", PAGES)
def test_axe(server, browser, path):
    tab = _open(browser, server, path)
    try:
        problems = axe_problems(tab.page, path, dark=path in DARK)
        tab.assert_clean()                      # no error box, no page error
        assert not problems, "axe-core found:\n" + "\n".join(problems)
    finally:
        tab.close()


def test_axe_every_cost_tab(server, browser):
    """The Cost page, each tab chosen in turn (the last one in the dark theme too)."""
    tab = _open(browser, server, "/Cost_and_scale?tab=Memory")
    page = tab.page
    try:
        problems = []
        for label in COST_TABS:
            button = page.get_by_role("tab", name=label, exact=True)
            if button.get_attribute("aria-selected") != "true":
                button.click()
                # the tab's section has run when its (screen-reader) h2 is in the page
                page.locator("h2.kv-sr-only", has_text=label).first.wait_for(state="attached", timeout=30_000)
            problems += axe_problems(page, f"/Cost_and_scale?tab={label}", dark=label == COST_TABS[-1])
            # a tab draws only while open: look for an error box before choosing the next one
            assert page.locator("[data-testid='stException']").count() == 0, label
        tab.assert_clean()
        assert not problems, "axe-core found:\n" + "\n".join(problems)
    finally:
        tab.close()
