"""Cached, read-only runs: pure computations keyed on their inputs, shared between visitors.

Records are frozen dataclasses and are never mutated, so sharing them through st.cache_resource is
safe; every visitor's own position (step, prompt) lives in st.session_state.
"""
from __future__ import annotations

import streamlit as st

from kvviz.decoding.batching import compare_with_solo, run_batch
from kvviz.decoding.sampling import make_rule
from kvviz.decoding.stepper import Run, run_generation
from kvviz.models.registry import get_model


@st.cache_resource(max_entries=256, ttl=3600, show_spinner=False)
def cached_run(model_name: str, prompt: tuple[str, ...], new_tokens: int, *, temperature: float = 0.0,
               top_k: int | None = None, top_p: float | None = None, seed: int = 0,
               model_options: tuple[tuple[str, object], ...] = (), repair: bool = False) -> Run:
    """Every argument is hashable, so it can be the cache key.

    The rule comes as plain settings (``**rule.settings()``); temperature 0 is greedy (the default).
    ``model_options``: constructor arguments, e.g. (("values", (("so", 5.0), ...)),);
    ``repair``: pass the model's own ``repair`` hook to the stepper (the weather model has one).
    """
    model = get_model(model_name, **dict(model_options))
    return run_generation(model, list(prompt), new_tokens, rule=make_rule(temperature, top_k, top_p),
                          seed=seed, repair=model.repair if repair else None)


@st.cache_resource(max_entries=128, ttl=3600, show_spinner=False)
def cached_batch_run(model_name: str, prompts: tuple[tuple[str, ...], ...], new_tokens: int):
    """A batched run (kvviz.decoding.batching) and each prompt run alone, with their comparison."""
    run = run_batch(get_model(model_name), [list(p) for p in prompts], new_tokens)
    solo = [cached_run(model_name, p, new_tokens) for p in prompts]
    return run, solo, compare_with_solo(run, solo)
