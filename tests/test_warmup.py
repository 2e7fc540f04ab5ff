"""The server's start-up: it answers at once and loads the engine, the pages' default runs and the real
models in the background, and a page asked for meanwhile waits for what it needs (kvviz/ui/app/warmup.py,
kvviz/ui/app/waiting.py)."""
import importlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from streamlit.runtime.caching import cache_resource_api
from streamlit.web.server.app_discovery import discover_asgi_app

from kvviz.ui.app import models, warmup, warmup_state
from kvviz.ui.app.pages import script
from tests.conftest import no_exception, open_page
from tools.browser import start_server, stop_server, wait_healthy, warm_up_status
from tools.st_session import Session, run

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_run_finds_the_st_app_in_app_py():
    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.app_name == "app"


def test_the_warm_up_imports_every_page_module():
    pages = set(_page_files())
    assert len(pages) == len(list((ROOT / "pages").glob("*.py")))      # every file in pages/ renders one
    assert pages <= set(warmup.MODULES), f"not warmed: {sorted(pages - set(warmup.MODULES))}"


@pytest.mark.app          # a real `streamlit run`'s start-up, in a fresh interpreter: not an engine test
def test_the_served_app_warms_up_and_the_warm_up_leaves_every_module_loaded(tmp_path):
    # a fresh interpreter: app.py imported as `streamlit run` imports it (as a module, not as the home
    # page's script), then the warm-up its lifespan starts, without anything this test process imported. The
    # imports only (KVVIZ_WARM=imports): each page's default run is made and checked, one page at a
    # time, by test_after_the_warm_up_a_default_visit_computes_nothing (the whole warm-up, both real
    # models loaded and run, took 40-80 s of this test's time)
    code = ("import sys, app; from kvviz.ui.app import warmup; "
            "assert app.app._user_lifespan is warmup.lifespan, 'app.py serves without the warm-up'; "
            "failed = warmup.warm(); missing = [m for m in warmup.MODULES if m not in sys.modules]; "
            "print(failed, missing)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "KVVIZ_WARM": "imports", "KVVIZ_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[] []", out.stdout + out.stderr


def test_the_lifespan_does_only_what_the_first_page_needs():
    # the server answers once the lifespan has yielded: it reads the first page's files and imports the
    # home page's modules (no torch), and leaves the rest to the warm-up's thread (here not started)
    code = ("import asyncio, sys, app; from kvviz.ui.app import warmup, serve_files; started = []; "
            "warmup.start = lambda: started.append(1)\n"
            "async def main():\n    async with warmup.lifespan(None): pass\n"
            "asyncio.run(main()); "
            "print('torch' in sys.modules, started, serve_files.frontend_files.cache_info().currsize)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "False [1] 1", out.stdout + out.stderr


def _page_files() -> dict[str, str]:
    """page module (kvviz.ui.pages.x) → its file in pages/ (the one that calls its render)."""
    found = {}
    for path in sorted((ROOT / "pages").glob("*.py")):
        m = re.search(r"^from kvviz\.ui\.pages import (\w+) as page\b", path.read_text(encoding="utf-8"), re.M)
        if m:
            found[f"kvviz.ui.pages.{m.group(1)}"] = f"pages/{path.name}"
    return found


def _cache_entries() -> set[tuple[str, str]]:
    """(function, argument hash) of every st.cache_resource entry in this process."""
    out = set()
    for caches in list(cache_resource_api._resource_caches._function_caches.values()):
        for cache in list(caches.values()):
            out |= {(cache.display_name, key) for key in list(cache._mem_cache)}
    return out


WARMED = [name for name in warmup.MODULES if name.startswith("kvviz.ui.pages.")
          and any(hasattr(importlib.import_module(name), f) for f in ("warm", "warm_model"))]


def test_the_pages_with_a_long_first_run_are_warmed():
    long_first_runs = {"kvviz.ui.pages.gpt", "kvviz.ui.pages.paged", "kvviz.ui.pages.compress",
                       "kvviz.ui.pages.speculative"}
    assert long_first_runs <= set(WARMED)


@pytest.mark.app
@pytest.mark.parametrize("module", WARMED)
def test_after_the_warm_up_a_default_visit_computes_nothing(module, tiny_real_smollm2):
    # warm() makes exactly what a visitor's first, default run of the page would: that run finds
    # every cached result ready (a different setting computes as before). The default visit of the
    # Real LLM page opens SmolLM2, the first real model: the server here loads that one only (Gemma 3's
    # load and run, made by the same loop of the warm-up, doubled this test's time), SmolLM2's class on
    # tiny weights (which results are cached does not depend on the weights; the real ones took 13 s)
    page = importlib.import_module(module)
    if hasattr(page, "warm"):
        page.warm()
    if hasattr(page, "warm_model"):         # after the warm-up's steps of each real model: prepare, load
        for name in models.enabled():
            if models.prepare(name) is not None:
                page.warm_model(name)
    warmed = _cache_entries()
    assert warmed
    at = open_page(_page_files()[module])
    no_exception(at)
    assert _cache_entries() - warmed == set(), "computed on the first visit despite the warm-up"


# ---- the server answers at once; the warm-up goes on in the background ------------------------------------

@pytest.mark.app          # a real `streamlit run`: its health check and home page while it warms up
def test_a_fresh_server_answers_and_draws_its_home_page_before_its_warm_up_ends(tmp_path):
    # the default warm-up (every page's default run, then SmolLM2's load and runs: the server of the
    # tests loads that model only), stopped once the home page is checked
    proc, base, log = start_server(tmp_path / "server.log", {"KVVIZ_REAL_MODELS": "smollm2"})
    try:
        wait_healthy(base, log, timeout=60, proc=proc, ready=False)
        assert warm_up_status(base)["ready"] is False, "the health check waited for the warm-up"
        home = run(_visit(base, ""))
        assert not home.exceptions() and "kvviz" in home.headings()[0], home.headings()
        status = warm_up_status(base)
        assert status["started"] and not status["ready"], status      # drawn while the warm-up goes on
    finally:
        stop_server(proc)
    assert "kvviz: loading the engine in the background" in log.read_text()


async def _visit(base: str, page: str):
    async with Session(base, page, timeout=120) as s:
        return s


@pytest.fixture
def warm_up(monkeypatch, tmp_path):
    """A warm-up state of this test's own (``warmup_state.STATE``), its durations recorded in a cache directory
    of its own (not the real one, whose record the next server's messages read)."""
    monkeypatch.setenv("KVVIZ_CACHE_DIR", str(tmp_path / "cache"))
    state = warmup_state.WarmUp()
    monkeypatch.setattr(warmup_state, "STATE", state)
    yield state


def _step(key: str, work=lambda: None, **kw) -> warmup_state.Step:
    return warmup_state.Step(key, "warmup.step_page" if kw.get("page") else "warmup.step_engine", key, work, **kw)


def test_steps_are_waited_for_until_made_or_planned_out(warm_up):
    assert warm_up.done("warm:kvviz.ui.pages.abc")                 # no warm-up: nothing to wait for
    warm_up.begin(last={})
    warm_up.add([_step("engine")])
    assert not warm_up.done("engine") and not warm_up.done("runs:smollm2")   # unknown until the plan
    warm_up.run(warm_up.steps[0])
    warm_up.add([_step("warm:kvviz.ui.pages.abc", page="abc")], planned=True)
    assert warm_up.done("engine") and warm_up.done("runs:smollm2")           # not in the plan
    assert not warm_up.done("warm:kvviz.ui.pages.abc")
    assert warm_up.status()["ready"] is False and warm_up.status()["steps"] == 2
    warm_up.run(warm_up.steps[1])
    warm_up.finish()
    assert warm_up.done("warm:kvviz.ui.pages.abc") and warm_up.status()["ready"] is True


def test_the_last_durations_are_kept_in_the_cache_directory(tmp_path, warm_up):
    from kvviz.models import real
    assert warmup_state.times_file().parent == real.cache_root()         # beside the converted weights
    warm_up.begin()
    assert warm_up.last == {}                                       # a cold cache directory: no record
    warm_up.add([_step("engine", lambda: time.sleep(0.05))], planned=True)
    warm_up.run(warm_up.steps[0])
    warm_up.finish()
    assert warmup_state.read_times()["steps"]["engine"] >= 0.05
    warm_up.begin()
    assert warm_up.last_seconds("engine") >= 0.05 and warm_up.last_seconds("model:gemma3") is None


@pytest.mark.app
def test_a_page_asked_while_the_warm_up_makes_its_run_waits_for_it(warm_up, monkeypatch):
    # the A/B/C page asked for while the warm-up's step makes its default run: the page shows the
    # step and waits; the run is computed once, by the warm-up, and the page then draws it
    from kvviz.ui.app import runs, waiting
    from kvviz.ui.pages import abc
    from tests.conftest import shared_caches_aside, stepper
    computed_in, shown = [], []
    generate = runs.run_generation
    monkeypatch.setattr(runs, "run_generation", lambda *a, **k: (computed_in.append(threading.current_thread().name),
                                                                 generate(*a, **k))[1])
    show = waiting.show
    page_may_go = threading.Event()

    def spy(state, keys):
        shown.append((keys, state.status()["doing"]))
        show(state, keys)
        page_may_go.set()                        # the message is on the page: let the warm-up go on

    monkeypatch.setattr(waiting, "show", spy)

    def step_of_abc():
        assert page_may_go.wait(30), "the page did not wait for the warm-up"
        abc.warm()

    warm_up.begin(last={"steps": {"warm:kvviz.ui.pages.abc": 0.4}})
    engine = _step("engine")
    warm_up.add([engine])
    warm_up.run(engine)
    step = _step("warm:kvviz.ui.pages.abc", step_of_abc, page="abc")
    warm_up.add([step], planned=True)
    thread = threading.Thread(target=lambda: (warm_up.run(step), warm_up.finish()), name="test-warm-up")
    with shared_caches_aside():                  # the default run not made yet
        thread.start()
        at = open_page(script("abc"))
        thread.join(30)
        no_exception(at)
        assert stepper(at) is not None and at.title[0].value == "A/B/C miniature"
    assert shown and shown[0] == (("engine", "warm:kvviz.ui.pages.abc"), "warm:kvviz.ui.pages.abc")
    assert computed_in == ["test-warm-up"], "the page computed a copy of the warm-up's run"
    assert warm_up.failed == []


def test_the_wait_message_counts_the_steps_and_the_time(warm_up):
    from kvviz.ui.app.i18n import render, strings
    from kvviz.ui.app.waiting import fraction
    warm_up.begin(last={"steps": {"engine": 2.0, "warm:a": 1.0, "warm:b": 1.0}})
    warm_up.add([_step("engine"), _step("warm:a", page="abc"), _step("warm:b", page="gpt")], planned=True)
    assert fraction(warm_up, ("warm:a",), 1, 0.5) == pytest.approx(2.5 / 3)     # by last time's seconds
    assert fraction(warm_up, ("warm:b",), 0, 1.0) == pytest.approx(1 / 4)
    warm_up.last = {}                                                          # no record: by steps
    assert fraction(warm_up, ("warm:b",), 1, 3.0) == pytest.approx(1.5 / 3)
    for lang in ("en", "es", "de"):
        text = render(strings(lang)["warmup.wait"], lang, step=2, steps=14, what="X")
        assert "2" in text and "14" in text and "X" in text
