"""The selection-rule controls every model page shares: greedy or sampling, τ, top-k, top-p, seed.

``rule, seed = rule_controls("abc")`` draws one row of widgets and returns a validated rule from
``kvviz.decoding.sampling`` and the seed of its draws. Pass them on as hashable settings:
``cached_run(model, prompt, n, **rule.settings(), seed=seed)``.

Every widget is keyed ``<prefix>_<name>`` and kept in the URL (``?abc_rule=sample&abc_tau=0.7``),
so a copied link reopens the same rule. The sampling widgets stay visible (disabled) in greedy mode,
so switching back and forth keeps their values.

Each control's hover help is the glossary's definition of its term (``control_help``: plain words,
one wording per idea, kvviz.ui.app.nav.term_help), after the few words only the control needs (what empty means, the
range): the idea is worded once, in kvviz/ui/locales/<lang>/glossary.json.
"""
from __future__ import annotations

import streamlit as st

from kvviz.decoding.sampling import Greedy, Sampler, SelectionRule, make_rule
from kvviz.limits import MAX_SEED
from kvviz.ui.app import fmt, nav, urlstate
from kvviz.ui.app.i18n import t

MODES = ("greedy", "sample")
# Pages whose whole point is sampling open in sampling mode; every other page opens greedy.
SAMPLE_BY_DEFAULT = {"sampling"}
TAU_MAX = 5.0            # slider range; the engine accepts any finite τ ≥ 0
TOP_K_MAX = 1_000        # widget range; a k above the vocabulary keeps every token
TAU, TOP_P, SEED = 1.0, 1.0, 0     # what the widgets start at (top-k starts off)


# control -> (its glossary term, kvviz/ui/pages/glossary.py TERMS; the key of its own words)
HELP = {"rule": ("greedy", "rule.mode_help"), "tau": ("temperature", "rule.temperature_help"),
        "top_k": ("top_k_p", "rule.top_k_help"), "top_p": ("top_k_p", "rule.top_p_help"),
        "seed": ("seed", "rule.seed_help")}


def control_help(name: str) -> str:
    """The hover help of the control ``name`` (a key of HELP): its own words, then its term's glossary
    definition and the link to the entry."""
    term, own = HELP[name]
    return nav.term_help(term, t(own))


RuleKey = tuple[float, int | None, float | None]      # (temperature, top_k, top_p); temperature 0 = greedy


def rule_cache_key(rule: SelectionRule) -> RuleKey:
    """``rule`` as a hashable cache key, the arguments of ``make_rule`` (pages over the tiny GPT)."""
    s = rule.settings()
    return s["temperature"], s["top_k"], s["top_p"]


def rule_from_key(key: RuleKey) -> SelectionRule:
    """The rule a ``rule_cache_key`` stands for (the cached runs rebuild it from the key)."""
    return Sampler(*key)


def default_rule(key_prefix: str) -> tuple[SelectionRule, int]:
    """The rule and seed ``rule_controls(key_prefix)`` returns before anyone touches its widgets."""
    if key_prefix in SAMPLE_BY_DEFAULT:
        return make_rule(TAU, None, TOP_P), SEED
    return Greedy(), SEED


def _bound_value(key: str, default: float, lo: float, hi: float) -> float:
    """The value a URL-bound slider shows in this run: its state, else the address's (which the
    binding reads when the widget is made), else the default."""
    value = st.session_state.get(key)
    if value is None:
        try:
            value = float(st.query_params.get(key, default))
        except ValueError:
            value = default
    return float(value) if lo <= float(value) <= hi else default


def _number_slider(col, name_key: str, lo: float, hi: float, default: float, step: float, key: str,
                   **kwargs) -> float:
    """A slider whose value is written in the page's language (0,70 in Spanish and German): in its
    label, because Streamlit draws a slider's own numbers with a printf format, always with a point.
    Its own numbers are hidden (the ``kv-num-slider`` rule in style.css)."""
    shown = fmt.fixed(_bound_value(key, default, lo, hi), 2)
    with col.container(key=f"kv-num-slider-{key}"):
        return st.slider(t("rule.slider_label", name=t(name_key), value=shown), lo, hi, default, step, key=key,
                         bind="query-params", **kwargs)


def rule_controls(key_prefix: str) -> tuple[SelectionRule, int]:
    """Draw the rule widgets (keys ``<key_prefix>_rule/_tau/_top_k/_top_p/_seed``); return (rule, seed)."""
    def key(name: str) -> str:
        return f"{key_prefix}_{name}"

    default_mode = "sample" if key_prefix in SAMPLE_BY_DEFAULT else "greedy"
    urlstate.choice_param(key("rule"), MODES, default_mode)      # ?<prefix>_rule=sample, whatever the language
    c = st.columns([1.5, 1.4, 1.1, 1.4, 1.0], vertical_alignment="bottom")
    mode = c[0].segmented_control(
        t("rule.mode"), MODES, required=True, format_func=lambda m: t(f"rule.mode_{m}"), key=key("rule"),
        on_change=urlstate.sync, args=(key("rule"), default_mode), help=control_help("rule"), width="stretch")
    off = mode != "sample"
    tau = _number_slider(c[1], "rule.temperature", 0.0, TAU_MAX, TAU, 0.05, key("tau"), disabled=off,
                         help=control_help("tau"))
    # numbers through urlstate, not bind: a bound number_input raises on ?abc_seed=-inf
    urlstate.int_param(key("top_k"), None, 1, TOP_K_MAX)
    urlstate.int_param(key("seed"), SEED, 0, MAX_SEED)
    top_k = c[2].number_input(t("rule.top_k"), min_value=1, max_value=TOP_K_MAX, step=1,
                              placeholder=t("rule.off"), key=key("top_k"), disabled=off,
                              on_change=urlstate.sync, args=(key("top_k"), None),
                              help=control_help("top_k"))
    top_p = _number_slider(c[3], "rule.top_p", 0.01, 1.0, TOP_P, 0.01, key("top_p"), disabled=off,
                           help=control_help("top_p"))
    seed = c[4].number_input(t("rule.seed"), min_value=0, max_value=MAX_SEED, step=1, key=key("seed"),
                             on_change=urlstate.sync, args=(key("seed"), SEED), disabled=off,
                             help=control_help("seed"))
    if off:
        return Greedy(), int(seed)
    return make_rule(float(tau), None if top_k is None else int(top_k), float(top_p)), int(seed)
