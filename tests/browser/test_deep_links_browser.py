"""URL round trip in a real browser: set a page up by hand, copy its address, open that address
in a fresh browser context (a new visitor), and see the same screen."""
import re

import pytest
from playwright.sync_api import expect

from tools.browser import Page

pytestmark = pytest.mark.browser


def _screen(tab: Page) -> tuple[str, list[str]]:
    tab.page.locator(".kv-chip").first.wait_for(timeout=60_000)     # the page streams in pieces
    tab.settle()
    chips = [c.split()[-1] for c in tab.page.locator(".kv-chip").all_inner_texts()]
    return tab.heading(), chips


def test_abc_round_trip(server, browser):
    first, second = Page(browser), Page(browser)
    try:
        first.goto(f"{server}/ABC_miniature?lang=es")
        box = first.page.get_by_label("Prompt (tokens A, B, C)", exact=True)
        box.fill("C A B")
        box.press("Enter")
        first.settle()
        first.page.locator("h1").first.click()
        for _ in range(3):
            first.page.keyboard.press("ArrowRight")
            first.settle()
        expect(first.page).to_have_url(re.compile(r"step=3"))
        url = first.page.url
        assert "prompt=C" in url and "lang=es" in url
        before = _screen(first)
        second.goto(url)                     # a new visitor with the copied address
        assert _screen(second) == before
        assert before[0].startswith("Evento 3") and before[1][:3] == ["C", "A", "B"]
        second.assert_clean()
    finally:
        first.close()
        second.close()


def test_weather_round_trip_with_repair_and_values(server, browser):
    first, second = Page(browser), Page(browser)
    try:
        first.goto(f"{server}/Weather_heads?step=2&values=nice:9")
        repair = first.page.locator("[data-testid='stCheckbox']").filter(has_text="Repair stale keys")
        repair.locator("label").first.click()
        first.settle()
        expect(first.page).to_have_url(re.compile(r"repair=true"))
        url = first.page.url
        assert "values=nice" in url and "step=2" in url
        first.wait_drawn(2)
        main_first = first.page.locator("[data-testid='stMain']").inner_text()
        second.goto(url)
        second.wait_drawn(2)
        main_second = second.page.locator("[data-testid='stMain']").inner_text()
        assert _screen(second) == _screen(first)
        for fact in ("max |Δ|", "9"):
            assert (fact in main_first) == (fact in main_second)
        second.assert_clean()
    finally:
        first.close()
        second.close()


def test_cost_batching_round_trip_with_the_gpt(server, browser):
    first, second = Page(browser), Page(browser)
    try:
        first.goto(f"{server}/Cost_and_scale?tab=Batching")
        first.page.get_by_text("Tiny GPT (trained)", exact=True).click()
        expect(first.page).to_have_url(re.compile(r"bt_model=gpt"), timeout=30_000)
        first.settle()
        box = first.page.get_by_label("Prompt 3", exact=True)
        box.fill("")
        box.press("Enter")
        expect(first.page.locator("h3").first).to_have_text(re.compile(r"\(2 sequences\)"), timeout=60_000)
        first.settle()
        first.page.locator("h1").first.click()
        first.page.keyboard.press("End")
        expect(first.page).to_have_url(re.compile(r"step=7"), timeout=30_000)
        first.settle()
        url = first.page.url
        assert "bt_p3=" in url and "tab=Batching" in url
        before = _screen(first)
        second.goto(url)                     # a new visitor with the copied address
        assert _screen(second) == before
        assert before[0].startswith("Event 7 of 7: choose (2 sequences)")
        assert before[1][:5] == ["Today", "the", "weather", "is", "so"]
        second.assert_clean()
    finally:
        first.close()
        second.close()
