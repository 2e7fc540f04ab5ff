"""A page asked for while the server's warm-up (kvviz/ui/app/warmup_state.py) is still preparing what it needs.

``wait_for(*keys)`` holds the page's run until those warm-up steps are done, showing meanwhile what
is being prepared (step i of n), the seconds so far and what the step took at the last start
(``warmup_state.times_file``), with a bar towards the page's last step; it redraws on every change and
twice a second, so no visitor waits blind, and the page is drawn in the same run as soon as its
steps are done. It never computes anything itself: what the warm-up is computing (a default run,
a model's load) is computed once. ``nav.page_setup`` waits for a page's imports and default run
(``for_page``), ``models.real_model`` for a real model and its default runs.

Outside a page's run (the warm-up itself, the command line, tests) or when no warm-up runs, it
returns at once.
"""
from __future__ import annotations

import itertools

import streamlit as st
from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

from kvviz.ui.app import fmt, warmup_state
from kvviz.ui.app.i18n import t
from kvviz.ui.app.pages import BY_TITLE

POLL_S = 0.5              # the message's clock is redrawn at least this often
WAIT_KEY = "kv_wait_"     # the message's container (st-key-kv_wait_<n>): never hidden by presenter mode's hold
_DRAWN = itertools.count(1)


def page_keys(title_key: str) -> list[str]:
    """The warm-up steps a page needs before its body runs: the imports, and its own default run."""
    body = BY_TITLE[title_key].body
    return [] if body is None else ["engine", f"warm:{body}"]


def for_page(title_key: str) -> None:
    wait_for(*page_keys(title_key))


def done(*keys: str) -> bool:
    """No need to wait for ``keys``: the warm-up has made them, or makes none of them."""
    return all(warmup_state.STATE.done(k) for k in keys)


def _cached() -> bool:
    """Inside an st.cache_resource function (whose elements Streamlit would replay on later hits)."""
    try:
        from streamlit.runtime.caching.cache_utils import in_cached_function
    except ImportError:                     # a later Streamlit: draw nothing there
        return True
    return bool(in_cached_function.get())


def wait_for(*keys: str) -> None:
    """In a page's run: until the warm-up has done every step in ``keys``, with a progress message."""
    state = warmup_state.STATE
    if done(*keys) or warmup_state.in_warm_up() or get_script_run_ctx() is None:
        return
    state.hurry.set()                       # the warm-up stops letting page loads pass: this page needs it
    if _cached():                           # the caller's run already waited and drew; block only
        while not done(*keys):
            state.wait(POLL_S)
        return
    box = st.empty()
    while not done(*keys):
        # a key of its own each time (two waits in one run never share one); presenter mode's hold shows it
        with box.container(key=f"{WAIT_KEY}{next(_DRAWN)}"):
            show(state, keys)
        state.wait(POLL_S)
    box.empty()


def _label(step: warmup_state.Step) -> str:
    if step.page:
        return t(step.label, page=t(f"nav.{step.page}"))
    if step.model:
        return t(step.label, model=step.model)
    return t(step.label)


def show(state: warmup_state.WarmUp, keys: tuple[str, ...]) -> None:
    """The message: the step running, how far the warm-up is towards the page's last step, the time."""
    import time

    snap = state.status()
    if snap["step"] is None:                    # between two steps
        return
    i = snap["step"] - 1
    step = state.steps[i]
    n = state.count()
    if n is None:
        st.info(t("warmup.wait_first", what=_label(step)), icon=":material/hourglass_top:")
    else:
        st.info(t("warmup.wait", step=i + 1, steps=n, what=_label(step)), icon=":material/hourglass_top:")
    elapsed = time.monotonic() - state.step_started
    last = state.last_seconds(step.key)
    st.progress(fraction(state, keys, i, elapsed),
                text=t("warmup.time", s=fmt.fixed(elapsed, 1), last=fmt.fixed(last, 1)) if last is not None
                else t("warmup.time_first", s=fmt.fixed(elapsed, 1)))


def fraction(state: warmup_state.WarmUp, keys: tuple[str, ...], i: int, elapsed: float) -> float:
    """How far the warm-up is towards the last step the page waits for, by the last start's durations
    (by steps where a duration is missing)."""
    known = [state.index(k) for k in keys]
    end = max([j for j in known if j is not None] + [i])
    before = [state.last_seconds(s.key) for s in state.steps[:i]]
    ahead = [state.last_seconds(s.key) for s in state.steps[i:end + 1]]
    if None in before or None in ahead:
        current = 0.5 if ahead[0] is None else min(elapsed / max(ahead[0], 1e-3), 0.95)
        return min((i + current) / (end + 1), 1.0)
    total = sum(before) + sum(ahead)
    return min((sum(before) + min(elapsed, 0.95 * ahead[0])) / max(total, 1e-3), 1.0)
