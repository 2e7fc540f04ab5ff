"""The plotly.js bundle every chart is drawn with (kvviz/ui/plotly_js.py): the right version, and
every kind of trace the figure builders make."""
import asyncio
import gzip
import re
from pathlib import Path

from plotly.offline import get_plotlyjs_version

from kvviz.ui import plotly_js

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = plotly_js.STATIC / plotly_js.PLOTLY_BUNDLE


def bundle_text() -> str:
    return BUNDLE.read_text(encoding="utf-8")


def test_the_bundle_is_the_plotly_js_the_figures_are_built_for():
    # the plotly package validates and writes figures for one plotly.js version; the browser must
    # draw them with that version (a newer plotly package needs a new bundle from npm)
    head = bundle_text()[:200]
    assert re.search(r"plotly\.js \(cartesian - minified\) v(\S+)", head).group(1) == get_plotlyjs_version()
    assert get_plotlyjs_version() in plotly_js.PLOTLY_BUNDLE
    assert plotly_js.PLOTLY["bundle"].endswith("app/static/" + plotly_js.PLOTLY_BUNDLE)


def test_the_app_serves_its_static_folder():
    config = (ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert re.search(r"^enableStaticServing\s*=\s*true", config, re.M)
    assert plotly_js.STATIC == ROOT / "static"


def test_every_trace_kind_the_builders_make_is_in_the_bundle():
    # the cartesian bundle has a dozen trace kinds; one it lacks would draw nothing in the browser
    have = set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', bundle_text()))
    assert {"bar", "heatmap", "scatter"} <= have
    used = set()
    for path in (ROOT / "kvviz").rglob("*.py"):
        src = path.read_text(encoding="utf-8")
        used |= {name.lower() for name in re.findall(r"\bgo\.([A-Z][A-Za-z0-9]*)\(", src)
                 if name not in ("Figure", "Layout")}
        # plain JSON specs: "type": "bar" in a dict literal, type="bar" in dict(...)
        used |= set(re.findall(r'\btype"?\s*[=:]\s*["\'](bar|heatmap|scatter[a-z0-9]*|[a-z]+3d|pie|box|violin|'
                               r'histogram[a-z0-9]*|contour|image|table|sankey|funnel|waterfall|indicator)["\']', src))
    assert used, "no figure builder found"
    assert used <= have, f"trace kinds outside the bundle: {sorted(used - have)}"


def _call(mw, path: str, method: str = "GET", accept: bytes = b"gzip, deflate") -> tuple[dict, bytes]:
    sent = []

    async def send(msg):
        sent.append(msg)

    scope = {"type": "http", "method": method, "path": path, "headers": [(b"accept-encoding", accept)]}
    asyncio.run(mw(scope, None, send))
    head = {k.decode(): v.decode() for k, v in sent[0]["headers"]} if "headers" in sent[0] else sent[0]
    return head, sent[1]["body"] if len(sent) > 1 else b""


def test_the_server_sends_the_bundle_compressed_once_and_cacheable():
    passed = []

    async def streamlit_app(scope, receive, send):      # what st.App would have answered
        passed.append(scope["path"])
        await send({"type": "passed"})

    mw = plotly_js.ServeBundle(streamlit_app)
    raw = BUNDLE.read_bytes()
    for prefix in ("", "/course"):                       # also below a server.baseUrlPath
        head, body = _call(mw, f"{prefix}/app/static/{plotly_js.PLOTLY_BUNDLE}")
        assert gzip.decompress(body) == raw and len(body) < len(raw) / 2
        assert head["content-encoding"] == "gzip" and head["content-length"] == str(len(body))
        assert head["content-type"].startswith("text/javascript") and "immutable" in head["cache-control"]
    head, body = _call(mw, f"/app/static/{plotly_js.PLOTLY_BUNDLE}", accept=b"identity")
    assert body == raw and "content-encoding" not in head
    head, body = _call(mw, f"/app/static/{plotly_js.PLOTLY_BUNDLE}", method="HEAD")
    assert body == b"" and int(head["content-length"]) < len(raw)
    # everything else is Streamlit's
    _call(mw, "/app/static/PLOTLY_LICENSE.txt")
    _call(mw, "/_stcore/health")
    assert passed == ["/app/static/PLOTLY_LICENSE.txt", "/_stcore/health"]
