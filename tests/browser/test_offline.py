"""A lecture hall without internet: no page asks any host but the app's own server for anything.

A browser context of its own routes every request: the server's go through, any other host's is
aborted and recorded. The home page and a stepping page (with its expanders, the sidebar's page
icons and the stepper) are opened; nothing outside may even have been asked for, and the icon font
(Streamlit's Material Symbols, served by the app) must be loaded and drawing the icons. A browser
of its own, because routing turns the HTTP cache off, which the other tests' shared context keeps.
"""
from __future__ import annotations

import pytest

from tools.browser import CHROME_ARGS, TEST_CHROMIUM, Page

pytestmark = pytest.mark.browser

ICON_FONT = "Material Symbols Rounded"


def test_no_request_leaves_the_server_and_icons_still_draw(browser, server):
    outside: list[str] = []

    def route(r) -> None:
        url = r.request.url
        if url.startswith((server + "/", "data:", "blob:")):
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    # a browser of its own: the tests' single-process chromium does not survive a second context
    own = browser.browser_type.launch(executable_path=TEST_CHROMIUM, args=CHROME_ARGS)
    tab = Page.__new__(Page)                   # a Page (settle, assert_clean) in that browser
    tab.ctx, tab.owns_ctx, tab.errors = own.new_context(viewport={"width": 1400, "height": 900}), True, []
    tab.ctx.route("**/*", route)
    tab.page = tab.ctx.new_page()
    tab.page.on("pageerror", lambda e: tab.errors.append(str(e)))
    try:
        for path in ("/", "/ABC_miniature?step=2"):
            tab.goto(server + path)
            tab.page.locator("[data-testid='stExpander'] summary, [data-testid='stSidebarNav'], "
                             "[data-testid='stPageLink']").first.wait_for(timeout=30_000)
            tab.page.wait_for_timeout(500)              # late requests (favicon, fonts) have started
            assert not outside, f"{path} asked other hosts for {outside}"
            tab.assert_clean()
            # the icon font is the app's own file, loaded, and it is what draws the icons
            fonts = tab.page.evaluate("[...document.fonts].filter(f => f.family.includes('Material'))"
                                      ".map(f => f.status)")
            assert "loaded" in fonts, fonts
            family = tab.page.evaluate("""() => {
                const icon = document.querySelector("[data-testid='stIconMaterial']");
                return icon && getComputedStyle(icon).fontFamily; }""")
            assert family and ICON_FONT in family, family
            icon = tab.page.evaluate("document.querySelector(\"link[rel='shortcut icon']\").href")
            assert icon.startswith("data:image/svg+xml"), icon[:80]     # the tab's icon, inline
        abc = tab.page.locator("[data-testid='stExpander'] [data-testid='stIconMaterial']").first
        assert abc.count() and abc.evaluate("e => getComputedStyle(e).fontFamily").find(ICON_FONT) >= 0
    finally:
        tab.close()
        own.close()
