"""Many visitors at once: 20 browser sessions against one server, spread over the three stepping
pages (A/B/C, weather, tiny GPT), each with its own prompt and length, stepping concurrently. Each
must see only its own state, and none may error."""
import re

import pytest
from playwright.sync_api import expect

from tests.conftest import Page

pytestmark = pytest.mark.browser

SESSIONS = 20
# (page path, prompt parameter, length parameter, model name, prompts)
PAGES = [
    ("ABC_miniature", "prompt", "new", "abc", ["A B", "C A B", "B", "A A C", "C C A B", "B A", "A C"]),
    ("Weather_heads", "prompt", "new", "weather",
     ["Today weather is so", "Today weather is", "weather is so", "Today is so nice", "so nice",
      "Today weather", "is so"]),
    ("Tiny_GPT", "gpt_prompt", "gpt_new", "gpt",
     ["Today the weather is so", "It was", "Tomorrow the wind", "The sky is", "Yesterday it was", "In"]),
]


def _plans():
    """Session i: page i % 3, that page's (i // 3)-th prompt, 3–7 new tokens, 1–4 steps."""
    for i in range(SESSIONS):
        path, p_key, n_key, model, prompts = PAGES[i % len(PAGES)]
        yield path, p_key, n_key, model, prompts[(i // len(PAGES)) % len(prompts)], 3 + i % 5, 1 + i % 4


def test_twenty_sessions_keep_their_own_state(server, browser):
    from kvviz.generation import run_generation
    from kvviz.registry import get_model

    plans = list(_plans())
    runs = []
    for _, _, _, model, prompt, new, _ in plans:
        m = get_model(model)
        tokens = m.tokenize(prompt) if model == "gpt" else prompt.split()
        runs.append(run_generation(m, tokens, new))
    tabs = []
    try:
        for path, p_key, n_key, _, prompt, new, _ in plans:
            t = Page(browser, width=1200, height=800)
            # start every load before waiting for any: the server handles them together
            t.page.goto(f"{server}/{path}?{p_key}={prompt.replace(' ', '+')}&{n_key}={new}",
                        wait_until="commit", timeout=120_000)
            tabs.append(t)
        for t in tabs:
            expect(t.event_heading).to_have_text(re.compile(r"^Event 0 of"), timeout=120_000)
            t.settle(timeout=120_000)
        for round_ in range(4):              # interleaved Next clicks across all sessions
            for t, plan in zip(tabs, plans):
                if round_ < plan[-1]:
                    # the button, not its → key: this test is about whose state a session sees
                    # (the keys have their own tests; 20 headless windows on 2 cores can lose one)
                    t.page.get_by_role("button").filter(has_text="Next").first.click()
            # Wait for each session's own rerun to show its next event. A settle alone is not
            # enough: on a loaded server a press's rerun may not have started when it looks.
            for t, plan, run in zip(tabs, plans, runs):
                expect(t.event_heading).to_have_text(
                    re.compile(rf"^Event {min(round_ + 1, plan[-1])} of {len(run.events) - 1}\b"), timeout=120_000)
        for t, plan, run in zip(tabs, plans, runs):
            t.settle(timeout=120_000)
            steps = plan[-1]
            assert t.heading().startswith(f"Event {steps} of {len(run.events) - 1}"), plan
            strip = [chip.split()[-1] for chip in t.page.locator(".kv-chip").all_inner_texts()]
            assert strip == run.events[steps].sequence, (plan, strip)
            t.assert_clean()
    finally:
        for t in tabs:
            t.close()
