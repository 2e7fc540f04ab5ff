"""``python -m kvviz export``: the argparse wiring only (importing it loads neither Streamlit nor torch;
the export itself does, when it runs)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

LANGS = ("en", "es", "de")
DEFAULT_LIVE_URL = "http://localhost:8501"


def add_command(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser("export", help="write the lecture script as static pages that need no server",
                       description="Write every screen of the lecture script as a static page (the stepper's own "
                                   "JavaScript, kvviz's plotly.js, the fonts and each screen's frames): it opens "
                                   "from file://, python -m http.server or any static host.")
    e.add_argument("--out", required=True, type=Path, help="folder to write (emptied first)")
    e.add_argument("--lang", choices=LANGS, default="en", help="language of the pages (default en)")
    e.add_argument("--present", action="store_true", help="presenter mode: larger type, one screen per step")
    e.add_argument("--live-url", default=DEFAULT_LIVE_URL,
                   help=f"where the live app runs, for each screen's link to the same view (default {DEFAULT_LIVE_URL})")
    e.add_argument("--only", type=lambda v: {k.strip() for k in v.split(",") if k.strip()}, default=None,
                   metavar="KEY,KEY", help="only these screens of the lecture script (keys as in the file names, "
                                           "e.g. abc_prefill,gpt_decode; default: every screen)")
    e.set_defaults(run=_run)


def _run(a: argparse.Namespace) -> int:
    if a.out.exists() and any(a.out.iterdir()) and not (a.out / "index.html").exists():
        print(f"kvviz: error: {a.out} is not empty and holds no export; choose an empty folder", file=sys.stderr)
        return 2
    from kvviz.ui.export.site import export, size_report     # Streamlit and the engine: only now

    try:
        result = export(a.out, lang=a.lang, present=a.present, live_url=a.live_url, only=a.only)
    except ValueError as e:
        print(f"kvviz: error: {e}", file=sys.stderr)
        return 2
    print(size_report(result))
    return 0
