"""What a native lecturer flagged in the Spanish and German strings, one test per flag:
the key still exists, the flagged wording is gone, the fix is there. The glossary test keeps the
whole language in line; these pin the exact places the reader named."""
from __future__ import annotations

import re

import pytest

from kvviz.ui.app.i18n import strings

# (lang, keys, must not match, must match); patterns are case-sensitive Python re
FLAGS = [
    # ---- Spanish
    ("es", "weather.*", r"(?i)\bconsultas?\b|\bclaves?\b", None),
    ("es", ["weather.did_prefill", "weather.did_decode", "weather.mask_title"], None, r"\bquery\b"),
    ("es", ["weather.mask_title", "weather.repair", "weather.stale_key"], None, r"\bkeys?\b"),
    ("es", ["home.intro"], r"claves|valores|KV cache|lo ha procesado", r"las keys y los values.*la \*\*caché KV\*\*"),
    ("es", ["home.intro"], None, r"hasta que esa pasada lo haya procesado"),
    ("es", ["sampling.q1_cache", "sampling.q3_vocab", "sampling.q3_reveal", "stepper.cache_title", "home.intro"],
     r"\b(?:el|un|la) (?:KV )?cache\b|\bKV cache\b|\bcache\b", r"(?i)\b(?:la|una) caché\b|^Caché KV"),
    ("es", ["cost.per_token_text"], r"\{x\} veces", r"\{x\} lo que cuesta con caché"),
    ("es", ["cost.ms_ttft_text"], r"pasos de decode procesando",
     r"el prefill, que procesó \{p\} posiciones, costó lo mismo que \{x\} pasos de decode"),
    ("es", ["home.blurb_cost", "lecture.cost_memory_gqa_why", "lecture.cost_batching_gpt", "cost.bt_model_help"],
     r"(?i)\blotes?\b", r"(?i)\bbatch(?:ing)?\b"),
    ("es", ["cost.tab_serving", "cost.dg_title", "home.blurb_cost", "cost.intro", "cost.serve_intro",
            "abc.more_body", "lecture.cost_serving"],
     r"(?i:desagregad)|(?!Disaggregated Serving)(?i:disaggregated serving)",
     r"Disaggregated Serving"),
    ("es", ["cost.flops_intro", "cost.fl_model_help", "cost.counted_ok", "cost.counted_none", "cost.bt_intro",
            "cost.fig_cached_counted", "gpt.new_tokens_help", "gpt.verify_stepper_same"],
     r"(?i)\bstepper\b", r"recorrido paso a paso"),
    ("es", ["stepper.cache_flagged_cells"], r"que recalcular el prefijo ahora da distintas",
     r"ya no coinciden con el resultado de recalcular"),
    ("es", ["stepper.kv_recompute_help"], r"recomput", r"\brecalcular\b"),
    ("es", ["gpt.intro"], r"atada", r"comparte los pesos del embedding"),
    ("es", ["gpt.explain"], r"\bcosto\b", r"\bcoste\b"),
    ("es", ["gpt.top_p_help"], r"\bchico\b", r"más pequeño"),
    ("es", ["gpt.memory_body"], r"achic", r"\breducen\b"),
    # ---- German
    ("de", ["cost.bt_head", "cost.bt_head_help", "cost.bt_att_which", "cost.bt_table_which",
            "lecture.cost_memory_gqa_why"], r"K[oö]pf", r"\bHeads?\b"),
    ("de", ["cost.bt_pad"], r"Füll", r"^Padding$"),
    ("de", "cost.*", r"\bFüll\w*|Auffüllung", None),
    ("de", ["lecture.cost_batching_why"], r"aufgefüllt in einem Cache|jede gleich wie allein",
     r"jeder liefert dasselbe wie allein ausgeführt"),
    ("de", ["lecture.weather_stale_why"], r"alle Keys neu berechnet ergibt", r"berechnet man alle Keys neu, sind es"),
    ("de", ["weather.did_prefill", "weather.intro", "home.blurb_weather"], r"\b[Dd]as (?:\w+ )?Prefill\b(?!-)",
     r"\b[Dd]er (?:parallele )?Prefill\b"),
    ("de", ["home.blurb_weather", "lecture.weather_stale_why", "weather.intro", "weather.why_body",
            "weather.decode_hint", "sampling.q3_reveal"], r"Nur-Anhängen|nur angehängt wird", r"Append-only-"),
    ("de", ["cost.ms_progress", "gpt.timing_progress"], r"\bMesse\b", r"^Messung läuft"),
    ("de", ["lecture.title", "nav.lecture"], r"Vorlesungsskript", r"^Vorlesungsablauf$"),
    ("de", ["cost.flops_intro", "cost.fl_model_help", "cost.counted_ok", "cost.counted_none", "cost.bt_intro",
            "cost.fig_cached_counted", "gpt.new_tokens_help"], r"\bStepper", r"Schrittmodus"),
    ("de", ["cost.tab_serving", "cost.dg_title", "home.blurb_cost"], r"(?i)disaggregiert", r"Disaggregated Serving"),
    ("de", ["weather.assumption_body", "home.intro"], r"Keys und Werte", r"Keys und Values"),
    ("de", ["cost.bt_model_help"], r"dekodiert", r"\bdecodiert\b"),
    ("de", ["stepper.reset"], r"Neustart", r"^Zurücksetzen$"),
    ("de", ["present.toggle_help"], r"Neustart", r"Zurücksetzen"),
    # German in du: the keys that said Sie
    ("de", ["abc.bad_prompt", "cost.mem_intro", "cost.fig_you", "cost.fig_you_hover", "cost.bt_need_two",
            "cost.ms_intro", "cost.ms_none", "cost.ms_done"], r"\b(?:Sie|Ihnen|Ihre?[mnrs]?)\b",
     r"\b(?:du|dein\w*|Versuch|Wähle|Gib|Drücke|miss)\b"),
]


def _keys(lang: str, keys) -> list[str]:
    if isinstance(keys, str):                 # "weather.*": every key of that section
        section = keys.split(".")[0] + "."
        return [k for k in strings(lang) if k.startswith(section)]
    return keys


def _id(flag) -> str:
    lang, keys, bad, _ = flag
    name = keys if isinstance(keys, str) else keys[0] + (f"+{len(keys) - 1}" if len(keys) > 1 else "")
    return f"{lang}:{name}:{(bad or 'fix').split('|')[0][:30]}"


@pytest.mark.parametrize("flag", FLAGS, ids=[_id(f) for f in FLAGS])
def test_flagged_wording_fixed(flag):
    lang, keys, bad, good = flag
    s = strings(lang)
    for key in _keys(lang, keys):
        assert key in s, f"{lang} lost {key}"
        if bad:
            assert not re.search(bad, s[key]), f"{lang} {key} still says {re.search(bad, s[key]).group(0)!r}"
        if good:
            assert re.search(good, s[key], flags=re.S), f"{lang} {key}: expected /{good}/ in {s[key]!r}"


def test_the_choose_phase_has_one_name_per_language():
    for lang, word in (("es", "elección"), ("de", "Auswahl")):
        s = strings(lang)
        assert {s[f"{page}.phase_choose"] for page in ("abc", "gpt", "weather")} == {word}, lang
