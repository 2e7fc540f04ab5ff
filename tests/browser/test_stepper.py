"""The stepper component (kvviz/ui/components/step_view.py) in a real browser: its buttons, keys, slider,
autoplay with Space, a focused text box keeping its keys, the per-step CSV, a language switch that
keeps the step, and no page errors."""
import re

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser


def test_buttons_slider_and_csv(server, tab):
    tab.goto(f"{server}/ABC_miniature")
    tab.wait_drawn(0)
    expect(tab.stepper_button("prev")).to_be_disabled()
    tab.stepper_button("next").click()
    tab.wait_heading(r"^Event 1 of 11: choose")
    tab.stepper_button("next").click()
    tab.wait_heading(r"^Event 2 of 11: decode")
    expect(tab.page).to_have_url(re.compile(r"step=2\b"))
    tab.stepper_button("end").click()
    tab.wait_heading(r"^Event 11 of 11")
    expect(tab.stepper_button("next")).to_be_disabled()
    tab.stepper_button("prev").click()
    tab.wait_heading(r"^Event 10 of 11")
    tab.stepper_button("reset").click()
    tab.wait_heading(r"^Event 0 of 11: prefill")
    expect(tab.page).not_to_have_url(re.compile(r"step="))          # event 0: the address stays short
    slider = tab.page.get_by_role("slider", name="Event")
    slider.focus()
    tab.page.keyboard.press("End")                                   # the slider's own key: its maximum
    tab.wait_heading(r"^Event 11 of 11")
    slider.press("ArrowLeft")
    tab.wait_heading(r"^Event 10 of 11: decode")
    tab.wait_drawn(10)
    assert tab.page.locator(".kvs-cachetbl tbody tr").count() == 7
    with tab.page.expect_download() as dl:
        tab.page.locator(".kvs-csv").click()
    assert dl.value.suggested_filename == "abc_cache_step10.csv"
    lines = open(dl.value.path(), encoding="utf-8").read().splitlines()
    assert lines[0] == "position,token,k,v,event,phase" and len(lines) == 8
    assert lines[3] == '2,A,"(1, 0)","(1, 0)",2,decode'
    tab.settle()
    tab.assert_clean()


def test_autoplay_runs_to_the_last_event_and_space_toggles(server, tab):
    tab.goto(f"{server}/ABC_miniature?step=6")
    tab.wait_drawn(6)
    tab.page.locator(".kvs-speed select").select_option("4")
    play = tab.stepper_button("play")
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    tab.wait_heading(r"^Event ([7-9]|10|11) of 11")            # it moves on its own
    tab.wait_heading(r"^Event 11 of 11", timeout=15_000)
    expect(play).to_have_attribute("aria-pressed", "false")  # and stops at the last event
    tab.page.wait_for_timeout(600)
    assert tab.heading().startswith("Event 11 of 11")
    expect(tab.page).to_have_url(re.compile(r"step=11\b"))
    # Space: play again (from the start, as it was at the end), Space again: pause
    tab.page.locator("h1").first.click()
    tab.page.keyboard.press(" ")
    tab.wait_heading(r"^Event [1-9] of 11")
    tab.page.keyboard.press(" ")
    expect(play).to_have_attribute("aria-pressed", "false")
    shown = tab.heading()
    tab.page.wait_for_timeout(800)
    assert tab.heading() == shown and not shown.startswith("Event 11")
    tab.settle()
    tab.assert_clean()


def test_a_focused_text_box_keeps_its_keys(server, tab):
    tab.goto(f"{server}/ABC_miniature?step=3")
    tab.wait_drawn(3)
    box = tab.page.get_by_label("Prompt (tokens A, B, C)", exact=True)
    box.click()
    for key in ("ArrowRight", "ArrowLeft", "Home", "End", " "):
        box.press(key)
    tab.page.wait_for_timeout(500)
    assert tab.heading().startswith("Event 3 of 11")
    assert box.input_value() == "A B "                        # the space went into the box
    assert "step=3" in tab.page.url
    tab.assert_clean()


