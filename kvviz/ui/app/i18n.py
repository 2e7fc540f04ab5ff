"""Interface text in English, Spanish and German.

Strings live in ``locales/<lang>/<section>.json`` (one folder per language, one file per page or
shared section). ``t("abc.title")`` looks up key ``title`` in section ``abc`` for the current
language and falls back to English, so a missing translation never breaks a page (a test lists them).

**Counts.** A number that a noun follows is written as an ICU-style plural, so the noun (and in
Spanish and German its article and adjectives) agrees with it::

    "cache_title": "KV cache ({n, plural, one {# row} other {# rows}})"
    "did_prefill": "{n, plural, one {la fila de esta pasada} other {las # filas de esta pasada}}"

The form is picked by the language's CLDR plural rule (Babel): ``=N`` for exactly N, else ``one``,
``many`` …, else ``other``; ``#`` is the count written the way the language writes numbers
(:func:`kvviz.ui.app.fmt.integer`). The count must be a number, or a list: a list is counted by its
length and ``#`` is its items joined the way the language joins them (``0 and 1``, ``0 y 1``,
``0 und 1``). A list in a plain ``{placeholder}`` is joined the same way. Forms may hold other
placeholders, and plurals of their own.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path

from kvviz.ui.app import fmt
from kvviz.ui.app.lang import LANGS as LANGS  # re-exported: pages import the languages from here
from kvviz.ui.app.lang import current_lang as current_lang

LOCALES = Path(__file__).parents[1] / "locales"
PLURAL_START = re.compile(r"\{(\w+),\s*plural,\s*")
_SELECTOR = re.compile(r"\s*(=\d+|zero|one|two|few|many|other)\s*\{")


@cache
def strings(lang: str) -> dict[str, str]:
    """All keys of one language as ``section.key -> text`` (read-only, cached per process)."""
    out: dict[str, str] = {}
    for f in sorted((LOCALES / lang).glob("*.json")):
        for k, v in json.loads(f.read_text(encoding="utf-8")).items():
            out[f"{f.stem}.{k}"] = v
    return out


def _closing(text: str, i: int) -> int:
    """Index of the ``}`` that closes the brace opened just before ``text[i]``."""
    depth = 1
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return j
    raise ValueError(f"unclosed plural in {text!r}")


@lru_cache(maxsize=4096)
def parse(text: str) -> tuple:
    """``text`` as a tuple of literal strings and ``(name, {selector: parsed form})`` plurals."""
    parts: list = []
    pos = 0
    for m in PLURAL_START.finditer(text):
        if m.start() < pos:                          # inside a form already taken whole
            continue
        parts.append(text[pos:m.start()])
        forms, i = {}, m.end()
        while (sel := _SELECTOR.match(text, i)) is not None:
            end = _closing(text, sel.end())
            forms[sel.group(1)] = parse(text[sel.end():end])
            i = end + 1
        close = re.compile(r"\s*\}").match(text, i)
        if close is None or "other" not in forms:
            raise ValueError(f"malformed plural {m.group(1)!r} in {text!r}: needs an other form and a closing brace")
        parts.append((m.group(1), forms))
        pos = close.end()
    parts.append(text[pos:])
    return tuple(parts)


def _arguments(parts: tuple):
    for part in parts:
        if isinstance(part, str):
            yield from re.findall(r"\{(\w+)\}", part.replace("{{", "").replace("}}", ""))
        else:
            yield part[0]
            for form in part[1].values():
                yield from _arguments(form)


def placeholders(text: str) -> set[str]:
    """Every argument ``text`` takes: plain ``{name}`` and the counts of its plurals, at any depth."""
    return set(_arguments(parse(text)))


def plural_names(text: str) -> set[str]:
    """The placeholders ``text`` counts with (``{n, plural, …}``), nested ones included."""
    return set(PLURAL_START.findall(text))


@cache
def _plural_rule(lang: str):
    from babel import Locale  # here: a page without counts needs no Babel
    return Locale.parse(lang).plural_form


def join(items: Sequence[object], lang: str) -> str:
    """``items`` as a list in ``lang``: ``0, 1, and 2`` | ``0, 1 y 2`` | ``0, 1 und 2``."""
    from babel.lists import format_list
    return format_list([str(x) for x in items], locale=lang) if items else ""


def _count_and_text(name: str, value: object, lang: str) -> tuple[float, str]:
    if isinstance(value, (list, tuple)):
        return len(value), join(value, lang)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"the count {name!r} must be a number or a list, not {value!r}")
    if isinstance(value, int) or float(value).is_integer():        # 1.0 bytes is "1 byte"
        return int(value), fmt.integer(int(value), lang=lang)
    return value, fmt.num(value, ",g", lang=lang)


def _resolve(parts: tuple, lang: str, args: dict) -> str:
    out = []
    for part in parts:
        if isinstance(part, str):
            out.append(part)
            continue
        name, forms = part
        if name not in args:
            raise KeyError(name)
        count, shown = _count_and_text(name, args[name], lang)
        form = forms.get(f"={count:g}") or forms.get(_plural_rule(lang)(abs(count))) or forms["other"]
        # "#" becomes a placeholder of its own, so the count's text is never parsed as a template
        slot = f"_n_{name}"
        args[slot] = shown
        out.append(_resolve(form, lang, args).replace("#", "{" + slot + "}"))
    return "".join(out)


def render(template: str, lang: str, /, **args: object) -> str:
    """``template`` with its placeholders filled for ``lang``: plurals resolved, lists joined."""
    if not args:
        return template
    args = dict(args)
    parts = parse(template)
    text = _resolve(parts, lang, args) if len(parts) > 1 else template
    return text.format(**{k: join(v, lang) if isinstance(v, (list, tuple)) else v for k, v in args.items()})


def lookup(key: str, lang: str) -> str:
    """The raw text of ``key`` in ``lang``, English where ``lang`` lacks it."""
    text = strings(lang).get(key) or strings("en").get(key)
    if text is None:
        raise KeyError(f"missing interface string {key!r}")
    return text


def t(key: str, **fmt: object) -> str:
    """The text for ``key`` in the current language, formatted with ``fmt``."""
    lang = current_lang()
    return render(lookup(key, lang), lang, **fmt)
