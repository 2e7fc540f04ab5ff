"""Issue 42's "plain words" and "the step first" on the Tiny GPT, Speculative decoding, Sampling and Cost
pages: a hover definition is the glossary's own entry (kvviz.ui.app.nav.term_help), shortened to its
lead; no second wording. Pure, no page."""
import pytest

from kvviz.ui.app import i18n, nav
from kvviz.ui.app.i18n import LANGS, strings
from kvviz.ui.app.presenter import lead
from kvviz.ui.pages.glossary import TERMS


@pytest.mark.parametrize("lang", LANGS)
def test_a_hover_definition_is_the_glossary_entrys_lead_and_links_to_it(lang, monkeypatch):
    monkeypatch.setattr(i18n, "current_lang", lambda: lang)
    s = strings(lang)
    for term, _ in TERMS:
        text = nav.term_help(term, "own help")
        own, line, link = text.split("\n\n")
        assert own == "own help"                                     # the widget's own help first
        head, rest = lead(s[f"glossary.d_{term}"], nav.TERM_CHARS)
        assert line == f"**{s[f'glossary.h_{term}']}:** {head}" + (" …" if rest else "")
        assert s[f"glossary.d_{term}"].startswith(head)
        assert link == f"[{s['first.glossary_entry']}](Glossary#{term})"
    assert nav.term_help("kl").startswith(f"**{s['glossary.h_kl']}:**")      # no own help: the definition alone
