"""The accessibility scans' known exceptions (tests/browser/axe_check.py) stay precise:
each names one rule, the element it excuses by selector and markup, and says why."""
from tests.browser.axe_check import KNOWN


def test_known_exceptions_are_precise():
    """An exception names one rule and both patterns, and gives its reason."""
    for k in KNOWN:
        assert k.rule and k.target and k.html and len(k.reason) > 20, k
