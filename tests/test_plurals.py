"""Counts agree with their nouns in every language: no "1 rows", "1 posiciones", "(1 steps)".

Every string with a plural (``{n, plural, one {…} other {…}}``, kvviz/ui/app/i18n.py) is rendered at 0, 1
and 2 in every language and read the way a student reads it: after "1" no plural noun, after "0" and
"2" no singular one. Every other string is rendered with every placeholder set to 1, which catches a
count that was never made a plural. Lists of ids are joined with "and" / "y" / "und".
"""
from __future__ import annotations

import re

import pytest

from kvviz.ui.app.i18n import LANGS, PLURAL_START, join, parse, placeholders, plural_names, render, strings

# count nouns of the pages, plural and singular, per language (German Parameter, Zeichen: the same)
PLURAL = {
    "en": "rows positions tokens steps layers heads sinks codes events variants runs prompts bytes parameters "
          "sequences columns slots proposals passes characters draws screens blocks requests components dims "
          "dimensions numbers rounds entries keys queries words pairs cells threads",
    "es": "filas posiciones tokens pasos capas cabezas sumideros códigos eventos variantes ejecuciones prompts bytes "
          "parámetros secuencias columnas huecos propuestas pasadas caracteres sorteos pantallas bloques peticiones "
          "componentes dimensiones números rondas entradas claves consultas palabras pares celdas hilos",
    "de": "Zeilen Positionen Tokens Schritte Schritten Schichten Heads Sinks Codes Ereignisse Ereignissen Varianten "
          "Läufe Läufen Durchläufe Durchläufen Prompts Bytes Sequenzen Spalten Vorschläge Vorschlägen Ziehungen "
          "Bildschirme Blöcke Blöcken Anfragen Komponenten Dimensionen Zahlen Runden Keys Queries Wörter Zellen "
          "Threads",
}
SINGULAR = {
    "en": "row position token step layer head sink code event variant run prompt byte parameter sequence column "
          "slot proposal pass character draw screen block request component dim dimension number round key query "
          "word cell thread",
    "es": "fila posición token paso capa cabeza sumidero código evento variante ejecución prompt byte parámetro "
          "secuencia columna hueco propuesta pasada carácter sorteo pantalla bloque petición componente dimensión "
          "número ronda clave consulta palabra celda hilo",
    "de": "Zeile Position Token Schritt Schicht Head Sink Code Ereignis Variante Lauf Durchlauf Prompt Byte Sequenz "
          "Spalte Vorschlag Ziehung Bildschirm Block Anfrage Komponente Dimension Zahl Runde Key Query Wort Zelle "
          "Thread",
}
# words that may stand between a count and its noun ("1 real K/V rows", "1 neue Tokens"), not these
GLUE = {"en": "to of per this that and or the a an in on at is are from for with than no not",
        "es": "y o a de del en por que la el los las con para un una no sin hay",
        "de": "und oder von bis pro die der das den dem mit in auf für als ein eine nicht kein keine "
              "dieser dieses diesem diesen"}
LISTED = {"en": "and", "es": "y", "de": "und"}


def _noun_after(n: int, lang: str, nouns: str) -> re.Pattern:
    glue = "|".join(GLUE[lang].split())
    between = rf"(?:(?!(?:{glue}) )[a-zäöüéíóúñ/][\w/−-]* ){{0,2}}?"
    nouns = "|".join(nouns.split())
    compound = "|".join(PLURAL[lang].split())       # "2 query heads", "2 Prompt-Tokens": the head noun counts
    # not a sign or a formula ("+1 keys", "γ + 1 rows"), not part of a longer number
    return re.compile(rf"(?<![\w.,+−-])(?<![+−×·=] ){n} {between}(?:[\w/]+-)?({nouns})(?![-\w])(?! (?:{compound})\b)")


def _read_wrong(text: str, lang: str, n: int) -> list[str]:
    """What a reader stumbles on after the number ``n``: a plural noun after 1, a singular after 0 or 2."""
    text = re.sub(r"`[^`]*`", " ", text)                # code is not prose
    return [m.group(0) for m in _noun_after(n, lang, PLURAL[lang] if n == 1 else SINGULAR[lang]).finditer(text)]


PLURAL_KEYS = sorted(k for k, v in strings("en").items() if plural_names(v))


def test_many_strings_count_with_plurals_in_every_language():
    assert len(PLURAL_KEYS) >= 120, len(PLURAL_KEYS)      # every count-bearing string of the pages
    for lang in LANGS:
        s = strings(lang)
        missing = [k for k in PLURAL_KEYS if not plural_names(s[k])]
        assert not missing, f"{lang}: no plural where English counts: {missing[:10]}"


@pytest.mark.parametrize("lang", list(LANGS))
def test_counted_nouns_agree_at_0_1_2(lang):
    wrong = []
    for key in PLURAL_KEYS:
        text = strings(lang)[key]
        counts = plural_names(text)
        for n in (0, 1, 2):
            # every count is n; any other placeholder a word, so only the counts stand before nouns
            shown = render(text, lang, **{k: (n if k in counts else "X") for k in placeholders(text)})
            assert "plural," not in shown and "{" not in shown, (key, shown)
            # 0 takes the plural in all three languages ("0 rows", "0 filas", "0 Zeilen")
            wrong += [f"{key} at {n}: {bad!r}" for bad in _read_wrong(shown, lang, n)]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("lang", list(LANGS))
