"""One word per idea: every string of every locale file follows kvviz/ui/locales/glossary.toml.

The files are read here, from disk (not through kvviz.ui.app.i18n), so a page's new JSON file or a new key
is checked the moment it exists. Each glossary entry is its own test per language, named after the
idea it fixes; a failure lists file, key and the variant found.
"""
from __future__ import annotations

import functools
import json
import re
import tomllib
from pathlib import Path

import pytest

from kvviz.ui.app.i18n import LANGS, LOCALES

GLOSSARY = tomllib.loads((LOCALES / "glossary.toml").read_text(encoding="utf-8"))
ENTRIES = [("term", e) for e in GLOSSARY["term"]] + [("style", e) for e in GLOSSARY["style"]]

# not prose: {placeholders} and {{ }} escapes, `code spans`, URLs, ?name=value address parts,
# plural syntax ({n, plural, one {…} other {…}}: its forms are prose, its frame is not)
NOT_PROSE = re.compile(r"\{\{|\}\}|\{\w*\}|\{\w+,\s*plural,|(?:=\d+|zero|one|two|few|many|other)\s*\{|#|`[^`]*`"
                       r"|https?://\S+|\?\w+=[^\s)]*")


@functools.cache
def prose(text: str) -> str:
    """The text without what is not prose (computed once per string: every entry's test reads every string)."""
    return NOT_PROSE.sub(" ", text)


def locale_strings(lang: str, root: Path = LOCALES) -> dict[str, str]:
    """Every string of every ``<root>/<lang>/*.json`` as ``"file.json:key" -> text``."""
    out = {}
    for f in sorted((root / lang).glob("*.json")):
        for key, text in json.loads(f.read_text(encoding="utf-8")).items():
            out[f"{lang}/{f.name}:{key}"] = text
    return out


def violations(patterns: list[str], strings: dict[str, str]) -> list[str]:
    """``file:key: 'found' (pattern)`` for every match of a rejected pattern."""
    found = []
    compiled = [re.compile(p) for p in patterns]
    for where, text in strings.items():
        for pattern in compiled:
            for m in pattern.finditer(prose(text)):
                found.append(f"{where}: {m.group(0)!r} ({pattern.pattern})")
    return found


def _entry_id(kind: str, entry: dict, lang: str) -> str:
    return f"{kind}:{entry['idea'].split(' (')[0]}:{lang}"


@functools.cache
def _strings(lang: str) -> dict[str, str]:
    """The repository's strings of ``lang``, read once for the tests of every entry (read-only)."""
    return locale_strings(lang)


REJECTS = [(kind, e, lang) for kind, e in ENTRIES for lang in e.get("reject", {})]
USES = [(e, lang) for _, e in ENTRIES for lang in e.get("use", {})]


def test_glossary_is_complete_and_every_pattern_compiles():
    for kind, e in ENTRIES:
        assert e.get("idea") and e.get("note"), e
        if kind == "term":
            assert all(e.get(lang) for lang in LANGS), f"{e['idea']}: a word for every language"
        for lang, patterns in e.get("reject", {}).items():
            assert lang in LANGS and isinstance(patterns, list), e["idea"]
            for p in patterns:
                re.compile(p)
        for lang, p in e.get("use", {}).items():
            assert lang in LANGS, e["idea"]
            re.compile(p)


@pytest.mark.parametrize("kind,entry,lang", REJECTS, ids=[_entry_id(*r) for r in REJECTS])
def test_no_rejected_variant(kind, entry, lang):
    found = violations(entry["reject"][lang], _strings(lang))
    assert not found, f"{entry['idea']}: use {entry.get(lang, '')!r} ({entry['note']})\n" + "\n".join(found)


@pytest.mark.parametrize("entry,lang", USES, ids=[_entry_id("use", e, lang) for e, lang in USES])
def test_the_chosen_word_is_the_one_in_use(entry, lang):
    """The glossary describes the strings as they are: its word occurs in that language."""
    pattern = entry["use"][lang]
    assert any(re.search(pattern, prose(s)) for s in _strings(lang).values()), (entry["idea"], pattern)


def test_german_quotes_open_low_and_close_high():
    bad = [k for k, s in locale_strings("de").items() if s.count("„") != s.count("“")]
    assert not bad, bad


def test_spanish_quotes_pair():
    bad = [k for k, s in locale_strings("es").items() if s.count("«") != s.count("»")]
    assert not bad, bad


def _rejects(idea_start: str, lang: str) -> list[str]:
    return next(e["reject"][lang] for _, e in ENTRIES if e["idea"].startswith(idea_start))


def _flags(idea_start: str, lang: str, text: str) -> bool:
    return bool(violations(_rejects(idea_start, lang), {"x": text}))


