"""A generated token sequence on a page, shown beside another for comparison (the cached and the
uncached loop's tokens, speculative and plain decoding's)."""
from __future__ import annotations

import streamlit as st


def show(label: str, text: str) -> None:
    """``label`` in bold over ``text`` in a bordered box. Plain ``st.text``, not ``st.code``: the
    code box loads Streamlit's syntax highlighter, ≈ 0.5 s of a fresh browser's main thread before
    the page's stepper is drawn (Chrome's profiler of a first visit to the Tiny GPT page)."""
    st.markdown(f"**{label}**")
    with st.container(border=True):
        st.text(text)
