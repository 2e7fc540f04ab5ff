"""Numbers in the page's language: every number the interface writes goes through this module.

English keeps the app's reference output, which is Python's format mini-language:
``0.330``, ``1,024``, ``12.3×``, ``37.7 MB``, ``12%``. Spanish and German show **the same
digits** with the symbols Babel (the CLDR data, ``babel.numbers``) gives their locales: decimal
comma, ``.`` between thousands, ``12 %`` with a no-break space:
``0,330``, ``1.024``, ``12,3×``, ``37,7 MB``, ``12 %``. One rule in every language: a negative
number is written with the minus sign U+2212 (``−0.5`` | ``−0,5``), as a typeset page writes it, not
the hyphen-minus Python and CLDR's ``en``/``es``/``de`` give (:data:`MINUS`).
Scientific notation is written with a power of ten in every language, ``1.2 × 10⁻⁶`` | ``1,2 × 10⁻⁶``
(:func:`sci`). Babel groups four-digit numbers in Spanish too (``1.024``, as the static texts write
them); CLDR's minimum-grouping rule for ``es`` (which would print ``1024``) is not applied by Babel,
and this module follows Babel.

The digits come from Python's formatting and only the symbols are swapped, so a number is rounded
the same way in every language (switching the language never changes a digit), and English output
is what ``f"{x:.3f}"`` gives with its minus sign typeset.

Use::

    from kvviz.ui.app import fmt
    fmt.fixed(0.33, 3)          # en 0.330      es/de 0,330
    fmt.integer(36864)          # en 36,864     es/de 36.864
    fmt.num(x, ".4g")           # any format spec, e.g. the old f"{x:.4g}"
    fmt.factor(12.34)           # en 12.3×      es/de 12,3×
    fmt.percent(0.123)          # en 12%        es/de 12 %
    fmt.sci(1.2e-6)             # en 1.2 × 10⁻⁶  es/de 1,2 × 10⁻⁶ (and 0 for exactly 0)
    fmt.nbytes(37_748_736)      # en 37.7 MB    es/de 37,7 MB

Every function takes ``lang=`` (``"en"``, ``"es"``, ``"de"``); without it, the current page's language.
Everything here is shown text. What goes into a widget's value, an address (URL parameter), a
download (CSV, JSON) or the CLI's output must not use this module: it stays machine-readable, with
dot decimals and the hyphen-minus.
Charts: ``kvviz.ui.components.charts.chart`` sets plotly's ``separators`` from :func:`plotly_separators` and passes
numbers the figure builders pre-formatted in English through :func:`relocalize`.
"""
from __future__ import annotations

import re
from functools import cache

from kvviz.ui.app import lang as page_lang  # the page's language (kvviz/ui/app/lang.py), not i18n: no circle

REFERENCE = "en"        # the language whose output is Python's own formatting (its minus typeset)
MINUS = "\u2212"        # "−": every language's minus sign on the page (CLDR's en/es/de say "-")


def _lang(lang: str | None) -> str:
    if lang is not None:
        return lang
    return page_lang.current_lang()


@cache
def _symbols(lang: str) -> dict[str, str] | None:
    """Babel's number symbols for ``lang`` as a translation table from Python's, or None for English.

    Babel is imported only here, so an English page never loads its locale data."""
    if lang == REFERENCE:
        return None
    from babel import Locale
    from babel.numbers import (
        get_decimal_symbol,
        get_exponential_symbol,
        get_group_symbol,
        get_minus_sign_symbol,
        get_plus_sign_symbol,
    )
    Locale.parse(lang)                                   # an unknown language fails loudly here
    return {".": get_decimal_symbol(lang), ",": get_group_symbol(lang), "e": get_exponential_symbol(lang),
            "E": get_exponential_symbol(lang), "-": _typeset(get_minus_sign_symbol(lang)),
            "+": get_plus_sign_symbol(lang)}


def _typeset(minus: str) -> str:
    """A locale's minus symbol as the page writes it: CLDR's hyphen-minus becomes U+2212."""
    return MINUS if minus == "-" else minus


