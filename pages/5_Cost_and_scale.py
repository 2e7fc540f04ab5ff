"""Cost and scale: cache memory, FLOPs, batching, measured decode speed, disaggregated serving."""

from kvviz.ui.nav import page_setup

page_setup("cost.title")

from kvviz.ui import cost_page  # noqa: E402  (after set_page_config)

cost_page.render()
