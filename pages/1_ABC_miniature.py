"""A/B/C miniature: the three-token model, stepped event by event (docs/design.md §1)."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("abc.title")

from kvviz.ui.pages import abc as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
