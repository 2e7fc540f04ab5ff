"""The server's start-up loads the engine before the first visitor (kvviz/ui/app/warmup.py)."""
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.runtime.caching import cache_resource_api
from streamlit.web.server.app_discovery import discover_asgi_app

from kvviz.ui.app import warmup
from tests.conftest import no_exception, open_page

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_run_finds_the_st_app_in_app_py():
    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.app_name == "app"


def test_the_warm_up_imports_every_page_module():
    pages = set(_page_files())
    assert len(pages) == len(list((ROOT / "pages").glob("*.py")))      # every file in pages/ renders one
    assert pages <= set(warmup.MODULES), f"not warmed: {sorted(pages - set(warmup.MODULES))}"


@pytest.mark.app          # a real `streamlit run`'s start-up, in a fresh interpreter: not an engine test
def test_the_served_app_warms_up_and_the_warm_up_leaves_every_module_loaded():
    # a fresh interpreter: app.py imported as `streamlit run` imports it (as a module, not as the home
    # page's script), then its lifespan's warm-up, without anything this test process imported. The
    # imports only (KVVIZ_WARM=imports): each page's default run is made and checked, one page at a
    # time, by test_after_the_warm_up_a_default_visit_computes_nothing (the whole warm-up, both real
    # models loaded and run, took 40-80 s of this test's time)
    code = ("import sys, app; from kvviz.ui.app import warmup; "
            "assert app.app._user_lifespan is warmup.lifespan, 'app.py serves without the warm-up'; "
            "failed = warmup.warm(); missing = [m for m in warmup.MODULES if m not in sys.modules]; "
            "print(failed, missing)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "KVVIZ_WARM": "imports"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[] []", out.stdout + out.stderr


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


WARMED = [name for name in warmup.MODULES
          if name.startswith("kvviz.ui.pages.") and hasattr(importlib.import_module(name), "warm")]


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
    # load and run, made by the same loop of llm.warm, doubled this test's time), SmolLM2's class on
    # tiny weights (which results are cached does not depend on the weights; the real ones took 13 s)
    importlib.import_module(module).warm()
    warmed = _cache_entries()
    assert warmed
    at = open_page(_page_files()[module])
    no_exception(at)
    assert _cache_entries() - warmed == set(), "computed on the first visit despite the warm-up"
