"""Presenter mode: larger type and charts, controls reduced to Prev / Next / Reset.

Kept in plain session state (it survives page switches) and in the address as ``?present=1``,
so a lecturer can open a deep link straight into presenter mode.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from kvviz.ui.app.i18n import t

KEY = "present"

# Bigger type everywhere; the sidebar stays available but starts collapsed (see nav.page_setup).
CSS = """<style>
[data-testid='stMain'] { font-size: 1.3rem; }
[data-testid='stMain'] h1 { font-size: 2.6rem; }
[data-testid='stMain'] h3 { font-size: 2rem; }
[data-testid='stMain'] .block-container { max-width: 100%; padding: 3.5rem 1.5rem 1rem; }
[data-testid='stMain'] button p { font-size: 1.3rem; }
</style>"""


def init_from_url() -> None:
    """On a new session, the address decides (``?present=1``)."""
    if KEY not in st.session_state:
        st.session_state[KEY] = st.query_params.get(KEY) in ("1", "true", "on")


def _sync_url() -> None:
    if st.session_state[KEY]:
        st.query_params[KEY] = "1"
    else:
        st.query_params.pop(KEY, None)


def _toggled() -> None:
    st.session_state[KEY] = st.session_state.present_toggle
    _sync_url()


def presenting() -> bool:
    return bool(st.session_state.get(KEY, False))


def toggle() -> None:
    """The sidebar switch; also applies the presenter CSS."""
    st.toggle(t("present.toggle"), value=presenting(), key="present_toggle", on_change=_toggled,
              help=t("present.toggle_help"))
    _sync_url()
    if presenting():
        st.markdown(CSS, unsafe_allow_html=True)


@contextmanager
def settings(label_key: str = "present.settings") -> Iterator[None]:
    """Where a page draws its inputs: inline normally, folded away in presenter mode."""
    if presenting():
        with st.expander(t(label_key), icon=":material/tune:"):
            yield
    else:
        yield


# a sentence ends at . ! ? (or a closing quote or bracket after one) followed by a space and a capital,
# an opening quote or bold: "1.5" and "e.g. the" do not end one
_SENTENCE_END = re.compile(r"(?<=[.!?])[»”)*]*\s+(?=[A-ZÁÉÍÓÚÑÄÖÜ¿¡«“*])")
LEAD_CHARS = 320          # at most this much of the introduction stays open above the stepper


def lead(text: str, limit: int = LEAD_CHARS) -> tuple[str, str]:
    """An introduction split into what stays open (its first paragraph, or as many of its first
    sentences as fit ``limit`` characters, at least one) and the rest, which folds away; the two
    joined again are the whole text (up to the space at the split)."""
    first, sep, rest = text.partition("\n\n")
    if len(first) <= limit:
        return first, rest
    cut = 0
    for m in _SENTENCE_END.finditer(first):
        if m.start() > limit and cut:
            break
        cut = m.start()
        if cut > limit:
            break
    if not cut:
        return first, rest
    head, tail = first[:cut], first[cut:].lstrip()
    if head.count("**") % 2 or head.count("$") % 2 or head.count("`") % 2:    # never split inside markup
        return first, rest
    return head, tail + (sep + rest if rest else "")


def intro(text: str, label_key: str = "present.intro") -> None:
    """A page's introduction, the step first: normally its lead (``lead``) open and the rest folded
    (the stepper is visible without scrolling at 1400 × 900); in presenter mode all of it folded
    away (one idea on screen), under ``label_key`` ("About this section" for a tab's or a section's)."""
    if presenting():
        with st.expander(t(label_key), icon=":material/info:"):
            st.markdown(text)
        return
    head, rest = lead(text)
    st.markdown(head)
    if rest:
        with st.expander(t("look.intro_more"), icon=":material/info:"):
            st.markdown(rest)


def section_intro(text: str) -> None:
    """A tab's or a section's introduction: in full normally (the page's own introduction above is
    the one folded after its lead), folded away in presenter mode as "About this section"."""
    if presenting():
        intro(text, "present.intro_section")
    else:
        st.markdown(text)
