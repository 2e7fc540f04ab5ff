"""Smaller caches: a sliding window with attention sinks, quantized K/V and grouped K/V heads, each
stepped beside the full cache and measured on the tiny GPT's logits (docs/design.md §5)."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("compress.title")

from kvviz.ui.pages import compress as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
