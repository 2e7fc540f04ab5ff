"""Every page in Spanish and German shows no English sentence: each text element (titles, text,
captions, widget labels and help, alerts, table headers) is compared with the same page in English;
a long text that comes out identical was not translated."""
import re

import pytest

from kvviz.ui.app.pages import PAGES
from tests.conftest import frame, frame_text, no_exception, open_page, stepper

pytestmark = pytest.mark.app          # every test here runs a page (AppTest)

KINDS = ("title", "header", "subheader", "markdown", "caption", "info", "warning", "error", "success",
         "button", "expander", "tabs", "metric")
WIDGETS = ("text_input", "number_input", "slider", "selectbox", "toggle", "radio", "checkbox",
           "segmented_control", "text_area", "select_slider")


def _texts(at) -> list[str]:
    out = []
    for kind in KINDS:
        for el in at.get(kind):
            for attr in ("value", "label"):
                v = getattr(el, attr, None) if attr != "value" or kind not in ("button", "expander", "tabs") else None
                if isinstance(v, str):
                    out.append(v)
    for kind in WIDGETS:
        for w in at.get(kind):
            out += [s for s in (getattr(w, "label", None), getattr(w, "help", None)) if isinstance(s, str)]
    data = stepper(at)
    if data is not None:           # the stepper's frame and its own controls (kvviz/ui/components/step_view.py)
        out.append(frame_text(frame(at)))
        for word in data["payload"]["words"].values():             # a label, or labels by value (the speeds)
            out += list(word.values()) if isinstance(word, dict) else [word]
    return out


def _chart_and_table_words(at) -> set[str]:
    """Axis titles, chart titles, hover texts and table headers, word by word."""
    from tests.conftest import plotly_specs
    words = []
    data = stepper(at)
    if data is not None:           # the stepper's charts and tables
        f = frame(at)
        words += (data["payload"]["table"] or {}).get("cols", [])
        words += [c for r in ("top", "lead", "main", "side", "wide", "more") for b in f.get(r, []) if "tbl" in b
                  for c in b["tbl"]["cols"]]
    for spec in plotly_specs(at) + (frame(at)["figs"] if data is not None else []):
        layout = spec.get("layout", {})
        for k, v in layout.items():
            if k.startswith(("xaxis", "yaxis")) or k == "title":
                title = (v or {}).get("title") if k != "title" else v
                words.append((title or {}).get("text") if isinstance(title, dict) else title)
        for trace in spec.get("data", []):
            words += [trace.get("hovertemplate"), trace.get("name")]
            words += [(trace.get("colorbar") or {}).get("title", {}).get("text")]
    for df in at.dataframe:
        words += [str(c) for c in df.value.columns]
    out = set()
    for w in words:
        if isinstance(w, str):
            w = re.sub(r"%\{[^}]*\}|<[^>]+>", " ", w)
            out |= {x.lower() for x in re.findall(r"[A-Za-z]{4,}", w)}
    return out


def _sentences(text: str) -> set[str]:
    """Pieces of prose: runs of at least four words of letters (numbers, tokens and formulas differ)."""
    # quoted examples and code spans are model input/output (the tiny GPT speaks English): not prose
    text = re.sub(r"“[^”]*”|«[^»]*»|„[^“]*“|`[^`]*`|\"[^\"]*\"", " ", text)
    text = re.sub(r"https?://\S+", " ", text)      # addresses (a cited paper's link) are not prose
    text = re.sub(r"<[^>]+>|:material/\w+:|[*`_#]", " ", text)
    return {m.group(0).strip() for m in re.finditer(r"(?:[A-Za-z][a-z']+[ ,;:]+){3,}[A-Za-z][a-z']+", text)}


# words that are the same in every language (technical terms kept as the field uses them)
SHARED = re.compile(r"^(?:(?:KV|cache|prefill|decode|Prefill|Decode|top|greedy|Greedy|nice|warm|delicious|"
                    r"Today|weather|is|so|the|a)\b[ ,;:]*)+$")


# words spelled the same in the three languages, or names (tokens, models, units)
SAME_WORDS = {"logit", "logits", "prefill", "decode", "cache", "token", "tokens", "today", "weather", "nice",
              "warm", "delicious", "top", "greedy", "softmax", "bytes", "batch", "query", "head", "heads",
              "extra", "layer", "bits", "config", "json", "small", "attention", "keys", "queries", "phase", "seed",
              "causal",
              "position",   # German writes Phase, Position; Attention, Keys, Queries as the field does
              "batching", "pool", "block", "prompt", "ttft",   # glossary: el batching / el pool, der Block; TTFT
              "nats", "caches", "draft",                       # nats: a unit; die Caches, das Draft-Modell
              "dimension", "rotation"}                         # German: die Dimension, die Rotation


@pytest.mark.parametrize("lang", ["es", "de"])
@pytest.mark.parametrize("page", [p.script for p in PAGES], ids=lambda p: p.split("/")[-1])
def test_no_english_prose_left(page, lang, request):
    if "Real_LLM" in page:                     # the page's words, not the weights' (SmolLM2's class, tiny)
        request.getfixturevalue("tiny_real_smollm2")
    target = None if page == "app.py" else page
    en = open_page(target, {"step": "2"})                 # a decode event on the stepping pages
    other = open_page(target, {"lang": lang, "step": "2"})
    no_exception(other)
    english = set().union(*map(_sentences, _texts(en)))
    shown = set().union(*map(_sentences, _texts(other)))
    left = sorted(s for s in english & shown if not SHARED.match(s))
    assert not left, f"{page} in {lang} still shows English: {left[:8]}"
    words = sorted((_chart_and_table_words(en) & _chart_and_table_words(other)) - SAME_WORDS)
    assert not words, f"{page} in {lang}: charts or tables still show English words {words[:12]}"
