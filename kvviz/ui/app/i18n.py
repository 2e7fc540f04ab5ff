"""Interface text in English, Spanish and German.

Strings live in ``locales/<lang>/<section>.json`` (one folder per language, one file per page or
shared section). ``t("abc.title")`` looks up key ``title`` in section ``abc`` for the current
language and falls back to English, so a missing translation never breaks a page (a test lists them).
"""
from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import streamlit as st

LANGS = {"en": "English", "es": "Español", "de": "Deutsch"}
LOCALES = Path(__file__).parents[1] / "locales"


@cache
def strings(lang: str) -> dict[str, str]:
    """All keys of one language as ``section.key -> text`` (read-only, cached per process)."""
    out: dict[str, str] = {}
    for f in sorted((LOCALES / lang).glob("*.json")):
        for k, v in json.loads(f.read_text(encoding="utf-8")).items():
            out[f"{f.stem}.{k}"] = v
    return out


def current_lang() -> str:
    # The selector's state exists only once the widget ran; before that (page title) read the URL.
    lang = st.session_state.get("lang") or st.query_params.get("lang", "en")
    return lang if lang in LANGS else "en"


def t(key: str, **fmt: object) -> str:
    """The text for ``key`` in the current language, formatted with ``fmt``."""
    text = strings(current_lang()).get(key) or strings("en").get(key)
    if text is None:
        raise KeyError(f"missing interface string {key!r}")
    return text.format(**fmt) if fmt else text