def test_no_count_left_outside_a_plural(lang):
    """Every string, every placeholder set to 1: no "1 rows" anywhere, no "row(s)" shortcut."""
    wrong = []
    for key, text in strings(lang).items():
        if "%{" in text:                        # a plotly hover template, filled by plotly
            continue
        names = placeholders(text)
        shown = render(text, lang, **{k: 1 for k in names}) if names else text
        wrong += [f"{key}: {b!r}" for b in _read_wrong(shown, lang, 1)]
        wrong += [f"{key}: {m.group(0)!r}" for m in re.finditer(r"\w\((?:s|es|en|n|e)\)", re.sub(r"`[^`]*`", "", text))]
    assert not wrong, "\n".join(wrong)


# a count of one read after an article or "all": "the 1 prompt token", «el 1 token», „das 1 Prompt-Token",
# "accepted all 1 draft token" (a one-token prompt); the one form says "the only token" instead
THE_ONE = {"en": r"\b(?:[Tt]he|[Aa]ll|[Ii]ts|[Tt]heir|[Tt]his|[Tt]hese|[Tt]hose) 1 (?=\w)",
           "es": r"\b(?:[Ee]l|[Ll]a|[Ll]os|[Ll]as|[Ss]us?|[Tt]od[oa]s(?: l[oa]s)?|[Ee]st[eao]s?) 1 (?=\w)",
           # German: before a noun only ("eine Blockgröße, die 1 nicht teilt" is a relative clause)
           "de": r"\b(?:[Dd](?:as|ie|er|en|em|es)|[Aa]lle[nms]?|[Ii]hre?[nmrs]?|[Ss]eine?[nmrs]?|[Dd]iese[nmrs]?)"
                 r" 1 (?=[A-ZÄÖÜ])"}


@pytest.mark.parametrize("lang", list(LANGS))
def test_a_count_of_one_is_not_read_as_the_1(lang):
    wrong = []
    for key in PLURAL_KEYS:
        text = strings(lang)[key]
        counts = plural_names(text)
        shown = render(text, lang, **{k: (1 if k in counts else "X") for k in placeholders(text)})
        wrong += [f"{key}: {m.group(0)!r} in {shown[max(0, m.start() - 30):m.end() + 30]!r}"
                  for m in re.finditer(THE_ONE[lang], shown)]
    assert not wrong, "\n".join(wrong)


def test_the_same_counts_in_every_language():
    en = strings("en")
    for lang in LANGS:
        other = strings(lang)
        for key in PLURAL_KEYS:
            assert plural_names(other[key]) == plural_names(en[key]), (lang, key)


def test_lists_are_joined_the_languages_way():
    assert [join([0, 1], lang) for lang in LANGS] == ["0 and 1", "0 y 1", "0 und 1"]
    for lang, word in LISTED.items():
        one = render(strings(lang)["paged.did_decode"], lang, ids=[3])
        two = render(strings(lang)["paged.did_decode"], lang, ids=[0, 1])
        assert re.search(r"\b(request|petición|Anfrage) 3\.", one), one
        assert re.search(rf"\b(requests|peticiones|Anfragen) 0 {word} 1\.", two), two


def test_plural_rules_come_from_the_language():
    text = "{n, plural, =0 {none} one {# row} other {# rows}}"
    assert [render(text, "en", n=n) for n in (0, 1, 2, 1024)] == ["none", "1 row", "2 rows", "1,024 rows"]
    assert render("{n, plural, one {# fila} other {# filas}}", "es", n=1024) == "1.024 filas"
    assert render("{b, plural, one {# byte} other {# bytes}}", "en", b=0.5) == "0.5 bytes"
    assert render("{b, plural, one {# byte} other {# bytes}}", "en", b=1.0) == "1 byte"
    nested = "{n, plural, one {# a, {k, plural, one {# b} other {# bs}}} other {# as}}"
    assert render(nested, "en", n=1, k=2) == "1 a, 2 bs"
    with pytest.raises(TypeError):                 # a count must be a number: "1,024" cannot be counted
        render(text, "en", n="1,024")
    with pytest.raises(ValueError):
        parse("{n, plural, one {# row}}")          # no other form
    assert PLURAL_START.pattern


def test_autoplay_speeds_are_written_in_the_language():
    """The stepper's speed menu: "1 evento/s", "0,5 eventos/s", the same speeds as step_view.js."""
    from pathlib import Path

    from kvviz.ui.frames import SPEEDS, translator, words
    js = (Path(__file__).parents[1] / "kvviz" / "ui" / "components" / "step_view.js").read_text(encoding="utf-8")
    assert re.search(r"const SPEEDS = \[([^\]]*)\]", js).group(1).replace(" ", "") == ",".join(map(str, SPEEDS))
    assert words(translator("es"))["speeds"] == {"0.5": "0,5 eventos/s", "1": "1 evento/s", "2": "2 eventos/s",
                                                 "4": "4 eventos/s"}
    assert words(translator("de"))["speeds"]["1"] == "1 Ereignis/s"
    assert words(translator("en"))["speeds"]["0.5"] == "0.5 events/s"
