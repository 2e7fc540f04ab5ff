"""Glossary: the words the pages use, each explained in a few lines, in the page's language."""
from kvviz.ui.app.nav import page_foot, page_setup

page_setup("glossary.title")

from kvviz.ui.pages import glossary as page  # noqa: E402  (after set_page_config)

page.render()
page_foot()
