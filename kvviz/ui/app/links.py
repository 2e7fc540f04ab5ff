"""Links that open a page in a given state (a fresh session reads everything from the address).

They are plain anchors with a leading slash (``/ABC_miniature?step=2``), opened in the same tab:
a deep link is exactly what a student gets when a lecturer shares the address.
"""
from __future__ import annotations

import html
from urllib.parse import urlencode

import streamlit as st

from kvviz.ui.app import presenter
from kvviz.ui.app.i18n import current_lang
from kvviz.ui.app.pages import url_path


def address(script: str, params: dict[str, object] | None = None, lang: str = "en", present: bool = False) -> str:
    """The address of ``script`` with ``params`` in ``lang`` (English is left out) and presenter mode."""
    query = {k: str(v) for k, v in (params or {}).items()}
    if lang != "en":
        query.setdefault("lang", lang)
    if present:
        query.setdefault("present", "1")
    return url_path(script) + ("?" + urlencode(query) if query else "")


def deep_link(script: str, params: dict[str, object] | None = None) -> str:
    """The address of ``script`` with ``params``, keeping the current language and presenter mode."""
    return address(script, params, current_lang(), presenter.presenting())


def anchor(label: str, href: str, css_class: str = "kv-link") -> str:
    return f"<a class='{css_class}' href='{html.escape(href)}' target='_self'>{html.escape(label)}</a>"


def show_links(rows: list[tuple[str, str, str]]) -> None:
    """rows of (link label, address, one line of explanation), as a numbered list."""
    items = "".join(f"<li>{anchor(label, href)}<br><span class='kv-why'>{html.escape(why)}</span></li>"
                    for label, href, why in rows)
    st.markdown("<style>.kv-steps li{margin:.35em 0}.kv-steps .kv-link{font-weight:600}"
                ".kv-why{opacity:.8}</style>" f"<ol class='kv-steps'>{items}</ol>", unsafe_allow_html=True)
