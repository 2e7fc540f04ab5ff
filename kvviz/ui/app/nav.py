"""Page frame: page config, our own sidebar navigation with human labels, language selector.

Classic multipage mode (a ``pages/`` folder) with the default nav hidden in config.toml: with
``st.navigation`` plus ``pages/`` a deep link on a fresh server runs the page without app.py.
"""
from __future__ import annotations

import html
from pathlib import Path

import streamlit as st

from kvviz.ui.app import presenter, urlstate, waiting
from kvviz.ui.app.i18n import LANGS, t
from kvviz.ui.app.pages import BY_TITLE, PAGES, Place, places
from kvviz.ui.app.share import copy_link
from kvviz.ui.components import charts, plotly_js
from kvviz.ui.components.sources import show_sources

# app-wide CSS: contrast where the theme has no setting (st.html puts a style-only body in
# the event container, so it takes no room on the page)
STYLE = Path(__file__).with_name("style.css")
# the tab's icon, sent inline as a data URL: a ":material/…:" page icon makes the browser fetch an
# SVG from Google's font host, which a lecture hall without internet cannot reach
ICON = Path(__file__).with_name("icon.svg").read_text(encoding="utf-8")


def _lang_to_url() -> None:
    if st.session_state.lang == "en":
        st.query_params.pop("lang", None)
    else:
        st.query_params["lang"] = st.session_state.lang


def _pick_lang() -> None:
    st.session_state.lang = st.session_state.lang_select
    _lang_to_url()


# Widget keys that several pages use with their own meaning (and as short URL names: ?step=3).
# Streamlit keeps a key's state across a page switch when the next page has a widget with the same
# key, so "A B" from the A/B/C page would land in the weather prompt: clear them on a switch.
PAGE_LOCAL_KEYS = ("step", "prompt", "new", "repair")


def _forget_other_page(page: str) -> None:
    if st.session_state.get("_page") not in (None, page):
        for key in PAGE_LOCAL_KEYS:
            st.session_state.pop(key, None)
    st.session_state["_page"] = page


def page_setup(title_key: str) -> None:
    """Call first on every page (``title_key``: its declaration's, kvviz/ui/app/pages.py): config, sidebar
    navigation, language; on a fresh server, the wait for the warm-up's steps of this page."""
    _forget_other_page(title_key)
    presenter.init_from_url()
    st.set_page_config(page_title=f"kvviz · {t(title_key)}", page_icon=ICON, layout="wide",
                       initial_sidebar_state="collapsed" if presenter.presenting() else "auto")
    if BY_TITLE[title_key].charts:
        plotly_js.preload()          # first, so the browser evaluates plotly while the page builds
    st.html(STYLE)
    # ?lang=es in the URL (a bound selectbox would put "Español" there); the URL wins on first load
    if "lang" not in st.session_state:          # a new session: the address decides
        url_lang = st.query_params.get("lang", "en")
        st.session_state.lang = url_lang if url_lang in LANGS else "en"
    with st.sidebar:
        # "lang" is plain session state (it survives page switches); the widget only edits it
        st.selectbox(t("nav.language"), list(LANGS), index=list(LANGS).index(st.session_state.lang),
                     format_func=LANGS.get, key="lang_select", on_change=_pick_lang)
        _lang_to_url()   # keep the address shareable after page switches
        presenter.toggle()
        copy_link()
        charts.format_picker()
        st.markdown(f"**{t('nav.title')}**")
        for page in PAGES:                      # kvviz/ui/app/pages.py: every page, in teaching order
            st.page_link(page.script, label=t(page.label_key), icon=page.icon)
    urlstate.notice_slot()
    # a fresh server's warm-up may still be importing the page or making its default run: the page
    # waits for it with a progress message (kvviz/ui/app/waiting.py) instead of computing a copy
    waiting.for_page(title_key)


def page_foot() -> None:
    """Call last on every page: the foot of the page set up by :func:`page_setup`, its sources
    (``PageSpec.sources``) in a closed expander. After the body, so a body that returns early still
    has it."""
    page = st.session_state["_page"]
    show_sources(BY_TITLE[page].sources)
    glossary = BY_TITLE["glossary.title"]
    if page != glossary.title_key:          # the words the pages use, one click from every page
        st.page_link(glossary.script, label=t("first.glossary_link"), icon=glossary.icon)


def hidden_heading(text: str) -> None:
    """A level-2 heading for screen readers only. The heading outline must not skip a level (h1, then
    h2, then h3); this one opens a section whose look needs no heading, e.g. the stepper, whose event
    heading is an h3, or a tab of the Cost page. ``kv-sr-only`` in style.css keeps it out of sight
    and out of the layout."""
    st.html(f"<h2 class='kv-sr-only'>{html.escape(text)}</h2>")


def folded_settings(label_key: str = "present.settings"):
    """Where a page whose stepper must come first (the first event in sight at 1400 × 900)
    draws its inputs: folded in both modes, under the label presenter mode gives its settings
    (kvviz.ui.app.presenter.settings)."""
    return st.expander(t(label_key), icon=":material/tune:")


# how long a hover definition may be: the glossary entry's first sentences up to this many characters
TERM_CHARS = 220


def term_help(term: str, text: str | None = None) -> str:
    """A widget's or metric's ``help=`` where a glossary term (kvviz/ui/pages/glossary.py TERMS) first
    appears: ``text`` (the widget's own help, if any), then the glossary's own definition, shortened
    to its lead, and a link to the entry. One source: the strings ``glossary.h_<term>`` and
    ``glossary.d_<term>``, never a second wording."""
    short, rest = presenter.lead(t(f"glossary.d_{term}"), TERM_CHARS)
    line = f"**{t(f'glossary.h_{term}')}:** {short}" + (" …" if rest else "")
    link = f"[{t('first.glossary_entry')}](Glossary#{term})"
    return "\n\n".join(part for part in (text, line, link) if part)


def place_text(p: Place) -> str:
    """Where a screen sits in the lecture script, as the stepper and a page's title say it: its section
    (the script's heading number) and its number among all the script's screens, the number the
    exported lecture gives the same screen ("Screen 44 of 53"): "Lecture script, section 8: screen 44 of 53"."""
    every = places()
    return t("notice.lecture_place", section=p.section, n=every.index(p) + 1, total=len(every))
