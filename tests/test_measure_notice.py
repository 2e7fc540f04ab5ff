"""What to notice in the measured views (kvviz/ui/frames/measure_notice.py): each line from small
hand-built records, in the three languages (the pages' own tests check that the page shows it)."""
from __future__ import annotations

import pytest

from kvviz import cost
from kvviz.compress import Evaluation, Variant, VariantResult
from kvviz.speculative import SpeedMeasurement, SpeedPoint
from kvviz.speculative.measure import SelfSpeedMeasurement, SelfSpeedPoint
from kvviz.ui.app import fmt
from kvviz.ui.frames import translator
from kvviz.ui.frames.measure_notice import draft_notice, self_notice, tradeoff_notice

LANGS = ("en", "es", "de")
OPENING = {"en": "Look at", "es": "Mira", "de": "Sieh auf"}
SERVER = {"en": "Measured on this server", "es": "Medido en este servidor", "de": "Auf diesem Server gemessen"}


def _draft(speedups: dict[int, float]) -> SpeedMeasurement:
    """γ → measured speed-up (plain 1 s, speculative 1 / speed-up s); c = 0.3, v = 1 + 0.2 γ."""
    pts = [SpeedPoint(48, 1 / s, 1.0, 1 / s, 1.0, gamma=g, acceptance_rate=0.8, tokens_per_target_pass=2.5,
                      run_other_ms=0.25,
                      verify_ms=0.5 * (1 + 0.2 * g), expected=cost.speculative_speedup(0.8, g, 0.3),
                      expected_with_verify=cost.speculative_speedup(0.8, g, 0.3, 1 + 0.2 * g))
           for g, s in speedups.items()]
    return SpeedMeasurement(pts, 48, 3, 1, 2.0, target_ms=0.5, draft_ms=0.15, context=30, c_flops=0.06,
                            rule={"name": "greedy"}, prompt_len=5)


@pytest.mark.parametrize("lang", LANGS)
def test_draft_notice_points_at_the_fastest_gamma_and_says_what_makes_the_gap(lang):
    m = _draft({1: 1.2, 2: 1.5, 3: 1.4})
    tr = translator(lang)
    text = draft_notice(m, tr)
    best = m.points[1]
    assert text.startswith(OPENING[lang] + " ") and "γ = 2" in text and SERVER[lang] in text
    assert f"**{fmt.factor(1.5, 2, lang=lang)}**" in text
    for x in (fmt.factor(best.expected, 2, lang=lang), fmt.factor(best.expected_with_verify, 2, lang=lang),
              fmt.fixed(0.25, 3, lang=lang), f"v = {fmt.fixed(1.4, 2, lang=lang)}"):     # what makes the gap
        assert x in text, x
    slower = draft_notice(_draft({1: 0.8, 2: 0.9}), tr)        # no γ pays: said so, the best row still named
    assert "γ = 2" in slower and f"**{fmt.factor(0.9, 2, lang=lang)}**" in slower and slower != text
    assert slower.split(":")[1] != text.split(":")[1]
    above = draft_notice(_draft({1: 1.2, 2: 1.9}), tr)          # above the formula's 1.52×: noise, said so
    assert above.startswith(tr("measure_notice.draft_above", g=2, measured=fmt.factor(1.9, 2, lang=lang),
                                expected=fmt.factor(best.expected, 2, lang=lang),
                                expected_v=fmt.factor(best.expected_with_verify, 2, lang=lang)))
    assert text.startswith(tr("measure_notice.draft_best", g=2, measured=fmt.factor(1.5, 2, lang=lang),
                              expected=fmt.factor(best.expected, 2, lang=lang),
                              expected_v=fmt.factor(best.expected_with_verify, 2, lang=lang)))


def _self(method: str, prompt: str, speedup: float, proposed: int, accepted: int, passes: int,
          same: bool = True) -> SelfSpeedPoint:
    return SelfSpeedPoint(24, 1 / speedup, 1.0, 1 / speedup, 1.0, prompt=prompt, method=method, proposed=proposed,
                          accepted=accepted, target_passes=passes, same_tokens=same, draft_s=0.01, verify_s=0.5)


