"""Sampling: greedy, temperature, top-k and top-p as one visible pipeline (docs/design.md §3)."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("sampling.title")

from kvviz.ui.pages import sampling as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
