"""The lecture script: the pages in teaching order, one deep link per screen to show, minutes per
section; and, on each page, the place of the screen it shows ("Lecture script, section 2: screen 8 of 53 · next →")."""
from __future__ import annotations

import html

import streamlit as st

from kvviz.ui.app import nav, presenter
from kvviz.ui.app.i18n import t
from kvviz.ui.app.links import anchor, deep_link, show_links
from kvviz.ui.app.pages import PAGE, PAGES, matching

# (section, [(page, address parameters, i18n key of the line to say)]) in the order of a lecture: each
# page's screens as its declaration lists them (kvviz/ui/app/pages.py), the pages in teaching order
SCRIPT: list[tuple[str, list[tuple[str, dict, str]]]] = [
    (page.key, [(page.script, screen.params, screen.key) for screen in page.lecture]) for page in PAGES if page.lecture]

def title(page_key: str, text: str) -> None:
    """A page's title; where the address is a screen of the script without a step (the stepper says
    those with one), its place and the link to the next screen under it (in presenter mode beside it)."""
    found = [(p, nxt) for p, nxt in matching(page_key, st.query_params.to_dict()) if p.step is None]
    if not found:
        st.title(text)
        return
    p, nxt = found[0]
    nxt_link = (" · " + anchor(f"{t('notice.lecture_next')} →", deep_link(nxt.page.script, nxt.screen.params))
                if nxt else "")
    place = f"<p class='kv-place'>{html.escape(nav.place_text(p))}{nxt_link}</p>"
    if presenter.presenting():                 # beside the title: the screen keeps its height
        left, right = st.columns([3, 1], vertical_alignment="center")
        left.title(text)
        right.markdown(place, unsafe_allow_html=True)
    else:
        st.title(text)
        st.markdown(place, unsafe_allow_html=True)


def render() -> None:
    st.title(t("lecture.title"))
    st.markdown(t("lecture.intro"))
    total = sum(page.minutes for page in PAGES if page.lecture)
    st.markdown(t("lecture.minutes_total", m=total))
    n = 0
    for section, steps in SCRIPT:
        st.header(t(f"lecture.h_{section}"))
        st.caption(t("lecture.minutes", m=PAGE[section].minutes))
        rows = []
        for page, params, key in steps:
            n += 1
            rows.append((t(f"lecture.{key}"), deep_link(page, params), t(f"lecture.{key}_why")))
        show_links(rows)
    st.caption(t("lecture.footer", n=n))
