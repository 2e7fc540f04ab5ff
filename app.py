"""kvviz home page: the map of the app. Thin, and free of torch so it loads fast."""
import streamlit as st

from kvviz.ui.nav import PAGES, page_setup
from kvviz.ui.i18n import t

page_setup("home.title")

st.title(t("home.title"))
st.markdown(t("home.intro"))
st.subheader(t("home.pages"))
for path, label, icon in PAGES[1:]:
    st.page_link(path, label=t(label), icon=icon)
    st.caption(t(label.replace("nav.", "home.blurb_")))
