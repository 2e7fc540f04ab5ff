"""Frames for the stepper component (kvviz/ui/components/step_view.py): pure functions, no ``st.`` calls.

A page turns a finished run into one **payload**: every event's frame (what the browser draws for
that event) plus the figures and cache-table rows they refer to, deduplicated. The browser then
draws any event without asking the server. Everything here takes engine records and translated
words and returns plain dicts, so tests can call it without Streamlit.

Payload (JSON, ``Payload.to_json()``)::

    {"v": 1,
     "words":  {...}          # the component's own labels in the page's language (stepview.* keys)
     "colors": {...}          # prompt / processed / pending / chosen (kvviz.viz.theme.COLORS)
     "ratio":  [3, 2] | null  # widths of the main and side columns (null: one above the other)
     "present_ratio": [3, 1] | null   # the same in presenter mode (lead and side share one row there)
     "figs":   [{"data": [...], "layout": {...}}, ...]   # plotly specs, template dropped, rounded
     "texts":  ["...", ...]   # long HTML strings used by several frames (a block may hold an index)
     "table":  {"cols": [...], "csv_cols": [...], "rows": [[cell, ...], ...] (as shown),
                "csv_rows": [[cell, ...], ...] | null (as the engine wrote them, when they differ),
                "present_cols": [...] | null}
     "csv":    "abc" | null   # file stem of the per-step cache CSV download (null: no download)
     "moments": [[i, label], ...]   # the run's key moments (event i), marked on the slider; a key
                                      # (M) or button jumps to the next one (kvviz/ui/frames/moments.py)
     "pick":   {"rows": L, "cols": H, "sel": [row, col], "cells": [[label, ...], ...], "label": str,
                "fold": str} | null   # figures marked "pick" are a rows × cols grid of tiles (trace
                                      # r·cols + c on one pair of axes, spanning x0 - 0.5 .. x0 + T - 0.5,
                                      # y0 - 0.5 .. y0 + N - 0.5); choosing one sends [row, col] to Python
                                      # (step_view.stepper's on_pick); presenter mode folds them behind a
                                      # button labelled "fold"
     "frames": [frame, ...]}  # one per event

    frame = {"heading": "Event 2 of 11: decode",
             "notice": {"notice": html, "jump": i | null, "jl": label | null} | null,
                                        # what to notice: the cell, row or bar that carries the step's
                                        # point and why; first on the screen in presenter mode; "jump":
                                        # the event where it will happen, when nothing differs yet
             "top":  [block, ...],      # token strip(s) and the "what happened / not yet" lines
             "lead": [block, ...],      # full width above the columns (a wide attention figure)
             "main": [block, ...],      # left column (attention)
             "side": [block, ...],      # right column (logits)
             "wide": [block, ...],      # full width below the columns
             "metrics": {"items": [[label, value, help, delta | null], ...], "badge": [kind, text] | null,
                         "notes": [html, ...]} | null,
             "table": {"title": str, "ids": [row id, ...], "new": [i, ...], "rewritten": [i, ...],
                       "evicted": [i, ...], "flagged": [[i, column], ...], "struck": [i, ...] (only when some row is),
                       "keep": [i, ...] (only when some row is), "notes": html} | null,   # i: index into ids;
                                                  # presenter mode never folds flagged and "keep" rows away
             "more": [block, ...]}      # explanations below everything

    block = {"fig": i, "alt": str, "pick": 1?} | {"html": html} | {"note": html}
          | {"alert": "ok|bad|info|warn", "text": html}
          | {"lines": [["did" | "todo", html], ...]} | {"strip": {"chips": [[pos, token, kind]], "legend": bool,
             "label": html | null}} | {"tbl": {"cols", "rows", "row_head", "marks": [[r, c, cls]],
             "row_marks": [[r, cls]], "title"}} | {"details": summary, "body": [block, ...]}
          | {"cols": [[block, ...], ...]}
    A block with "x": 1 is an explanation: presenter mode leaves it out. A block with "p": 1 is
    shown only in presenter mode (a shorter form of an "x" block, so the step fits one screen).

HTML strings are escaped here (``md`` turns the interface strings' **bold**, *italic*, `code` and
"- " lists into HTML after escaping); the browser escapes every other string it inserts.
"""
from __future__ import annotations

import html as _html
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence

