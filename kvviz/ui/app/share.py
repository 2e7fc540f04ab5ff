"""'Copy link to this view': copies the browser's current address.

The address is read in the browser, not on the server: bound widgets (step, prompt, ...) update it
client-side, and a fragment rerun (a step click) does not rerun the sidebar, so a server-built link
would lag behind. The component shows the link in a text box too, selected, for when the clipboard
is not available (plain http on another host).
"""
from __future__ import annotations

import streamlit as st

from kvviz.ui.app.i18n import t

_JS = """
export default function(component) {
  const { data, parentElement } = component;
  const root = parentElement.querySelector('.kv-share');
  const button = root.querySelector('button');
  const box = root.querySelector('input');
  const note = root.querySelector('span');
  button.innerHTML = '<svg width="16" height="16" viewBox="0 0 24 24" aria-hidden="true" '
    + 'style="vertical-align:-3px;margin-right:.4em"><path fill="currentColor" '
    + 'd="M3.9 12a3.1 3.1 0 0 1 3.1-3.1h4V7H7a5 5 0 0 0 0 10h4v-1.9H7A3.1 3.1 0 0 1 3.9 12M8 13h8v-2H8z'
    + 'm9-6h-4v1.9h4a3.1 3.1 0 0 1 0 6.2h-4V17h4a5 5 0 0 0 0-10"/></svg>';
  button.appendChild(document.createTextNode(data.label));
  button.title = data.help;
  button.hidden = false;                    // shown once it has its label: never an unnamed button
  button.onclick = async () => {
    box.value = window.location.href;
    box.style.display = 'block';
    box.select();
    try { await navigator.clipboard.writeText(box.value); note.textContent = data.copied; }
    catch (e) { note.textContent = data.manual; }
  };
}
"""
_HTML = ("<div class='kv-share'><button type='button' hidden></button><input readonly aria-label='link'>"
         "<span></span></div>")
_CSS = """
.kv-share button { width: 100%; padding: .45rem .75rem; border-radius: .5rem; cursor: pointer;
  border: 1px solid var(--st-border-color, #ccc); background: var(--st-secondary-background-color, #f0f2f6);
  color: var(--st-text-color, inherit); font: inherit; }
.kv-share input { display: none; width: 100%; margin-top: .4rem; font-family: monospace; font-size: .8rem; }
.kv-share span { font-size: .85rem; opacity: .8; }
"""

_component = st.components.v2.component("kvviz_copy_link", html=_HTML, css=_CSS, js=_JS)


def copy_link() -> None:
    """A button that copies the current address (page, step, prompt, settings, language)."""
    _component(key="kvviz_copy_link", data={"label": t("share.copy"), "help": t("share.copy_help"),
                                            "copied": t("share.copied"), "manual": t("share.manual")})
