"""Paged cache: a stream of requests served from one block pool, step by step (docs/design.md §5)."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("paged.title")

from kvviz.ui.pages import paged as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