from kvviz.ui.app import fmt
from kvviz.ui.app.i18n import lookup, render
from kvviz.viz.theme import COLORS, WORDS

Tr = Callable[..., str]

# the component's own words (kvviz/ui/locales/*/stepview.json), sent once per payload
WORD_KEYS = ("prev", "prev_help", "next", "next_help", "reset", "reset_help", "end", "end_help", "step", "step_help",
             "strip_label", "chip_prompt", "chip_processed", "chip_pending", "legend_prompt", "legend_processed",
             "legend_pending")
OWN_WORD_KEYS = ("play", "pause", "play_help", "speed", "speed_help", "controls",
                 "key_left", "key_right", "key_home", "key_end", "key_space", "rows_hidden")
NOTICE_WORD_KEYS = ("label", "moment_next", "moment_next_help", "key_moment", "moment_at", "lecture_next")
SPEEDS = (0.5, 1, 2, 4)    # autoplay, events per second: step_view.js's SPEEDS
TEXT_POOL_MIN = 160        # HTML strings at least this long are stored once in "texts"
PRESENT_TOP_K = 5          # bars of a next-token chart in presenter mode (ten are slivers on a projector)


def translator(lang: str) -> Tr:
    """``t`` for one language without Streamlit's session (English where a key is missing)."""
    def tr(key: str, **fmt: object) -> str:
        return render(lookup(key, lang), lang, **fmt)
    tr.lang = lang          # numbers in frames are written the way this language writes them
    return tr


def lang_of(tr: Tr) -> str:
    """The language ``tr`` translates into (English for a plain function, as tests may pass)."""
    return getattr(tr, "lang", fmt.REFERENCE)


def words(tr: Tr) -> dict[str, str]:
    out = {k: tr("stepper." + k) for k in WORD_KEYS}
    out.update({k: tr("stepview." + k) for k in OWN_WORD_KEYS})
    out.update({k: tr("notice." + k) for k in NOTICE_WORD_KEYS})
    out["csv"] = tr("stepper.dl_cache")
    # the autoplay speeds as the language writes them ("0,5 eventos/s", "1 evento/s"), keyed as
    # step_view.js writes each speed (String(0.5) == "0.5")
    out["speeds"] = {str(s): tr("stepview.speed_option", s=s) for s in SPEEDS}
    return out


def figure_words(tr: Tr) -> dict[str, str]:
    """The words figure builders draw (kvviz.viz.theme.WORDS) in ``tr``'s language."""
    return {k: tr(f"charts.{k}") for k in WORDS}


def table_headers(columns: Sequence[str], tr: Tr) -> list[str]:
    """Display names for engine table columns (position, token, event, phase, value, k …, v …)."""
    out = []
    for c in columns:
        base = str(c).split(" ", 1)[0]
        out.append(tr(f"charts.col_{base}") + str(c)[len(base):]
                   if base in ("position", "token", "event", "phase", "value") else str(c))
    return out


# ---------------------------------------------------------------- text

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_CODE = re.compile(r"`([^`]+)`")


# a backslash before * ` or \ keeps it a plain character (``literal``: a visitor's text in a sentence)
_ESCAPED = re.compile(r"\\([*`\\])")
_HELD = {"*": "\ue000", "`": "\ue001", "\\": "\ue002"}      # private-use stand-ins while the patterns run


def literal(text: str) -> str:
    """``text`` (a visitor's words, a model's tokens) inside interface markdown, shown as it is:
    ``md`` reads no bold, italic or code in it."""
    return re.sub(r"([*`\\])", r"\\\1", str(text))


def _inline(text: str) -> str:
    s = _ESCAPED.sub(lambda m: _HELD[m.group(1)], _html.escape(text, quote=False))
    s = _CODE.sub(r"<code>\1</code>", s)
    s = _BOLD.sub(r"<strong>\1</strong>", s)
    s = _ITALIC.sub(r"<em>\1</em>", s)
    for ch, held in _HELD.items():
        s = s.replace(held, ch)
    return s


