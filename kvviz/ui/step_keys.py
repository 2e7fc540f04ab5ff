"""The stepper's keys (← → Home End), delivered as clicks so that no press is lost.

Streamlit's own ``shortcut=`` on a button loses a press that lands while the step fragment is still
rerunning, although its handler runs (``python bench/lost_presses.py`` on 1.67: 16 of 100 presses
made as fast as the page redraws), whereas a click on the same button always arrives. So the
buttons keep ``shortcut=`` for their key hints, and this component takes the keys first: one
``keydown`` listener on ``window`` in the capture phase stops the event before Streamlit's handler
sees it and clicks the matching button once the key event is over (1 of 485 lost in our runs). The
same rules as the native shortcuts decide what counts (no modifier keys, not while typing), and a
widget that uses these keys itself (a slider, tabs, a menu, a table) keeps them.
"""
from __future__ import annotations

import json

import streamlit as st

# key -> the stepper button's widget key (Streamlit marks its container with .st-key-<key>)
BUTTONS = {"ArrowLeft": "kv_step_prev", "ArrowRight": "kv_step_next", "Home": "kv_step_reset",
           "End": "kv_step_end"}

_JS = """
export default function(component) {
  if (window.__kvStepKeys) return;          // one listener per browser tab, whatever the reruns
  window.__kvStepKeys = true;
  const buttons = %s;
  // widgets that use these keys themselves (sliders, tabs, menus, the data grid) keep them
  const own = 'input, textarea, select, [contenteditable="true"], [role="slider"], [role="tab"], ' +
    '[role="tablist"], [role="listbox"], [role="option"], [role="combobox"], [role="radio"], ' +
    '[role="spinbutton"], [role="menu"], [role="menuitem"], [role="grid"], [data-testid="stDataFrame"]';
  const typing = (el) => el && el.closest && (el.closest(own) || el.isContentEditable);
  window.addEventListener('keydown', (e) => {
    const key = buttons[e.key];
    if (!key || e.ctrlKey || e.metaKey || e.altKey || e.shiftKey || typing(e.target)) return;
    const find = () => document.querySelector('.st-key-' + key + ' button');
    if (!find()) return;                      // a page without a stepper: leave the key alone
    e.preventDefault();
    e.stopImmediatePropagation();
    // click after the key event has finished, as a pointer click would: a click dispatched inside
    // the keydown handler was lost as often as the native shortcut (bench/lost_presses.py)
    setTimeout(() => { const b = find(); if (b && !b.disabled) b.click(); }, 0);
  }, true);
}
""" % json.dumps(BUTTONS)

_component = st.components.v2.component("kvviz_step_keys", html="<span hidden></span>", js=_JS)


def install() -> None:
    """Mount the listener (idempotent: the browser keeps one per tab)."""
    _component(key="kvviz_step_keys")
