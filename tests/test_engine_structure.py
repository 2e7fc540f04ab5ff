"""The engine's shape: every model follows the whole protocol, and the modules import each other
without circles (and without imports tucked into functions to dodge one)."""
import ast
import functools
from pathlib import Path

import pytest

from kvviz import cost
from kvviz.decoding.stepper import run_generation
from kvviz.models.base import ModelLimits, UnknownTokenError
from kvviz.models.registry import MODELS, get_model

ENGINE = Path(__file__).resolve().parents[1] / "kvviz"
PROMPTS = {"abc": "a, b c", "weather": "today WEATHER is so", "gpt": "today the weather",
           "smollm2": "Today the weather", "gemma3": "Today the weather"}
BYTE_LEVEL = {"smollm2", "gemma3"}   # byte-level (or byte-fallback) tokenizers: no word is unknown
REAL = {"smollm2", "gemma3"}
# Gemma 3's real weights load in ≈ 4.5 s: its cases run in tests/test_gemma3.py, the one module that
# loads them (tests/conftest.py's ``gemma3``), through the same checks
ELSEWHERE = {"gemma3": "tests/test_gemma3.py"}
HERE = sorted(set(MODELS) - set(ELSEWHERE))


def _model(name: str, request):
    """A fresh model; a real one is the tests' one loaded copy (tests/conftest.py: its weights)."""
    return request.getfixturevalue(name) if name in REAL else get_model(name)


def check_protocol(model, name: str) -> None:
    """The model tokenizes, knows its limits and its cost shape, and its records have that shape."""
    tokens = model.tokenize(PROMPTS[name])
    assert tokens and set(tokens) <= set(model.vocab)
    if name in BYTE_LEVEL:
        assert "".join(model.tokenize("Zebra 🦓")) and model.decode(model.tokenize("Zebra 🦓")) == "Zebra 🦓"
    else:
        with pytest.raises(UnknownTokenError) as err:
            model.tokenize(PROMPTS[name] + " Zebra")
        assert err.value.tokens == ["Zebra"]
    assert isinstance(model.limits, ModelLimits)
    cfg = cost.config_of(model)
    assert cfg in cost.SHAPES.values()              # one table of named shapes
    run = run_generation(model, tokens, 3)
    cost.count_flops(run.events, cfg)               # the records have the shape the cost model says
    last = run.events[-1]
    values_per_token = cfg.n_layers * cfg.kv_width
    assert last.cache.nbytes() == values_per_token * last.cache_len * last.logits.element_size()


def check_limits(model, name: str) -> None:
    """The stepper refuses a prompt or a run longer than the model's limits."""
    word = model.tokenize(PROMPTS[name])[0]
    with pytest.raises(ValueError, match="Prompt length"):
        run_generation(model, [word] * (model.limits.max_prompt_tokens + 1), 1)
    with pytest.raises(ValueError, match="New tokens"):
        run_generation(model, [word], model.limits.max_new_tokens + 1)


@pytest.mark.parametrize("name", HERE)
def test_every_model_tokenizes_knows_its_limits_and_its_cost_shape(name, request):
    check_protocol(_model(name, request), name)


@pytest.mark.parametrize("name", HERE)
def test_limits_are_enforced_by_the_stepper(name, request):
    check_limits(_model(name, request), name)


def test_the_models_checked_elsewhere_are_checked_there():
    """Every model of the registry goes through both checks: here, or in the module named."""
    for name, where in ELSEWHERE.items():
        assert name in MODELS
        text = (ENGINE.parent / where).read_text(encoding="utf-8")
        assert f'check_protocol({name}, "{name}")' in text and f'check_limits({name}, "{name}")' in text


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A file's syntax tree, parsed once for every check of this module (read-only)."""
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.cache
def _imports(path: Path) -> tuple[set[str], list[str]]:
    """kvviz modules ``path`` imports at its top level, and those it imports inside a function."""
    tree = _tree(path)
    in_function = {id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                   for n in ast.walk(f) if n is not f}
    top, nested = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvviz"):
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("kvviz")]
        else:
            continue
        (nested.extend(names) if id(node) in in_function else top.update(names))
    return top, nested


def _engine_modules() -> dict[str, Path]:
    out = {}
    for path in ENGINE.rglob("*.py"):
        rel = path.relative_to(ENGINE.parent).with_suffix("")
        if "ui" in rel.parts:
            continue
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = path
    return out