def md(text: str) -> str:
    """The small markdown of the interface strings as HTML: paragraphs (blank lines), line breaks,
    "- " lists, **bold**, *italic*, `code`. Everything else is escaped."""
    parts = []
    for para in re.split(r"\n\s*\n", text.strip()):
        lines = [ln for ln in para.split("\n") if ln.strip()]
        if lines and all(ln.lstrip().startswith("- ") for ln in lines):
            parts.append("<ul>" + "".join(f"<li>{_inline(ln.lstrip()[2:])}</li>" for ln in lines) + "</ul>")
        elif len(parts) == 0 and len(lines) == 1 and "\n\n" not in text:
            parts.append(_inline(lines[0]))
        else:
            parts.append("<p>" + "<br>".join(_inline(ln.rstrip().rstrip("\\").rstrip()) for ln in lines) + "</p>")
    return "".join(parts)


# ---------------------------------------------------------------- blocks

def notice_block(text: str, jump: int | None = None, jump_label: str | None = None) -> dict:
    """What to notice on an event (``Payload.add(notice=...)``): ``text`` points at the cell, row or
    bar that carries the step's point and says why it matters. ``jump``: where nothing differs yet,
    the event where it will (the stepper offers the jump, labelled ``jump_label``)."""
    return {"notice": md(text), "jump": jump, "jl": jump_label if jump is not None else None}


def fig_block(index: int, alt: str) -> dict:
    return {"fig": index, "alt": alt}


def html_block(text: str, explain: bool = False) -> dict:
    """A paragraph from interface markdown."""
    return _x({"html": md(text)}, explain)


def note_block(text: str, explain: bool = False) -> dict:
    """A caption (small type)."""
    return _x({"note": md(text)}, explain)


def alert_block(kind: str, text: str, explain: bool = False) -> dict:
    return _x({"alert": kind, "text": md(text)}, explain)


def lines_block(did: str, todo: str | None = None) -> dict:
    """What just happened (✓) and what has not happened yet (⧗)."""
    return {"lines": [["did", md(did)]] + ([["todo", md(todo)]] if todo else [])}


def strip_block(sequence: Sequence[str], prompt_len: int, cached: int, legend: bool = True,
                position_base: int = 0, label: str | None = None) -> dict:
    """Token chips: the first ``prompt_len`` are prompt, then processed up to ``cached``, the rest
    pending (the chosen token that is not in the cache yet)."""
    chips = []
    for i, tok in enumerate(sequence):
        kind = "prompt" if i < prompt_len else "processed" if i < cached else "pending"
        chips.append([i + position_base, tok, kind])
    return {"strip": {"chips": chips, "legend": legend, "label": md(label) if label else None}}


def strip_tail(block: dict, width: float, label: Callable[[int], str]) -> list[dict]:
    """A token strip too long for one projector row: ``block`` in the normal view, and in presenter
    mode its newest chips (where the step happens) after ``label(left out)``, which says how many it
    leaves out. ``width``: the row's room in characters of the chips' monospace type, a chip taking
    its token's characters, its position's in small type and its padding (``chip_width``); the
    newest chips that fit it stay. A strip that fits stays as it is."""
    chips = block["strip"]["chips"]
    used, keep = 0.0, 0
    for pos, tok, _ in reversed(chips):
        used += chip_width(pos, tok)
        if used > width:
            break
        keep += 1
    if keep == len(chips):
        return [block]
    tail = {"strip": {**block["strip"], "chips": chips[len(chips) - keep:], "label": md(label(len(chips) - keep))}}
    return [_x(dict(block), True), presenter_only(tail)]


def chip_width(pos: int, tok: str) -> float:
    """A chip's width in characters of its monospace type (kvviz/ui/components/step_view.css .kv-chip):
    the token, a space, the position at .65 em, and .8 em of padding, its borders and the gap."""
    return len(tok) + 1 + 0.65 * len(str(pos)) + 2.5


def table_block(columns: Sequence[str], rows: Iterable[Sequence[object]], title: str | None = None,
                row_head: bool = False, marks: Sequence[tuple[int, int, str]] = (),
                row_marks: Sequence[tuple[int, str]] = (), explain: bool = False) -> dict:
    """A small table (cells as text). ``marks``: (row, column, "mark" | "bad"); ``row_marks``:
    (row, "bold" | "new" | "rewritten")."""
    return _x({"tbl": {"cols": [str(c) for c in columns], "rows": [[str(c) for c in r] for r in rows],
                       "row_head": row_head, "marks": [list(m) for m in marks],
                       "row_marks": [list(m) for m in row_marks], "title": md(title) if title else None}}, explain)


def details_block(summary: str, body: list[dict], explain: bool = True) -> dict:
    return _x({"details": summary, "body": body}, explain)


