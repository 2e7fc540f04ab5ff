"""Speculative decoding: a draft proposes, the tiny GPT verifies in one pass, both caches roll back."""

from kvviz.ui.nav import page_setup

page_setup("spec.title")

from kvviz.ui import spec_page  # noqa: E402  (after set_page_config)

spec_page.render()
