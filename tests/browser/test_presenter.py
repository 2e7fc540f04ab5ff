"""Presenter mode on a projector (1280×720 and 1920×1080): settings folded away, no horizontal
scroll, and after any step the token strip, the attention chart, the logits and the newest rows of
the cache table are all on screen without scrolling (kvviz/ui/components/step_view.js fits the step), and no
heatmap prints its cell values over each other, no axis title runs into another (plotly_view.js drops
them where rows or subplots got too thin). axe-core
scans presenter mode in the views opened here (``AXE``; the rules: tests/browser/axe_check.py)."""
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.browser.axe_check import assert_accessible
from tests.conftest import Page

pytestmark = pytest.mark.browser

# one view of each layout, the densest where a page has several (the tiny GPT's batch, not the
# A/B/C's; quantized K/V, whose frames add the error heatmap to the window's)
STEPPING = ["ABC_miniature", "Weather_heads", "Tiny_GPT?step=2",
            "Cost_and_scale?tab=Batching&bt_model=gpt", "Paged_cache", "Smaller_caches?sc_kind=quant",
            "Speculative_decoding?sd_rule=sample&sd_seed=1&step=5"]
# presenter views scanned by axe-core at their first step (True: in the dark theme too): the stepper
# (A/B/C; Tiny GPT, whose visible h2 folds away there) and a sampled speculative round, the densest
# frame; the other stepping pages fold the same elements the same way
AXE = {"ABC_miniature": False, "Tiny_GPT?step=2": False, "Speculative_decoding?sd_rule=sample&sd_seed=1&step=5": True}
# words of the chart labels (aria) that must be on screen after each step: one of each group
# the speculative page's draft passes have no attention to show (the engine keeps the verification
# pass's): they show both caches beside the draft's probabilities
CHARTS = {"Paged_cache": (("pool",), ("bytes",)),                   # the block pool and the memory
          "Speculative_decoding": (("attention", "cache"), ("probab",))}
MODEL_CHARTS = (("attention",), ("logit", "probab"))
SIZES = [(1280, 720), (1920, 1080)]

# the boxes that must be on screen: strip, every chart shown (attention and logits), newest cache row
BOXES = """() => {
  const r = document.querySelector('.kvs-root');
  const shown = (sel) => [...r.querySelectorAll(sel)].filter((e) => e.offsetParent !== null);
  const box = (e) => { const b = e.getBoundingClientRect(); return [b.top, b.bottom, b.left, b.right]; };
  const rows = r.querySelectorAll('.kvs-cachetbl tbody tr');
  const main = document.querySelector("[data-testid='stMain']");
  // pairs of boxes sharing more than 2 px each way, as [[top, left], [top, left]]
  const overlapping = (boxes) => boxes.flatMap((a, i) => boxes.slice(i + 1).filter((c) =>
    Math.min(a.bottom, c.bottom) - Math.max(a.top, c.top) > 2
      && Math.min(a.right, c.right) - Math.max(a.left, c.left) > 2)
    .map((c) => [[a.top, a.left], [c.top, c.left]]));
  // heatmap cell values that print over each other, within each figure shown (figures drawn ahead for
  // the next steps wait hidden in the same slots)
  const figs = [...r.querySelectorAll('.kvs-figslot')].flatMap((slot) =>
    [...slot.querySelectorAll('.kvs-fig')].filter((f) => f.dataset.key === slot.dataset.shown));
  let labels = 0;
  const overlaps = figs.flatMap((f) => {
    const t = [...f.querySelectorAll('.heatmap-label text')].map((e) => e.getBoundingClientRect())
      .filter((b) => b.width > 0);
    labels += t.length;
    return overlapping(t);
  }).slice(0, 3);
  // y axis titles of stacked subplots running into each other, within one chart
  const titles = [...r.querySelectorAll('.kvs-fig')].flatMap((f) => overlapping(
    [...f.querySelectorAll("g[class^='g-y'][class$='title'] text")].map((e) => e.getBoundingClientRect())
      .filter((b) => b.height > 0)));
  return {strip: shown('.kvs-strip').map(box), charts: shown('.kvs-fig').map(box), overlaps, titles, labels,
          newest: rows.length ? box(rows[rows.length - 1]) : null,
          alts: shown('.kvs-figslot').map((e) => e.getAttribute('aria-label')),
          width: window.innerWidth, height: window.innerHeight,
          scroll: Math.max(document.documentElement.scrollWidth,
                           main.scrollWidth - main.clientWidth + window.innerWidth)};
}"""


def _boxes(tab: Page) -> dict:
    return tab.page.evaluate(BOXES)


def _on_screen(tab: Page, where: str, path: str = "") -> None:
    b = _boxes(tab)
    assert b["scroll"] <= b["width"], (where, "scrolls sideways", b)
    assert b["strip"] and len(b["charts"]) >= 2 and b["newest"], (where, b)

    def inside(box):
        top, bottom, left, right = box
        return top >= 0 and bottom <= b["height"] + 0.5 and left >= 0 and right <= b["width"] + 0.5
    for name in ("strip", "charts"):
        for box in b[name]:
            assert inside(box), (where, name, box, b)
    assert inside(b["newest"]), (where, "newest cache row", b["newest"], b)
    assert not b["overlaps"], (where, "heatmap values printed over each other", b["overlaps"])
    assert not b["titles"], (where, "axis titles over each other", b["titles"])
    for words in CHARTS.get(path.split("?")[0], MODEL_CHARTS):
        assert any(w in (a or "").lower() for a in b["alts"] for w in words), (where, words, b["alts"])


