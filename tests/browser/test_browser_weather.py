"""The weather page in a real browser: deep link, keys, the BERT answer, a value typed into its input."""
import re
import urllib.request
from pathlib import Path

import pytest
from streamlit import file_util

from kvviz.ui.components.plotly_js import PLOTLY_BUNDLE
from tests.browser.axe_check import assert_accessible

pytestmark = pytest.mark.browser


def charts(tab):
    """The stepper's charts on screen: the four heads first, then the logits."""
    return tab.charts


ORDER = """window.__drawnOrder = [];
new MutationObserver(() => {
  for (const [name, sel] of [["stepper", ".kvs-root[data-drawn]"], ["chart", ".kvc-chart[data-drawn='1']"]])
    if (!window.__drawnOrder.includes(name) && document.querySelector(sel)) window.__drawnOrder.push(name);
}).observe(document, {subtree: true, childList: true, attributes: true});"""


def test_deep_link_to_the_stale_decode_keys_and_reveal(server, tab):
    tab.page.add_init_script(ORDER)
    tab.goto(f"{server}/Weather_heads?step=2")
    assert tab.heading().startswith("Event 2 of 5: decode")
    main = tab.page.locator("[data-testid='stMain']")
    assert "differs by 1.0" in main.inner_text() and "max |Δ| = 1" in main.inner_text()
    tab.wait_drawn(2)
    assert_accessible(tab.page, "/Weather_heads?step=2")          # the accessibility scan of this page
    # every chart, the stepper's and the causal mask below it, drawn by kvviz's plotly.js bundle:
    # Streamlit's 4.7 MB plotly chunk is never loaded (kvviz/ui/components/plotly_js.py)
    assert tab.page.locator(".kvc-chart[data-drawn='1']").count() == 1
    # the causal mask, below the stepper, waited for the stepper's first drawing (plotly_view.js)
    assert tab.page.evaluate("() => window.__drawnOrder") == ["stepper", "chart"]
    loaded = tab.page.evaluate("() => performance.getEntriesByType('resource').map((e) => e.name)")
    assert [u for u in loaded if f"/app/static/{PLOTLY_BUNDLE}?v=" in u], loaded
    assert not [u for u in loaded if "PlotlyChart" in u]
    # sent by app.py's st.App middleware: compressed once, cached by the browser for a year
    with urllib.request.urlopen(f"{server}/app/static/{PLOTLY_BUNDLE}") as r:
        assert "immutable" in r.headers["Cache-Control"] and r.read(40).startswith(b"/*! plotly.js v")
    # and Streamlit's own files from memory: the same bytes, without the ETag of Streamlit's StaticFiles
    entry = next(u for u in loaded if re.search(r"/static/js/index\.[^/]+\.js$", u))
    with urllib.request.urlopen(entry) as r:
        assert r.read() == (Path(file_util.get_static_dir()) / "static" / "js" / entry.rsplit("/", 1)[1]).read_bytes()
        assert "immutable" in r.headers["Cache-Control"] and "ETag" not in r.headers
    heads = charts(tab).first
    assert "Head 2 · last token" in heads.inner_text() and "5:nice" in heads.inner_text()
    answer = "Only causal (decoder) models can append to a cache."
    assert not tab.page.get_by_text(answer).is_visible()
    tab.page.get_by_text("Think first, then reveal the answer").click()
    tab.page.get_by_text(answer).wait_for(state="visible")
    tab.assert_clean()
    tab.page.locator("h1").first.click()          # focus the page, not a widget
    tab.page.keyboard.press("ArrowRight")
    tab.wait_heading(r"^Event 3 of 5: choose")
    tab.settle()
    assert "step=3" in tab.page.url
    tab.page.keyboard.press("Home")
    tab.wait_heading(r"^Event 0 of 5: prefill")
    tab.settle()
    tab.assert_clean()


def test_typing_a_value_changes_the_logits(server, tab):
    tab.goto(f"{server}/Weather_heads")
    tab.wait_drawn(0)
    bars = charts(tab).nth(1)
    assert "15.300" in bars.inner_text()
    weather = tab.page.get_by_role("spinbutton", name="weather", exact=True)    # the word's number input
    assert weather.input_value() == "20"
    weather.fill("40")
    weather.press("Enter")
    tab.wait_url(r"values=weather(%3A|:)40")            # the rerun writes the address (under load, after settle)
    # weather = 40: contexts at position 4 become [22.5, 5, 10, 14], so nice = 18 + 2.5 + 1 + 2.8
    tab.page.wait_for_function(
        "() => [...document.querySelectorAll('.kvs-fig')].some(c => c.offsetParent && c.innerText.includes('24.300'))",
        timeout=30_000)
    tab.assert_clean()


def test_coming_from_the_abc_page_starts_clean(server, tab):
    tab.goto(f"{server}/ABC_miniature?prompt=C+A+B&step=3")
    tab.page.locator("[data-testid='stSidebar'] a", has_text="Today weather is so").click()
    tab.settle()
    assert tab.heading().startswith("Event 0 of 5: prefill")
    assert tab.page.locator("[data-testid='stAlert']", has_text="can't be run").count() == 0
    tab.assert_clean()
