"""Hostile input, tried systematically: empty, blank, huge, unicode, script-like, NaN, ±inf, negative
and wrong-typed values.

- Every value goes through every parser that reads the address (kvviz/ui/app/urlstate.py, the step,
  language and presenter readers, the weather values) and every engine parser behind a text box,
  directly, without running a page: each must give a usable value, and a notice when it refused
  one (or the error the page turns into a message), never an exception.
- Then each page runs once with every parameter it reads set to a hostile value at once, and once
  per text or number field with that field's nastiest value: it must draw, say what it refused,
  and show no exception. The number of cases tried is printed."""
import math
from types import SimpleNamespace

import pytest
import streamlit as st

from kvviz.decoding.logit_sources import TypedLogitsError, parse_logits
from kvviz.decoding.stepper import run_generation
from kvviz.limits import LimitError
from kvviz.models.registry import get_model
from kvviz.models.weather import MAX_ABS_TOKEN_VALUE, values_from_text
from kvviz.ui.app import i18n, presenter, urlstate
from kvviz.ui.app.i18n import strings
from kvviz.ui.app.pages import PAGES, script
from kvviz.ui.components import step_view
from kvviz.ui.pages.cost import TAB_KEYS
from kvviz.ui.pages.sampling import SOURCES
from tests.conftest import no_exception, open_page

HOSTILE_TEXT = ["", "   ", "x" * 5000, "A" * 3000, "Ä ö 🤖 ∑ \u202e", "<script>alert(1)</script>",
                "__import__('os').system('true')", "nan", "-inf", "1e308", "-1", "0", "A\x00B", "{lang}"]
# URL values: the text cases plus wrong types for numeric keys, and a few valid ones to contrast
HOSTILE_URL = HOSTILE_TEXT + ["3.7", "[1,2]", "true", "%00", "999999999999999999999", " 7 ", "1e1", "inf",
                              "NaN", "0x10", "1_000", "4", "sample", "128", "1,8", "es"]
# one string with every trap at once: format fields, markup, code, RTL, NUL, too long
MONSTER = "{lang} <script>alert(1)</script> __import__('os') Ä ö 🤖 ∑ \u202e A\x00B nan -inf " + "x" * 5000
CASES = {"count": 0}


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print(f"\nhostile-input cases tried: {CASES['count']}")


class _State(dict):
    """st.session_state as the readers use it (item and attribute access)."""
    __getattr__ = dict.get

    def __setattr__(self, k, v):
        self[k] = v


@pytest.fixture
def url(monkeypatch):
    """The address readers on a fake session: ``url.params`` is the address, ``url.state`` the
    session state they fill, ``url.notices`` what they told the user."""
    u = SimpleNamespace(state=_State(), params={}, notices=[])
    monkeypatch.setattr(st, "session_state", u.state)
    monkeypatch.setattr(st, "query_params", u.params)
    monkeypatch.setattr(urlstate, "notice", u.notices.append)

    def fresh(**params):                           # a new visitor with this address
        u.state.clear(), u.notices.clear(), u.params.clear(), u.params.update(params)
        CASES["count"] += 1
    u.fresh = fresh
    return u


# ---------------------------------------------------------------- the address, parser by parser

@pytest.mark.parametrize("default,low,high,whole", [(6, 1, 32, True), (None, 1, 50, True), (0, 0, 2**32 - 1, True),
                                                    (100.0, 0.001, 1e6, False)])
def test_number_settings_keep_a_valid_value_and_say_when_they_refuse(url, default, low, high, whole):
    read = urlstate.int_param if whole else urlstate.float_param
    for raw in HOSTILE_URL:
        url.fresh(n=raw)
        read("n", default, low, high)
        value = url.state["n"]
        if url.notices:                            # refused: the default, and the notice names the key and value
            assert value == default and len(url.notices) == 1 and "n" in url.notices[0], raw
            assert raw.strip()[:10] in url.notices[0] or not raw.strip(), (raw, url.notices)
        else:                                      # taken: exactly the number asked for
            assert value == default if not raw else float(raw) == value, raw
        if value is not None:
            assert low <= value <= high and math.isfinite(value), (raw, value)
            assert isinstance(value, int) if whole else isinstance(value, float), (raw, value)
    url.fresh(n="7")
    urlstate.int_param("n", 6, 1, 32)
    assert url.state["n"] == 7 and not url.notices


