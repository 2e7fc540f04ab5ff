"""Every page cites what its mechanism comes from: declared once (PageSpec.sources, kvviz/references.py),
listed at the page's foot in its language, and the same list in docs/design.md §7."""
import json
import re

import pytest

from kvviz.references import REFERENCE, REFERENCES
from kvviz.ui.app.i18n import LANGS, LOCALES
from kvviz.ui.app.pages import PAGES, script
from tests.conftest import ROOT, no_exception, open_page

# the lecture script only links pages, the glossary only defines their words
BODIES = [p for p in PAGES if p.body and p.key not in ("lecture", "glossary")]


def test_every_page_with_a_mechanism_declares_known_sources_and_every_source_is_cited():
    for page in BODIES:
        assert page.sources, f"{page.key} declares no sources"
        assert set(page.sources) <= set(REFERENCE), set(page.sources) - set(REFERENCE)
        assert len(set(page.sources)) == len(page.sources)
    assert {k for p in PAGES for k in p.sources} == set(REFERENCE)
    assert len(REFERENCE) == len(REFERENCES)


def test_every_reference_is_complete_and_said_in_every_language():
    for ref in REFERENCES:
        assert ref.url.startswith("https://") and ref.title and ref.authors and 2015 <= ref.year <= 2026
        assert ref.venue or ref.kind
    for lang in LANGS:
        notes = json.loads((LOCALES / lang / "sources.json").read_text(encoding="utf-8"))
        frame = {"heading", "intro", "title", "kind_docs", "kind_software", "kind_report"}
        assert set(notes) == frame | set(REFERENCE), lang


def test_the_design_doc_lists_the_same_references():
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("## 7 Sources", 1)[1]
    items = re.findall(r"^- (.+)$", section, re.MULTILINE)
    assert len(items) == len(REFERENCES)
    for item, ref in zip(items, REFERENCES):
        assert item.startswith(ref.cite()) and f"[{ref.title}]({ref.url})" in item and ref.venue in item


@pytest.mark.app
@pytest.mark.parametrize("lang,heading", [("en", "Sources"), ("es", "Referencias"), ("de", "Literatur")])
def test_the_page_foot_lists_the_pages_sources_in_its_language(lang, heading):
    at = open_page(script("sampling"), {"lang": lang} if lang != "en" else None)
    no_exception(at)
    foot = [e for e in at.expander if e.label == heading]
    assert len(foot) == 1
    text = " ".join(m.value for m in foot[0].markdown)
    for key in next(p for p in PAGES if p.key == "sampling").sources:
        assert REFERENCE[key].url in text
    assert "Holtzman et al. 2020" in text