@cache
def _percent_affixes(lang: str) -> tuple[str, str]:
    """(prefix, suffix) of a positive percentage: ``("", "%")`` in English, ``("", "\\xa0%")`` in es/de."""
    if lang == REFERENCE:
        return "", "%"
    from babel.numbers import format_percent
    sample = format_percent(0.5, locale=lang)            # "50 %", "%50", "50%" …
    head, _, tail = sample.partition("50")
    return head, tail


def _swap(text: str, lang: str) -> str:
    """Python's symbols in ``text`` replaced by the locale's (CLDR writes no + in a positive exponent);
    in English only the minus sign."""
    table = _symbols(lang)
    if table is None:
        return text.replace("-", MINUS)
    return "".join(table.get(c, c) for c in text.replace("e+", "e"))


def num(x: float, spec: str = "", lang: str | None = None) -> str:
    """``format(x, spec)`` written the way ``lang`` writes numbers (the one function everything uses).

    ``spec`` is any Python format spec: ``".3f"``, ``",d"``, ``",.1f"``, ``".4g"``, ``"+.3f"``, ``".1e"``,
    ``".0%"``. In English the result is exactly ``format(x, spec)``."""
    lang = _lang(lang)
    if spec.endswith("%"):
        text = format(x, spec)[:-1]                       # Python's own "12.3%", without the sign
        head, tail = _percent_affixes(lang)
        sign = text[0] if text[:1] in "+-" else ""
        return _swap(sign, lang) + head + _swap(text[len(sign):], lang) + tail
    return _swap(format(x, spec), lang)


def fixed(x: float, digits: int = 3, lang: str | None = None) -> str:
    """A decimal with ``digits`` places and grouped thousands: 0.330 | 0,330; 1,234.500 | 1.234,500."""
    return num(x, f",.{digits}f", lang)


def integer(n: int, lang: str | None = None) -> str:
    """A whole number with grouped thousands: 36,864 | 36.864 (also for counts far beyond 2⁶⁴)."""
    return num(int(n), ",d", lang)


def sig(x: float, digits: int | None = None, lang: str | None = None) -> str:
    """Significant digits, trailing zeros dropped (Python's ``g``): 12.5, 10.33 | 12,5, 10,33.

    ``digits=None`` is plain ``g`` (six significant digits)."""
    return num(x, "g" if digits is None else f".{digits}g", lang)


def signed(x: float, digits: int = 3, lang: str | None = None) -> str:
    """A change with its sign: +0.123, −… | +0,123 (metric deltas)."""
    return num(x, f"+,.{digits}f", lang)


def percent(fraction: float, digits: int = 0, lang: str | None = None) -> str:
    """A fraction as a percentage: 0.123 → 12% | 12 % (CLDR puts a no-break space before % in es/de)."""
    return num(fraction, f",.{digits}%", lang)


def factor(x: float, digits: int = 1, lang: str | None = None) -> str:
    """A ratio with the multiplication sign after it: 12.3× | 12,3×."""
    return num(x, f",.{digits}f", lang) + "×"


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


def sci(x: float, digits: int = 1, lang: str | None = None) -> str:
    """A tiny or huge number as a lecture hall reads it (the check badges' differences and
    tolerances): 1.2 × 10⁻⁶ | 1,2 × 10⁻⁶, and exactly 0 as 0, never 0.0e+00 | 0,0E00."""
    if x == 0:
        return "0"
    mantissa, exponent = f"{x:.{digits}e}".split("e")
    return num(float(mantissa), f".{digits}f", lang) + "\xa0×\xa010" + str(int(exponent)).translate(_SUPERSCRIPT)


def g(x: float, digits: int = 3, lang: str | None = None) -> str:
    """``digits`` significant digits, in powers of ten below 0.001 (a KL of rounding): 0.353 | 0,353;
    9.24 × 10⁻⁵ | 9,24 × 10⁻⁵, never 9.24e-05."""
    if x != 0 and abs(x) < 1e-3:
        return sci(x, digits - 1, lang)
    return num(x, f".{digits}g", lang)


_BYTE_UNITS = (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3))
_FLOP_UNITS = (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3))


