"""Static files sent from memory: the charts' plotly.js and Streamlit's own frontend.

A fresh browser's first visit fetches ≈ 130 files of Streamlit's frontend (60 when the page opens,
70 more, one per kind of widget, once the page's first elements arrive) from the same process that
runs the page's script. Streamlit sends them through Starlette's ``StaticFiles``: a stat, an open
and reads in worker threads per file, 3–4 ms of the server each with six in flight (1 ms from
memory: ``bench/server_profile.py --files``), while the script of the page they belong to waits
for the same interpreter. ``ServeFromMemory``, a middleware of ``app.py``'s ``st.App``, answers
GET and HEAD for those files from bytes read once at start-up (kvviz/ui/app/warmup.py), with the
headers Streamlit gives them (their names carry a content hash: cached for a year), and, like
Streamlit, uncompressed (a deployment's proxy compresses). Files above ``MAX_FILE`` (the charts
libraries kvviz never loads) and anything else pass through to Streamlit.

plotly.js (``plotly_js.PLOTLY_BUNDLE``, served at ``app/static/``): Streamlit's static serving would
compress its 1.2 MB again for every new browser (≈ 0.08 s of the server's CPU) and send no caching
header; here it is compressed once and cached for a year (the pages load it at an address with a
hash of its bytes, ``plotly_js.PLOTLY``, so a rebuilt bundle is fetched anew).

A page's own address (``/ABC_miniature``, below any prefix): Streamlit answers it with its
index.html, whose code cannot tell the page's name from a base path, so it first asks for
``/ABC_miniature/_stcore/health``, gets a 404, waits 100 ms and only then connects at ``/``:
≈ 0.14 s of every first visit to a page's link. Here that index.html says where the app's base
is (``window.__streamlit.BACKEND_BASE_URL``, the setting Streamlit reads for it, computed in the
browser from its own address, so a proxy's prefix is kept), and the first health check is the one
that answers.

``/_kvviz/ready`` (below any prefix) answers where the server's background warm-up stands
(kvviz/ui/app/warmup.py), as JSON: the tests' server and the benchmarks wait for ``"ready": true``.
"""
from __future__ import annotations

import functools
import gzip
import json
import mimetypes
from pathlib import Path
from typing import NamedTuple

from streamlit import file_util
from streamlit.source_util import page_icon_and_name

from kvviz.ui.app import warmup_state
from kvviz.ui.app.pages import PAGES
from kvviz.ui.components.plotly_js import PLOTLY_BUNDLE, STATIC

MAX_FILE = 1_000_000                    # bytes; larger frontend files are left to Streamlit
CACHE_FOREVER = b"public, immutable, max-age=31536000"
BUNDLE_PATH = "/app/static/" + PLOTLY_BUNDLE
READY_PATH = "/_kvviz/ready"             # the warm-up's status (``ready``), below any base path
HEALTH_PATH = "/_stcore/health"
PAGES_DIR = Path(__file__).resolve().parents[3] / "pages"
NO_CACHE = b"no-cache"                  # as Streamlit sends index.html: asked for again on every visit
# before Streamlit's code: the app's base is the page's address without its last segment (the page)
BASE_URL_SCRIPT = (b"<script>window.__streamlit = Object.assign({BACKEND_BASE_URL: location.origin + "
                   b"location.pathname.replace(/[^/]*$/, '')}, window.__streamlit)</script>")


# Presenter mode's first load of a stepping page showed its title, folded expanders and Streamlit's
# grey skeletons for about a second before the step was drawn (CSS sent by the page's script comes
# too late: its element's code is loaded lazily, after the title is painted). On those addresses
# the main column stays blank from the first paint until the stepper has fitted the step to the
# screen (step_view.js removes the class), an error or a warning came instead (the Real LLM's weights
# missing, say), a fresh server's warm-up is being waited for (kvviz/ui/app/waiting.py ``WAIT_KEY``), or
# 6 s passed.
STEPPING_PAGES = tuple(page.url[1:] for page in PAGES if page.opens_on_stepper)      # kvviz/ui/app/pages.py
HOLD_SCRIPT = ("<style>html.kvs-hold [data-testid='stMainBlockContainer']:not(:has("
               "[data-testid='stAlertContentError'], [data-testid='stAlertContentWarning'], "
               "[class*='st-key-kv_wait_'], "
               "[data-testid='stException'])) "
               "{ visibility: hidden; }</style><script>(() => { "
               "const page = location.pathname.replace(/\\/$/, '').split('/').pop(); "
               "if (!/[?&]present=(1|true|on)(&|$)/.test(location.search) || "
               f"!{list(STEPPING_PAGES)!r}.includes(page)) return; "
               "const html = document.documentElement; html.classList.add('kvs-hold'); "
               "let ran = false; "
               # a view of the page without a stepper (SmolLM2's views, a settings error): shown once
               # the page's run has finished without one (a stepper, its key kvs_…, shows itself)
               "const free = () => { html.classList.remove('kvs-hold'); watch.disconnect(); }; "
               "const watch = new MutationObserver(() => { "
               "const state = document.querySelector(\"[data-testid='stApp']\")"
               "?.getAttribute('data-test-script-state'); "
               "if (state === 'running') ran = true; "
               "else if (ran && state === 'notRunning' && "
               "!document.querySelector(\"[class*='st-key-kvs_'], .kvs-root\")) free(); "
               "if (!html.classList.contains('kvs-hold')) watch.disconnect(); }); "
               "watch.observe(document, { subtree: true, attributes: true, "
               "attributeFilter: ['data-test-script-state'] }); "
               "setTimeout(free, 6000); })()</script>").encode()


