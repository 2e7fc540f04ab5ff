"""Cost and scale: cache memory, FLOPs, batching, measured decode speed, disaggregated serving."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("cost.title")

from kvviz.ui.pages import cost as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
