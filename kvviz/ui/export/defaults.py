"""The export's defaults, read by both the command line (the package, without Streamlit) and ``site``.

A module of their own, so that ``site`` does not import its package back (an import circle)."""
LANGS = ("en", "es", "de")                   # kvviz.ui.app.i18n.LANGS (tests/test_export.py keeps them equal)
DEFAULT_LIVE_URL = "http://localhost:8501"   # `streamlit run app.py`'s own address
