"""Streamlit helpers: the only part of kvviz that imports streamlit."""
