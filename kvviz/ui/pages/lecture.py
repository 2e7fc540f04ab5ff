"""The lecture script: the pages in teaching order, one deep link per screen to show."""
from __future__ import annotations

import streamlit as st

from kvviz.ui.app.i18n import t
from kvviz.ui.app.links import deep_link, show_links
from kvviz.ui.app.pages import PAGES

# (section, [(page, address parameters, i18n key of the line to say)]) in the order of a lecture: each
# page's screens as its declaration lists them (kvviz/ui/app/pages.py), the pages in teaching order
SCRIPT: list[tuple[str, list[tuple[str, dict, str]]]] = [
    (page.key, [(page.script, screen.params, screen.key) for screen in page.lecture]) for page in PAGES if page.lecture]


def render() -> None:
    st.title(t("lecture.title"))
    st.markdown(t("lecture.intro"))
    n = 0
    for section, steps in SCRIPT:
        st.header(t(f"lecture.h_{section}"))
        rows = []
        for page, params, key in steps:
            n += 1
            rows.append((t(f"lecture.{key}"), deep_link(page, params), t(f"lecture.{key}_why")))
        show_links(rows)
    st.caption(t("lecture.footer", n=n))
