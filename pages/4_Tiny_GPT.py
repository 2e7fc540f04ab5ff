"""Tiny GPT: a trained GPT with a KV cache, stepped, verified, timed and weighed (docs/design.md §3)."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("gpt.title")

from kvviz.ui.pages import gpt as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
