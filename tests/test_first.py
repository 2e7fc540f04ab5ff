"""The rules "plain words" and "the step first" on the Tiny GPT, Speculative decoding, Sampling and Cost
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


@pytest.mark.parametrize("lang", LANGS)
def test_the_rule_controls_help_is_their_own_words_then_their_terms_glossary_entry(lang, monkeypatch):
    """Greedy / sample, τ, top-k, top-p and the seed (kvviz/ui/components/rule_controls.py) on every
    model page: the control's own words, then the glossary's definition of its term (no second wording)."""
    from kvviz.ui.components.rule_controls import HELP, control_help
    monkeypatch.setattr(i18n, "current_lang", lambda: lang)
    s = strings(lang)
    assert set(HELP) == {"rule", "tau", "top_k", "top_p", "seed"}
    for name, (term, own) in HELP.items():
        assert term in dict(TERMS), (name, term)
        text = control_help(name)
        assert text == nav.term_help(term, s[own]) and text.startswith(s[own] + "\n\n")
        assert f"**{s[f'glossary.h_{term}']}:**" in text and f"(Glossary#{term})" in text
