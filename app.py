"""kvviz home page: the map of the app. Thin, and free of torch so it loads fast."""
import streamlit as st

from kvviz.ui.i18n import t
from kvviz.ui.links import deep_link, show_links
from kvviz.ui.nav import PAGES, page_setup

page_setup("home.title")

st.title(t("home.title"))
st.markdown(t("home.intro"))
st.header(t("home.pages"))
# plain links with their addresses (the sidebar has the same pages as in-app links)
show_links([(t(label), deep_link(path), t(label.replace("nav.", "home.blurb_"))) for path, label, _ in PAGES[1:]])
