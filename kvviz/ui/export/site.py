"""Write the lecture as a folder of static pages that needs no server (``python -m kvviz export``).

The folder::

    index.html                  the lecture script's screens in teaching order
    01_abc_prefill.html …       one page per screen
    assets/step_view.css        the stepper's own stylesheet (the file the live app uses)
    assets/components.js        the stepper's and the single chart's JavaScript, byte for byte the
                                modules the live app's components run (plotly_js.module_js), as text
    assets/export.js            mounts them as Streamlit would (export.js says how)
    assets/export.css           the page around them: fonts, the theme's colours, headings
    assets/plotly-kvviz-*.js    kvviz's plotly.js bundle
    assets/fonts/*.woff2        Streamlit's Source Sans and Source Code
    data/<hash>.js              each screen's frames and figures, as computed by the live page
                                (screens with the same run share one file)

A page fetches nothing: every file is a ``<script>``, a stylesheet or a font of the folder, so it
opens from ``file://`` (where a page may neither ``fetch()`` nor import a module file), from
``python -m http.server`` and from any static host. Same inputs, same bytes: nothing in the folder
depends on the time or the machine.
"""
from __future__ import annotations

import functools
import glob
import hashlib
import html
import json
import os
import shutil
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import streamlit as st
import torch

from kvviz.models.gpt import GPTModel, load_tiny_gpt
from kvviz.ui.app import presenter
from kvviz.ui.app.i18n import LANGS
from kvviz.ui.app.links import address
from kvviz.ui.app.pages import script
from kvviz.ui.components import charts, plotly_js
from kvviz.ui.export.capture import Captured, capture, markdown_html
from kvviz.ui.export.defaults import DEFAULT_LIVE_URL
from kvviz.ui.frames import translator
from kvviz.ui.pages import gpt as gpt_page
from kvviz.ui.pages.lecture import SCRIPT

HERE = Path(__file__).parent
COMPONENTS = Path(plotly_js.__file__).parent      # the live components' own files
ROOT = HERE.parents[2]
LECTURE_PAGE = script("lecture")
# Streamlit's own fonts (its frontend's static/media), as the live page loads them
FONTS = {"SourceSans-Upright.woff2": "SourceSansVF-Upright*.woff2",
         "SourceSans-Italic.woff2": "SourceSansVF-Italic*.woff2",
         "SourceCode-Upright.woff2": "SourceCodeVF-Upright*.woff2"}


@dataclass
class Screen:
    """One exported screen: where it is in the lecture and what its page drew."""
    n: int
    section: str
    key: str
    page: str
    params: dict
    file: str
    live: str                       # the same view in the live app
    captured: Captured
    data: str = ""                  # id of its data file (data/<id>.js)


@dataclass
class Export:
    """What ``export`` wrote: the screens and every file's size in bytes."""
    out: Path
    lang: str
    present: bool
    screens: list[Screen] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(self.files.values())


def lecture_screens() -> list[tuple[int, str, str, dict, str]]:
    """(n, section, page, params, key) of every screen of the lecture script, in teaching order."""
    out = []
    for section, steps in SCRIPT:
        for page, params, key in steps:
            out.append((len(out) + 1, section, page, params, key))
    return out


def export(out: Path, lang: str = "en", present: bool = False, live_url: str = DEFAULT_LIVE_URL,
           only: set[str] | None = None) -> Export:
    """Write the lecture in ``lang`` to ``out`` (emptied first); ``only``: keys of the screens to
    write (all by default). Returns what was written."""
    if lang not in LANGS:
        raise ValueError(f"unknown language {lang!r} (one of {', '.join(LANGS)})")
    keys = [s[4] for s in lecture_screens()]
    if only is not None and (not only or not only <= set(keys)):
        raise ValueError(f"no such screen: {', '.join(sorted(only - set(keys))) or '(none given)'} "
                         f"(the lecture's screens: {', '.join(keys)})")
    tr = translator(lang)
    out = Path(out)
    if out.exists():
        shutil.rmtree(out)
    (out / "assets" / "fonts").mkdir(parents=True)
    (out / "data").mkdir()
    result = Export(out, lang, present)
    live = live_url.rstrip("/")
    chosen = [s for s in lecture_screens() if only is None or s[4] in only]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)      # one order of summation on any machine: the same bytes everywhere
    try:
        for n, section, page, params, key in chosen:
            got = capture(page, params, lang, present)
            result.screens.append(Screen(n, section, key, page, params, f"{n:02d}_{key}.html",
                                         live + address(page, params, lang, present), got))
    finally:
        torch.set_num_threads(threads)
    _assets(out)
    for s in result.screens:
        s.data = _data_file(out, s.captured)
    for i, s in enumerate(result.screens):
        prev = result.screens[i - 1] if i else None
        nxt = result.screens[i + 1] if i + 1 < len(result.screens) else None
        _write(out / s.file, _screen_page(s, prev, nxt, len(keys), lang, present, live, tr))
    _write(out / "index.html", _index_page(result.screens, lang, present, live, tr))
    for path in sorted(out.rglob("*")):
        if path.is_file():
            result.files[path.relative_to(out).as_posix()] = path.stat().st_size
    return result


