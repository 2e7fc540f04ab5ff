"""The step first and plain words: the home page's path through every page, the introductions'
open lead (kvviz.ui.app.presenter.lead), the Glossary page's terms in three languages. Pure, no page."""
import pytest

from kvviz.ui.app.i18n import LANGS, strings
from kvviz.ui.app.pages import PAGES, PATH
from kvviz.ui.app.presenter import LEAD_CHARS, lead
from kvviz.ui.pages.glossary import TERMS, words


def test_the_home_path_lists_every_page_once_with_one_line_each():
    keys = [k for _, part in PATH for k in part]
    assert sorted(keys) == sorted(p.key for p in PAGES[1:])             # every page but home, once
    assert [part for part, _ in PATH][:2] == ["core", "further"]         # the lesson's core pages first
    for lang in LANGS:
        s = strings(lang)
        for key in keys:
            line = s[f"look.line_{key}"]
            assert "\n" not in line and len(line) <= 120, (lang, key)     # one line of what it shows


@pytest.mark.parametrize("key", ["abc.intro", "weather.intro", "gpt.intro", "paged.intro", "speculative.intro",
                                 "llm.intro", "compress.intro"])
@pytest.mark.parametrize("lang", LANGS)
def test_an_introduction_opens_with_a_short_lead_and_folds_the_rest(key, lang):
    text = strings(lang)[key]
    head, rest = lead(text)
    assert head and text.startswith(head)
    assert " ".join((head + " " + rest).split()) == " ".join(text.split())      # nothing lost, nothing added
    first = text.split("\n\n")[0]
    assert head == first or len(head) <= LEAD_CHARS + 300                       # a paragraph, or its first sentences
    assert head.count("**") % 2 == 0


def test_a_long_paragraph_is_cut_after_a_sentence_not_inside_a_number():
    text = "First sentence, τ = 1.5 here. " + "Second one is long. " * 30 + "\n\nNext paragraph."
    head, rest = lead(text, limit=40)
    assert head == "First sentence, τ = 1.5 here." and rest.endswith("Next paragraph.")
    assert lead("Short.\n\nMore.") == ("Short.", "More.")


def test_every_glossary_term_is_defined_in_every_language_with_the_glossarys_words():
    for lang in LANGS:
        s = strings(lang)
        for term, _ in TERMS:
            assert s[f"glossary.h_{term}"] and len(s[f"glossary.d_{term}"]) > 60, (lang, term)
    named = words()
    assert named["kv_cache"] == {"en": "KV cache", "es": "la caché KV", "de": "der KV-Cache"}
    assert {t for t, idea in TERMS if idea} == set(named)
    wanted = {"prefill", "decode", "kv_cache", "recompute_check", "kl", "ttft", "residual", "tokenizer", "greedy",
              "temperature", "top_k_p", "paged_blocks", "accept_rule", "sliding_window", "gqa", "positions"}
    assert wanted <= {t for t, _ in TERMS}

