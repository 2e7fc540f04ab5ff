"""kvviz.ui.app.fmt: English exactly as Python formats it, Spanish and German as Babel (CLDR) does, the
same digits in every language; in every language a negative number's minus is U+2212, as typeset."""
import random

import pytest
from babel import Locale
from babel.numbers import format_decimal, format_percent, format_scientific

from kvviz.ui.app import fmt

OTHER = ("es", "de")
# values away from rounding ties: there Babel rounds the decimal string half-even and Python the
# binary value, and fmt keeps Python's digits in every language (test_same_digits_in_every_language)
random.seed(17)
VALUES = [0.0, 0.33, 0.6699, -1.0, 15.3, 1024.0, 36864.0, 37.748736, 12345.678, -9876543.21, 0.0049] + \
         [random.uniform(-1e7, 1e7) for _ in range(40)]


def _percent_pattern(lang: str, digits: int) -> str:
    pattern = Locale.parse(lang).percent_formats[None].pattern
    return pattern.replace("0", "0." + "0" * digits, 1) if digits else pattern


def _babel(text: str) -> str:
    """Babel's text with the page's minus sign (CLDR's es and de write the hyphen-minus)."""
    return text.replace("-", fmt.MINUS)


def test_english_is_python_formatting_with_its_minus_typeset():
    for x in VALUES:
        for spec in (".3f", ",.1f", ",.0f", ".4g", "g", "+.3f", ".1e", ".2e", ",.3g"):
            assert fmt.num(x, spec, "en") == format(x, spec).replace("-", "\u2212")
    assert fmt.fixed(0.33, 3, "en") == "0.330" and fmt.integer(1024, "en") == "1,024"
    assert fmt.factor(12.34, lang="en") == "12.3×"
    assert fmt.percent(0.123, lang="en") == "12%" and fmt.nbytes(37_748_736, "en") == "37.7 MB"


@pytest.mark.parametrize("lang", OTHER)
def test_decimals_and_thousands_as_babel_writes_them(lang):
    for x in VALUES:
        for digits in (0, 1, 3):
            pattern = "#,##0" + ("." + "0" * digits if digits else "")
            assert fmt.fixed(x, digits, lang) == _babel(format_decimal(x, format=pattern, locale=lang)), (x, digits)
    for n in (0, 7, 999, 1024, 36_864, 8_192, 1_000_000, 37_748_736):
        assert fmt.integer(n, lang) == format_decimal(n, locale=lang)


@pytest.mark.parametrize("lang", OTHER)
def test_four_digit_numbers_are_grouped_as_babel_groups_them(lang):
    """CLDR's minimum grouping digits would print 1024 in Spanish, but Babel (and so this app, and
    its static texts: «1.024 tokens») writes 1.024."""
    assert fmt.integer(1024, lang) == format_decimal(1024, locale=lang) == "1.024"


@pytest.mark.parametrize("lang", OTHER)
def test_percentages_as_babel_writes_them(lang):
    for x in (0.0, 0.05, 0.123, 0.6, 1.0, 0.1234, 12.5):
        assert fmt.percent(x, 0, lang) == format_percent(x, locale=lang)
        assert fmt.percent(x, 1, lang) == format_percent(x, format=_percent_pattern(lang, 1), locale=lang)
    assert fmt.percent(0.123, lang=lang) == "12\xa0%"                     # no-break space before %


@pytest.mark.parametrize("lang", ["en", *OTHER])
def test_scientific_notation_is_a_power_of_ten_and_zero_is_zero(lang):
    """Not 0,0E00 nor 1.2e-06: a mantissa in the language's digits times a power of ten."""
    point = "." if lang == "en" else ","
    assert fmt.sci(1.2e-6, lang=lang) == f"1{point}2\xa0×\xa010⁻⁶"
    assert fmt.sci(2.5e8, lang=lang) == f"2{point}5\xa0×\xa010⁸" and fmt.sci(1e-4, 0, lang) == "1\xa0×\xa010⁻⁴"
    assert fmt.sci(-3.45e-12, 2, lang) == fmt.num(-3.45, ".2f", lang) + "\xa0×\xa010⁻¹²"
    assert fmt.sci(0.0, 1, lang) == fmt.sci(-0.0, 2, lang) == "0"
    for x in (1.2e-6, 3.4e-7, 9.9e-5, 1.0e-12, 2.5e8):         # the same digits as Babel's notation
        mantissa = format_scientific(x, "0.0E00", locale=lang).split("E")[0]
        assert fmt.sci(x, 1, lang).startswith(mantissa.replace(".", point))


@pytest.mark.parametrize("lang", ["en", *OTHER])
def test_significant_digits_turn_to_powers_of_ten_below_a_thousandth(lang):
    """A KL of rounding reads 9.24 × 10⁻⁵, not 0.0000924 nor 9.24e-05; larger ones keep three digits."""
    point = "." if lang == "en" else ","
    assert fmt.g(9.24e-5, lang=lang) == f"9{point}24\xa0×\xa010⁻⁵" and fmt.g(6.7e-14, lang=lang).endswith("10⁻¹⁴")
    assert fmt.g(0.353, lang=lang) == f"0{point}353" and fmt.g(0.001, lang=lang) == f"0{point}001"
    assert fmt.g(0.0, lang=lang) == "0" and fmt.g(12.0, lang=lang) == "12"


