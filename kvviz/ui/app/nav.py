"""Page frame: page config, our own sidebar navigation with human labels, language selector.

Classic multipage mode (a ``pages/`` folder) with the default nav hidden in config.toml: with
``st.navigation`` plus ``pages/`` a deep link on a fresh server runs the page without app.py.
"""
from __future__ import annotations

import html
from pathlib import Path

import streamlit as st

from kvviz.ui.app import presenter, urlstate
from kvviz.ui.app.i18n import LANGS, t
from kvviz.ui.app.share import copy_link
from kvviz.ui.components import charts, plotly_js

# (script path, i18n key of its label, icon) in teaching order
PAGES = [
    ("app.py", "nav.home", ":material/home:"),
    ("pages/1_ABC_miniature.py", "nav.abc", ":material/looks_one:"),
    ("pages/2_Weather_heads.py", "nav.weather", ":material/looks_two:"),
    ("pages/3_Sampling.py", "nav.sampling", ":material/casino:"),
    ("pages/4_Tiny_GPT.py", "nav.gpt", ":material/smart_toy:"),
    ("pages/5_Cost_and_scale.py", "nav.cost", ":material/speed:"),
    ("pages/6_Paged_cache.py", "nav.paged", ":material/view_module:"),
    ("pages/7_Smaller_caches.py", "nav.compress", ":material/compress:"),
    ("pages/8_Speculative_decoding.py", "nav.speculative", ":material/fast_forward:"),
    ("pages/9_Real_LLM.py", "nav.llm", ":material/forum:"),
    ("pages/10_Lecture_script.py", "nav.lecture", ":material/school:"),
]

# app-wide CSS: contrast where the theme has no setting (st.html puts a style-only body in
# the event container, so it takes no room on the page)
STYLE = Path(__file__).with_name("style.css")


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
NO_CHARTS = ("home.title", "lecture.title")     # pages that draw no chart: no plotly to preload


def _forget_other_page(page: str) -> None:
    if st.session_state.get("_page") not in (None, page):
        for key in PAGE_LOCAL_KEYS:
            st.session_state.pop(key, None)
    st.session_state["_page"] = page


def page_setup(title_key: str) -> None:
    """Call first on every page: config, sidebar navigation, language."""
    _forget_other_page(title_key)
    presenter.init_from_url()
    st.set_page_config(page_title=f"kvviz · {t(title_key)}", page_icon=":material/memory:", layout="wide",
                       initial_sidebar_state="collapsed" if presenter.presenting() else "auto")
    if title_key not in NO_CHARTS:
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
        for path, label, icon in PAGES:
            st.page_link(path, label=t(label), icon=icon)
    urlstate.notice_slot()


def hidden_heading(text: str) -> None:
    """A level-2 heading for screen readers only. The heading outline must not skip a level (h1, then
    h2, then h3); this one opens a section whose look needs no heading, e.g. the stepper, whose event
    heading is an h3, or a tab of the Cost page. ``kv-sr-only`` in style.css keeps it out of sight
    and out of the layout."""
    st.html(f"<h2 class='kv-sr-only'>{html.escape(text)}</h2>")
