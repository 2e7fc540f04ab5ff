"""The static export (kvviz/ui/export, ``python -m kvviz export``): one screen of each page of the lecture
(its first) and a few more (``SHOWN``) in English, written here, and two of them (two pages, each
with settings of its own) written again by the command in another process, byte for byte the same
frames and files; the whole under 20 MB; every page opened from file:// in chromium with every
request outside the folder refused; every event of the A/B/C and Tiny GPT runs stepped through
with the keys (the screen's own event on the others), its heading and the data of every figure it
shows equal to the live page's payload (the frames the exporter captured from the page;
tests/test_export.py checks those against the payload builders); every single chart's data equal to
the live page's figure; no page or console error, no control that needs the server; the index and a
Tiny GPT screen pass axe-core as the live pages do. Then keys, autoplay, the live links, a
model-view tile, and presenter mode in Spanish."""
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

from kvviz.ui.components import plotly_js
from kvviz.ui.export.site import export, lecture_screens
from kvviz.ui.frames import translator
from kvviz.ui.pages.lecture import SCRIPT
from tests.browser.axe_check import COLOUR_RULES, FAIL_IMPACTS, KEEP_FIXED, KNOWN
from tests.conftest import ROOT, shared_caches_aside
from tools.browser import shared_context

pytestmark = pytest.mark.browser

LIVE = "http://live.invalid:8501"      # the screens' live links: never fetched
MAX_BYTES = 20_000_000
TRACE_KEYS = ("type", "x", "y", "z", "text")

# One screen, read in the browser in one go (no round trip per step): its title, links and controls;
# the stepper's own event, then with ``all`` every event from Home on (→ as the keydown its key
# listener gets): each event's heading and the figures it shows, and the data plotly holds for each
# figure (a figure is drawn once, into its own element); each single chart, scrolled to (it is drawn
# near the screen, as on the live page), and its data.
LOOK = """async ([start, all, keys]) => {
  const until = (ok, what) => new Promise((done, fail) => {
    const t0 = performance.now();
    const look = () => ok() ? done()
      : performance.now() - t0 > 20000 ? fail(new Error(what)) : requestAnimationFrame(look);
    look();
  });
  const traces = (el) => el.data.map((t) => Object.fromEntries(keys.filter((k) => k in t).map((k) => [k, t[k]])));
  const key = (e) => window.dispatchEvent(new KeyboardEvent('keydown', {key: e, bubbles: true}));
  const out = {title: document.querySelector('h1').textContent, steps: [], figs: {}, charts: [],
               live: document.querySelector('.kvx-nav [data-kvx-live]').getAttribute('href'),
               hrefs: [...document.querySelectorAll('a[href]')].map((a) => a.getAttribute('href')),
               stray: [...document.querySelectorAll('button, input, select, textarea')]
                 .filter((e) => !e.closest('.kvs-root, .modebar')).map((e) => e.outerHTML.slice(0, 80))};
  const root = document.querySelector('.kvs-root');
  const shown = (i) => until(() => root.dataset.drawn === String(i), 'event ' + i + ' not drawn').then(() => {
    const figs = [...root.querySelectorAll('.kvs-fig')].filter((d) => d.offsetParent !== null);
    for (const d of figs) {
      const k = d.dataset.key.split(':')[0];
      if (!(k in out.figs)) out.figs[k] = traces(d);
    }
    out.steps.push([i, root.querySelector('.kvs-heading').textContent,
                    figs.map((d) => Number(d.dataset.key.split(':')[0]))]);
  });
  if (start !== null) {
    await until(() => document.querySelector('.kvs-root'), 'no stepper');
    await shown(start);
    if (all) {
      key('Home');
      await shown(0);
      const last = Number(root.querySelector('.kvs-slider input').max);
      for (let i = 1; i <= last; i++) { key('ArrowRight'); await shown(i); }
    }
  }
  for (const el of document.querySelectorAll('.kvc-chart')) {
    el.scrollIntoView();
    await until(() => el.dataset.drawn === '1', 'chart not drawn');
    out.charts.push(traces(el));
  }
  return out;
}"""
# two screens of two pages, each with settings of its own (a sampled run; a pool small enough to preempt):
# written again by the command, in another process
AGAIN = ("gpt_sampled", "paged_preempt")
# what this test exports: the first screen of each section of the lecture (one run of every page, every
# kind of block), the Tiny GPT decode screen the keys test opens, SmolLM2's prompt-lookup round (a
# stepper of its own) and AGAIN. Every screen the same way: a screen is its page's capture from its
# address, and every address of the script opens its named state in tests/test_deep_links.py; the whole
# lecture (then 51 screens) took this test 100 s of the suite's 8 minutes.
SHOWN = {steps[0][2] for _, steps in SCRIPT} | {"gpt_decode", "speculative_lookup", *AGAIN}
# screens stepped through every event from the file (the others show their own event): the stepper's
# JavaScript is the live app's, byte for byte, which the live pages' walks step through
EVERY_EVENT = {"abc_prefill", "gpt_prefill"}


