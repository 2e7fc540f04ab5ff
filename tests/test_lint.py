"""The linter over the whole tree (the rules are pyproject.toml's [tool.ruff]), so the README's one test
command checks the code's style too."""
import subprocess
import sys

from tests.conftest import ROOT


def test_ruff_finds_nothing():
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
