"""axe-core on an open page: the rules kvviz keeps, used by the accessibility and presenter tests.

Fails on any serious or critical violation, and on the rules this project once fixed and keeps fixed
(heading levels that skip, empty table headers). A violation inside Streamlit's own widget that the
app cannot reach goes into KNOWN with its reason; it is matched by rule id, a pattern on axe's CSS
selector of the node and a pattern on its HTML, so the same rule anywhere else still fails.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from axe_playwright_python.sync_playwright import Axe  # axe-core for Python Playwright

FAIL_IMPACTS = {"serious", "critical"}
KEEP_FIXED = {"heading-order", "empty-table-header"}        # moderate / minor, fixed once: stay fixed
# the dark pass runs only the rules that depend on colours (the page's DOM is the same)
COLOUR_RULES = {"runOnly": {"type": "rule", "values": ["color-contrast", "link-in-text-block"]},
                "resultTypes": ["violations"]}


@dataclass(frozen=True)
class Known:
    """A violation the app cannot fix: ``rule`` and regexes on the node's selector and HTML."""
    rule: str
    target: str
    html: str
    reason: str

    def matches(self, rule: str, node: dict) -> bool:
        return (rule == self.rule and re.search(self.target, " ".join(map(str, node["target"])))
                is not None and re.search(self.html, node["html"]) is not None)


# None today: every violation axe-core 4.12 reported on these pages had a fix in the theme, in
# kvviz/ui/app/style.css or in the app's own HTML (README, "Accessibility").
KNOWN: list[Known] = []

# Streamlit has finished: script done, no skeletons, nothing stale (greyed while rerunning), the
# title drawn, every chart near the screen drawn (kvviz/ui/components/chart_view.js draws the others when they
# come near it), a stepper (if any) has drawn its step, and the page is whole (no placeholder of
# step_view.whole_page).
SETTLED = """() => {
  const app = document.querySelector('[data-testid="stApp"]');
  return !!app && app.dataset.testScriptState === 'notRunning' && !!document.querySelector('h1')
    && !document.querySelector('[data-testid="stSkeleton"], [data-stale="true"]')
    && [...document.querySelectorAll('.kvc-chart')]
      .every(c => c.hasAttribute('data-drawn') || c.dataset.pending === 'far')
    && [...document.querySelectorAll('.kvs-root')].every(r => r.hasAttribute('data-drawn'))
    && !document.querySelector('.st-key-kvs_rest');
}"""


# a chart is drawn when it comes near the screen: bring each one there, so the scan sees every figure
DRAW_ALL = """async () => {
  for (const c of document.querySelectorAll('.kvc-chart[data-pending="far"]')) {
    c.scrollIntoView();
    await new Promise((ok) => setTimeout(ok, 50));
  }
}"""
ALL_DRAWN = "() => [...document.querySelectorAll('.kvc-chart')].every(c => c.dataset.drawn === '1')"


def draw_all(page) -> None:
    page.evaluate(DRAW_ALL)
    page.wait_for_function(ALL_DRAWN, timeout=60_000, polling=100)


def settle(page) -> None:
    page.wait_for_function(SETTLED, timeout=90_000, polling=100)
    page.wait_for_timeout(400)                  # a rerun that starts right after the first one
    page.wait_for_function(SETTLED, timeout=90_000, polling=100)


def _theme(page, scheme: str) -> None:
    """Switch the browser's colour scheme; Streamlit's default theme setting ("System") follows."""
    page.emulate_media(color_scheme=scheme)
    page.wait_for_function("(s) => getComputedStyle(document.querySelector('[data-testid=\"stApp\"]'))"
                           ".colorScheme === s", arg=scheme, timeout=30_000)
    page.wait_for_timeout(300)                  # colour transitions
    settle(page)


def _problems(response: dict, where: str) -> list[str]:
    out = []
    for v in response["violations"]:
        if v["impact"] not in FAIL_IMPACTS and v["id"] not in KEEP_FIXED:
            continue
        for node in v["nodes"]:
            if any(k.matches(v["id"], node) for k in KNOWN):
                continue
            summary = (node.get("failureSummary") or "").replace("\n", " ")
            out.append(f"{where}: {v['id']} ({v['impact']}) {' '.join(map(str, node['target']))}\n"
                       f"    {node['html'][:200]}\n    {summary[:300]}")
    return out


def axe_problems(page, where: str, dark: bool = False) -> list[str]:
    """Scan the settled page (whole page, sidebar included) in the light theme and, with ``dark``,
    again in the dark one (the page stays dark: nothing after a dark scan depends on the theme)."""
    settle(page)
    draw_all(page)
    problems = _problems(Axe().run(page).response, f"{where} [light]")
    if dark:
        _theme(page, "dark")
        problems += _problems(Axe().run(page, options=COLOUR_RULES).response, f"{where} [dark]")
    return problems


def assert_accessible(page, where: str, dark: bool = False) -> None:
    """``axe_problems`` of the page, failing the test with every problem found."""
    problems = axe_problems(page, where, dark)
    assert not problems, "axe-core found:\n" + "\n".join(problems)
