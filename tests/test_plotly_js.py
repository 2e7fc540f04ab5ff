"""The plotly.js bundle every chart is drawn with (kvviz/ui/components/plotly_js.py): the right version, and
every kind of trace the figure builders make."""
import hashlib
import json
import re
from pathlib import Path

from plotly.offline import get_plotlyjs_version

from kvviz.ui.components import plotly_js

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = plotly_js.STATIC / plotly_js.PLOTLY_BUNDLE


def bundle_text() -> str:
    return BUNDLE.read_text(encoding="utf-8")


def test_the_bundle_is_the_plotly_js_the_figures_are_built_for():
    # the plotly package validates and writes figures for one plotly.js version; the browser must
    # draw them with that version (a newer plotly package needs the bundle rebuilt by tools/plotly_bundle)
    head = bundle_text()[:200]
    assert re.search(r"plotly\.js v(\S+) \(kvviz", head).group(1) == get_plotlyjs_version()
    assert get_plotlyjs_version() in plotly_js.PLOTLY_BUNDLE
    # its address changes with its bytes (browsers keep it for a year)
    digest = hashlib.sha256(BUNDLE.read_bytes()).hexdigest()[:12]
    assert plotly_js.PLOTLY["bundle"].endswith(f"app/static/{plotly_js.PLOTLY_BUNDLE}?v={digest}")


def test_the_app_serves_its_static_folder():
    config = (ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8")
    assert re.search(r"^enableStaticServing\s*=\s*true", config, re.M)
    assert plotly_js.STATIC == ROOT / "static"


def test_every_trace_kind_the_builders_make_is_in_the_bundle():
    # the bundle registers only the trace kinds kvviz draws; one it lacks would draw nothing in the browser
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
    assert used <= have, (f"trace kinds outside the bundle: {sorted(used - have)}; register them in "
                          "tools/plotly_bundle/entry.js and rebuild (README, Charts)")


def test_the_bundle_is_built_from_the_recipe_in_tools():
    # tools/plotly_bundle builds the bundle from the npm package plotly.js of the same version; its
    # lock file pins what was built (rebuilding gives the same bytes: README, Charts)
    recipe = ROOT / "tools" / "plotly_bundle"
    package = json.loads((recipe / "package.json").read_text(encoding="utf-8"))
    assert package["dependencies"]["plotly.js"] == get_plotlyjs_version()
    lock = json.loads((recipe / "package-lock.json").read_text(encoding="utf-8"))
    assert lock["packages"]["node_modules/plotly.js"]["version"] == get_plotlyjs_version()
    entry = (recipe / "entry.js").read_text(encoding="utf-8")
    registered = set(re.findall(r"require\('plotly\.js/lib/([a-z0-9]+)'\)", entry)) - {"core"}
    have = set(re.findall(r'moduleType:"trace",name:"([a-z0-9]+)"', bundle_text()))
    assert registered | {"scatter"} == have          # core brings scatter; nothing else slipped in


def test_the_preload_script_survives_streamlits_sanitizer():
    # DOMPurify (st.html) removes an element whose text has "<" before a letter, "/" or "!": the
    # page would then start loading plotly.js only when the stepper mounts, and show a gap
    inner = plotly_js._PRELOAD_HTML.removeprefix("<script data-kvs-preload>").removesuffix("</script>")
    assert not re.findall(r"<[/\w!]", inner), re.findall(r".{30}<[/\w!].{10}", inner)
