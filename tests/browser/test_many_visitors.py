"""Many visitors at once: 20 browser sessions against one server, each with its own page and
prompt, stepping concurrently. Each must see only its own state, and none may error."""
import re

import pytest
from playwright.sync_api import expect

from tests.conftest import Page

pytestmark = pytest.mark.browser

PROMPTS = ["A B", "C A B", "B", "A A C", "C C A B", "B A", "C", "A B C", "B B A C", "A C"]
SESSIONS = 20


def _heading(tab: Page):
    return tab.page.locator("h3").first


def test_twenty_sessions_keep_their_own_state(server, browser):
    from kvviz.generation import run_generation
    from kvviz.models.abc import ABCModel

    tabs, plans = [], []
    try:
        for i in range(SESSIONS):
            prompt = PROMPTS[i % len(PROMPTS)]
            steps = 1 + i % 4
            t = Page(browser, width=1200, height=800)
            # start every load before waiting for any: the server handles them together
            t.page.goto(f"{server}/ABC_miniature?prompt={prompt.replace(' ', '+')}&new={3 + i % 5}",
                        wait_until="commit", timeout=120_000)
            tabs.append(t)
            plans.append((prompt, 3 + i % 5, steps))
        for t in tabs:
            t.settle(timeout=120_000)
            t.page.locator("h1").first.click()
        for round_ in range(4):              # interleaved key presses across all sessions
            for t, (_, _, steps) in zip(tabs, plans):
                if round_ < steps:
                    t.page.keyboard.press("ArrowRight")
            # Wait for each session's own rerun to show its next event. A settle alone is not
            # enough: on a loaded server a press's rerun may not have started when it looks.
            for t, (prompt, new, steps) in zip(tabs, plans):
                last = len(run_generation(ABCModel(), prompt.split(), new).events) - 1
                expect(_heading(t)).to_have_text(
                    re.compile(rf"^Event {min(round_ + 1, steps)} of {last}\b"), timeout=120_000)
        for t, (prompt, new, steps) in zip(tabs, plans):
            t.settle(timeout=120_000)
            run = run_generation(ABCModel(), prompt.split(), new)
            ev = run.events[steps]
            assert _heading(t).inner_text().startswith(f"Event {steps} of {len(run.events) - 1}"), prompt
            strip = [chip.split()[-1] for chip in t.page.locator(".kv-chip").all_inner_texts()]
            assert strip == ev.sequence, (prompt, strip)
            t.assert_clean()
    finally:
        for t in tabs:
            t.close()