def test_a_language_switch_keeps_the_step(server, tab):
    tab.goto(f"{server}/ABC_miniature")
    tab.wait_drawn(0)
    tab.page.locator("h1").first.click()
    for _ in range(4):
        tab.page.keyboard.press("ArrowRight")
    tab.wait_heading(r"^Event 4 of 11: decode")
    tab.settle()                                              # the step report's rerun is over
    box = tab.page.get_by_role("combobox", name="Language")
    box.click()
    tab.page.get_by_role("option", name="Español").click()
    tab.wait_heading(r"^Evento 4 de 11")
    tab.settle()
    expect(tab.stepper_button("next")).to_contain_text("Siguiente")
    assert "step=4" in tab.page.url and "lang=es" in tab.page.url
    tab.assert_clean()


SEEN = """window.__seen = {};
new MutationObserver(() => {
  const found = {rest: () => document.querySelector(".st-key-kvs_rest"),
                 drawn: () => document.querySelector(".kvs-root[data-drawn]"),
                 section: () => [...document.querySelectorAll("h2")].some((h) => h.textContent.startsWith("Memory"))};
  for (const [name, test] of Object.entries(found)) {
    if (!window.__seen[name] && test()) window.__seen[name] = performance.now();
  }
}).observe(document, {subtree: true, childList: true, attributes: true});"""


def test_a_first_page_waits_below_its_stepper_until_it_has_drawn(server, tab):
    # step_view.whole_page: the first page of a browser session stops below its stepper; the stepper's
    # first drawing reruns it whole by itself (no click), and the stepper is not drawn again
    tab.page.add_init_script(SEEN)
    tab.goto(f"{server}/Paged_cache")
    tab.page.get_by_role("heading", name="Memory: paging against contiguous reservation").wait_for(timeout=30_000)
    tab.settle()
    seen = tab.page.evaluate("() => window.__seen")
    assert seen.get("rest") and seen["rest"] < seen["drawn"] < seen["section"], seen
    assert tab.page.locator(".st-key-kvs_rest").count() == 0
    assert tab.page.evaluate("() => window.__kvsLog.length") == 1      # one drawing of event 0, kept
    tab.assert_clean()
    # the rest of the session (another page from the sidebar): whole at once, no placeholder
    tab.page.evaluate("() => { window.__seen = {}; }")
    tab.page.locator("[data-testid='stSidebar'] a", has_text="Tiny GPT").first.click()
    tab.page.locator(".kvs-root[data-drawn]").wait_for(timeout=30_000)
    tab.page.get_by_role("heading", name="Verification: with and without the cache").wait_for(timeout=30_000)
    tab.settle()
    assert "rest" not in tab.page.evaluate("() => window.__seen")


def test_a_pages_link_connects_at_once_and_its_charts_draw_in_one_pass(server, tab):
    # serve_files.page_html: the page's own address names the app's base, so the browser asks no
    # /Weather_heads/_stcore/health first (a 404 and 100 ms of waiting); plotly_view.fitMargins: the
    # margins are wide enough before the first drawing, so automargin draws no figure a second time
    asked = []
    tab.page.on("request", lambda r: asked.append(r.url))
    tab.goto(f"{server}/Weather_heads?lang=de")
    tab.wait_drawn(0)
    health = [u for u in asked if u.endswith("/_stcore/health")]
    assert health and all(u == f"{server}/_stcore/health" for u in health), health
    assert tab.page.locator("script[data-kvs-preload]").count() == 1     # plotly.js started early
    # automargin draws a figure again only when it must widen a margin: the margins plotly used are
    # the ones the figure came with
    drawn = tab.page.evaluate("""() => [...document.querySelectorAll('.kvs-root .kvs-fig')]
        .filter((d) => d.offsetParent).map((d) => [d._fullLayout.margin, d._fullLayout._size])""")
    assert len(drawn) == 2, drawn
    for margin, size in drawn:
        assert all(size[s] == margin[s] for s in "lrtb"), (margin, size)
    tab.assert_clean()
