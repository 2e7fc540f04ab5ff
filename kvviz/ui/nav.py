"""Page frame: page config, our own sidebar navigation with human labels, language selector.

Classic multipage mode (a ``pages/`` folder) with the default nav hidden in config.toml: with
``st.navigation`` plus ``pages/`` a deep link on a fresh server runs the page without app.py.
"""
from __future__ import annotations

import streamlit as st

from kvviz.ui.i18n import LANGS, t

# (script path, i18n key of its label, icon) in teaching order
PAGES = [
    ("app.py", "nav.home", ":material/home:"),
    ("pages/1_ABC_miniature.py", "nav.abc", ":material/looks_one:"),
]


def page_setup(title_key: str) -> None:
    """Call first on every page: config, sidebar navigation, language."""
    st.set_page_config(page_title=f"kvviz · {t(title_key)}", page_icon=":material/memory:", layout="wide")
    with st.sidebar:
        st.selectbox(t("nav.language"), list(LANGS), format_func=LANGS.get, key="lang",
                     bind="query-params", persist_state="session")
        st.markdown(f"**{t('nav.title')}**")
        for path, label, icon in PAGES:
            st.page_link(path, label=t(label), icon=icon)
