"""Settings that live in the address (``?new=6``) without Streamlit's ``bind`` for numbers.

A bound ``st.number_input`` raises inside Streamlit on ``?new=-inf`` or ``?new=nan`` (seen on
1.67), so numeric settings are parsed here: a new session takes the address's value when it is
valid, and otherwise keeps the default and says so on the page.
"""
from __future__ import annotations

import math

import streamlit as st

from kvviz.ui.i18n import t


def int_param(key: str, default: int, low: int, high: int) -> None:
    """Initialise ``st.session_state[key]`` from ``?key=`` once per session (valid ints in range)."""
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    value = default
    if raw is not None:
        try:
            f = float(raw)
            ok = math.isfinite(f) and f.is_integer() and low <= f <= high
        except ValueError:
            ok = False
        if ok:
            value = int(f)
        else:
            st.session_state.setdefault("_url_notices", []).append(
                t("url.bad_value", name=key, raw=raw[:40], low=low, high=high, default=default))
    st.session_state[key] = value


def sync(key: str, default: object) -> None:
    """Write ``st.session_state[key]`` to the address (removed when it equals the default)."""
    value = st.session_state.get(key, default)
    if value == default:
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = str(value)


def show_notices() -> None:
    """Tell the user which address values were ignored (once)."""
    for msg in st.session_state.pop("_url_notices", []):
        st.warning(msg, icon=":material/link_off:")
