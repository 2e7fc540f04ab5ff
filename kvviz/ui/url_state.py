"""Keep a choice widget's *value* (not its translated label) in the page address.

``bind="query-params"`` on a widget with a ``format_func`` writes the formatted label to the URL
(``?abc_rule=Sample``, ``?abc_rule=Muestrear`` in Spanish), so a link would depend on the language.
For such widgets: ``seed_from_url`` before drawing the widget (no ``default=``), and
``on_change=value_to_url, args=(key, default)``.
"""
from __future__ import annotations

from typing import Sequence

import streamlit as st


def seed_from_url(key: str, options: Sequence[str], default: str) -> None:
    """On first use in a session (or after the widget was unmounted), take ?key= if it is valid."""
    if key not in st.session_state:
        raw = st.query_params.get(key)
        st.session_state[key] = raw if raw in options else default


def value_to_url(key: str, default: str) -> None:
    """Write the widget's value to ?key= (removed when it is the default, to keep links short)."""
    value = st.session_state.get(key)
    if value is None or value == default:
        st.query_params.pop(key, None)
    else:
        st.query_params[key] = str(value)