class Asset(NamedTuple):
    body: bytes
    gzipped: bytes | None                 # sent when the browser accepts gzip; None: always plain
    content_type: bytes


def _content_type(name: str) -> bytes:
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind.endswith("javascript"):
        kind += "; charset=utf-8"
    return kind.encode()


@functools.cache
def frontend_files() -> dict[str, Asset]:
    """Streamlit's frontend files by URL path below the server's base path (``/static/js/…``),
    read once per process; about 13 MB."""
    root = Path(file_util.get_static_dir())
    files = {}
    for path in sorted((root / "static").rglob("*")):
        if path.is_file() and path.stat().st_size <= MAX_FILE:
            rel = path.relative_to(root).as_posix()
            files["/" + rel] = Asset(path.read_bytes(), None, _content_type(rel))
    return files


@functools.cache
def plotly_bundle() -> Asset:
    """The plotly.js bundle, plain and compressed once per process."""
    raw = (STATIC / PLOTLY_BUNDLE).read_bytes()
    return Asset(raw, gzip.compress(raw, compresslevel=9, mtime=0), _content_type(PLOTLY_BUNDLE))


@functools.cache
def page_names() -> frozenset[str]:
    """The last segment of each page's address, by Streamlit's own rule (``1_ABC_miniature.py``:
    ``ABC_miniature``)."""
    return frozenset(name for p in PAGES_DIR.glob("*.py") if (name := page_icon_and_name(p)[1]))


@functools.cache
def page_html() -> Asset:
    """Streamlit's index.html with ``BASE_URL_SCRIPT`` and ``HOLD_SCRIPT`` at the end of its head, for a page's address
    (an inline script runs while the page is read, Streamlit's code, a module, after that)."""
    index = (Path(file_util.get_static_dir()) / "index.html").read_bytes()
    end = index.index(b"</head>")
    body = index[:end] + BASE_URL_SCRIPT + b"\n  " + HOLD_SCRIPT + b"\n  " + index[end:]
    return Asset(body, gzip.compress(body, compresslevel=9, mtime=0), _content_type("index.html"))


def find(path: str) -> Asset | None:
    """What answers ``path`` (under any base path), or None: Streamlit's."""
    if path.endswith(BUNDLE_PATH):
        return plotly_bundle()
    if path.rpartition("/")[2] in page_names():
        return page_html()
    i = path.rfind("/static/", 0, len(path) - 1)
    while i >= 0:                       # a base path may itself contain /static/
        found = frontend_files().get(path[i:])
        if found is not None:
            return found
        i = path.rfind("/static/", 0, i)
    return None


def _header(scope: dict, name: bytes) -> bytes:
    return b",".join(v for k, v in scope.get("headers", []) if k.lower() == name)


def ready() -> Asset:
    """``/_kvviz/ready``: where the server's warm-up stands (kvviz/ui/app/warmup_state.py ``WarmUp.status``), as
    JSON: ``ready`` is true once every page's default run and every real model are prepared."""
    return Asset(json.dumps(warmup_state.STATE.status()).encode(), None, b"application/json")


class ServeFromMemory:
    """ASGI middleware for ``st.App``: GET/HEAD of the files ``find`` knows, from memory, and of
    ``READY_PATH``; every other request (and ranges) passes through to Streamlit."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        asset = None
        path = scope.get("path", "")
        if not path.endswith((READY_PATH, HEALTH_PATH)):      # a visitor's request: the warm-up lets it pass
            warmup_state.STATE.visited()
        if scope["type"] == "http" and scope.get("method") in ("GET", "HEAD") and not _header(scope, b"range"):
            asset = ready() if path.endswith(READY_PATH) else find(path)
        if asset is None:
            await self.app(scope, receive, send)
            return
        gzipped = asset.gzipped is not None and b"gzip" in _header(scope, b"accept-encoding")
        body = asset.gzipped if gzipped else asset.body
        cache = NO_CACHE if asset.content_type.startswith((b"text/html", b"application/json")) else CACHE_FOREVER
        headers = [(b"content-type", asset.content_type), (b"content-length", str(len(body)).encode()),
                   (b"cache-control", cache), (b"x-content-type-options", b"nosniff")]
        if asset.gzipped is not None:
            headers.append((b"vary", b"Accept-Encoding"))
        if gzipped:
            headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
