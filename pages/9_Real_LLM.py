"""A real LLM: SmolLM2-135M-Instruct through its own KV cache, token by token."""

from kvviz.ui.nav import page_setup

page_setup("llm.title")

from kvviz.ui import llm_page  # noqa: E402  (after set_page_config)

llm_page.render()
