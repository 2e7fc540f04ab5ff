"""Run one lecture screen exactly as the live app does and keep what it draws.

Each screen is the page's own script, run headless by Streamlit's ``AppTest`` with the screen's
address (its lecture parameters, the language, presenter mode): the same widgets read the same
address, the same cached runs and payload builders compute the frames, so the stepper's payload
and every chart's figure are the bytes the live page sends a browser for that address. What the
page draws is kept as plain blocks for ``site.py``: headings, markdown (as the page wrote it), captions, alerts,
metrics, tables, single charts, and the stepper. Widgets are not drawn (they need the server);
their values are kept as the screen's settings, as the page shows them. Expanders (settings,
explanations folded away) are left out; so is everything below a stepper: on a browser's first
visit the live page stops there too (``step_view.whole_page``), and below it come timings, which
differ from run to run.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamlit.testing.v1 import AppTest

from kvviz.ui.app import fmt
from kvviz.ui.frames import md, translator

SLIDER_VALUE = re.compile(r": \*\*[^*]*\*\*$")       # rule.slider_label's value part

APP = Path(__file__).resolve().parents[3] / "app.py"
TIMEOUT = 300           # seconds for one page's run (a cold paged-cache page on a busy machine)
SETTING_KINDS = ("text_input", "text_area", "number_input", "slider", "select_slider", "selectbox",
                 "button_group", "toggle", "checkbox", "radio", "multiselect")
_LINK = re.compile(r"\[([^\]]+)\]\(((?:https?://|/)[^)\s]*)\)")
_HIDDEN_H2 = re.compile(r"^<h2 class='kv-sr-only'>[^<]*</h2>$")


@functools.cache
def _components():
    """Streamlit's registry of installed v2 components, scanned once per process. A new ``AppTest``
    scans the metadata of every installed distribution for it (0.4 s here: 16 of the 29 s of a
    whole export, and as much for every page a test opens); a server scans once at start-up, and
    its sessions share the registry, as the runs here do."""
    from streamlit.components.v2.component_manager import BidiComponentManager

    manager = BidiComponentManager()
    manager.discover_and_register_components(start_file_watching=False)
    return manager


def app_test(path: Path = APP, timeout: float = TIMEOUT) -> AppTest:
    """An ``AppTest`` of ``path`` sharing this process's component registry (``_components``). A
    Streamlit without that registry (its attribute renamed) gets a plain AppTest, which scans again."""
    at = AppTest.from_file(str(path), default_timeout=timeout)
    if getattr(at, "_bidi_component_manager", False) is None:
        at._bidi_component_manager = _components()
    return at


class CaptureError(RuntimeError):
    """The page did not draw what a screen needs (an exception, a notice about its address)."""


@dataclass
class Captured:
    """What one screen's page drew: its title, blocks in page order, its settings as shown and,
    on a stepping page, the stepper's mount data."""
    title: str
    blocks: list[dict] = field(default_factory=list)
    settings: list[tuple[str, str]] = field(default_factory=list)
    stepper: dict | None = None       # {"payload": JSON text, "start": step, "n": events}


def markdown_html(text: str, live: str = "") -> str:
    """The interface's small markdown (``frames.md``) as HTML, its [links](https://…) as anchors; a
    link into the app (``/Paged_cache?pg_blocks=8``) opens it in the live app at ``live``."""
    return _LINK.sub(lambda m: f"<a href='{live if m.group(2).startswith('/') else ''}{m.group(2)}'>{m.group(1)}</a>",
                     md(text))


def _chosen_labels(w: Any) -> list[str]:
    """The labels a choice widget shows for its value, as the page formatted them. (AppTest's own
    ``index``/``indices`` format the value again outside the page's run, in English.)"""
    p = w.proto
    fields = {f.name for f in p.DESCRIPTOR.fields}
    if p.set_value and "raw_values" in fields:
        return list(p.raw_values)
    if p.set_value and "raw_value" in fields:
        return [p.raw_value]
    options = [getattr(o, "content", o) for o in p.options]
    default = [p.default] if isinstance(p.default, int) else list(p.default)
    return [options[i] for i in default]


def _shown_value(w: Any, lang: str, on_off: tuple[str, str]) -> str | None:
    """A widget's value as the page shows it; None for a disabled widget or an unanswered one."""
    p = w.proto
    if getattr(p, "disabled", False):
        return None                                  # not in effect (e.g. τ while the rule is greedy)
    kind, v = w.type, w.value
    if kind in ("toggle", "checkbox"):
        return on_off[0] if v else on_off[1]
    if kind in ("selectbox", "radio", "button_group", "multiselect"):
        return None if v is None else ", ".join(_chosen_labels(w))
    if v is None:
        return getattr(p, "placeholder", "") or None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    return fmt.integer(v, lang=lang) if isinstance(v, int) else fmt.sig(v, lang=lang)


def _asks(block: Any) -> bool:
    """A block holding an unanswered question (a radio without a choice, as the Sampling page's)."""
    return any(getattr(ch, "type", "") == "radio" and ch.index is None for ch in block.children.values())


def without_empty_sections(blocks: list[dict]) -> list[dict]:
    """Headings whose section lost everything (its widgets stay on the live page) left out."""
    out: list[dict] = []
    for b in reversed(blocks):
        if "h" in b and (not out or ("h" in out[-1] and out[-1]["h"] <= b["h"])):
            continue
        out.append(b)
    return out[::-1]