def test_choices_lists_and_text_keep_a_valid_value(url):
    for raw in HOSTILE_URL:
        url.fresh(rule=raw)
        urlstate.choice_param("rule", ["greedy", "sample"], "greedy")
        assert url.state["rule"] == (raw if raw in ("greedy", "sample") else "greedy"), raw
        assert len(url.notices) == (raw not in ("greedy", "sample")), raw

        url.fresh(ctx=raw)                          # a choice of numbers (?ms_context=512)
        urlstate.choice_param("ctx", [128, 512], 512, parse=int)
        assert url.state["ctx"] == (128 if raw == "128" else 512) and len(url.notices) == (raw != "128"), raw

        url.fresh(lens=raw)                         # a list (?ms_batches=1,8)
        urlstate.ints_param("lens", [1, 2, 8], [1, 8])
        assert url.state["lens"] == [1, 8] and len(url.notices) == (raw not in ("", "1,8")), raw

        url.fresh(prompt=raw)                       # text is only cut to size: the page validates it
        urlstate.text_param("prompt", "A B", 200)
        assert url.state["prompt"] == raw[:200] and not url.notices, raw
    url.fresh()
    urlstate.choice_param("rule", ["greedy", "sample"], "greedy")
    urlstate.ints_param("lens", [1, 2, 8], [1, 8])
    assert (url.state["rule"], url.state["lens"]) == ("greedy", [1, 8]) and not url.notices    # no address


def test_step_language_and_presenter_mode_from_any_address(url):
    for raw in HOSTILE_URL:
        url.fresh(step=raw, lang=raw, present=raw)
        step_view.url_step_notice(8)
        ok_step = raw.strip().lstrip("-").isdigit() and 0 <= int(raw) < 8
        assert len(url.notices) == (0 if ok_step else 1), (raw, url.notices)
        assert i18n.current_lang() == (raw if raw in i18n.LANGS else "en")
        presenter.init_from_url()
        assert url.state[presenter.KEY] is (raw in ("1", "true", "on")), raw


def test_weather_values_from_the_address_are_a_table_or_a_message():
    for raw in HOSTILE_URL + [f"so:{v}" for v in HOSTILE_URL] + ["nice:9,so:4", "so:4:5", "so:1e3", ":", ",,,"]:
        CASES["count"] += 1
        try:
            table = values_from_text(raw[:500])
        except LimitError:
            continue
        assert all(math.isfinite(v) and abs(v) <= MAX_ABS_TOKEN_VALUE for v in table.values()), raw


# ---------------------------------------------------------------- what is typed, parser by parser

@pytest.mark.parametrize("name", ["abc", "weather", "gpt"])
def test_typed_prompts_run_or_give_the_error_the_page_shows(name):
    model = get_model(name)
    for text in HOSTILE_TEXT + [MONSTER]:
        CASES["count"] += 1
        try:
            tokens = model.tokenize(text)        # what every page calls
            run = run_generation(model, tokens, 2)
        except (LimitError, ValueError):
            continue
        assert run.events[0].phase == "prefill" and run.prompt == tokens, text


def test_typed_logits_and_probabilities_parse_or_say_why():
    for text in HOSTILE_TEXT + [MONSTER, "A nan", "A inf, B 1", "A 1, A 2", "A -inf", "A 1e400", "A 0, B 0"]:
        for kind in ("logits", "probs"):
            CASES["count"] += 1
            try:
                src = parse_logits(text, kind)
            except TypedLogitsError as e:
                assert str(e), text
                continue
            assert src.tokens and len(src.tokens) == len(set(src.tokens)), text
            assert not any(math.isnan(x) or x == math.inf for x in src.logits.tolist()), text


def test_smaller_cache_settings_from_any_address_build_a_variant_or_say_why():
    """What the Smaller caches page hands the engine (kvviz.compress.Variant), from raw address text."""
    from kvviz.compress import Variant
    for raw in HOSTILE_URL + [MONSTER[:60]]:
        for kind, settings in (("window", {"window": raw, "sinks": raw}), ("quant", {"bits": raw, "group_size": raw,
                               "key_axis": raw, "residual": raw}), ("gqa", {"kv_heads": raw}), (raw, {})):
            CASES["count"] += 1
            try:
                v = Variant.of(kind, **settings)
            except LimitError as e:
                assert str(e), (kind, raw)
                continue
            assert all(x is None or isinstance(x, (int, str)) for x in v.settings().values()), (kind, raw)


# ---------------------------------------------------------------- whole pages

