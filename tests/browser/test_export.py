"""The static export (kvviz/ui/export, ``python -m kvviz export``): the lecture in English, written twice
(by the command in another process, and here) byte for byte the same; every page opened from
file:// in chromium with every request outside the folder refused; every event of one run of each
stepping page stepped through with the keys (the screen's own event on the others), its heading and
the data of every figure it shows equal to the live page's payload (the frames the exporter captured
from the page; tests/test_export.py checks those against the payload builders); every single
chart's data equal to the live page's figure; no page or console error, no control that needs the
server. Then keys, autoplay, the live links, a model-view
tile, and presenter mode in Spanish."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from kvviz.ui import plotly_js
from kvviz.ui.export.site import export
from kvviz.ui.frames import translator
from tests.conftest import ROOT, shared_context

pytestmark = pytest.mark.browser

LIVE = "http://live.invalid:8501"      # the screens' live links: never fetched
MAX_BYTES = 20_000_000
TRACE_KEYS = ("type", "x", "y", "z", "text")

# n events of the page's stepper in turn from event `from` (→ as the keydown its key listener gets), in
# the browser: per event its heading and the figures it shows, and the data plotly holds for each
# figure the first time it is shown (a figure is drawn once, into its own element).
STEP_ALL = """async ([n, keys, from]) => {
  const root = document.querySelector('.kvs-root');
  const drawn = (i) => new Promise((ok, fail) => {
    const t0 = performance.now();
    const look = () => root.dataset.drawn === String(i) ? ok()
      : performance.now() - t0 > 20000 ? fail(new Error('event ' + i + ' not drawn')) : requestAnimationFrame(look);
    look();
  });
  const steps = [], figs = {};
  for (let i = from; i < from + n; i++) {
    if (i > from) window.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowRight', bubbles: true}));
    await drawn(i);
    const shown = [...root.querySelectorAll('.kvs-fig')].filter((d) => d.offsetParent !== null);
    for (const d of shown) {
      const k = d.dataset.key.split(':')[0];
      if (!(k in figs)) figs[k] = d.data.map((t) => Object.fromEntries(keys.filter((x) => x in t).map((x) => [x, t[x]])));
    }
    steps.push([root.querySelector('.kvs-heading').textContent, shown.map((d) => Number(d.dataset.key.split(':')[0]))]);
  }
  return {steps, figs};
}"""
# controls outside the stepper and plotly's toolbar would need the server
STRAY = """() => [...document.querySelectorAll('button, input, select, textarea')]
  .filter((e) => !e.closest('.kvs-root, .modebar')).map((e) => e.outerHTML.slice(0, 80))"""


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The export written here, and the same command's folder written by another process at once."""
    root = tmp_path_factory.mktemp("export")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cli = subprocess.Popen([sys.executable, "-m", "kvviz", "export", "--out", str(root / "cli"), "--live-url", LIVE],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    result = export(root / "site", "en", live_url=LIVE)
    out, err = cli.communicate(timeout=900)
    assert cli.returncode == 0, err[-2000:]
    return result, root / "cli", out


class StaticTab:
    """A tab that may read the export's folder and nothing else."""

    def __init__(self, browser, folder: Path, width: int = 1400, height: int = 900):
        # a tab of the worker's one context (chromium runs in one process: a context of its own would
        # take it down when closed)
        self.page = shared_context(browser).new_page()
        self.page.set_viewport_size({"width": width, "height": height})
        self.folder = folder.resolve().as_uri() + "/"
        self.errors: list[str] = []
        self.blocked: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.route("**/*", self._only_the_folder)

    def _only_the_folder(self, route):
        url = route.request.url
        if url.startswith(self.folder):
            route.continue_()
        else:
            self.blocked.append(url)
            route.abort()

    def open(self, file: str, query: str = "") -> None:
        self.page.goto(self.folder + file + query)

    def close(self) -> None:
        self.page.close()


def _traces(fig: dict) -> list[dict]:
    return [{k: t[k] for k in TRACE_KEYS if k in t} for t in fig["data"]]


def _expected_figs(frame: dict, present: bool = False) -> list[int]:
    """The figures step_view.js shows for ``frame`` (presenter mode leaves out "x" blocks, the
    normal view "p" blocks)."""
    out = []
    for region in ("top", "lead", "main", "side", "wide", "more"):
        for b in frame.get(region) or []:
            if "fig" in b and not (b.get("x") if present else b.get("p")):
                out.append(b["fig"])
    return sorted(out)


def _drawn(tab: StaticTab, step: int) -> None:
    tab.page.locator(f".kvs-root[data-drawn='{step}']").wait_for(state="attached", timeout=20_000)


def _step_through(tab: StaticTab, payload: dict) -> None:
    """Home, then every event: each heading, the figures shown and their data as the payload says."""
    tab.page.locator("h1").first.click()
    tab.page.keyboard.press("Home")
    _drawn(tab, 0)
    _compare(payload, tab.page.evaluate(STEP_ALL, [len(payload["frames"]), list(TRACE_KEYS), 0]), 0)


def _compare(payload: dict, got: dict, start: int) -> None:
    for i, (heading, shown) in enumerate(got["steps"], start):
        f = payload["frames"][i]
        assert heading == f["heading"] and sorted(shown) == _expected_figs(f), (i, heading, shown)
    assert got["figs"], "no figure drawn"
    for k, traces in got["figs"].items():
        assert traces == _traces(payload["figs"][int(k)]), (k, payload["figs"][int(k)]["layout"].get("title"))


def test_export_is_the_same_bytes_twice_small_and_its_index_lists_the_lecture(browser, site):
    result, cli_folder, cli_out = site
    files = sorted(p.relative_to(result.out).as_posix() for p in result.out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(cli_folder).as_posix() for p in cli_folder.rglob("*") if p.is_file())
    for name in files:
        assert (result.out / name).read_bytes() == (cli_folder / name).read_bytes(), name
    assert result.total_bytes < MAX_BYTES and f"{result.total_bytes / 1e6:.2f} MB" in cli_out
    # the stepper's own files, byte for byte what the live app uses
    ui = ROOT / "kvviz" / "ui"
    assert (result.out / "assets" / "step_view.css").read_bytes() == (ui / "step_view.css").read_bytes()
    modules = json.loads(re.search(r"window\.KVX_MODULES = (\{.*\});", (result.out / "assets" / "components.js")
                                   .read_text(encoding="utf-8"), re.DOTALL).group(1))
    assert modules["stepper"] == plotly_js.module_js(ui / "step_view.js")
    assert modules["chart"] == plotly_js.module_js(ui / "chart_view.js")
    assert (result.out / "assets" / plotly_js.PLOTLY_BUNDLE).read_bytes() == (plotly_js.STATIC / plotly_js.PLOTLY_BUNDLE).read_bytes()
    # the index lists every screen of the lecture script, in its order
    tab = StaticTab(browser, result.out)
    try:
        tab.open("index.html")
        links = tab.page.locator("a.kvx-screen")
        assert [links.nth(i).get_attribute("href") for i in range(links.count())] == [s.file for s in result.screens]
        tr = translator("en")
        assert links.all_inner_texts() == [tr("lecture." + s.key) for s in result.screens] and len(result.screens) == 34
        assert not tab.errors and not tab.blocked, (tab.errors, tab.blocked)
    finally:
        tab.close()


def test_every_screen_draws_the_live_frames_from_file_alone(browser, site):
    result = site[0]
    tab = StaticTab(browser, result.out)
    stepped: set[str] = set()
    try:
        for s in result.screens:
            tab.open(s.file)
            c = s.captured
            live = tab.page.locator(".kvx-nav [data-kvx-live]").get_attribute("href")
            assert live.startswith(LIVE + "/") and parse_qs(urlsplit(live).query) == {   # the page leaves step 0 out
                k: [str(v)] for k, v in s.params.items() if not (k == "step" and v == 0)}, s.file
            if c.stepper:
                payload = json.loads(c.stepper["payload"])
                start = c.stepper["start"]
                _drawn(tab, start)                        # the screen's own event first
                assert tab.page.locator(".kvs-heading").inner_text() == payload["frames"][start]["heading"]
                if s.page not in stepped:                 # one run of each page: Home, then → through every event
                    stepped.add(s.page)
                    _step_through(tab, payload)
                else:                                     # the other runs: the screen's own event
                    got = tab.page.evaluate(STEP_ALL, [1, list(TRACE_KEYS), start])
                    _compare(payload, got, start)
            charts = [b["chart"] for b in _flat(c.blocks) if "chart" in b]
            slots = tab.page.locator(".kvc-chart")
            assert slots.count() == len(charts), s.file
            for k, chart in enumerate(charts):       # drawn when near the screen, as on the live page
                slots.nth(k).scroll_into_view_if_needed()
                expect(slots.nth(k)).to_have_attribute("data-drawn", "1", timeout=20_000)
                data = slots.nth(k).evaluate("(el) => el.data.map((t) => Object.fromEntries(%s.filter((k) => k in t)"
                                             ".map((k) => [k, t[k]])))" % json.dumps(TRACE_KEYS))
                assert data == _traces(chart["fig"]), (s.file, k)
            assert tab.page.locator("h1").first.inner_text() == c.title
            assert tab.page.evaluate(STRAY) == [], s.file
            hrefs = tab.page.eval_on_selector_all("a[href]", "(as) => as.map((a) => a.getAttribute('href'))")
            for h in hrefs:                          # into the folder, the live app, or a source on the web
                assert h.startswith((LIVE + "/", "https://")) or (result.out / h).is_file(), (s.file, h)
            assert not tab.errors, (s.file, tab.errors)
        assert not tab.blocked, tab.blocked
    finally:
        tab.close()


def _flat(blocks):
    for b in blocks:
        yield b
        for col in b.get("cols", []):
            yield from _flat(col)
        yield from _flat(b.get("group", []))


def test_keys_autoplay_address_live_link_and_model_view_tile(browser, site):
    result = site[0]
    gpt = next(s for s in result.screens if s.key == "gpt_decode")
    n = gpt.captured.stepper["n"]
    tab = StaticTab(browser, result.out)
    try:
        tab.open(gpt.file, f"?step={n - 3}")                  # the address's step, as on the live page
        heading = tab.page.locator(".kvs-heading")
        expect(heading).to_have_text(re.compile(rf"^Event {n - 3} of {n - 1}"))
        tab.page.locator(".kvs-speed select").select_option("4")
        tab.page.locator("h1").click()
        tab.page.keyboard.press("Space")                      # autoplay to the last event, then it stops
        expect(heading).to_have_text(re.compile(rf"^Event {n - 1} of {n - 1}"), timeout=10_000)
        expect(tab.page.locator(".kvs-bar [data-act='play']")).to_have_attribute("aria-pressed", "false")
        tab.page.keyboard.press("ArrowLeft")
        expect(heading).to_have_text(re.compile(rf"^Event {n - 2} of"))
        expect(tab.page).to_have_url(re.compile(rf"\?step={n - 2}$"))
        live = tab.page.locator(".kvx-settings [data-kvx-live]")
        expect(live).to_have_attribute("href", re.compile(rf"^{re.escape(LIVE)}/Tiny_GPT\?step={n - 2}$"))
        tab.page.keyboard.press("Home")
        expect(live).to_have_attribute("href", f"{LIVE}/Tiny_GPT")      # event 0 leaves step out, as live
        tab.page.locator(".kvs-root[data-drawn='0']").wait_for(state="attached")
        tile = tab.page.locator(".kvs-fig:visible .kvs-pick [role='gridcell'][data-r='2'][data-c='1']")
        tile.click()                                          # another layer and head: the live app computes it
        note = tab.page.locator("[data-kvx-pick] a")
        expect(note).to_have_attribute("href", f"{LIVE}/Tiny_GPT?gpt_layer=3&gpt_head=2")
        expect(tab.page.locator(".kvs-fig:visible .kvs-pick [aria-selected='true']")).to_have_attribute("data-r", "0")
        assert not tab.errors and not tab.blocked, (tab.errors, tab.blocked)
    finally:
        tab.close()


def test_presenter_mode_in_spanish_fits_one_screen(browser, tmp_path):
    result = export(tmp_path / "es", "es", present=True, live_url=LIVE, only={"abc_decode", "gpt_decode"})
    tab = StaticTab(browser, result.out, 1280, 720)
    try:
        for s in result.screens:
            tab.open(s.file)
            assert tab.page.get_attribute("html", "lang") == "es"
            root = tab.page.locator(".kvs-root.kvs-present")
            tab.page.locator(f".kvs-root[data-fitted='{s.captured.stepper['start']}']").wait_for(state="attached")
            expect(tab.page.locator(".kvs-heading")).to_have_text(re.compile(r"^Evento 2 de \d+: decode"))
            box = root.bounding_box()
            assert box["y"] >= 0 and box["y"] + box["height"] <= 720 + 1, (s.file, box)   # the whole step on screen
            assert tab.page.evaluate("parseFloat(getComputedStyle(document.querySelector('h1')).fontSize)") > 44
            assert "present=1" in s.live and "lang=es" in s.live
        assert not tab.errors and not tab.blocked, (tab.errors, tab.blocked)
    finally:
        tab.close()
