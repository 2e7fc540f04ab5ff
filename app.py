"""kvviz home page: the map of the app. Thin, and free of torch so it loads fast.

``streamlit run app.py`` finds ``app`` below (an ``st.App``, Streamlit's ASGI entry point) and
serves this script through it; its lifespan loads the engine before the server takes its first
request (kvviz/ui/app/warmup.py), and its middleware sends the charts' plotly.js and Streamlit's
frontend files from memory (kvviz/ui/app/serve_files.py). Streamlit runs this file as the home page's
script, under ``__name__ == "__main__"``.
"""
import streamlit as st

if __name__ != "__main__":                  # imported by `streamlit run` to be served
    from starlette.middleware import Middleware

    from kvviz.ui.app.serve_files import ServeFromMemory
    from kvviz.ui.app.warmup import lifespan

    app = st.App("app.py", lifespan=lifespan, middleware=[Middleware(ServeFromMemory)])
else:                                        # the home page
    from kvviz.ui.app.i18n import t
    from kvviz.ui.app.links import deep_link, show_links
    from kvviz.ui.app.nav import page_setup
    from kvviz.ui.app.pages import PAGE, PAGES, PATH

    page_setup("home.title")

    st.title(t("home.title"))
    st.markdown(t("home.intro"))
    # the path: the lesson's core pages, then further, then the lecture's; one line each of what it shows
    st.header(t("look.home_path"))
    for part, keys in PATH:
        st.subheader(t(f"look.home_{part}"))
        if part != "reference":
            st.markdown(t(f"look.home_{part}_intro"))
        show_links([(t(PAGE[k].label_key), deep_link(PAGE[k].script), t(f"look.line_{k}")) for k in keys])
    # plain links with their addresses (the sidebar has the same pages as in-app links)
    with st.expander(t("look.home_details")):
        show_links([(t(page.label_key), deep_link(page.script), t(page.blurb_key)) for page in PAGES[1:]])
