"""The server's start-up loads the engine before the first visitor (kvviz/ui/warmup.py)."""
import subprocess
import sys
from pathlib import Path

from streamlit.web.server.app_discovery import discover_asgi_app

from kvviz.ui import warmup

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_run_serves_app_py_through_the_st_app_with_the_warm_up():
    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.app_name == "app"
    assert "lifespan=lifespan" in (ROOT / "app.py").read_text()


def test_the_warm_up_imports_every_page_module():
    pages = {f"kvviz.ui.{p.stem}" for p in (ROOT / "kvviz" / "ui").glob("*_page.py")}
    assert pages <= set(warmup.MODULES), f"not warmed: {sorted(pages - set(warmup.MODULES))}"


def test_after_the_warm_up_the_engine_and_every_page_module_are_loaded():
    # a fresh interpreter: what warm() leaves loaded, without anything this test process imported
    code = ("import sys; from kvviz.ui import warmup; warmup.warm(); "
            "assert warmup.done.is_set(); missing = [m for m in warmup.MODULES if m not in sys.modules]; "
            "print(missing)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
