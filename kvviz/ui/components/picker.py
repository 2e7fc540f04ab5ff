"""The one layer/head picker of the pages over a model with several layers and heads: two selectboxes
numbered from 1 on screen (0-based to the code), kept in the address (?{prefix}_layer=4&{prefix}_head=2)."""
from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from kvviz.ui.app import urlstate
from kvviz.ui.app.i18n import t


def _help(key: str) -> str:
    """A picker's help, then how it counts: from 1, where positions count from 0 (people count from 1)."""
    return f"{t(key)}\n\n{t('picker.numbering')}"


@dataclass(frozen=True)
class LayerHeadPicker:
    """``prefix``: the page's address prefix (``gpt``, ``sd``, ``sc``, ``bt``); ``labels``: locale keys
    of the layer's label and help, then the head's. ``columns``/``align``: the row they sit in;
    ``persist``: keep the choice when the widgets leave the page (a tab switched away)."""

    prefix: str
    n_layers: int
    n_heads: int
    labels: tuple[str, str, str, str]
    columns: tuple[int, ...] = (1, 1, 3)
    align: str = "bottom"
    persist: bool = False

    @property
    def trivial(self) -> bool:
        """One layer and one head: nothing to pick (no widgets)."""
        return self.n_layers * self.n_heads == 1

    @property
    def keys(self) -> tuple[str, str]:
        return f"{self.prefix}_layer", f"{self.prefix}_head"

    def show(self) -> tuple[int, int]:
        """The selectboxes (none when ``trivial``); the chosen layer and head, 0-based."""
        if self.trivial:
            return 0, 0
        layer_key, head_key = self.keys
        urlstate.int_param(layer_key, 1, 1, self.n_layers)
        urlstate.int_param(head_key, 1, 1, self.n_heads)
        c = st.columns(list(self.columns), vertical_alignment=self.align)
        keep = {"persist_state": "session"} if self.persist else {}
        layer_label, layer_help, head_label, head_help = self.labels
        layer = c[0].selectbox(t(layer_label), range(1, self.n_layers + 1), key=layer_key, on_change=urlstate.sync,
                               args=(layer_key, 1), help=_help(layer_help), **keep) - 1
        head = c[1].selectbox(t(head_label), range(1, self.n_heads + 1), key=head_key, on_change=urlstate.sync,
                              args=(head_key, 1), help=_help(head_help), **keep) - 1
        return layer, head

    def pick(self, layer: int, head: int) -> None:
        """A tile of the model view was chosen (0-based): it becomes the selectboxes' layer and head and
        goes into the address, as if chosen there (runs as a callback, before the selectboxes exist)."""
        if 0 <= layer < self.n_layers and 0 <= head < self.n_heads:
            layer_key, head_key = self.keys
            st.session_state[layer_key], st.session_state[head_key] = layer + 1, head + 1
            urlstate.sync(layer_key, 1)
            urlstate.sync(head_key, 1)