def cols_block(columns: list[list[dict]]) -> dict:
    return {"cols": columns}


def presenter_only(block: dict) -> dict:
    """``block`` shown only in presenter mode (beside an ``explain=True`` block it replaces there)."""
    block["p"] = 1
    return block


def _x(block: dict, explain: bool) -> dict:
    if explain:
        block["x"] = 1
    return block


def metrics(items: Sequence[tuple[str, object, str | None, str | None]], badge: tuple[str, str] | None = None,
            notes: Sequence[str] = ()) -> dict:
    return {"items": [[label, str(value), help_, delta] for label, value, help_, delta in items],
            "badge": [badge[0], md(badge[1])] if badge else None, "notes": [md(n) for n in notes]}


def check_badge(check, tr: Tr, tol: float = 1e-6) -> tuple[str, str]:
    """The recompute check of an event (``Event.check``): agreement within ``tol``."""
    if check is None:
        return "info", tr("stepper.check_none")
    if check.max_abs_diff <= tol:
        return "ok", tr("stepper.check_ok", diff=fmt.sci(check.max_abs_diff, 1, lang=lang_of(tr)))
    return "bad", tr("stepper.check_bad", diff=fmt.num(check.max_abs_diff, ".4g", lang=lang_of(tr)))


def counters(ev, tr: Tr, tol: float = 1e-6) -> dict:
    """Cache length, the two K/V counters and the recompute-check badge of one stepper event."""
    return metrics([
        (tr("stepper.cache_len"), ev.cache_len, tr("stepper.cache_len_help"), None),
        (tr("stepper.kv_computed"), ev.kv_computed, tr("stepper.kv_computed_help"), None),
        (tr("stepper.kv_recompute"), ev.kv_recompute, tr("stepper.kv_recompute_help"),
         fmt.num(ev.kv_recompute - ev.kv_computed, "+d", lang=lang_of(tr))),
    ], check_badge(ev.check, tr, tol))


# ---------------------------------------------------------------- figures

def _rounded(x, digits: int):
    if isinstance(x, float):
        if not math.isfinite(x):
            return None
        return round(x, digits) if abs(x) < 1e6 else float(f"{x:.7g}")
    if isinstance(x, list):
        return [_rounded(v, digits) for v in x]
    if isinstance(x, dict):
        return {k: _rounded(v, digits) for k, v in x.items()}
    return x


def localize_spec(spec: dict, lang: str) -> dict:
    """A figure spec with its numbers written the way ``lang`` does: plotly's ``separators``, and the
    text labels, hover data and tick texts that are one English number (tokens and titles as they are)."""
    spec["layout"]["separators"] = fmt.plotly_separators(lang)
    if lang == fmt.REFERENCE:
        return spec
    for trace in spec["data"]:
        for prop in ("text", "customdata"):
            if isinstance(trace.get(prop), (str, list)):
                trace[prop] = relocalized(trace[prop], lang)
    for name, axis in spec["layout"].items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict) and axis.get("ticktext"):
            axis["ticktext"] = relocalized(axis["ticktext"], lang)
    return spec


def relocalized(value, lang: str):
    """``value`` (a label, or a list / nested list of labels) with labels that are one English number
    rewritten the way ``lang`` writes numbers; numbers, arrays and None as they are (plotly formats those)."""
    if isinstance(value, str):
        return fmt.relocalize(value, lang)
    if isinstance(value, (list, tuple)):
        return [relocalized(v, lang) for v in value]
    return value


def figure_spec(fig, digits: int | None = 4) -> dict:
    """A figure as plain JSON data: a ``*_spec`` dict of kvviz.viz.theme as it is, a ``go.Figure`` as
    ``fig.to_plotly_json()``; plotly's template dropped (the browser applies the page's theme),
    floats rounded to ``digits`` decimals (None: the builder rounded them already)."""
    spec = fig if isinstance(fig, dict) else json.loads(fig.to_json())
    layout = {k: v for k, v in spec.get("layout", {}).items() if k != "template"}
    out = {"data": spec.get("data", []), "layout": layout}
    return out if digits is None else _rounded(out, digits)


