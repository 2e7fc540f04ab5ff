"""The accessibility scans' known exceptions (tests/browser/axe_check.py) stay precise:
each names one rule, the element it excuses by selector and markup, and says why."""
from pathlib import Path

from kvviz.ui.app.pages import PAGES as NAV
from tests.browser.axe_check import KNOWN
from tests.browser.test_accessibility import ELSEWHERE, PAGES


def test_known_exceptions_are_precise():
    """An exception names one rule and both patterns, and gives its reason."""
    for k in KNOWN:
        assert k.rule and k.target and k.html and len(k.reason) > 20, k


def test_every_page_is_scanned():
    """Every page of the navigation is in the accessibility test's list, or scanned at load by the
    browser test that opens the same address anyway (that test file calls assert_accessible with it)."""
    browser_dir = Path(__file__).parent / "browser"
    for url in ELSEWHERE:
        assert any(f'assert_accessible(tab.page, "{url}"' in f.read_text() for f in browser_dir.glob("test_*.py")), url
    scanned = {u.split("?")[0] for u in PAGES + ELSEWHERE} | {"/Cost_and_scale"}      # its own test, every tab
    for page in NAV:
        assert page.url in scanned, f"{page.url} is not scanned by axe-core"
