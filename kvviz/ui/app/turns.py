"""One heavy job at a time per server: a timing or a measurement that another visitor's would slow.

The locks are this server's (``st.cache_resource``: one per name, shared by every session, never
replaced); a visitor who finds one taken is told so at once instead of waiting behind it.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from contextlib import AbstractContextManager, contextmanager

import streamlit as st


@st.cache_resource(show_spinner=False)
def server_lock(name: str) -> threading.Lock:
    """This server's lock called ``name`` (a timing held while it runs: two at once would time each other)."""
    return threading.Lock()


@contextmanager
def held(lock: threading.Lock, busy: str) -> Iterator[bool]:
    """Hold ``lock`` for the block and yield True; if another visitor holds it, show ``busy`` and
    yield False at once (a ``RunStore``'s ``running``, a ``server_lock``)."""
    if not lock.acquire(blocking=False):
        st.warning(busy, icon=":material/hourglass_top:")
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def my_turn(name: str, busy: str) -> AbstractContextManager[bool]:
    """``held`` on this server's lock called ``name``."""
    return held(server_lock(name), busy)


class RunStore:
    """This server's finished runs of one expensive kind (read-only records, the newest ``size``)
    and the lock that lets one such run go at a time (a real model's run takes both cores): the
    Real LLM's generations, the Paged cache's SmolLM2 runs, the Smaller caches' trade-offs. Hold it
    in ``st.cache_resource``: shared by every session, its records never changed after ``put``."""

    def __init__(self, size: int = 3) -> None:
        self.size = size
        self.running = threading.Lock()
        self._guard = threading.Lock()
        self._done: OrderedDict[Hashable, object] = OrderedDict()

    def get(self, key: Hashable) -> object | None:
        with self._guard:
            got = self._done.get(key)
            if got is not None:
                self._done.move_to_end(key)
            return got

    def put(self, key: Hashable, value: object) -> None:
        with self._guard:
            self._done[key] = value
            while len(self._done) > self.size:
                self._done.popitem(last=False)
