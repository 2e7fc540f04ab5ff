"""A page's sources: the papers and documentation its mechanism comes from, at the page's foot.

Declared once per page (``PageSpec.sources``, kvviz/ui/app/pages.py), the references themselves in
kvviz/references.py; what each one gives the app is ``sources.<key>`` in the locale files.
"""
from __future__ import annotations

import streamlit as st

from kvviz.references import REFERENCE, Reference
from kvviz.ui.app.i18n import t


def source_line(ref: Reference) -> str:
    """One Markdown list item: ``Shazeer 2019, §2.4. [“Title”](url). arXiv:1911.02150. — what it gives here``
    (the title in the language's quotation marks; a report's or a program's kind said in the language)."""
    where = f", {ref.where}" if ref.where else ""
    title = t("sources.title", title=ref.title.replace("[", "\\[").replace("]", "\\]"))
    venue = ", ".join(x for x in (ref.venue, t(f"sources.kind_{ref.kind}") if ref.kind else "") if x)
    return f"- {ref.cite()}{where}. [{title}]({ref.url}). {venue}. — {t(f'sources.{ref.key}')}"


def show_sources(keys: tuple[str, ...]) -> None:
    """The sources ``keys`` as a closed expander (nothing when there are none)."""
    if not keys:
        return
    with st.expander(t("sources.heading"), icon=":material/menu_book:"):
        st.markdown(t("sources.intro") + "\n\n" + "\n".join(source_line(REFERENCE[k]) for k in keys))
