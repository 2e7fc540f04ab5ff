"""Lecture script: deep links to every screen of a full walkthrough of the pages, in teaching order."""
from kvviz.ui.app.nav import page_foot, page_setup

page_setup("lecture.title")

from kvviz.ui.pages import lecture as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
