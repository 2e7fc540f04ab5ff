"""The lecture script: the seeds in teaching order, one deep link per screen to show."""
from __future__ import annotations

import streamlit as st

from kvviz.ui.app.i18n import t
from kvviz.ui.app.links import deep_link, show_links

ABC, WEATHER, SAMPLING, GPT, COST = ("pages/1_ABC_miniature.py", "pages/2_Weather_heads.py",
                                    "pages/3_Sampling.py", "pages/4_Tiny_GPT.py", "pages/5_Cost_and_scale.py")
PAGED = "pages/6_Paged_cache.py"
SMALLER = "pages/7_Smaller_caches.py"
SPECULATIVE = "pages/8_Speculative_decoding.py"
LLM = "pages/9_Real_LLM.py"

# (section, [(page, address parameters, i18n key of the line to say)]) in the order of a lecture
SCRIPT: list[tuple[str, list[tuple[str, dict, str]]]] = [
    ("abc", [
        (ABC, {"step": 0}, "abc_prefill"),
        (ABC, {"step": 1}, "abc_chosen"),
        (ABC, {"step": 2}, "abc_decode"),
        (ABC, {"step": 8}, "abc_counters"),
        (ABC, {"abc_rule": "sample", "abc_tau": 1.5, "abc_seed": 3, "step": 1}, "abc_sampling"),
    ]),
    ("weather", [
        (WEATHER, {"step": 0}, "weather_prefill"),
        (WEATHER, {"step": 1}, "weather_logits"),
        (WEATHER, {"step": 2}, "weather_stale"),
        (WEATHER, {"step": 2, "repair": "true"}, "weather_repair"),
    ]),
    ("sampling", [
        (SAMPLING, {"sampling_top_p": 0.8}, "sampling_quiz"),
        (SAMPLING, {"sampling_tau": 0.3}, "sampling_sharp"),
        (SAMPLING, {"sampling_tau": 2.0, "sampling_top_k": 2}, "sampling_flat"),
    ]),
    ("gpt", [
        (GPT, {"step": 0}, "gpt_prefill"),
        (GPT, {"step": 2}, "gpt_decode"),
        (GPT, {"gpt_rule": "sample", "gpt_tau": 0.8, "gpt_seed": 7, "step": 1}, "gpt_sampled"),
    ]),
    ("cost", [
        (COST, {"tab": "Memory"}, "cost_memory"),
        (COST, {"tab": "Memory", "mem_preset": "llama3-8b", "mem_tokens": 8192, "mem_batch": 8}, "cost_memory_gqa"),
        (COST, {"tab": "Compute (FLOPs)"}, "cost_compute"),
        (COST, {"tab": "Batching", "step": 2}, "cost_batching"),
        (COST, {"tab": "Batching", "bt_model": "gpt", "step": 2}, "cost_batching_gpt"),
        (COST, {"tab": "Measured here"}, "cost_measured"),
        (COST, {"tab": "Disaggregated serving"}, "cost_serving"),
    ]),
    ("paged", [
        (PAGED, {"step": 1}, "paged_shared"),
        (PAGED, {"step": 2}, "paged_boundary"),
        (PAGED, {"pg_blocks": 8, "step": 6}, "paged_preempt"),
        (PAGED, {"pg_policy": "static", "step": 4}, "paged_static"),
    ]),
    ("compress", [
        (SMALLER, {"sc_kind": "window", "sc_window": 8, "sc_sinks": 4, "step": 17}, "compress_window"),
        (SMALLER, {"sc_kind": "window", "sc_window": 16, "sc_sinks": 4, "step": 31}, "compress_exact"),
        (SMALLER, {"sc_kind": "quant", "sc_bits": 4, "sc_axis": "token", "step": 12}, "compress_quant"),
        (SMALLER, {"sc_kind": "gqa", "sc_kv_heads": 1, "step": 3}, "compress_gqa"),
        (SMALLER, {"sc_model": "smollm2", "sc_klayer": 11}, "compress_llm_keys"),
    ]),
    ("speculative", [       # the page's default run: "It is rainy in London , so we", 12 tokens, γ = 4, greedy
        (SPECULATIVE, {"step": 4}, "speculative_verify"),
        (SPECULATIVE, {"step": 7}, "speculative_rollback"),
        (SPECULATIVE, {"step": 17}, "speculative_bonus"),
        (SPECULATIVE, {"sd_rule": "sample", "sd_seed": 1, "step": 6}, "speculative_residual"),
        (SPECULATIVE, {"sd_draft": "prompt-lookup"}, "speculative_lookup"),
    ]),
    ("llm", [        # the page's default run: "What is the capital of France?" in the chat template, greedy
        (LLM, {"step": 0}, "llm_prefill"),
        (LLM, {"llm_layer": 4, "llm_head": 2, "step": 2}, "llm_gqa"),
        (LLM, {"llm_dtype": "bfloat16", "step": 3}, "llm_bf16"),
    ]),
]


def render() -> None:
    st.title(t("lecture.title"))
    st.markdown(t("lecture.intro"))
    n = 0
    for section, steps in SCRIPT:
        st.header(t(f"lecture.h_{section}"))
        rows = []
        for page, params, key in steps:
            n += 1
            rows.append((t(f"lecture.{key}"), deep_link(page, params), t(f"lecture.{key}_why")))
        show_links(rows)
    st.caption(t("lecture.footer", n=n))