def nbytes(n: float, lang: str | None = None) -> str:
    """Bytes in decimal units, three significant digits: 37.7 MB | 37,7 MB; 512 B; 1,536 TB | 1.536 TB.

    The same rule as ``kvviz.viz.cost.human_bytes`` (GB = 10⁹ bytes, as accelerators quote it)."""
    for unit, size in _BYTE_UNITS:
        if abs(n) >= size:
            v = n / size
            return (num(v, ",.3g", lang) if v < 1000 else num(v, ",.0f", lang)) + " " + unit
    return num(n, ",.0f", lang) + " B"


def flops(n: float, lang: str | None = None) -> str:
    """FLOPs in decimal units, three significant digits: 1.23 GFLOP | 1,23 GFLOP."""
    for unit, size in _FLOP_UNITS:
        if abs(n) >= size:
            return num(n / size, ",.3g", lang) + " " + unit
    return num(n, ",.0f", lang) + " FLOP"


def duration(seconds: float, lang: str | None = None) -> str:
    """A time in s, ms or µs: 1.25 s, 537 ms, 12.5 µs | 1,25 s, 537 ms, 12,5 µs."""
    if seconds >= 1:
        return num(seconds, ",.2f", lang) + " s"
    if seconds >= 1e-3:
        return num(seconds * 1e3, ",.3g", lang) + " ms"
    return num(seconds * 1e6, ",.3g", lang) + " µs"


_LIST_COMMA = re.compile(r"(?<=\d), (?=[+\-]?\d)")      # "0.33, 0.67": a list of numbers
_POINT = re.compile(r"(?<=\d)\.(?=\d)")
_SIGN = re.compile(r"(?<![\w.])-(?=\.?\d)")            # a minus before a number, not a hyphen in a word


def inline(text: str, lang: str | None = None) -> str:
    """Numbers inside a text Python wrote (``"(0.33, -0.67)"``, a cache cell) in ``lang``'s symbols:
    the minus sign typeset (``"(0.33, −0.67)"``); where the decimal mark is a comma, a comma between
    numbers becomes "; " (as Spanish and German write lists of decimals): ``"(0,33; −0,67)"``.
    Thousands separators are not expected here."""
    table = _symbols(_lang(lang))
    if table is not None and table["."] == ",":
        text = _POINT.sub(",", _LIST_COMMA.sub("; ", text))
    return _SIGN.sub(MINUS, text)


def plotly_separators(lang: str | None = None) -> str:
    """Plotly's ``layout.separators`` (decimal mark, then thousands mark): ``".,"`` | ``",."``.

    It applies to the numbers plotly formats itself (hover templates such as ``%{y:,.4f}``, ticks)."""
    table = _symbols(_lang(lang))
    return ".," if table is None else table["."] + table[","]


# An English number as Python writes it, alone in a label, with an optional unit after it.
_NUMBER = re.compile(r"(?P<num>[+\-]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:e[+\-]\d+)?)"
                     r"(?P<unit>%|×| ?(?:[kMGTP]?B|[kMGTP]?FLOP|[mµ]?s|tok/s|GB/s|GFLOP/s))?")


def relocalize(text: str, lang: str | None = None) -> str:
    """A label that is one English-formatted number (``"0.670"``, ``"1,000"``, ``"12.5×"``, ``"37.7 MB"``,
    ``"1.2e-06"``) rewritten for ``lang``; any other text is returned unchanged.

    For numbers that pure figure builders (``kvviz.viz.theme`` …) already turned into text: plotly's
    ``separators`` cannot reach those."""
    lang = _lang(lang)
    if not isinstance(text, str):
        return text
    m = _NUMBER.fullmatch(text)
    if m is None:
        return text
    number, unit = m.group("num"), m.group("unit") or ""
    if lang == REFERENCE:                 # English: only the minus sign changes
        return _swap(number, lang) + unit
    if unit == "%":
        head, tail = _percent_affixes(lang)
        sign = number[0] if number[0] in "+-" else ""
        return _swap(sign, lang) + head + _swap(number[len(sign):], lang) + tail
    return _swap(number, lang) + unit
