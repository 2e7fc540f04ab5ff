"""Deep links: every link of the lecture script opens its page in the state it names, and each
page's settings are restored from the address (the other half, the address following the widgets,
needs a browser: tests/browser/test_deep_links_browser.py)."""
from urllib.parse import parse_qsl, urlsplit

import pytest

from kvviz.ui.lecture_page import SCRIPT
from tests.conftest import no_exception, open_page

LINKS = [(page, params, key) for _, steps in SCRIPT for page, params, key in steps]


def _notices(at) -> list[str]:
    return [w.value for w in at.warning if "address" in w.value or "link" in w.value.lower()]


@pytest.mark.parametrize("page,params,key", LINKS, ids=[k for _, _, k in LINKS])
def test_lecture_link_opens_the_named_state(page, params, key):
    at = open_page(page, {k: str(v) for k, v in params.items()})
    no_exception(at)
    assert not _notices(at), _notices(at)          # nothing in the link was refused
    if "step" in params:
        heading = next(s.value for s in at.subheader if s.value.startswith("Event "))
        assert heading.startswith(f"Event {params['step']} of"), heading
    for k, v in params.items():                      # every named widget shows the linked value
        if k in ("step", "tab", "lang", "present"):
            continue
        values = [w.value for kind in ("slider", "number_input", "segmented_control", "toggle", "text_input")
                  for w in at.get(kind) if getattr(w, "key", None) == k]
        assert values, (k, "no widget")
        expected = v if isinstance(v, str) else float(v)
        got = str(values[0]).lower() if isinstance(v, str) else float(values[0])
        assert got == expected, (k, values[0], v)


def test_abc_state_restored_from_the_address():
    at = open_page("pages/1_ABC_miniature.py",
                   {"prompt": "C A B", "new": "4", "abc_rule": "sample", "abc_tau": "0.7", "abc_seed": "9",
                    "step": "3", "lang": "es"})
    no_exception(at)
    assert at.text_input(key="prompt").value == "C A B"
    assert at.number_input(key="new").value == 4
    assert at.slider(key="abc_tau").value == 0.7 and at.number_input(key="abc_seed").value == 9
    assert at.subheader[0].value.startswith("Evento 3 de 7")


def test_weather_state_restored_from_the_address():
    at = open_page("pages/2_Weather_heads.py", {"prompt": "Today weather is", "new": "2", "repair": "true",
                                                 "values": "is:3", "step": "2"})
    no_exception(at)
    assert at.text_input(key="prompt").value == "Today weather is"
    assert at.toggle(key="repair").value is True
    assert at.subheader[0].value.startswith("Event 2 of 3")


def test_home_links_carry_language_and_presenter_mode():
    at = open_page(None, {"lang": "de", "present": "1"})
    no_exception(at)
    html = " ".join(m.value for m in at.markdown)
    hrefs = [h for h in html.split("href='")[1:]]
    assert len(hrefs) >= 5
    for h in hrefs:
        query = dict(parse_qsl(urlsplit(h.split("'")[0].replace("&amp;", "&")).query))
        assert query.get("lang") == "de" and query.get("present") == "1", h


def test_gpt_layer_and_head_restored_from_the_address():
    at = open_page("pages/4_Tiny_GPT.py", {"step": "2", "gpt_layer": "4", "gpt_head": "2"})
    no_exception(at)
    assert at.selectbox(key="gpt_layer").value == 4 and at.selectbox(key="gpt_head").value == 2
    titles = _chart_titles(at)
    assert any("4" in x and "2" in x for x in titles), titles
    bad = open_page("pages/4_Tiny_GPT.py", {"gpt_layer": "99"})
    no_exception(bad)
    assert bad.selectbox(key="gpt_layer").value == 1 and any("gpt_layer" in w.value for w in bad.warning)


def _chart_titles(at) -> list[str]:
    from tests.conftest import plotly_specs
    return [str(s["layout"].get("title", {}).get("text", "")) for s in plotly_specs(at)]
