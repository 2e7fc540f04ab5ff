"""Settings that live in the address (``?new=6``, ``?abc_rule=sample``) without Streamlit's ``bind``.

A bound ``st.number_input`` raises inside Streamlit on ``?new=-inf`` or ``?new=nan`` (seen on
1.67), so numeric settings are parsed here: a new session takes the address's value when it is
valid, and otherwise keeps the default and says so on the page.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import streamlit as st

from kvviz.ui.app import fmt
from kvviz.ui.app.i18n import t


def _number(raw: str, low: float, high: float, whole: bool) -> float | None:
    """``raw`` as a finite number in [low, high] (a whole one if ``whole``), else None."""
    try:
        f = float(raw)
    except ValueError:
        return None
    ok = math.isfinite(f) and low <= f <= high and (f.is_integer() or not whole)
    return f if ok else None


def _number_param(key: str, default: float | None, low: float, high: float, whole: bool,
                  refused: Callable[[str], str]) -> None:
    """Initialise ``st.session_state[key]`` from ``?key=`` once per session; a value that is not a
    finite number in [low, high] (whole if ``whole``) keeps ``default`` and shows ``refused(raw)``."""
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    value = default
    if raw:
        f = _number(raw, low, high, whole)
        if f is None:
            notice(refused(raw[:40]))
        else:
            value = int(f) if whole else f
    st.session_state[key] = value


def int_param(key: str, default: int | None, low: int, high: int) -> None:
    """Initialise ``st.session_state[key]`` from ``?key=`` once per session (valid ints in range).

    ``default=None`` is an optional field (empty): ``?key=`` empty or absent keeps it empty.
    """
    _number_param(key, default, low, high, True, lambda raw: t(
        "url.bad_value", name=key, raw=raw, low=fmt.integer(low), high=fmt.integer(high),
        default=t("url.empty") if default is None else fmt.integer(default)))


def choice_param(key: str, options: Sequence, default: object, parse: Callable[[str], object] = str) -> None:
    """Initialise a choice widget's state from ``?key=`` (its value, not its translated label).

    ``bind="query-params"`` on a widget with a ``format_func`` writes the formatted label to the URL
    (``?abc_rule=Muestrear``), so a link would depend on the language.
    """
    if key not in st.session_state:
        raw = st.query_params.get(key)
        try:
            value = parse(raw) if raw is not None else default
        except ValueError:
            value = None                     # unreadable: the notice below says so
        if value is None or value not in options:
            notice(t("url.bad_choice", name=key, raw=str(raw)[:40], options=", ".join(map(str, options)),
                     default=default))
            value = default
        st.session_state[key] = value


def float_param(key: str, default: float, low: float, high: float) -> None:
    """``int_param`` for a decimal setting (finite, in [low, high])."""
    _number_param(key, default, low, high, False, lambda raw: t(
        "url.bad_number", name=key, raw=raw, low=fmt.sig(low), high=fmt.sig(high), default=fmt.sig(default)))


def text_param(key: str, default: str, max_chars: int) -> None:
    """Initialise a text input from ``?key=`` (cut to ``max_chars``; the page validates the text)."""
    if key not in st.session_state:
        raw = st.query_params.get(key)
        st.session_state[key] = default if raw is None else raw[:max_chars]


def ints_param(key: str, options: Sequence[int], default: Sequence[int]) -> None:
    """Initialise a multiselect of whole numbers from ``?key=1,2,8`` (every value one of ``options``)."""
    if key in st.session_state:
        return
    raw = st.query_params.get(key)
    value = list(default)
    if raw:
        try:
            got = [int(x) for x in raw.split(",") if x.strip()]
            ok = bool(got) and all(g in options for g in got)
        except ValueError:
            ok = False
        if ok:
            value = sorted(set(got))
        else:
            notice(t("url.bad_list", name=key, raw=raw[:40], options=", ".join(map(str, options)),
                     default=",".join(map(str, default))))
    st.session_state[key] = value


def sync(key: str, default: object) -> None:
    """Write ``st.session_state[key]`` to the address (removed when it equals the default)."""
    value = st.session_state.get(key, default)
    if isinstance(value, (list, tuple)):         # a multiselect: order does not matter
        value = sorted(value)
        default = sorted(default) if isinstance(default, (list, tuple)) else default
    if value == default:
        st.query_params.pop(key, None)
    elif isinstance(value, list):
        st.query_params[key] = ",".join(map(str, value))
    else:
        # 15 significant digits: enough for a float to come back as the same number
        st.query_params[key] = f"{value:.15g}" if isinstance(value, float) else str(value)


def sync_all(defaults: dict[str, object]) -> None:
    """``sync`` several keys at once (a preset that rewrites several fields)."""
    for key, default in defaults.items():
        sync(key, default)


def notice_slot() -> None:
    """Reserve the place at the top of the page where address notices appear (nav.page_setup)."""
    st.session_state["_notice_slot"] = st.container()


def notice(message: str) -> None:
    """Show that a value in the address was ignored, at the top of the page."""
    slot = st.session_state.get("_notice_slot")
    (slot if slot is not None else st).warning(message, icon=":material/link_off:")
