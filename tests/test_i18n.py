"""Every language has every interface string, with the same {placeholders}."""

import pytest

from kvviz.ui.app.i18n import LANGS, placeholders, strings
from kvviz.ui.app.pages import script


@pytest.mark.parametrize("lang", [lang for lang in LANGS if lang != "en"])
def test_every_key_translated_with_same_placeholders(lang):
    en, other = strings("en"), strings(lang)
    missing = sorted(set(en) - set(other))
    assert not missing, f"{lang} lacks {missing}"
    assert not sorted(set(other) - set(en)), "keys that English lacks"
    for k, text in en.items():
        assert placeholders(text) == placeholders(other[k]), k


@pytest.mark.app
def test_pages_render_in_every_language():
    from tests.conftest import no_exception, open_page
    for lang in LANGS:
        at = open_page(script("abc"), {"lang": lang})
        no_exception(at)
        assert at.title[0].value == strings(lang)["abc.title"]
