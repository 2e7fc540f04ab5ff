"""Today weather is so: four hand-made heads, prefill and decode, and the stale cache (docs/design.md §2)."""

from kvviz.ui.nav import page_setup

page_setup("weather.title")

from kvviz.ui import weather_page  # noqa: E402  (after set_page_config)

weather_page.render()