class Payload:
    """Collects the frames of one run; figures, long texts and cache rows are stored once."""

    def __init__(self, tr: Tr, *, ratio: Sequence[int] | None = (1, 1), csv: str | None = None,
                 present_ratio: Sequence[int] | None = None) -> None:
        self.tr = tr
        self.lang = lang_of(tr)
        self.frames: list[dict] = []
        self.figs: list[dict] = []
        self._fig_ids: dict[str, int] = {}
        self.texts: list[str] = []
        self._text_ids: dict[str, int] = {}
        self.rows: list[list[str]] = []
        self._row_ids: dict[tuple, int] = {}
        self.table_cols: list[str] | None = None
        self.table_csv_cols: list[str] | None = None
        self.present_cols: list[int] | None = None
        self.ratio = list(ratio) if ratio else None
        self.present_ratio = list(present_ratio) if present_ratio else None
        self.csv = csv
        self.pick: dict | None = None
        self.moments: list[list] = []
        self.colors = {k: COLORS[k] for k in ("prompt", "processed", "pending", "focus")}

    # -- pooled pieces
    def fig(self, fig, alt: str, digits: int | None = 4, explain: bool = False) -> dict:
        """A figure block (a plotly JSON dict or a ``go.Figure``); identical figures (a choose event
        showing the pass before it) are sent once. ``digits``: see ``figure_spec``; ``explain``: as
        for ``html_block``."""
        return _x(fig_block(self.fig_index(localize_spec(figure_spec(fig, digits), self.lang)), alt), explain)

    def pick_fig(self, fig: dict, alt: str) -> dict:
        """A figure block whose tiles the viewer can choose (see ``set_pick``): a ``*_spec`` dict
        whose builder rounded its numbers (walking every weight again would double its cost)."""
        return {**self.fig(fig, alt, digits=None), "pick": 1}

    def set_pick(self, rows: int, cols: int, selected: tuple[int, int], cells: Sequence[Sequence[str]],
                 label: str, fold: str) -> None:
        """The grid of the ``pick_fig`` figures: ``rows`` × ``cols`` tiles, ``selected`` (row, col)
        the one chosen now, ``cells`` each tile's accessible name, ``label`` the grid's, ``fold``
        the button that shows the grid in presenter mode."""
        if len(cells) != rows or any(len(r) != cols for r in cells):
            raise ValueError("one accessible name per tile")
        self.pick = {"rows": rows, "cols": cols, "sel": [int(selected[0]), int(selected[1])],
                     "cells": [list(map(str, r)) for r in cells], "label": label, "fold": fold}

    def moment(self, step: int | None, label: str) -> None:
        """Mark event ``step`` as a key moment of the run (``label``: what happens there); None and
        repeats are ignored (a moment that the run does not reach is simply not marked)."""
        if step is None or any(m[0] == step for m in self.moments):
            return
        self.moments.append([int(step), label])
        self.moments.sort(key=lambda m: m[0])

    def fig_index(self, spec: dict) -> int:
        key = json.dumps(spec, sort_keys=True, separators=(",", ":"))
        if key not in self._fig_ids:
            self._fig_ids[key] = len(self.figs)
            self.figs.append(spec)
        return self._fig_ids[key]

    def row(self, cells: Sequence[object]) -> int:
        cells = tuple("" if c is None else str(c) for c in cells)
        if cells not in self._row_ids:
            self._row_ids[cells] = len(self.rows)
            self.rows.append(list(cells))
        return self._row_ids[cells]

    def cache_table(self, csv_cols: Sequence[str], headers: Sequence[str], rows: Sequence[Sequence[object]],
                    title: str, new: Iterable[int] = (), rewritten: Iterable[int] = (),
                    flagged: Iterable[tuple[int, int]] = (), notes: str = "",
                    present_cols: Sequence[int] | None = None, evicted: Iterable[int] = (),
                    struck: Iterable[int] = (), keep: Iterable[int] = ()) -> dict:
        """A frame's cache table: ``rows`` in the run's column order (``csv_cols`` engine names,
        ``headers`` as shown); ``new``, ``rewritten``: row indices to highlight; ``evicted``: rows
        a smaller cache no longer holds (greyed); ``flagged``: (row, column index) cells;
        ``struck``: rows drawn struck out (a rollback removes them); ``keep``: rows that carry the
        step's point (the rows a window evicted at this event), never folded away in presenter mode,
        like the flagged cells' rows."""
        if self.table_cols is None:
            self.table_csv_cols, self.table_cols = list(map(str, csv_cols)), list(map(str, headers))
            self.present_cols = list(present_cols) if present_cols is not None else None
        elif list(map(str, csv_cols)) != self.table_csv_cols:
            raise ValueError("every frame's cache table must have the run's columns")
        table = {"title": title, "ids": [self.row(r) for r in rows], "new": sorted(set(new)),
                 "rewritten": sorted(set(rewritten)), "evicted": sorted(set(evicted)),
                 "flagged": sorted({(int(r), int(c)) for r, c in flagged}),
                 "notes": md(notes) if notes else ""}
        if struck:
            table["struck"] = sorted(set(struck))
        if keep:
            table["keep"] = sorted(set(keep))
        return table

    def _pool(self, x):
        """Long HTML strings go to ``texts`` once; blocks keep their index."""
        if isinstance(x, str) and len(x) >= TEXT_POOL_MIN:
            if x not in self._text_ids:
                self._text_ids[x] = len(self.texts)
                self.texts.append(x)
            return self._text_ids[x]
        return x

    def _pool_block(self, b: dict) -> dict:
        b = dict(b)
        for k in ("html", "note", "text", "notice"):
            if k in b:
                b[k] = self._pool(b[k])
        if "lines" in b:
            b["lines"] = [[kind, self._pool(text)] for kind, text in b["lines"]]
        if "body" in b:
            b["body"] = [self._pool_block(x) for x in b["body"]]
        if "cols" in b:
            b["cols"] = [[self._pool_block(x) for x in col] for col in b["cols"]]
        return b

    # -- frames
    def add(self, heading: str, *, top: Sequence[dict] = (), lead: Sequence[dict] = (), main: Sequence[dict] = (),
            side: Sequence[dict] = (), wide: Sequence[dict] = (), metrics: dict | None = None,
            table: dict | None = None, more: Sequence[dict] = (), notice: dict | None = None) -> None:
        frame = {"heading": heading, "notice": self._pool_block(notice) if notice else None}
        for name, blocks in (("top", top), ("lead", lead), ("main", main), ("side", side), ("wide", wide),
                             ("more", more)):
            frame[name] = [self._pool_block(b) for b in blocks]
        if metrics is not None:
            metrics = dict(metrics, notes=[self._pool(n) for n in metrics.get("notes", [])])
        if table is not None and table.get("notes"):
            table = dict(table, notes=self._pool(table["notes"]))
        frame["metrics"] = metrics
        frame["table"] = table
        self.frames.append(frame)

    # the engine's English inside cache cells (kvviz.decoding.trace.cache_table), as the page's language says it
    _CELL_PHRASES = ((re.compile(r"rewritten at event (\d+)"), "stepper.cell_rewritten", "i"),
                     (re.compile(r"quantized at event (\d+)"), "stepper.cell_quantized", "i"),
                     (re.compile(r"evicted at event (\d+)"), "stepper.cell_evicted", "i"),
                     (re.compile(r"(\d+) dims"), "stepper.cell_dims", "n"))

    def _shown_cell(self, cell: str) -> str:
        """A cache cell as shown: its numbers and its words in the page's language (the CSV keeps
        the engine's text)."""
        if self.lang == fmt.REFERENCE:
            return fmt.inline(cell, self.lang)     # only the minus sign typeset (kvviz/ui/app/fmt.py)
        for pattern, key, name in self._CELL_PHRASES:
            cell = pattern.sub(lambda m, key=key, name=name: self.tr(key, **{name: int(m.group(1))}), cell)
        return fmt.inline(cell, self.lang)

    def to_dict(self) -> dict:
        shown = [[self._shown_cell(c) for c in r] for r in self.rows]
        return {"v": 1, "words": words(self.tr), "colors": self.colors, "ratio": self.ratio,
                "present_ratio": self.present_ratio, "figs": self.figs,
                "texts": self.texts, "csv": self.csv, "pick": self.pick, "moments": self.moments,
                # rows as shown (numbers in the page's language); csv_rows as the engine wrote them,
                # for the per-step CSV (machine-readable), sent only when they differ
                "table": None if self.table_cols is None else {
                    "cols": self.table_cols, "csv_cols": self.table_csv_cols, "rows": shown,
                    "csv_rows": self.rows if shown != self.rows else None,
                    "present_cols": self.present_cols},
                "frames": self.frames}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def resolve(payload: dict, x):
    """A block's text as the browser sees it (tests): pooled strings are stored as indices."""
    return payload["texts"][x] if isinstance(x, int) else x