def _self_measurement(*points: SelfSpeedPoint) -> SelfSpeedMeasurement:
    return SelfSpeedMeasurement(list(points), 24, 1, 1, 9.0, lookup_tokens=10, max_ngram=2, exit_layer=20,
                                draft_tokens=4)


CASES = {"repeat": "repeat a text", "open": "open question"}


@pytest.mark.parametrize("lang", LANGS)
def test_self_notice_names_the_prompt_where_the_method_pays_and_the_same_tokens(lang):
    tr = translator(lang)
    m = _self_measurement(_self("prompt-lookup", "repeat", 1.8, 40, 30, 8),
                          _self("early-exit", "repeat", 0.7, 20, 5, 20),
                          _self("prompt-lookup", "open", 0.95, 0, 0, 24), _self("early-exit", "open", 0.6, 20, 4, 21))
    text = self_notice(m, "prompt-lookup", CASES, tr)
    rate = lambda r: tr("measure_notice.self_rate", rate=fmt.percent(r, 0, lang=lang))      # noqa: E731
    pays = tr("measure_notice.self_pays", method=tr("specllm.w_prompt_lookup"), case=CASES["repeat"],
              x=fmt.factor(1.8, 2, lang=lang), accepted=rate(0.75), tpp=3.0)  # 24 in 8 passes
    other = tr("measure_notice.self_other", case=CASES["open"], x=fmt.factor(0.95, 2, lang=lang),
               accepted=tr("measure_notice.self_no_proposal"), tpp=1.0)
    assert text == " ".join([pays, other, tr("measure_notice.self_why"), tr("measure_notice.self_same", k=2),
                             tr("measure_notice.on_this_server")])
    assert text.startswith(OPENING[lang] + " ") and SERVER[lang] in text and "**" in pays
    early = self_notice(m, "early-exit", CASES, tr)                 # pays on neither prompt: said so
    assert early.startswith(tr("measure_notice.self_pays_not", method=tr("specllm.w_early_exit"), case=CASES["repeat"],
                                x=fmt.factor(0.7, 2, lang=lang), accepted=rate(0.25), tpp=1.2))
    differs = self_notice(_self_measurement(_self("early-exit", "open", 1.1, 20, 15, 10, same=False)), "early-exit",
                          CASES, tr)
    assert "✗" in differs and CASES["open"] in differs and "✓" not in differs


def test_self_notice_takes_the_measurements_method_when_the_page_shows_another():
    m = _self_measurement(_self("early-exit", "open", 1.3, 20, 15, 10))
    assert self_notice(m, "draft", CASES, translator("en")) == self_notice(m, "early-exit", CASES, translator("en"))
    assert "on “open”" in self_notice(m, "draft", {}, translator("en"))         # no label: the prompt's name


def _result(variant: Variant, bytes_per_token: int, kl: float, agree: int, of: int = 4) -> VariantResult:
    return VariantResult(variant, ((kl,) * of,), ((True,) * agree + (False,) * (of - agree),),
                         (bytes_per_token * 10,), (10,))


def _evaluation(*results: VariantResult) -> Evaluation:
    return Evaluation((), (), 4, 0, tuple(results))


FULL = Variant.of("full")
WIN = Variant.of("window", window=8, sinks=4)
INT4 = Variant.of("quant", bits=4, group_size=16, key_axis="token", residual=0)
GQA = Variant.of("gqa", kv_heads=1)
INT8R = Variant.of("quant", bits=8, group_size=16, key_axis="channel", residual=16)


