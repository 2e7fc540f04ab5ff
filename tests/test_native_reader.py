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
    # the vectors in Spanish words, not English ones inside a Spanish sentence («sus keys y su value»)
    ("es", "weather.*", r"(?i)(?<![-\w])(?:keys?|quer(?:y|ies)|values?)\b(?!-)", None),
    ("es", ["weather.did_prefill", "weather.did_decode", "weather.mask_title"], None, r"\bconsulta\b"),
    ("es", ["weather.mask_title", "weather.repair", "weather.stale_key"], None, r"\bclaves?\b"),
    ("es", ["weather.did_prefill", "weather.did_decode"], r"sus keys y su value", r"sus claves y su valor"),
    ("es", ["charts.query_axis", "charts.query"], r"\bquery\b", r"^consulta"),
    ("es", ["home.intro"], r"\bkeys\b|\bvalues\b|KV cache|lo ha procesado",
     r"las claves y los valores.*la \*\*caché KV\*\*"),
    ("es", ["home.intro"], None, r"hasta que esa pasada lo haya procesado"),
    ("es", ["sampling.q1_cache", "sampling.q3_vocab", "sampling.q3_reveal", "stepper.cache_title", "home.intro"],
     r"\b(?:el|un|la) (?:KV )?cache\b|\bKV cache\b|\bcache\b", r"(?i)\b(?:la|una) caché\b|^Caché KV"),
    ("es", ["cost.per_token_text"], r"\{x\} veces", r"\{x\} lo que cuesta con caché"),
    ("es", ["cost.ms_ttft_text"], r"pasos de decode|\{p\} posiciones",
     r"el prefill, que procesó \{p, plural, .*\}, tardó \{x\}× lo que una pasada de decode"),
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
    ("de", ["compress.intro"], r"das Fach", r"deshalb wird er in der Praxis verkleinert"),
    ("de", ["stepper.no_attention"], r"Auswählen rechnet", r"^Beim Auswählen wird keine Attention berechnet"),
    ("de", ["speculative.intro", "speculative.expected_body"], r"durch den Speicher begrenzt", r"speichergebunden"),
    ("de", ["sampling.cap_input"], r"Der Softmax", r"^Die Softmax der Logits"),
    ("de", "cost.*", r"Decode-Schritt", None),
    ("es", ["speculative.did_verify", "speculative.did_verify_plain", "speculative.todo_draft"],
     r"(?<!modelo )\b[Ee]l objetivo\b", r"\b[Ee]l modelo objetivo\b"),
    ("es", ["paged.pool_title", "paged.fw_pool"], r"(?i)\bpool\b", r"^Conjunto de bloques"),
    ("es", ["paged.did_prefill", "paged.did_boundary", "paged.did_finished"], r"lista de libres",
     r"lista de bloques libres"),
    ("es", ["speculative.fig_u"], r"sorteo uniforme", r"número aleatorio uniforme"),
    ("es", ["gpt.did_decode", "gpt.attention_title", "gpt.cache_grew", "cost.ai_text"], r"\bpaso\b", r"\bpasada\b"),
    ("es", ["stepper.cache_title", "paged.check_ok"], r"\{n\} filas", r"\{n, plural, one \{"),
    # the real-LLM views (SmolLM2), read again by a native lecturer
    ("es", ["specllm.cases_body_early_exit"], r"es lo que las primeras capas", r"la frecuencia con que las primeras"),
    ("es", ["specllm.text_help"], r"marcas de rol|texto propio del caso", r"marcadores de rol"),
    ("es", ["compress.llm_intro", "compress.intro"], r"(?i)\bcampo\b", None),
    ("es", ["specllm.m_draft_help", "specllm.round0_ee", "specllm.w_no_draft", "specllm.verify_body_plain",
            "specllm.measure_reading", "specllm.cases_body_prompt_lookup"], r"\bpasos? normal", r"\bpasadas?\b"),
    ("de", ["specllm.exact_transformers"], r"gleichen gewöhnlichem Decode",
     r"dieselben wie beim gewöhnlichen Decoding mit Greedy"),
    ("de", ["specllm.text_help"], r"kommt darum|eigene Text des Falls|System-Prompt|Rollenmarken|Chat-Vorlage",
     r"Chatvorlage \(Systemprompt und Rollenmarker\) wird um sie herum gelegt"),
    ("de", ["llm.new_tokens_help", "llm.tokens_intro_chat", "llm.part_assistant", "llm.ended"], r"\bZug\b",
     r"\bBeitrag\b"),
    ("de", ["paged.fork_intro", "paged.lq_prefill_saved"], r"durchs Prefill|gespartes Prefill",
     r"durch den Prefill|gesparter Prefill"),
    ("de", ["paged.llm_run_help", "specllm.measure_intro", "speculative.measure_intro", "compress.llm_run_help",
            "cost.ms_caps"], r"zur Zeit|gleichzeitig", r"jeweils nur"),
    ("de", ["specllm.s_plain_passes", "specllm.exact_title", "specllm.exact_plain", "specllm.speedup_title",
            "specllm.measure_intro", "speculative.fig_plain", "speculative.s_plain_passes"],
     r"gewöhnliche[nmrs]? Decode\b(?!-)", r"(?i)gewöhnliche[nms]? Decoding"),
    ("de", ["specllm.m_draft_help", "specllm.w_no_draft", "specllm.verify_body_plain", "specllm.measure_reading",
            "specllm.cases_body_prompt_lookup", "speculative.fig_no_proposals", "speculative.no_alpha"],
     r"gewöhnliche[nmrs]? Schritt", r"Durchl[aä]uf"),
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