def test_the_engine_has_no_import_circles_and_no_function_level_imports():
    modules = _engine_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        top, nested = _imports(path)
        graph[name] = {m for m in top if m in modules and m != name}
        # the one exception: transformers is a development dependency (tests and benchmarks)
        assert not nested, f"{name} imports {nested} inside a function"
    # no cycle (packages re-export their modules; a module importing its own package is a cycle too)
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        if state.get(m) == 1:
            raise AssertionError(f"import circle: {' -> '.join(path + [m])}")
        if state.get(m) == 2:
            return
        state[m] = 1
        for dep in sorted(graph[m]):
            visit(dep, path + [m])
        state[m] = 2

    for m in sorted(graph):
        visit(m, [])


def _all_modules() -> dict[str, Path]:
    """Every module of kvviz, the pages' bodies included, by dotted name."""
    modules = {}
    for path in ENGINE.rglob("*.py"):
        rel = path.relative_to(ENGINE.parent).with_suffix("")
        modules[".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)] = path
    return modules


def _import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the kvviz modules it imports anywhere in its file: at the top and inside functions
    (an import put into a function still makes the two modules depend on each other)."""
    graph = {}
    for name, path in modules.items():
        top, nested = _imports(path)
        graph[name] = {m for m in top | set(nested) if m in modules and m != name}
    return graph


# Import edges that close a circle today and are on their way out. Each entry names who removes it;
# delete the entry when that branch is merged (the test then holds the line).
KNOWN_CIRCLE_EDGES: set[tuple[str, str]] = set()


def test_no_import_circles_anywhere_in_kvviz():
    """The pages too: a page body imports components and app infrastructure, never the other way.
    Imports inside functions count: hiding one there does not break the circle, it only delays it."""
    modules = _all_modules()
    graph = _import_graph(modules)
    for a, b in KNOWN_CIRCLE_EDGES:
        graph.get(a, set()).discard(b)
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> None:
        assert m not in path, f"import circle: {' -> '.join(path[path.index(m):] + [m])}"
        if m not in done:
            for dep in sorted(graph[m]):
                visit(dep, path + [m])
            done.add(m)

    for m in sorted(graph):
        visit(m, [])
    assert any(m.startswith("kvviz.ui.pages.") for m in done)


def test_the_circle_check_sees_imports_inside_functions(tmp_path):
    """The check above would catch the fmt <-> i18n circle that an import inside a function hid."""
    (tmp_path / "a.py").write_text("from kvviz.b import x\n", encoding="utf-8")
    (tmp_path / "b.py").write_text("def f():\n    from kvviz.a import y\n    return y\n", encoding="utf-8")
    graph = _import_graph({"kvviz.a": tmp_path / "a.py", "kvviz.b": tmp_path / "b.py"})
    assert graph == {"kvviz.a": {"kvviz.b"}, "kvviz.b": {"kvviz.a"}}


# The floors of the house, lowest first: a module imports only from its own floor or below.
# (cost: formulas only; measurements run models, so they sit above decoding.)
FLOORS = [
    {"kvviz", "limits", "references", "paths"},
    {"cost"},
    {"cache"},
    {"models"},
    {"decoding"},
    {"measure", "serving", "compress", "speculative"},
    {"viz"},
    {"ui"},
    {"cli"},
    {"__main__", "train_gpt"},
]
# Upward imports on their way out: delete an entry when its branch is merged.
KNOWN_UPWARD: set[str] = set()


def _floor(module: str) -> int:
    parts = module.split(".")
    package = parts[1] if len(parts) > 1 else "kvviz"
    found = [i for i, floor in enumerate(FLOORS) if package in floor]
    assert found, f"{module}: put its package on a floor in FLOORS (tests/test_engine_structure.py)"
    return found[0]


def test_no_module_imports_from_a_floor_above_its_own():
    modules = _all_modules()
    upward = sorted(f"{name} (floor {_floor(name)}) imports {dep} (floor {_floor(dep)})"
                    for name, deps in _import_graph(modules).items() if name not in KNOWN_UPWARD
                    for dep in deps if _floor(dep) > _floor(name))
    assert not upward


def test_models_import_nothing_from_loops_batching_or_pages():
    below = ("kvviz.decoding", "kvviz.serving", "kvviz.compress", "kvviz.speculative", "kvviz.measure",
             "kvviz.viz", "kvviz.cli", "kvviz.ui")
    checked = 0
    for name, path in _engine_modules().items():
        if name.startswith("kvviz.models"):
            top, _ = _imports(path)
            bad = {m for m in top if m.startswith(below)}
            assert not bad, (name, bad)
            checked += 1
    assert checked >= 10                     # the models package and the tiny GPT's modules


def test_cost_is_formulas_and_measurements_sit_above_decoding():
    """kvviz.cost holds formulas only: no torch, no kvviz package but itself and kvviz.limits; what
    this machine measures (kvviz.measure) imports the loops, and nothing below the loops imports it."""
    modules = _engine_modules()
    cost = {n: p for n, p in modules.items() if n == "kvviz.cost" or n.startswith("kvviz.cost.")}
    assert len(cost) >= 6
    for name, path in cost.items():
        assert not _third_party(path) & {"torch", "transformers", "numpy"}, name
        assert all(m.startswith(("kvviz.cost", "kvviz.limits")) for m in _imports(path)[0]), name
    lower = ("kvviz.cache", "kvviz.cost", "kvviz.models", "kvviz.decoding", "kvviz.limits")
    for name, path in modules.items():
        if name.startswith(lower):
            assert not {m for m in _imports(path)[0] if m.startswith("kvviz.measure")}, name
    assert any(m.startswith("kvviz.decoding") for m in _imports(modules["kvviz.measure.timing"])[0])


@functools.cache
def _third_party(path: Path) -> set[str]:
    """Top-level packages other than kvviz that ``path`` imports."""
    out = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[0] for a in node.names)
    return out - {"kvviz"}


def test_the_block_pool_is_bookkeeping_without_torch():
    """The paged cache's free list, reference counts and prefix names (kvviz.cache.block_pool) hold no
    tensors: neither it nor any engine module it imports needs torch."""
    modules = _engine_modules()
    todo, seen = ["kvviz.cache.block_pool"], set()
    while todo:
        name = todo.pop()
        if name in seen or name not in modules:
            continue
        seen.add(name)
        assert "torch" not in _third_party(modules[name]), name
        todo.extend(_imports(modules[name])[0])
    assert seen == {"kvviz.cache.block_pool", "kvviz.limits"}


def test_the_engine_never_imports_streamlit():
    """Only kvviz.ui draws pages; the engine (models, caches, loops, figures, CLI) runs without Streamlit."""
    modules = _engine_modules()
    assert len(modules) > 40
    for name, path in modules.items():
        assert "streamlit" not in _third_party(path), name


def _python_files() -> list[Path]:
    root = ENGINE.parent
    return [p for d in ("kvviz", "tests", "bench", "pages") for p in (root / d).rglob("*.py")] + [root / "app.py"]


def test_no_private_name_is_imported_from_another_module():
    """A leading underscore means "this module's own": no other module imports it (make it public instead)."""
    found = []
    for path in _python_files():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kvviz"):
                found += [f"{path.name}: {node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found


def test_no_module_is_longer_than_600_lines():
    """One idea per module: a newcomer reads a module whole."""
    long = {str(p.relative_to(ENGINE.parent)): n for p in ENGINE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 600}
    assert not long


def test_the_scheduler_reaches_the_paged_cache_only_through_its_manager():
    """vLLM's split: the scheduler asks a KV-cache manager; only the manager talks to the paged cache,
    through its public methods (no block pool, no private state); step records are built in one place."""
    modules = _engine_modules()
    for name in ("kvviz.serving.scheduler", "kvviz.serving.fork", "kvviz.serving.sweeps"):
        top, _ = _imports(modules[name])
        assert not [m for m in top if m.startswith("kvviz.cache")], name
    manager = ast.parse(modules["kvviz.serving.kv_manager"].read_text(encoding="utf-8"))
    touched = {n.attr for n in ast.walk(manager) if isinstance(n, ast.Attribute)
               and isinstance(n.value, ast.Attribute) and n.value.attr == "cache"}
    assert "set_active" in touched and not {a for a in touched if a.startswith("_") or a in ("pool", "layers")}
    builders = [name for name, path in modules.items() for n in ast.walk(_tree(path))
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "StepRecord"]
    assert builders == []          # StepRecord.of calls cls(...): no module calls StepRecord(...) itself


def test_benches_and_tools_import_no_test_code():
    """The browser driver, the server starter and the websocket session that tests and benches share
    live in tools/ (tools/browser.py, tools/st_session.py): a bench runs without the test suite."""
    root = ENGINE.parent
    found = []
    for path in [*(root / "bench").glob("*.py"), *(root / "tools").glob("*.py")]:
        for node in ast.walk(_tree(path)):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [f"{path.relative_to(root)}: {n}" for n in names if n == "tests" or n.startswith("tests.")]
    assert not found
