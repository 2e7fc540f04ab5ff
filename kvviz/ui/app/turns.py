"""One heavy job at a time per server: a timing or a measurement that another visitor's would slow.

The locks are this server's (``st.cache_resource``: one per name, shared by every session, never
replaced); a visitor who finds one taken is told so at once instead of waiting behind it.
"""
from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st


@st.cache_resource(show_spinner=False)
def server_lock(name: str) -> threading.Lock:
    """This server's lock called ``name`` (a timing held while it runs: two at once would time each other)."""
    return threading.Lock()


@contextmanager
def my_turn(name: str, busy: str) -> Iterator[bool]:
    """Hold ``server_lock(name)`` for the block and yield True; if another visitor holds it, show
    ``busy`` and yield False at once."""
    lock = server_lock(name)
    if not lock.acquire(blocking=False):
        st.warning(busy, icon=":material/hourglass_top:")
        yield False
        return
    try:
        yield True
    finally:
        lock.release()