@pytest.mark.parametrize("lang", OTHER)
def test_factors_bytes_flops_durations(lang):
    assert fmt.factor(12.34, lang=lang) == "12,3×" and fmt.factor(1234.5, 0, lang) == "1.234×"
    assert fmt.nbytes(37_748_736, lang) == "37,7 MB" and fmt.nbytes(536_870_912, lang) == "537 MB"
    assert fmt.nbytes(512, lang) == "512 B" and fmt.nbytes(2.5e15, lang) == "2.500 TB"
    assert fmt.flops(1.234e9, lang) == "1,23 GFLOP" and fmt.flops(12, lang) == "12 FLOP"
    assert fmt.duration(1.25, lang) == "1,25 s" and fmt.duration(0.0125, lang) == "12,5 ms"
    assert fmt.duration(2.5e-6, lang) == "2,5 µs"
    assert fmt.signed(-0.5, 3, lang) == "\u22120,500" and fmt.signed(0.25, 2, lang) == "+0,25"
    assert fmt.sig(10.3333, 4, lang) == "10,33" and fmt.sig(6.0, lang=lang) == "6"


@pytest.mark.parametrize("lang", ("en", *OTHER))
def test_same_digits_in_every_language(lang):
    """Only the symbols change: strip them and every language shows the English digits."""
    for x in VALUES:
        en, other = fmt.fixed(x, 3, "en"), fmt.fixed(x, 3, lang)
        assert en.replace(",", "").replace(".", "") == other.replace(".", "").replace(",", "")
    # a tie in decimal, not in binary: Python's rounding in every language (Babel alone would say 2,68)
    assert fmt.fixed(2.675, 2, "en") == "2.67" and fmt.fixed(2.675, 2, lang).replace(",", ".") == "2.67"


@pytest.mark.parametrize("lang", ("en", *OTHER))
def test_one_minus_sign_in_every_language_on_the_page_and_none_in_words(lang):
    """A shown negative number reads "−1", not "-1", whatever the language; a hyphen inside a word or
    a label ("k-2", "top-p") stays a hyphen."""
    for shown in (fmt.fixed(-1, 0, lang), fmt.integer(-1, lang), fmt.signed(-1.0, 1, lang), fmt.sig(-1, lang=lang),
                  fmt.percent(-0.01, lang=lang), fmt.factor(-1.0, 0, lang), fmt.nbytes(-1, lang),
                  fmt.relocalize("-1", lang)):
        assert shown.startswith("\u2212") and "-" not in shown, shown
    assert "-" not in fmt.num(1.5e-7, ".1e", lang)
    cell = fmt.inline("[-0.25, 1.00] k-2 top-p", lang)
    assert cell.count("\u2212") == 1 and cell.endswith(" k-2 top-p")


def test_huge_integers_beyond_64_bits():
    assert fmt.integer(2**70, "de") == "1.180.591.620.717.411.303.424"


def test_plotly_separators():
    assert fmt.plotly_separators("en") == ".,"
    assert fmt.plotly_separators("es") == fmt.plotly_separators("de") == ",."


@pytest.mark.parametrize("lang", ("en", *OTHER))
def test_relocalize_turns_english_labels_into_the_page_language(lang):
    for x in VALUES:
        for spec in (".3f", ",.0f", ",.1f", ".1e", ".0%", ",.3g"):
            assert fmt.relocalize(format(x, spec), lang) == fmt.num(x, spec, lang), (x, spec)
    assert fmt.relocalize("12.5×", lang) == fmt.factor(12.5, lang=lang)
    assert fmt.relocalize("37.7 MB", lang) == fmt.nbytes(37_700_000, lang)
    for not_a_number in ("2:weather", "A", "h1", "1.2.3", "v1.0", "", "pad", "0:A B", "(+1 × 64)"):
        assert fmt.relocalize(not_a_number, lang) == not_a_number


def test_without_lang_the_page_language_is_used(monkeypatch):
    import kvviz.ui.app.lang as page_lang
    monkeypatch.setattr(page_lang, "current_lang", lambda: "de")
    assert fmt.fixed(0.33) == "0,330" and fmt.plotly_separators() == ",."
    monkeypatch.setattr(page_lang, "current_lang", lambda: "en")
    assert fmt.fixed(0.33) == "0.330"


def test_english_pages_do_not_load_babel():
    """The home page stays light: English formatting never imports Babel."""
    import subprocess
    import sys

    from tests.conftest import ROOT
    code = ("import sys; from kvviz.ui.app import fmt; fmt.fixed(1.5, 2, 'en'); fmt.percent(0.5, lang='en'); "
            "fmt.plotly_separators('en'); print('babel' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


def test_numbers_inside_a_cache_cell_follow_the_language():
    cell = "(0.3302, -0.67, +1 × 64)"
    assert fmt.inline(cell, "en") == "(0.3302, \u22120.67, +1 × 64)"          # only the minus sign typeset
    assert fmt.inline(cell, "es") == fmt.inline(cell, "de") == "(0,3302; \u22120,67; +1 × 64)"
    assert fmt.inline("decode, rewritten at event 3", "de") == "decode, rewritten at event 3"   # words stay
    assert fmt.inline("12", "es") == "12"