# ---------------------------------------------------------------- files

def _write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8", newline="\n")


def _assets(out: Path) -> None:
    a = out / "assets"
    shutil.copyfile(COMPONENTS / "step_view.css", a / "step_view.css")
    shutil.copyfile(HERE / "export.js", a / "export.js")
    _write(a / "export.css", (HERE / "export.css").read_text(encoding="utf-8") + _theme_css())
    shutil.copyfile(plotly_js.STATIC / plotly_js.PLOTLY_BUNDLE, a / plotly_js.PLOTLY_BUNDLE)
    shutil.copyfile(plotly_js.STATIC / "PLOTLY_LICENSE.txt", a / "PLOTLY_LICENSE.txt")
    media = Path(st.__file__).parent / "static" / "static" / "media"
    for name, pattern in FONTS.items():
        found = sorted(glob.glob(str(media / pattern)))
        if not found:
            raise FileNotFoundError(f"Streamlit's font {pattern} is not in {media}")
        shutil.copyfile(found[0], a / "fonts" / name)
    modules = {"stepper": plotly_js.module_js(COMPONENTS / "step_view.js"),
               "chart": plotly_js.module_js(COMPONENTS / "chart_view.js"), "chart_css": charts.CSS}
    _write(a / "components.js",
           "// kvviz's components for the static export (written by kvviz/ui/export/site.py): the stepper's\n"
           "// and the single chart's JavaScript modules, exactly as the live app's components receive them\n"
           "// (kvviz/ui/components/plotly_js.module_js), kept as text: a page opened from file:// may not\n"
           "// import a module file, so assets/export.js imports each one from a blob: URL.\n"
           f"window.KVX_MODULES = {json.dumps(modules, ensure_ascii=False)};\n")


def _theme_css() -> str:
    """The live theme's primary colours (.streamlit/config.toml) over export.css's Streamlit defaults."""
    cfg = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")).get("theme", {})
    light = cfg.get("light", {}).get("primaryColor") or cfg.get("primaryColor")
    dark = cfg.get("dark", {}).get("primaryColor") or light
    return ("\n/* the theme's primary colours, from .streamlit/config.toml */\n"
            f":root {{ --st-primary-color: {light}; }}\n"
            f"@media (prefers-color-scheme: dark) {{ :root {{ --st-primary-color: {dark}; }} }}\n")