class _Walk:
    def __init__(self, lang: str, on_off: tuple[str, str]) -> None:
        self.lang, self.on_off = lang, on_off
        self.out = Captured(title="")
        self.done = False                            # the stepper has been drawn: nothing below it

    def settings_in(self, node: Any) -> None:
        """Widgets anywhere under ``node`` (presenter mode folds the settings into an expander)."""
        for ch in getattr(node, "children", {}).values():
            if getattr(ch, "type", "") in SETTING_KINDS:
                self.setting(ch)
            self.settings_in(ch)

    def setting(self, w: Any) -> None:
        value = _shown_value(w, self.lang, self.on_off)
        if value is not None and w.label:
            # a number slider writes its value into its label ("Temperature τ: **0.70**"): the
            # settings list gives the value once, beside the name
            self.out.settings.append((SLIDER_VALUE.sub("", w.label), value))

    def blocks(self, node: Any) -> list[dict]:
        out: list[dict] = []
        for ch in getattr(node, "children", {}).values():
            if self.done:
                break
            block = self.block(ch)
            if block is not None:
                out.append(block)
        return without_empty_sections(out)

    def block(self, el: Any) -> dict | None:
        kind, cls = getattr(el, "type", ""), type(el).__name__
        if kind in SETTING_KINDS:
            self.setting(el)
            return None
        if cls == "Expander":
            self.settings_in(el)
            return None
        if cls == "Title":
            self.out.title = self.out.title or el.value
            return None                              # site.py writes the page's h1 itself
        if cls in ("Header", "Subheader"):
            return {"h": 2 if cls == "Header" else 3, "text": el.value}
        if cls == "Markdown":
            return {"md": el.value} if el.value.strip() else None
        if cls == "Caption":
            return {"caption": el.value}
        if cls == "Text":
            return {"pre": el.value}
        if cls in ("Success", "Info", "Warning", "Error"):
            return {"alert": {"Success": "ok", "Info": "info", "Warning": "warn", "Error": "bad"}[cls],
                    "text": el.value}
        if cls == "Metric":
            return {"metric": [el.label, el.value, el.delta or "", el.proto.help or ""]}
        if cls == "Dataframe":
            df = el.value
            rows = [["" if v is None else str(v) for v in row] for row in df.itertuples(index=False)]
            return {"table": {"cols": [str(c) for c in df.columns], "rows": rows}}
        if cls == "Html":
            return {"raw": el.value} if _HIDDEN_H2.match(el.value.strip()) else None   # screen-reader headings
        if kind == "bidi_component":
            return self.component(el)
        if cls == "Button":
            # a button that computes or measures (the primary ones) becomes the live app's link; the
            # others change settings, which the live link covers too
            return {"live": el.label} if el.proto.type == "primary" else None
        if cls == "Column":
            return {"col": self.inner(el)}
        if hasattr(el, "children"):                  # a plain block, a tab (only the open one has children)
            if _asks(el):
                return None                          # a question: the answer is checked by the server
            inner = self.inner(el)
            if not inner:
                return None
            if all("col" in b for b in inner):       # st.columns: a row (of the columns that kept something)
                cols = [b["col"] for b in inner if b["col"]]
                return None if not cols else {"group": cols[0]} if len(cols) == 1 else {"cols": cols}
            return {"group": inner}
        return None                                  # downloads and the rest: they need the server

    def inner(self, el: Any) -> list[dict]:
        """A column's or block's blocks; nothing when it held settings and only text is left: that
        text was about its inputs (the weather page's "Token values": type a value and press Enter)."""
        before = len(self.out.settings)
        out = self.blocks(el)
        if len(self.out.settings) > before and all(("md" in b or "caption" in b) for b in out):
            return []
        return out

    def component(self, el: Any) -> dict | None:
        data = json.loads(el.proto.json)
        name = el.proto.component_name
        if name == "kvviz_stepper":
            payload = data["payload"]
            self.out.stepper = {"payload": payload, "start": int(data["start"]),
                                "n": len(json.loads(payload)["frames"])}
            self.done = True
            return {"stepper": True}
        if name == "kvviz_chart":
            return {"chart": {"fig": data["fig"], "alt": data.get("alt") or ""}}
        return None


def capture(page: str, params: dict[str, object], lang: str, present: bool) -> Captured:
    """Run ``page`` (``pages/1_ABC_miniature.py``) at the address ``params`` in ``lang`` (presenter
    mode if ``present``) and keep what it draws. Raises ``CaptureError`` when the page failed or
    refused a value of the address (a screen must show what the lecture script names)."""
    at = app_test()
    query = {k: str(v) for k, v in params.items()}
    if lang != "en":
        query["lang"] = lang
    if present:
        query["present"] = "1"
    for k, v in query.items():
        at.query_params[k] = v
    at.switch_page(page)
    at.run()
    if at.exception:
        raise CaptureError(f"{page} {query}: {at.exception[0].value}")
    refused = [w.value for w in at.warning if w.proto.icon == ":material/link_off:"]   # urlstate.notice
    if refused:
        raise CaptureError(f"{page} {query}: {refused}")
    tr = translator(lang)
    walk = _Walk(lang, (tr("export.on"), tr("export.off")))
    walk.out.blocks = walk.blocks(at.main)
    if not walk.out.title:
        raise CaptureError(f"{page} {query}: no title")
    return walk.out

