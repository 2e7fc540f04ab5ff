"""Every page is declared once (kvviz/ui/app/pages.py) and the declaration matches the files:
its script in pages/, the body that script renders, its strings, its lecture screens."""
import ast
import re
from pathlib import PurePosixPath

import pytest

from kvviz.ui.app import nav, serve_files, warmup
from kvviz.ui.app.i18n import strings
from kvviz.ui.app.pages import PAGE, PAGES, url_path
from kvviz.ui.pages.lecture import SCRIPT
from tests.conftest import ROOT, no_exception, open_page, plotly_specs, stepper


def _setup_and_body(path) -> tuple[str | None, str | None]:
    """(the title key a script passes to page_setup, the body module it renders)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    title = body = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "page_setup":
            title = node.args[0].value
        if isinstance(node, ast.ImportFrom) and node.module == "kvviz.ui.pages":
            body = f"kvviz.ui.pages.{node.names[0].name}"
    return title, body


def test_every_script_is_declared_once_and_every_declaration_has_its_script():
    files = {"app.py"} | {f"pages/{p.name}" for p in (ROOT / "pages").glob("*.py")}
    declared = [p.script for p in PAGES]
    assert sorted(declared) == sorted(files)
    assert len({p.key for p in PAGES}) == len(PAGES) and len({p.url for p in PAGES}) == len(PAGES)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.key)
def test_the_script_sets_up_the_declared_page_and_renders_its_body(page):
    title, body = _setup_and_body(ROOT / page.script)
    assert title == page.title_key
    if page.script != "app.py":                     # the home page draws itself
        assert body == page.body


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.key)
def test_the_script_ends_with_the_page_foot(page):
    """The foot (its sources, nav.page_foot) comes after the body, so a body that returns early keeps it."""
    tree = ast.parse((ROOT / page.script).read_text(encoding="utf-8"))
    calls = [getattr(n.value.func, "id", None) for n in tree.body if isinstance(n, ast.Expr)
             and isinstance(n.value, ast.Call)]
    if page.script != "app.py":
        assert calls[-1] == "page_foot"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.key)
def test_the_declared_strings_exist(page):
    en = strings("en")
    assert page.title_key in en and page.label_key in en
    if page.script != "app.py":
        assert page.blurb_key in en
    for screen in page.lecture:
        assert f"lecture.{screen.key}" in en and f"lecture.{screen.key}_why" in en
    if page.lecture:
        assert f"lecture.h_{page.key}" in en


def test_navigation_warm_up_stepping_and_lecture_read_the_declaration():
    assert nav.PAGES is PAGES
    assert [m for m in warmup.MODULES if m.startswith("kvviz.")] == [p.body for p in PAGES if p.body]
    assert set(serve_files.STEPPING_PAGES) == {p.url[1:] for p in PAGES if p.opens_on_stepper}
    assert set(serve_files.STEPPING_PAGES) <= serve_files.page_names()       # Streamlit's own names
    assert [section for section, _ in SCRIPT] == [p.key for p in PAGES if p.lecture]
    assert sum(len(steps) for _, steps in SCRIPT) == sum(len(p.lecture) for p in PAGES)


def test_addresses_follow_streamlits_rule():
    assert url_path("app.py") == "/" and PAGE["gpt"].url == "/Tiny_GPT"
    assert PAGE["lecture"].url == "/Lecture_script"
    for page in PAGES[1:]:
        assert re.fullmatch(r"pages/\d+_" + page.url[1:] + r"\.py", page.script)


@pytest.mark.app
@pytest.mark.parametrize("page", [p for p in PAGES if not p.charts], ids=lambda p: p.key)
def test_a_page_declared_without_charts_draws_none(page):
    """Such a page skips loading plotly.js (nav.page_setup): it must not need it."""
    at = open_page(None if page.script == "app.py" else page.script)
    no_exception(at)
    assert not plotly_specs(at)


@pytest.mark.app
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.key)
def test_the_declared_stepper_is_where_the_page_shows_it(page, request):
    """Presenter mode holds the first paint of exactly the pages that open on a stepper
    (serve_files.HOLD_SCRIPT): one held without would stay blank for 6 s, one not held flickers. The
    Real LLM page runs SmolLM2's class on tiny weights (where its stepper is, not what it shows)."""
    if page.key == "llm":
        request.getfixturevalue("tiny_real_smollm2")
    at = open_page(None if page.script == "app.py" else page.script)
    no_exception(at)
    assert (stepper(at) is not None) == page.opens_on_stepper
    if page.stepper:                                # a view of the page with a stepper of its own
        query = dict(q.split("=", 1) for q in page.stepper.split("&"))
        assert stepper(open_page(page.script, query)) is not None


def _strings_in_code(path) -> list[str]:
    """The string constants of a module, its docstrings left out (they may show a script as an example)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n.value for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_no_other_code_names_a_page_script():
    """The declaration is the one place: code asks it for a script (``script("gpt")``)."""
    names = [PurePosixPath(p.script).name for p in PAGES[1:]]
    found = [f"{path.relative_to(ROOT)}: {name}" for d in ("kvviz", "tests", "bench", "tools")
             for path in (ROOT / d).rglob("*.py") if path.name != "pages.py"
             for text in _strings_in_code(path) for name in names if name in text]
    assert not found