@pytest.mark.parametrize("lang", LANGS)
def test_tradeoff_notice_names_the_smallest_that_keeps_top1_the_largest_drop_and_the_lossless(lang):
    from kvviz.ui.frames.compress import variant_name
    tr = translator(lang)
    ev = _evaluation(_result(FULL, 4096, 0.0, 4), _result(WIN, 2731, 7e-4, 4), _result(INT4, 1024, 4e-6, 4),
                     _result(GQA, 1024, 0.12, 2), _result(INT8R, 4096, 0.0, 4))
    text = tradeoff_notice(ev, tr)
    assert text.startswith(f"{OPENING[lang]} **{variant_name(INT4, tr)}**")        # the smallest that keeps top-1
    assert fmt.percent(0.25, 0, lang=lang) in text and fmt.g(4e-6, lang=lang) in text
    assert fmt.integer(4096, lang=lang) in text and fmt.integer(1024, lang=lang) in text
    assert f"**{variant_name(GQA, tr)}**" in text and fmt.percent(0.5, 1, lang=lang) in text   # the largest drop
    assert tr("measure_notice.tradeoff_zero", n=1) in text                          # lossless, but no smaller
    assert text.endswith(tr("measure_notice.tradeoff_why"))
    assert variant_name(WIN, tr) not in text


@pytest.mark.parametrize("lang", LANGS)
def test_tradeoff_notice_other_shapes_of_results(lang):
    from kvviz.ui.frames.compress import variant_name
    tr = translator(lang)
    same = tradeoff_notice(_evaluation(_result(FULL, 4096, 0.0, 4), _result(WIN, 2048, 0.0, 4),
                                       _result(INT4, 1024, 1e-5, 4)), tr)
    assert tr("measure_notice.tradeoff_no_drop") in same                            # nobody drops a top-1 token
    assert f"**{variant_name(WIN, tr)}**" in same and fmt.percent(0.5, 0, lang=lang) in same   # lossless and smaller
    most = tradeoff_notice(_evaluation(_result(FULL, 4096, 0.0, 4), _result(WIN, 2048, 0.01, 3),
                                       _result(INT4, 1024, 0.02, 3), _result(GQA, 1024, 0.5, 1)), tr)
    assert most.startswith(tr("measure_notice.tradeoff_keeps_most", name=variant_name(INT4, tr), bytes=1024,
        pct=fmt.percent(0.25, 0, lang=lang), full=fmt.integer(4096, lang=lang),
        kl=fmt.g(0.02, lang=lang), top=fmt.percent(0.75, 1, lang=lang)))
    none = tradeoff_notice(_evaluation(_result(FULL, 4096, 0.0, 4), _result(INT8R, 4096, 0.0, 4)), tr)
    assert none.startswith(tr("measure_notice.tradeoff_none_smaller", n=1))
    no_full = tradeoff_notice(_evaluation(_result(WIN, 2048, 0.01, 4), _result(INT4, 1024, 0.02, 4)), tr)
    assert fmt.integer(2048, lang=lang) in no_full and fmt.percent(0.5, 0, lang=lang) in no_full   # the largest: 100 %


def test_every_line_is_translated():
    """Every string of the module exists in the three languages and differs from English."""
    import json
    from pathlib import Path
    root = Path(__file__).resolve().parents[1] / "kvviz" / "ui" / "locales"
    keys = {lang: json.loads((root / lang / "measure_notice.json").read_text(encoding="utf-8")) for lang in LANGS}
    assert set(keys["es"]) == set(keys["de"]) == set(keys["en"])
    assert all(keys["es"][k] != keys["en"][k] != keys["de"][k] for k in keys["en"])


def test_the_tradeoff_table_names_the_eviction_policies_too():
    """The equal-bytes comparison shows H2O, SnapKV, PyramidKV, FP8 and latent variants in the same
    table as the others (kvviz/ui/pages/compress_tradeoff.py), each with its kind's name."""
    from kvviz.ui.pages.compress_tradeoff import tradeoff_table
    ev = _evaluation(_result(FULL, 4096, 0.0, 4), _result(Variant.of("h2o", budget=16), 1024, 0.1, 3),
                     _result(Variant.of("snapkv", budget=16), 1024, 0.2, 3), _result(WIN, 2731, 7e-4, 4))
    assert list(tradeoff_table(ev)["Kind"]) == ["Full cache", "H2O", "SnapKV", "Window + sinks"]
