"""A real LLM: SmolLM2-135M-Instruct through its own KV cache, token by token."""

from kvviz.ui.app.nav import page_foot, page_setup

page_setup("llm.title")

from kvviz.ui.pages import llm as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
