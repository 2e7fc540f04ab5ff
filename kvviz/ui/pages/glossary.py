"""The Glossary page: one entry per term the pages use before or without explaining it, in the order a
run meets them. Each entry's heading and definition are strings (``glossary.h_<term>``,
``glossary.d_<term>`` in kvviz/ui/locales/<lang>/glossary.json); where the term is one of the
one-term-per-idea glossary's ideas (kvviz/ui/locales/glossary.toml), the words the three languages'
pages use for it come from there. Each heading is an anchor (``/Glossary#kv_cache``)."""
from __future__ import annotations

import re
import tomllib
from functools import cache
from pathlib import Path

import streamlit as st

from kvviz.ui.app.i18n import LANGS, t

TOML = Path(__file__).resolve().parents[1] / "locales" / "glossary.toml"

# (term, the start of its idea in glossary.toml or None), in the order a run meets them
TERMS: tuple[tuple[str, str | None], ...] = (
    ("prefill", "prefill ("),
    ("kv_cache", "KV cache"),
    ("choose", "choose ("),
    ("decode", "decode ("),
    ("positions", None),
    ("counters", None),
    ("recompute_check", "recompute ("),
    ("tokenizer", None),
    ("greedy", "greedy ("),
    ("temperature", None),
    ("top_k_p", None),
    ("seed", "seed, as the seed of the random"),
    ("kl", "KL divergence"),
    ("ttft", None),
    ("paged_blocks", "block ("),
    ("sliding_window", "sliding window"),
    ("gqa", "grouped K/V heads"),
    ("accept_rule", None),
    ("residual", "residual distribution"),
)


def _word(entry: str) -> str:
    """The word itself from a glossary field: ``"la caché KV (la caché, las cachés): feminine"`` ->
    ``"la caché KV"`` (notes in brackets, after a colon or a semicolon left out)."""
    return re.split(r" \(|: |; ", entry, maxsplit=1)[0].strip()


@cache
def words() -> dict[str, dict[str, str]]:
    """Per term with a glossary idea, its word in every language (kvviz/ui/locales/glossary.toml)."""
    ideas = tomllib.loads(TOML.read_text(encoding="utf-8"))["term"]
    out = {}
    for term, start in TERMS:
        if start is None:
            continue
        idea = next(i for i in ideas if i["idea"].startswith(start))
        out[term] = {lang: _word(idea[lang]) for lang in LANGS}
    return out


def render() -> None:
    st.title(t("glossary.title"))
    st.markdown(t("glossary.intro"))
    known = words()
    for term, _ in TERMS:
        st.header(t(f"glossary.h_{term}"), anchor=term)          # h2 under the page's h1
        st.markdown(t(f"glossary.d_{term}"))
        if term in known:
            st.caption(t("glossary.in_langs", **known[term]))
