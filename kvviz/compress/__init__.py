"""Smaller caches and what they cost, measured on any kvviz model's logits (docs/design.md §5): the
variants and what each runs (kvviz.compress.variants), their evaluation on held-out prompts or text
(kvviz.compress.evaluation), one prompt stepped beside the full cache (kvviz.compress.steps) and the
key channels a quantizer groups (kvviz.compress.keys)."""
from kvviz.compress.evaluation import (
    DEFAULT_PREFILL,
    DEFAULT_TOKENS,
    Evaluation,
    HeldOutPrompt,
    VariantResult,
    evaluate,
    evaluate_prompts,
    evaluate_text,
    held_out_prompts,
    held_out_stream,
    held_out_text,
    kl_divergence,
    run_cache,
)
from kvviz.compress.keys import KeyChannels, all_key_channels, key_channels
from kvviz.compress.steps import (
    Forced,
    RowErrors,
    StepComparison,
    StepScore,
    compare_steps,
    key_positions,
    pass_event,
    row_errors,
    sink_mass,
)
from kvviz.compress.variants import (
    KEY_AXES,
    KINDS,
    SETTINGS,
    Variant,
    llm_variants,
    page_variants,
    variant_cache,
    variant_model,
)

__all__ = ["all_key_channels", "compare_steps", "DEFAULT_PREFILL", "DEFAULT_TOKENS", "evaluate", "Evaluation",
           "evaluate_prompts", "evaluate_text", "Forced", "held_out_prompts", "held_out_stream", "held_out_text",
           "HeldOutPrompt", "KEY_AXES", "key_channels", "key_positions", "KeyChannels", "KINDS", "kl_divergence",
           "llm_variants", "page_variants", "pass_event", "row_errors", "RowErrors", "run_cache", "SETTINGS",
           "sink_mass", "StepComparison", "StepScore", "Variant", "variant_cache", "variant_model", "VariantResult"]