def _data_file(out: Path, c: Captured) -> str:
    """The screen's frames and figures as ``data/<id>.js`` (a script that hands them to export.js);
    the stepper's payload is the live page's JSON text, verbatim. Returns the id."""
    charts_json = json.dumps([b["chart"] for b in _all_blocks(c.blocks) if "chart" in b],
                             ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    body = '{"payload":' + (c.stepper["payload"] if c.stepper else "null") + ',"charts":' + charts_json + "}"
    ident = hashlib.sha256(body.encode("utf-8")).hexdigest()[:12]
    path = out / "data" / f"{ident}.js"
    if not path.exists():
        _write(path, f'KVX.data("{ident}", {body});\n')
    return ident


def _all_blocks(blocks: list[dict]):
    for b in blocks:
        yield b
        for inner in b.get("cols", []):
            yield from _all_blocks(inner)
        yield from _all_blocks(b.get("group", []))


# ---------------------------------------------------------------- pages

def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _head(title: str, lang: str, present: bool, scripts: list[str]) -> str:
    # plotly.js first, async: the browser reads and compiles it while it reads the rest of the page
    # (export.js hands the components the same load, as the live page's preload does)
    plotly = f'<script async id="kvx-plotly" src="assets/{plotly_js.PLOTLY_BUNDLE}"></script>\n' if scripts else ""
    tags = "".join(f'<script src="{_e(s)}"></script>\n' for s in scripts)
    style = presenter.CSS + "\n" if present else ""      # the live presenter mode's larger type
    return (f'<!doctype html>\n<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{_e(title)}</title>\n"
            '<link rel="icon" href="data:,">\n'           # no request for /favicon.ico
            f"{plotly}"
            '<link rel="stylesheet" href="assets/export.css">\n'
            '<link rel="stylesheet" href="assets/step_view.css">\n'
            f"{style}{tags}</head>\n")


def _body(inner: str, present: bool) -> str:
    cls = "kvx kvx-present" if present else "kvx"
    # stMain / block-container: presenter.CSS's selectors, so presenter mode reads as on the live page
    return (f'<body class="{cls}">\n<main data-testid="stMain"><div class="block-container">\n'
            f"{inner}</div></main>\n")


def _blocks_html(blocks: list[dict], charts_seen: list[int], live: str, live_base: str, tr) -> str:
    """The page's blocks as HTML; ``live``: this screen in the live app at ``live_base``."""
    out = []
    for b in blocks:
        if "h" in b:
            out.append(f"<h{b['h']}>{_e(b['text'])}</h{b['h']}>")
        elif "md" in b:
            out.append(f'<div class="kvx-md">{markdown_html(b["md"], live_base)}</div>')
        elif "caption" in b:
            out.append(f'<div class="kvx-caption">{markdown_html(b["caption"], live_base)}</div>')
        elif "pre" in b:
            out.append(f'<pre class="kvx-pre">{_e(b["pre"])}</pre>')
        elif "alert" in b:
            icon = {"ok": "✓", "bad": "✗", "info": "ℹ", "warn": "⚠"}[b["alert"]]
            out.append(f'<div class="kvs-alert kvs-{b["alert"]}" role="note"><span aria-hidden="true">{icon}</span>'
                       f'<div>{markdown_html(b["text"], live_base)}</div></div>')
        elif "metric" in b:
            label, value, delta, help_ = b["metric"]
            tip = f' title="{_e(help_)}"' if help_ else ""
            out.append(f'<div class="kvs-metric kvx-metric"{tip}>'
                       f'<div class="kvs-mlabel">{_e(label)}</div><div class="kvs-mvalue">{_e(value)}</div>'
                       + (f'<div class="kvs-mdelta">{_e(delta)}</div>' if delta else "") + "</div>")
        elif "table" in b:
            t = b["table"]
            head = "".join(f'<th scope="col">{_e(c)}</th>' for c in t["cols"])
            rows = "".join("<tr>" + "".join(f"<td>{_e(v)}</td>" for v in r) + "</tr>" for r in t["rows"])
            out.append(f'<div class="kvs-tblwrap" tabindex="0"><table class="kvs-tbl">'
                       f"<thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table></div>")
        elif "live" in b:
            out.append(f'<p class="kvx-needs-live"><a class="kvx-live" data-kvx-live href="{_e(live)}">'
                       f'{_e(tr("export.button_live", label=b["live"]))}</a></p>')
        elif "raw" in b:
            out.append(b["raw"])
        elif "chart" in b:
            out.append(f'<div class="kvx-chart" data-kvx-chart="{len(charts_seen)}"></div>')
            charts_seen.append(len(charts_seen))
        elif "stepper" in b:
            out.append('<div class="kvx-stepper" data-kvx-stepper></div>'
                       '<p class="kvx-pick" role="status" data-kvx-pick hidden></p>')
        elif "cols" in b:
            cols = "".join(f"<div>{_blocks_html(c, charts_seen, live, live_base, tr)}</div>" for c in b["cols"])
            out.append(f'<div class="kvs-cols kvx-cols" style="--kvs-n:{len(b["cols"])}">{cols}</div>')
        elif "group" in b:
            out.append(_blocks_html(b["group"], charts_seen, live, live_base, tr))
    return "\n".join(out)


def _nav(s: Screen, prev: Screen | None, nxt: Screen | None, total: int, tr) -> str:
    def link(other: Screen | None, key: str, rel: str, arrow: str) -> str:
        if other is None:
            return ""
        label = f"{arrow} {tr('export.' + key)}" if arrow == "←" else f"{tr('export.' + key)} {arrow}"
        return f'<a rel="{rel}" href="{_e(other.file)}" title="{_e(tr("lecture." + other.key))}">{_e(label)}</a>'
    return ('<nav class="kvx-nav">'
            f'<a href="index.html">{_e(tr("export.all_screens"))}</a>'
            f'<span>{_e(tr("export.screen_of", n=s.n, total=total))}</span>'
            f'{link(prev, "prev", "prev", "←")}{link(nxt, "next", "next", "→")}'
            f'<a class="kvx-live" data-kvx-live href="{_e(s.live)}">{_e(tr("export.open_live"))}</a></nav>\n')


@functools.cache
def _pick_keys(page: str) -> tuple[str, ...]:
    """The address parameters of the layer and head a model-view tile chooses (only the Tiny GPT's
    stepper has tiles)."""
    return gpt_page.picker(GPTModel(load_tiny_gpt())).keys if page == script("gpt") else ()


def _screen_page(s: Screen, prev: Screen | None, nxt: Screen | None, total: int, lang: str, present: bool,
                 live: str, tr) -> str:
    c = s.captured
    body = [_nav(s, prev, nxt, total, tr),
            f'<p class="kvx-section">{_e(tr("lecture.h_" + s.section))}</p>',
            f"<h1>{_e(c.title)}</h1>",
            f'<p class="kvx-line"><strong>{_e(tr("lecture." + s.key))}</strong>: '
            f'{_e(tr("lecture." + s.key + "_why"))}</p>',
            _blocks_html(c.blocks, [], s.live, live, tr)]
    settings = "".join(f"<li>{_e(k)}: <strong>{_e(v)}</strong></li>" for k, v in c.settings)
    body.append(f'<section class="kvx-settings"><h2>{_e(tr("export.settings_title"))}</h2>'
                + (f"<ul>{settings}</ul>" if settings else f"<p>{_e(tr('export.settings_none'))}</p>")
                + f'<p>{_e(tr("export.settings_note"))} <a class="kvx-live" data-kvx-live href="{_e(s.live)}">'
                f"{_e(tr('export.open_live'))}</a></p></section>\n")
    cfg = {"data": s.data, "present": present, "live": s.live,
           "start": c.stepper["start"] if c.stepper else 0, "n": c.stepper["n"] if c.stepper else 0,
           "pick": list(_pick_keys(s.page)) or None,
           "pickText": [tr("export.pick_live", link="{link}"),
                        tr("export.pick_live_link", layer="{layer}", head="{head}")],
           "plotly": f"assets/{plotly_js.PLOTLY_BUNDLE}"}
    title = f"kvviz · {tr('lecture.' + s.key)}"
    return (_head(title, lang, present, ["assets/components.js", "assets/export.js", f"data/{s.data}.js"])
            + _body("\n".join(body), present)
            + f"<script>KVX.screen({json.dumps(cfg, ensure_ascii=False, sort_keys=True)});</script>\n"
            "</body>\n</html>\n")


def _index_page(screens: list[Screen], lang: str, present: bool, live: str, tr) -> str:
    parts = [f"<h1>{_e(tr('lecture.title'))}</h1>",
             f'<div class="kvx-md">{markdown_html(tr("export.index_intro"))}</div>']
    live_link = (f'<a href="{_e(live + address(LECTURE_PAGE, None, lang, present))}">'
                 f'{_e(tr("export.index_live_link"))}</a>')
    parts.append(f"<p>{_e(tr('export.index_live', link='{link}')).replace('{link}', live_link)}</p>")
    section = None
    for s in screens:
        if s.section != section:
            if section is not None:
                parts.append("</ol>")
            section = s.section
            parts.append(f"<h2>{_e(tr('lecture.h_' + section))}</h2>\n<ol class=\"kvx-screens\" start=\"{s.n}\">")
        parts.append(f'<li><a class="kvx-screen" href="{_e(s.file)}">{_e(tr("lecture." + s.key))}</a>'
                     f'<br><span class="kvx-why">{_e(tr("lecture." + s.key + "_why"))}</span></li>')
    if section is not None:
        parts.append("</ol>")
    footer = tr("export.index_footer", n=len(screens), lang=LANGS[lang])
    parts.append(f'<p class="kvx-caption">{markdown_html(footer)}</p>')
    return (_head(f"kvviz · {tr('lecture.title')}", lang, present, [])
            + _body("\n".join(parts) + "\n", present) + "</body>\n</html>\n")


def size_report(result: Export) -> str:
    """The folder's size by kind of file (for the CLI)."""
    kinds: dict[str, int] = {}
    for name, n in result.files.items():
        kind = name.split("/")[0] if "/" in name else "pages"
        kinds[kind] = kinds.get(kind, 0) + n
    parts = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sorted(kinds.items()))
    return (f"{len(result.screens)} screens, {len(result.files)} files, {result.total_bytes / 1e6:.2f} MB "
            f"({parts}) in {result.out}{os.sep}")
