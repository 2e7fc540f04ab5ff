"""The Lecture script page (kvviz/ui/pages/lecture.py): each section's screens as links with the line
to say, in the page's language, and the minutes that fill a 90-minute lecture."""
import html

import pytest

from kvviz.ui.app.i18n import lookup
from kvviz.ui.app.links import address
from kvviz.ui.app.pages import PAGE, script
from tests.conftest import no_exception, open_page

pytestmark = pytest.mark.app          # runs the page (AppTest)


@pytest.mark.parametrize("lang", ["en", "es", "de"])
def test_the_long_text_screen_is_listed_with_its_line(lang):
    """Gemma 3's long text, the Real LLM section's screen after the hybrid cache: its address (in the
    page's language), what to say and why, in that language."""
    at = open_page(script("lecture"), {"lang": lang})
    no_exception(at)
    page = " ".join(m.value for m in at.markdown)
    keys = [s.key for s in PAGE["llm"].lecture]
    assert keys[keys.index("llm_hybrid") + 1] == "llm_long"
    href = address(script("llm"), {"llm_model": "gemma3", "llm_text": "long", "step": 1}, lang, False)
    assert f"href='{html.escape(href)}'" in page, href
    for key in ("lecture.llm_long", "lecture.llm_long_why"):
        assert html.escape(lookup(key, lang)) in page, key
    assert lookup("lecture.minutes_total", lang).split("{m}")[0] + "90" in page
