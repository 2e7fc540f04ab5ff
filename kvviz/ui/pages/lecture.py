"""The lecture script: the pages in teaching order, one deep link per screen to show, minutes per
section; and, on each page, the place of the screen it shows ("Lecture 2.3 of 4 · next →")."""
from __future__ import annotations

import html
from collections.abc import Mapping
from dataclasses import dataclass

import streamlit as st

from kvviz.ui.app import presenter
from kvviz.ui.app.i18n import t
from kvviz.ui.app.links import anchor, deep_link, show_links
from kvviz.ui.app.pages import PAGE, PAGES, PageSpec, Screen

# (section, [(page, address parameters, i18n key of the line to say)]) in the order of a lecture: each
# page's screens as its declaration lists them (kvviz/ui/app/pages.py), the pages in teaching order
SCRIPT: list[tuple[str, list[tuple[str, dict, str]]]] = [
    (page.key, [(page.script, screen.params, screen.key) for screen in page.lecture]) for page in PAGES if page.lecture]

# address parameters that say how to show a screen, not which screen it is
_NOT_THE_SCREEN = ("lang", "present", "step")


@dataclass(frozen=True)
class Place:
    """One screen of the script: section ``section`` (1-based, teaching order), ``index`` of ``of`` in it."""
    section: int
    index: int
    of: int
    page: PageSpec
    screen: Screen

    @property
    def number(self) -> str:
        return f"{self.section}.{self.index}"

    @property
    def step(self) -> int | None:
        """The stepper's event it shows (None: a screen without one)."""
        return int(self.screen.params["step"]) if "step" in self.screen.params else None


def places() -> list[Place]:
    """Every screen of the script in order, numbered as the script's sections are."""
    out = []
    for s, page in enumerate((p for p in PAGES if p.lecture), start=1):
        out += [Place(s, i, len(page.lecture), page, screen) for i, screen in enumerate(page.lecture, start=1)]
    return out


def matching(page_key: str, query: Mapping[str, str]) -> list[tuple[Place, Place | None]]:
    """The screens of ``page_key`` that the address ``query`` shows (its parameters, the language,
    presenter mode and the step aside, are exactly the screen's), each with the script's next screen."""
    here = {k: str(v) for k, v in query.items() if k not in _NOT_THE_SCREEN}
    every = places()
    out = []
    for n, p in enumerate(every):
        if p.page.key != page_key:
            continue
        if {k: str(v) for k, v in p.screen.params.items() if k not in _NOT_THE_SCREEN} == here:
            out.append((p, every[n + 1] if n + 1 < len(every) else None))
    return out


def place_text(p: Place) -> str:
    return t("notice.lecture_place", n=p.number, of=p.of)


def stepper_places(page_key: str | None) -> list[list]:
    """For the stepper (step_view.stepper): ``[step, "Lecture 2.3 of 4", next address, next title]``
    for each screen of the address shown that names a step."""
    if page_key not in PAGE:
        return []
    return [[p.step, place_text(p), deep_link(nxt.page.script, nxt.screen.params) if nxt else "",
             t(f"lecture.{nxt.screen.key}") if nxt else ""]
            for p, nxt in matching(page_key, st.query_params.to_dict()) if p.step is not None]


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
    place = f"<p class='kv-place'>{html.escape(place_text(p))}{nxt_link}</p>"
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
