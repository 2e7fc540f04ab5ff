"""Tiny GPT: a trained GPT with a KV cache, stepped, verified, timed and weighed (docs/design.md §3)."""

from kvviz.ui.nav import page_setup

page_setup("gpt.title")

from kvviz.ui import gpt_page  # noqa: E402  (after set_page_config)

gpt_page.render()
