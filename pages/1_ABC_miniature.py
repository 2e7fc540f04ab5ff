"""A/B/C miniature: the seeds' three-token model, stepped event by event (docs/design.md §1)."""

from kvviz.ui.nav import page_setup

page_setup("abc.title")

from kvviz.ui import abc_page  # noqa: E402  (after set_page_config)

abc_page.render()
