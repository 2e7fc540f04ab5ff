"""Today weather is so: four hand-made heads, prefill and decode, and the stale cache (docs/design.md §2)."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("weather.title")

from kvviz.ui.pages import weather as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
