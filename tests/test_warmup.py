"""The server's start-up loads the engine before the first visitor (kvviz/ui/warmup.py)."""
import subprocess
import sys
from pathlib import Path

from streamlit.web.server.app_discovery import discover_asgi_app

from kvviz.ui import warmup

ROOT = Path(__file__).resolve().parents[1]


def test_streamlit_run_finds_the_st_app_in_app_py():
    found = discover_asgi_app(ROOT / "app.py")
    assert found.is_asgi_app and found.app_name == "app"


def test_the_warm_up_imports_every_page_module():
    pages = {f"kvviz.ui.{p.stem}" for p in (ROOT / "kvviz" / "ui").glob("*_page.py")}
    assert pages <= set(warmup.MODULES), f"not warmed: {sorted(pages - set(warmup.MODULES))}"


def test_the_served_app_warms_up_and_the_warm_up_leaves_every_module_loaded():
    # a fresh interpreter: app.py imported as `streamlit run` imports it (as a module, not as the home
    # page's script), then its lifespan's warm-up, without anything this test process imported
    code = ("import sys, app; from kvviz.ui import warmup; "
            "assert app.app._user_lifespan is warmup.lifespan, 'app.py serves without the warm-up'; "
            "failed = warmup.warm(); missing = [m for m in warmup.MODULES if m not in sys.modules]; "
            "print(failed, missing)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[] []", out.stdout + out.stderr
