"""Speculative decoding: a draft proposes, the tiny GPT verifies in one pass, both caches roll back."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("speculative.title")

from kvviz.ui.pages import speculative as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
