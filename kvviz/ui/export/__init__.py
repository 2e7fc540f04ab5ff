"""The lecture as static pages that need no server: ``python -m kvviz export --out DIR`` (kvviz.cli.export).

``capture`` runs each screen of the lecture script through its live page (Streamlit's AppTest, the
page's own widgets, cached runs and payload builders) and keeps what it draws; ``site`` writes the
folder (the stepper's own JavaScript and stylesheet, kvviz's plotly.js, the fonts, one page per
screen). This module loads neither Streamlit nor torch: the command line imports it, and ``run``
imports the rest only when an export runs. See docs/export.md.
"""
from __future__ import annotations

import sys
from pathlib import Path

from kvviz.ui.export.defaults import DEFAULT_LIVE_URL, LANGS

__all__ = ["DEFAULT_LIVE_URL", "LANGS", "run"]


def run(out: Path, lang: str = "en", present: bool = False, live_url: str = DEFAULT_LIVE_URL,
        only: set[str] | None = None) -> int:
    """Export into ``out`` and print its size; 2 after a message when ``out`` holds other files or a
    screen key is unknown."""
    if out.exists() and any(out.iterdir()) and not (out / "index.html").exists():
        print(f"kvviz: error: {out} is not empty and holds no export; choose an empty folder", file=sys.stderr)
        return 2
    from kvviz.ui.export.site import export, size_report  # Streamlit and the engine: only now

    try:
        result = export(out, lang=lang, present=present, live_url=live_url, only=only)
    except ValueError as e:
        print(f"kvviz: error: {e}", file=sys.stderr)
        return 2
    print(size_report(result))
    return 0