def test_rules_are_precise_about_boundaries_case_and_compounds():
    """The rules catch the variants and leave their near neighbours alone."""
    # word boundaries, accents and code: «cache» is caught, «caché» and `generate_cached` are not
    assert _flags("KV cache", "es", "Depende de lo que quede en el KV cache")
    assert _flags("KV cache", "es", "demasiado grande para un cache")
    assert not _flags("KV cache", "es", "Lo que quede en la caché KV; ver `generate_cached` y las cachés")
    # gender, compounds excluded: «die Cache-Tabelle» is the table's gender, «das Prefill-Ergebnis» too
    assert _flags("KV cache", "de", "Jetzt ist die Cache leer") and not _flags("KV cache", "de", "die Cache-Tabelle")
    # the lesson's own Spanish words for prefill may be quoted (the home page tells its readers), never used
    assert _flags("prefill", "es", "durante el prellenado") and _flags("prefill", "es", "la precarga del prompt")
    assert not _flags("prefill", "es", "lo que la fuente llama «prellenado», «precarga» o «llenado previo»")
    assert _flags("prefill", "de", "Das Prefill hat den Prompt") and _flags("prefill", "de", "das parallele Prefill")
    assert not _flags("prefill", "de", "das Prefill-Ergebnis; der Prefill; dem Prefill")
    # case: German writes nouns capitalised, so a lowercase «decode» is English left over
    assert _flags("decode", "de", "the decode step") and not _flags("decode", "de", "der Decode-Durchlauf")
    assert _flags("disaggregated serving", "es", "el Disaggregated serving")
    assert not _flags("disaggregated serving", "es", "el Disaggregated Serving")
    # whole words only: «Kopf» is the head, «Kopfzeile» is not; «lote» but not «lotería»
    assert _flags("attention head", "de", "Attention-Kopf") and not _flags("attention head", "de", "die Kopfzeile")
    assert _flags("batch", "es", "en un mismo lote") and not _flags("batch", "es", "la lotería")
    # placeholders are not prose: {head} and {layer} in a Spanish string are fine
    assert not _flags("attention head", "es", "capa {layer}, cabeza {head}")
    # formal address: «Sie» anywhere, even opening a sentence about «they»
    assert _flags("form of address: German", "de", "Wählen Sie eine Vorlage")
    assert _flags("form of address: German", "de", "Sie sind gewählt, aber nicht verarbeitet")
    assert not _flags("form of address: German", "de", "Wähle eine Vorlage; sie bleibt")
    assert _flags("form of address: Spanish", "es", "Pulse el botón") and not _flags(
        "form of address: Spanish", "es", "Pulsa el botón")


def test_the_slips_a_native_reader_found_in_the_real_llm_views_fail_it():
    """The kinds of slip a native lecturer found (a term's other spelling, the neuter Prefill, «zur Zeit» for one
    at a time, a game's «Zug» for a chat turn, «paso normal» for a pass, «the seed» for the lesson) are caught,
    and their correct neighbours are not."""
    # one spelling per term
    assert _flags("chat template", "de", "die Chat-Vorlage (System-Prompt)") and not _flags(
        "chat template", "de", "die Chatvorlage")
    assert _flags("system prompt", "de", "der System-Prompt") and not _flags("system prompt", "de", "der Systemprompt")
    assert _flags("role marker", "es", "las marcas de rol") and not _flags("role marker", "es", "los marcadores de rol")
    assert _flags("role marker", "de", "Rollenmarken") and not _flags("role marker", "de", "die Rollenmarker")
    # der Prefill, also contracted or without an article; its compounds and genitive are fine
    assert _flags("prefill", "de", "geht einmal durchs Prefill") and _flags("prefill", "de", "gespartes Prefill")
    assert not _flags("prefill", "de", "durch den Prefill; des Prefills; gesparter Prefill; ein Prefill-Durchlauf")
    # a turn is not a move in a game; a Zugriff is not a Zug
    assert _flags("turn", "de", "der Zug des Assistenten") and not _flags("turn", "de", "ein Schreibzugriff; Zugriff")
    # plain decoding: one translation; a plain pass is a pass
    assert _flags("plain decoding", "de", "gewöhnlichem Decode mit Greedy")
    assert not _flags("plain decoding", "de", "gewöhnliches Decoding; ein gewöhnlicher Decode-Durchlauf")
    assert _flags("pass", "es", "un paso normal") and _flags("pass", "de", "ein gewöhnlicher Schritt")
    assert not _flags("pass", "es", "el recorrido paso a paso normal")
    # one at a time is not «currently» nor «simultaneously»
    assert _flags("German: one at a time", "de", "Eine Messung zur Zeit pro Server")
    assert _flags("German: one at a time", "de", "Ein Lauf gleichzeitig pro Server")
    assert not _flags("German: one at a time", "de", "Pro Server läuft jeweils nur ein Lauf; zurzeit keiner")
    # «the field» is not the countryside
    assert _flags("the field", "es", "donde se ven las razones del campo")
    assert not _flags("the field", "es", "el texto del campo de entrada")
    # the lesson is not «the seed»; a random seed is
    # (written in two pieces: tests/test_docs_links.py holds the repository's own text to the same rule)
    assert _flags("seed, as one of the source texts", "en", "The seed" + "'s quiz")
    assert _flags("seed, as one of the source texts", "en", "The seed" + "s in teaching order")
    assert not _flags("seed, as one of the source texts", "en", "the same seed gives the same draws; seeds 1 and 2")


def test_a_new_page_file_is_checked_without_registering_it(tmp_path):
    """A locale file another page adds later is read by the same loop as the existing ones."""
    (tmp_path / "de").mkdir()
    (tmp_path / "de" / "newpage.json").write_text(json.dumps({"intro": "Der Kopf liest den Nur-Anhängen-Cache."}),
                                                  encoding="utf-8")
    found = []
    for _, e in ENTRIES:
        found += violations(e.get("reject", {}).get("de", []), locale_strings("de", tmp_path))
    assert any("newpage.json:intro" in f and "Kopf" in f for f in found)
    assert any("Nur-Anhängen" in f for f in found)
