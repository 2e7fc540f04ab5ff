"""Normal mode: no chart title, legend or axis label cut at the figure's edge or running into
another text, on the pages whose charts share a row, in German (the longest words) on a 1280 px wide window
with the sidebar open, every chart in view (a tall window: the charts further down are drawn too).
English and Spanish, and 1400 px, were checked the same way by hand when the layouts below were
made (docs/testing.md); German at the narrower width is where a title met its neighbour."""
import os

import pytest

from tests.browser.legibility import SCAN
from tools.browser import Page

pytestmark = pytest.mark.browser

# the pages with several charts side by side or in the stepper's narrow column, where a title met its
# neighbour or a legend ran past the edge (the other pages' single wide charts were clean in all three
# languages at 1280 and 1400 px when checked: docs/testing.md; the CI's budget keeps this to five)
PAGES = ["Weather_heads", "Sampling", "Paged_cache", "Speculative_decoding", "Real_LLM"]
# the stepper's event drawn, then every chart shown scrolled to (a chart is drawn when it comes near the
# screen; a Cost tab's hidden neighbours are drawn once opened) until it is drawn
DRAW_ALL = """async () => {
  const until = (ok, what) => new Promise((done, fail) => {
    const t0 = performance.now();
    const look = () => ok() ? done() : performance.now() - t0 > 30000 ? fail(new Error(what)) : setTimeout(look, 50);
    look();
  });
  await until(() => document.querySelector('.main-svg'), 'no chart drawn');
  for (const r of document.querySelectorAll('.kvs-root')) await until(() => r.dataset.drawn !== undefined, 'stepper');
  for (const c of [...document.querySelectorAll('.kvc-chart')].filter((c) => c.offsetParent !== null)) {
    c.scrollIntoView();
    await until(() => c.dataset.drawn === '1', 'chart not drawn');
  }
}"""
# what is not fixed yet (strict: listed and fine fails too, so that the entry goes)
KNOWN: dict[str, str] = {}
OPTS = {"min_px": 9, "min_plot": 40, "screen": False, "scope": "[data-testid='stMain']", "html": False}


# CI: German at 1280 px. KVVIZ_TITLES_ALL=1 scans English, Spanish and German at 1280 and 1400 px (by hand)
VIEWS = ([(lang, w) for lang in ("de", "es", "en") for w in (1280, 1400)]
         if os.environ.get("KVVIZ_TITLES_ALL") == "1" else [("de", 1280)])


@pytest.mark.parametrize("lang,width", VIEWS, ids=[f"{lang}-{w}" for lang, w in VIEWS])
def test_no_title_or_label_cut_or_overlapping_in_german_at_1280(server, browser, lang, width):
    tab = Page(browser, width=width, height=4000)
    problems = []
    try:
        for path in PAGES:
            sep = "&" if "?" in path else "?"
            tab.goto(f"{server}/{path}{sep}lang={lang}")
            tab.page.evaluate(DRAW_ALL)
            tab.settle()                                 # the page's rerun after its first drawing, done
            tab.assert_clean()
            r = tab.page.evaluate(SCAN, OPTS)
            assert r["figs"], f"{path}: no chart scanned"
            problems += [f"{path}: {p}" for p in r["problems"] if p.split(":")[0] in ("cut", "overlap")]
    finally:
        tab.close()
    known = {path for path in KNOWN if any(p.startswith(path + ":") for p in problems)}
    assert known == set(KNOWN), f"legible now: remove from KNOWN: {set(KNOWN) - known}"
    problems = [p for p in problems if p.split(":")[0] not in KNOWN]
    assert not problems, "\n".join(problems)