@pytest.fixture(scope="module")
def site(tmp_path_factory, tiny_llama_dir):
    """``SHOWN`` exported here, and two of its screens (``AGAIN``) exported at the same time by the
    command in another process. SmolLM2's screens (the Real LLM's first, its prompt lookup) show
    SmolLM2's class on tiny weights: what the export writes and the browser replays does not depend
    on the weights, and the real ones' default run and loop views took ≈ 15 s of this test."""
    root = tmp_path_factory.mktemp("export")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cli = subprocess.Popen([sys.executable, "-m", "kvviz", "export", "--out", str(root / "cli"), "--live-url", LIVE,
                            "--only", ",".join(AGAIN)],
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with pytest.MonkeyPatch.context() as mp, shared_caches_aside():
        mp.setenv("KVVIZ_SMOLLM2", str(tiny_llama_dir))
        mp.setenv("KVVIZ_REAL_MODELS", "smollm2")
        result = export(root / "site", "en", live_url=LIVE, only=SHOWN)
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


def _accessible(tab: StaticTab, where: str) -> None:
    """axe-core on an exported page by the live app's rules (tests/browser/axe_check.py), in the light
    theme and, for the colours, the dark one. The page's own errors are checked first: axe-core's
    reading of the stylesheets (an XMLHttpRequest, which file:// refuses) logs one of its own."""
    from axe_playwright_python.sync_playwright import Axe

    assert not tab.errors, (where, tab.errors)
    page = tab.page
    problems = []
    for scheme, options in (("light", None), ("dark", COLOUR_RULES)):
        page.emulate_media(color_scheme=scheme)
        for v in Axe().run(page, options=options).response["violations"]:
            nodes = [n for n in v["nodes"] if not any(k.matches(v["id"], n) for k in KNOWN)]
            if nodes and (v["impact"] in FAIL_IMPACTS or v["id"] in KEEP_FIXED):
                problems.append(f"{where} [{scheme}] {v['id']}: {nodes[0]['html'][:120]}")
    page.emulate_media(color_scheme="light")
    tab.errors.clear()
    assert not problems, problems


def _compare(payload: dict, got: dict) -> None:
    """Each event the browser showed: its heading and figures as the payload's frame says, and each
    figure's data as the payload holds it."""
    for i, heading, shown in got["steps"]:
        f = payload["frames"][i]
        assert heading == f["heading"] and sorted(shown) == _expected_figs(f), (i, heading, shown)
    assert got["figs"], "no figure drawn"
    for k, traces in got["figs"].items():
        assert traces == _traces(payload["figs"][int(k)]), (k, payload["figs"][int(k)]["layout"].get("title"))


def test_the_exported_lecture(browser, site):
    """One test over the one export (split up, the test workers could each make it): its files, its
    index, every screen, and the keys, the address and the live links on one screen."""
    _same_bytes_twice_small_and_its_index_lists_the_lecture(browser, *site)
    _every_screen_draws_the_live_frames_from_file_alone(browser, site[0])
    _keys_autoplay_address_live_link_and_model_view_tile(browser, site[0])


def _same_bytes_twice_small_and_its_index_lists_the_lecture(browser, result, cli_folder, cli_out) -> None:
    again = [s for s in result.screens if s.key in AGAIN]
    def names(folder: Path, under: str) -> list[str]:
        return sorted(p.relative_to(folder).as_posix() for p in (folder / under).rglob("*") if p.is_file())

    assert names(cli_folder, "assets") == names(result.out, "assets")
    assert names(cli_folder, "data") == sorted(f"data/{s.data}.js" for s in again)   # the same frames, the same names
    for name in names(cli_folder, "assets") + names(cli_folder, "data"):
        assert (cli_folder / name).read_bytes() == (result.out / name).read_bytes(), name
    for s in again:                                   # and its pages draw them
        assert f"data/{s.data}.js" in (cli_folder / s.file).read_text(encoding="utf-8")
    assert f"{len(again)} screens" in cli_out
    assert result.total_bytes < MAX_BYTES, result.total_bytes
    # the stepper's own files, byte for byte what the live app uses
    ui = ROOT / "kvviz" / "ui" / "components"
    assert (result.out / "assets" / "step_view.css").read_bytes() == (ui / "step_view.css").read_bytes()
    modules = json.loads(re.search(r"window\.KVX_MODULES = (\{.*\});", (result.out / "assets" / "components.js")
                                   .read_text(encoding="utf-8"), re.DOTALL).group(1))
    assert modules["stepper"] == plotly_js.module_js(ui / "step_view.js")
    assert modules["chart"] == plotly_js.module_js(ui / "chart_view.js")
    bundle = plotly_js.PLOTLY_BUNDLE
    assert (result.out / "assets" / bundle).read_bytes() == (plotly_js.STATIC / bundle).read_bytes()
    # the index lists the screens written, in the lecture script's order and numbered as in the script
    tab = StaticTab(browser, result.out)
    try:
        tab.open("index.html")
        links = tab.page.locator("a.kvx-screen")
        assert [links.nth(i).get_attribute("href") for i in range(links.count())] == [s.file for s in result.screens]
        tr = translator("en")
        assert links.all_inner_texts() == [tr("lecture." + s.key) for s in result.screens]
        assert [s.key for s in result.screens] == [s[4] for s in lecture_screens() if s[4] in SHOWN]
        assert [s.n for s in result.screens] == [s[0] for s in lecture_screens() if s[4] in SHOWN]
        _accessible(tab, "index.html")
        assert not tab.errors and not tab.blocked, (tab.errors, tab.blocked)
    finally:
        tab.close()


def _every_screen_draws_the_live_frames_from_file_alone(browser, result) -> None:
    tab = StaticTab(browser, result.out)
    try:
        for s in result.screens:
            c = s.captured
            every = bool(c.stepper) and s.key in EVERY_EVENT
            tab.open(s.file)
            got = tab.page.evaluate(LOOK, [c.stepper["start"] if c.stepper else None, every, list(TRACE_KEYS)])
            if c.stepper:
                payload = json.loads(c.stepper["payload"])
                assert got["steps"][0][0] == c.stepper["start"]
                assert len(got["steps"]) == (1 + c.stepper["n"] if every else 1)
                _compare(payload, got)
            charts = [b["chart"] for b in _flat(c.blocks) if "chart" in b]
            assert got["charts"] == [_traces(ch["fig"]) for ch in charts], s.file
            assert got["title"] == c.title and got["stray"] == [], (s.file, got["stray"])
            assert got["live"].startswith(LIVE + "/") and parse_qs(urlsplit(got["live"]).query) == {
                k: [str(v)] for k, v in s.params.items() if not (k == "step" and v == 0)}, s.file   # step 0 left out
            for h in got["hrefs"]:                   # into the folder, the live app, or a source on the web
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


def _keys_autoplay_address_live_link_and_model_view_tile(browser, result) -> None:
    gpt = next(s for s in result.screens if s.key == "gpt_decode")
    n = gpt.captured.stepper["n"]
    tab = StaticTab(browser, result.out)
    try:
        tab.open(gpt.file, f"?step={n - 3}")                  # the address's step, as on the live page
        heading = tab.page.locator(".kvs-heading")
        expect(heading).to_have_text(re.compile(rf"^Event {n - 3} of {n - 1}"))
        tab.page.locator(f".kvs-root[data-drawn='{n - 3}']").wait_for(state="attached")
        _accessible(tab, gpt.file)
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
