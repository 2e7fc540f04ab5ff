"""The README's two commands are the ones CI runs and the ones a newcomer copies."""
import re

from tests.conftest import ROOT


def _blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", (ROOT / "README.md").read_text(), flags=re.S)


def test_readme_starts_with_the_two_commands():
    run_app, run_tests = _blocks()[:2]
    assert "pip install -r requirements.txt" in run_app and "streamlit run app.py" in run_app
    assert "pytest" in run_tests and "chromium" in run_tests


def test_ci_runs_the_readme_test_command():
    ci_last = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci_last == _blocks()[1]


def test_home_page_path_does_not_import_torch():
    """The home page loads fast: none of its imports pulls in torch (≈ 1 s and ≈ 200 MB)."""
    import subprocess
    import sys
    code = "import sys, kvviz.ui.app.nav, kvviz.ui.app.links; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr
