"""The lecture as static pages that need no server: ``python -m kvviz export --out DIR``.

``capture`` runs each screen of the lecture script through its live page (Streamlit's AppTest, the
page's own widgets, cached runs and payload builders) and keeps what it draws; ``site`` writes the
folder (the stepper's own JavaScript and stylesheet, kvviz's plotly.js, the fonts, one page per
screen); ``cli`` is the command's argparse wiring, importable without Streamlit. See docs/export.md.
"""