def _step(tab: Page, key: str, expect_step: int) -> None:
    tab.page.keyboard.press(key)
    tab.page.locator(f".kvs-root[data-fitted='{expect_step}']").wait_for(state="attached", timeout=30_000)
    tab.page.wait_for_timeout(150)


def _steps_fit(tab: Page, path: str, size: tuple[int, int], keys: list[tuple[str, int]]) -> None:
    for key, step in keys:
        _step(tab, key, step)
        _on_screen(tab, f"{size[0]}x{size[1]} after {key} (event {step})", path)


@pytest.mark.parametrize("path", STEPPING)
def test_each_step_fits_one_projector_screen(server, browser, path):
    """At 1280×720, then (the same tab resized, as a lecturer's window moving to a larger projector)
    at 1920×1080: the step, several steps later, the last and the first event fit the screen."""
    small, large = SIZES
    tab = Page(browser, width=small[0], height=small[1])
    try:
        sep = "&" if "?" in path else "?"
        start = int(parse_qs(urlsplit(path).query).get("step", ["1"])[0])
        tab.goto(f"{server}/{path}{sep}present=1" + ("" if "step=" in path else "&step=1"))
        tab.page.locator(f".kvs-root[data-fitted='{start}']").wait_for(state="attached", timeout=60_000)
        tab.assert_clean()
        if path in AXE:
            assert_accessible(tab.page, f"{path} presenter", dark=AXE[path])
        main = tab.page.locator("[data-testid='stMain']")
        # inputs are folded into the Settings expander: no text box visible on first sight
        assert main.locator("input[type='text']:visible").count() == 0
        assert main.get_by_text("Settings").count() >= 1
        _on_screen(tab, f"1280x720 step {start}", path)
        last = int(tab.heading().split(" of ")[1].split(":")[0])
        tab.page.locator("h1").first.click(force=True)   # focus the page, not a widget (h1 may be scrolled away)
        _steps_fit(tab, path, small, [("ArrowRight", start + 1), ("ArrowRight", start + 2), ("End", last),
                                      ("ArrowLeft", last - 1), ("Home", 0)])
        # the stepper fits itself again after a resize (and marks it): then step at the larger size
        tab.page.evaluate("() => document.querySelector('.kvs-root').removeAttribute('data-fitted')")
        tab.page.set_viewport_size({"width": large[0], "height": large[1]})
        tab.page.locator(".kvs-root[data-fitted='0']").wait_for(state="attached", timeout=30_000)
        _on_screen(tab, "1920x1080 event 0", path)
        _steps_fit(tab, path, large, [("ArrowRight", 1), ("End", last)])
        tab.settle()
        tab.assert_clean()
    finally:
        tab.close()


GROW_ABOVE = """(px) => {
  const block = document.querySelector("[data-testid='stMainBlockContainer']");
  const el = document.createElement('div');
  el.className = 'kvs-test-grow';
  el.style.height = px + 'px';
  block.prepend(el);
}"""


def test_a_fitted_step_stays_on_screen_while_the_page_grows_above_it(server, browser):
    """Elements arriving above the stepper after it fitted itself (the page's rerun after its first
    drawing, a late font) do not push the step below the projector's edge; once the lecturer
    scrolls, the page is theirs and stays where they put it. Chromium's scroll anchoring would hide
    both when the growth is above the screen; it is switched off here, as browsers without it (and
    growth inside the screen) show the page."""
    tab = Page(browser, width=1280, height=720)
    try:
        tab.goto(f"{server}/ABC_miniature?present=1&step=1")
        tab.page.locator(".kvs-root[data-fitted='1']").wait_for(state="attached", timeout=60_000)
        tab.settle()                                     # no rerun pending that would fit the step again
        tab.page.add_style_tag(content="* { overflow-anchor: none !important; }")
        tab.page.locator("h1").first.click(force=True)
        tab.page.keyboard.press("ArrowRight")           # a fresh fitting (and its watch) at event 2
        tab.page.locator(".kvs-root[data-fitted='2']").wait_for(state="attached", timeout=30_000)
        tab.page.evaluate(GROW_ABOVE, 400)
        tab.page.wait_for_timeout(300)
        _on_screen(tab, "400 px added above the fitted step", "ABC_miniature")
        assert _boxes(tab)["labels"] > 0            # the A/B/C attention heatmap prints its values here
        tab.page.mouse.move(640, 400)
        tab.page.mouse.wheel(0, -200)                   # the lecturer scrolls up a little
        tab.page.wait_for_timeout(300)
        top = tab.page.evaluate("() => document.querySelector('.kvs-root').getBoundingClientRect().top")
        tab.page.evaluate(GROW_ABOVE, 400)
        tab.page.wait_for_timeout(300)
        after = tab.page.evaluate("() => document.querySelector('.kvs-root').getBoundingClientRect().top")
        assert after > top + 300, ("scrolled back after the lecturer scrolled", top, after)
    finally:
        tab.close()


def test_presenter_mode_folds_the_sampling_page(server, browser):
    """The Sampling page (no stepper) in presenter mode: folded settings, no sideways scroll, axe-core
    with its sampling widgets enabled."""
    tab = Page(browser, width=1280, height=720)
    try:
        tab.goto(f"{server}/Sampling?sampling_top_p=0.8&present=1")
        tab.assert_clean()
        assert_accessible(tab.page, "/Sampling presenter")
        width = tab.page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1], width
        main = tab.page.locator("[data-testid='stMain']")
        assert main.locator("input[type='text']:visible").count() == 0
        assert main.get_by_text("Settings").count() >= 1
    finally:
        tab.close()
