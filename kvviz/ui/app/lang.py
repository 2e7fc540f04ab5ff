"""The languages kvviz speaks and the current page's one.

Below both ``i18n`` (the texts) and ``fmt`` (the numbers), which each need the page's language:
with it here neither imports the other's module to learn it, so the two hold no import circle.
"""
from __future__ import annotations

LANGS = {"en": "English", "es": "Español", "de": "Deutsch"}


def current_lang() -> str:
    """The page's language: the selector's, else the address's ``?lang=``, else English."""
    import streamlit as st  # here: texts and numbers are formatted without Streamlit too
    # The selector's state exists only once the widget ran; before that (page title) read the URL.
    lang = st.session_state.get("lang") or st.query_params.get("lang", "en")
    return lang if lang in LANGS else "en"