def test_one_row_one_verb_and_no_the_1_in_the_real_llm_views():
    """A count of one takes a verb in the singular ("the draft's row … was cropped") and is not read as
    "the 1 token": the one-token prompt and the one-row rollback in all three languages."""
    from kvviz.ui.app.i18n import render
    s = {lang: strings(lang) for lang in ("en", "es", "de")}
    one = {"en": "The draft's row in layers 1 to 3 (the bottom strip) was cropped",
           "es": "La fila del borrador en las capas 1 a 3 (la franja de abajo) se recortó",
           "de": "Die Zeile des Entwurfs in den Schichten 1 bis 3 (der untere Streifen) wurde"}
    two = {"en": "rows in layers 1 to 3 (the bottom strip) were cropped", "es": "se recortaron", "de": "wurden"}
    for lang in one:
        assert render(s[lang]["specllm.rollback_ee"], lang, d=1, k=3).startswith(one[lang]), lang
        assert two[lang] in render(s[lang]["specllm.rollback_ee"], lang, d=2, k=3), lang
    args = dict(n=1, layers=30, kv=3, hs=64, heads=9)
    assert "ran the prompt's only token through all 30 layers" in render(s["en"]["llm.did_prefill"], "en", **args)
    assert "el único token del prompt por las 30 capas" in render(s["es"]["llm.did_prefill"], "es", **args)
    assert "das einzige Prompt-Token in einem Durchlauf durch alle 30 Schichten" in render(
        s["de"]["llm.did_prefill"], "de", **args)


def test_counts_read_as_a_native_reader_expects():
    """The exact phrases a lecturer read: one row, one step, one position; two requests joined with y."""
    from kvviz.ui.app.i18n import render
    s = {lang: strings(lang) for lang in ("en", "es", "de")}
    assert render(s["en"]["stepper.cache_title"], "en", n=1) == "KV cache (1 row)"
    assert render(s["en"]["compress.m_so_far"], "en", n=1).endswith("(1 step)")
    assert render(s["en"]["weather.reads_line"], "en", head="H", where=[4], reads="r", ctx="c").startswith(
        "**H**: key +1 at position 4. ")
    assert render(s["es"]["paged.check_exact"], "es", n=1).startswith(
        "Comprobación: la única fila de esta pasada coincide")
    assert "1 posición)" in render(s["es"]["speculative.did_draft_first"], "es", r=1, fed="A", k=1, tok="B", pos=2,
                                   how="h", n=3)
    assert render(s["es"]["paged.did_decode"], "es", ids=[0, 1]).endswith("peticiones 0 y 1.")
    assert render(s["de"]["paged.did_decode"], "de", ids=[0, 1]).endswith("Anfragen 0 und 1.")
