"""The middleware that sends static files from memory (kvviz/ui/app/serve_files.py): plotly.js compressed
once, Streamlit's frontend files as Streamlit sends them, everything else left to Streamlit."""
import asyncio
import concurrent.futures
import gzip
import re
from pathlib import Path

from streamlit import file_util

from kvviz.ui.app import serve_files
from kvviz.ui.components import plotly_js

BUNDLE = plotly_js.STATIC / plotly_js.PLOTLY_BUNDLE
FRONTEND = Path(file_util.get_static_dir())


def _call(path: str, method: str = "GET", accept: bytes = b"gzip, deflate", extra=(), kind="http"):
    """(headers, body) of the middleware's answer, or (None, path) if it passed the request on."""
    sent, passed = [], []

    async def streamlit_app(scope, receive, send):      # what st.App would have answered
        passed.append(scope["path"])

    async def send(msg):
        sent.append(msg)

    scope = {"type": kind, "method": method, "path": path,
             "headers": [(b"accept-encoding", accept), *extra]}
    # in a thread of its own: a browser test before it in this worker leaves playwright's loop running
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, serve_files.ServeFromMemory(streamlit_app)(scope, None, send)).result()
    if passed:
        return None, passed[0]
    assert sent[0]["status"] == 200
    return {k.decode(): v.decode() for k, v in sent[0]["headers"]}, sent[1]["body"]


def test_the_server_sends_the_bundle_compressed_once_and_cacheable():
    raw = BUNDLE.read_bytes()
    for prefix in ("", "/course"):                       # also below a server.baseUrlPath
        head, body = _call(f"{prefix}/app/static/{plotly_js.PLOTLY_BUNDLE}")
        assert gzip.decompress(body) == raw and len(body) < len(raw) / 2
        assert head["content-encoding"] == "gzip" and head["content-length"] == str(len(body))
        assert head["content-type"].startswith("text/javascript") and "immutable" in head["cache-control"]
    head, body = _call(f"/app/static/{plotly_js.PLOTLY_BUNDLE}", accept=b"identity")
    assert body == raw and "content-encoding" not in head
    head, body = _call(f"/app/static/{plotly_js.PLOTLY_BUNDLE}", method="HEAD")
    assert body == b"" and int(head["content-length"]) < len(raw)


def test_streamlit_frontend_files_are_sent_from_memory_as_they_are():
    # the page's entry module and a font, named in Streamlit's index.html
    index = (FRONTEND / "index.html").read_text(encoding="utf-8")
    entry = re.search(r'src="\./(static/js/index\.[^"]+\.js)"', index).group(1)
    font = re.search(r'href="\./(static/media/[^"]+\.woff2)"', index).group(1)
    for prefix in ("", "/course", "/course/static"):     # any base path, even one with /static/ in it
        head, body = _call(f"{prefix}/{entry}")
        assert body == (FRONTEND / entry).read_bytes()
        assert head["content-type"] == "text/javascript; charset=utf-8"
        assert head["cache-control"] == "public, immutable, max-age=31536000"
        assert head["content-length"] == str(len(body)) and "content-encoding" not in head   # as Streamlit: plain
    head, body = _call(f"/{font}")
    assert body == (FRONTEND / font).read_bytes() and head["content-type"] == "font/woff2"
    head, body = _call(f"/{entry}", method="HEAD")
    assert body == b"" and head["content-length"] == str((FRONTEND / entry).stat().st_size)


def test_everything_else_is_left_to_streamlit():
    big = max((FRONTEND / "static" / "js").glob("*.js"), key=lambda p: p.stat().st_size)
    assert big.stat().st_size > serve_files.MAX_FILE
    entry = next((FRONTEND / "static" / "js").glob("index.*.js")).name
    for path in ("/", "/ABC_miniature/", "/No_such_page", "/_stcore/health", "/app/static/PLOTLY_LICENSE.txt",
                 "/static/js/no-such-file.js", "/static/js/../../index.html", "/static/",
                 f"/static/js/{big.name}"):
        assert _call(path) == (None, path)
    assert _call(f"/static/js/{entry}", method="POST")[0] is None
    assert _call(f"/static/js/{entry}", extra=[(b"range", b"bytes=0-99")])[0] is None
    assert _call(f"/static/js/{entry}", kind="websocket")[0] is None


def test_the_files_held_in_memory_are_streamlits_small_ones():
    files = serve_files.frontend_files()
    on_disk = {"/" + p.relative_to(FRONTEND).as_posix() for p in (FRONTEND / "static").rglob("*")
               if p.is_file() and p.stat().st_size <= serve_files.MAX_FILE}
    assert set(files) == on_disk and len(files) > 100
    assert sum(len(a.body) for a in files.values()) < 30e6


def test_a_pages_address_gets_index_html_that_names_the_apps_base():
    # Streamlit's index.html, plus the script that spares the browser its 404 probe of
    # /<page>/_stcore/health; under any prefix, compressed when the browser accepts it
    index = (FRONTEND / "index.html").read_bytes()
    for prefix in ("", "/course", "/~/+"):
        head, body = _call(f"{prefix}/Weather_heads", accept=b"identity")
        added = serve_files.BASE_URL_SCRIPT + b"\n  " + serve_files.HOLD_SCRIPT + b"\n  "
        assert body.replace(added, b"") == index
        assert body.index(serve_files.BASE_URL_SCRIPT) < body.index(b"</head>")
        assert head["content-type"] == "text/html; charset=utf-8" and head["cache-control"] == "no-cache"
    head, body = _call("/ABC_miniature")
    assert head["content-encoding"] == "gzip" and serve_files.BASE_URL_SCRIPT in gzip.decompress(body)
    # every page of pages/, named by Streamlit's rule, and nothing else
    assert serve_files.page_names() == {p.stem.split("_", 1)[1] for p in serve_files.PAGES_DIR.glob("*.py")}
    assert "BACKEND_BASE_URL" in serve_files.BASE_URL_SCRIPT.decode()


def test_the_pages_held_blank_until_their_step_is_drawn_are_the_stepping_pages():
    # presenter mode's first load keeps these pages' main column blank until the stepper has fitted its
    # step (HOLD_SCRIPT): every page that opens on a stepper, and no other (it would stay blank 6 s)
    from tests.browser.test_presenter import STEPPING
    assert set(serve_files.STEPPING_PAGES) == {p for p in STEPPING if "?" not in p}
    assert set(serve_files.STEPPING_PAGES) <= serve_files.page_names()
