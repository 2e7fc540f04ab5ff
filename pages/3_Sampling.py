"""Sampling: greedy, temperature, top-k and top-p as one visible pipeline (docs/design.md §3)."""

from kvviz.ui.nav import page_setup

page_setup("sampling.title")

from kvviz.ui import sampling_page  # noqa: E402  (after set_page_config)

sampling_page.render()
