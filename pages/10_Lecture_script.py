"""Lecture script: deep links to every screen of a full walkthrough of the seeds, in order."""
from kvviz.ui.nav import page_setup

page_setup("lecture.title")

from kvviz.ui import lecture_page  # noqa: E402  (after set_page_config)

lecture_page.render()