def _views():
    """Every page as a visitor can open it: the Cost page once per tab (tabs not shown do not run),
    the model pages also with sampling on (greedy disables the top-k and seed fields), the Sampling
    page with each source of logits (each has its own fields)."""
    cost_tabs = [strings("en")["cost." + k] for k in TAB_KEYS]
    for page in (p.script for p in PAGES[1:]):
        if "Cost" in page:
            yield from ((page, {"tab": tab}) for tab in cost_tabs)
        elif "Sampling" in page:
            yield from ((page, {"sampling_source": src}) for src in SOURCES)
        else:
            yield page, {}
            if "Smaller" in page:                      # the real LLM's part has fields of its own
                yield page, {"sc_model": "smollm2"}
            prefix = {"ABC": "abc", "Weather": "weather", "GPT": "gpt", "Speculative": "sd"}
            yield from ((page, {f"{v}_rule": "sample"}) for k, v in prefix.items() if k in page)


VIEWS = list(_views())
VIEW_IDS = [p.split("_", 1)[1].removesuffix(".py") + "".join(f"-{v}" for v in q.values()) for p, q in VIEWS]
# read only ?lang= and ?present=, which fall back silently (English, presenter mode off)
NO_SETTINGS_OF_ITS_OWN = {script("lecture"), script("glossary")}


def _fields(at):
    return [w for kind in ("text_input", "number_input", "slider", "selectbox", "text_area", "toggle",
                           "radio", "checkbox", "segmented_control", "select_slider")
            for w in at.get(kind)]


def _notices(at) -> list[str]:
    return [w.value for w in at.warning if "address" in w.value or "link" in w.value.lower()]


@pytest.mark.app
@pytest.mark.parametrize("page,view", [v for v in VIEWS if "sample" not in v[1].values()],
                         ids=[i for i, v in zip(VIEW_IDS, VIEWS) if "sample" not in v[1].values()])
def test_page_with_every_parameter_hostile_at_once(page, view, request):
    if "Real_LLM" in page:                         # the page's handling of its input, on tiny weights
        request.getfixturevalue("tiny_real_smollm2")
    keys = sorted({w.key for w in _fields(open_page(page, view)) if w.key and not w.key.startswith("$$")})
    keys += ["step", "lang", "present", "values", "tab", "unknown"]
    # each parameter its own hostile value, cycling through all of them
    query = {k: HOSTILE_URL[i % len(HOSTILE_URL)] for i, k in enumerate(k for k in keys if k not in view)}
    at = open_page(page, {**query, **view})
    CASES["count"] += 1
    no_exception(at)
    assert at.title, page                          # the page still draws
    assert _notices(at) or page in NO_SETTINGS_OF_ITS_OWN, (page, "no notice for a hostile address")


BOXES = ("text_input", "text_area", "number_input")


def _box(at, kind: str, i: int):
    boxes = list(at.get(kind))
    return boxes[i] if i < len(boxes) and not boxes[i].disabled else None


def _nastiest(box):
    """Text: every trap at once. A browser cannot send NaN or a fraction through an integer field
    (Streamlit's own widget state fails before our code runs), so integer fields get a huge
    negative number and decimal fields NaN."""
    if box.type != "number_input":
        return MONSTER
    return -10**12 if box.proto.data_type == 0 else math.nan                 # NumberInput.DataType.INT


@pytest.mark.app
@pytest.mark.parametrize("page,view", VIEWS, ids=VIEW_IDS)
def test_every_typed_field_with_its_nastiest_value(page, view, request):
    """One rerun per field on one session: the field gets its nastiest value while the field before
    gets its own value back, so that one refusal cannot hide the next field. The Real LLM page runs
    SmolLM2's class on tiny weights (what it does with a field, not the real numbers)."""
    if "Real_LLM" in page:
        request.getfixturevalue("tiny_real_smollm2")
    at = open_page(page, view)
    fields = [(kind, i) for kind in BOXES for i, w in enumerate(at.get(kind)) if not w.disabled]
    back = None                                    # (kind, index, value) of the field to restore
    for kind, i in fields:
        if back:
            before = _box(at, back[0], back[1])
            if before is not None:
                before.set_value(back[2])
            if _box(at, kind, i) is None:           # the last refusal hid this field: restore first
                at.run()
        box = _box(at, kind, i)
        assert box is not None, (page, kind, i, "a field disappeared after its neighbour was restored")
        back = (kind, i, box.value)
        box.set_value(_nastiest(box))
        at.run()
        CASES["count"] += 1
        no_exception(at)
        assert at.title, (page, box.label)
