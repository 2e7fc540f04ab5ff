"""``python -m kvviz export --out DIR``: the lecture script as static pages that need no server
(kvviz.ui.export, docs/export.md). Importing this loads neither Streamlit nor torch."""
from __future__ import annotations

import argparse
from pathlib import Path

from kvviz.ui.export import DEFAULT_LIVE_URL, LANGS, run


def _keys(value: str) -> set[str]:
    return {k.strip() for k in value.split(",") if k.strip()}


def add_command(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("export", help="write the lecture script as static pages that need no server",
                       description="Write every screen of the lecture script as a static page (the stepper's own "
                                   "JavaScript, kvviz's plotly.js, the fonts and each screen's frames): it opens "
                                   "from file://, python -m http.server or any static host.")
    e.add_argument("--out", required=True, type=Path, help="folder to write (emptied first)")
    e.add_argument("--lang", choices=LANGS, default="en", help="language of the pages (default en)")
    e.add_argument("--present", action="store_true", help="presenter mode: larger type, one screen per step")
    e.add_argument("--live-url", default=DEFAULT_LIVE_URL,
                   help=f"where the live app runs, for each screen's link to the same view "
                        f"(default {DEFAULT_LIVE_URL})")
    e.add_argument("--only", type=_keys, default=None, metavar="KEY,KEY",
                   help="only these screens (keys as in the file names, e.g. abc_prefill,gpt_decode; default: all)")
    e.set_defaults(run=lambda a: run(a.out, a.lang, a.present, a.live_url, a.only))
