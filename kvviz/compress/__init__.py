"""Smaller caches and what they cost, measured on the trained tiny GPT's logits (docs/design.md §5):
the variants (kvviz.compress.variants), their evaluation on held-out prompts
(kvviz.compress.evaluation) and one prompt stepped beside the full cache (kvviz.compress.steps)."""
from kvviz.compress.evaluation import (
                                       Evaluation,
                                       HeldOutPrompt,
                                       VariantResult,
                                       evaluate,
                                       held_out_prompts,
                                       held_out_stream,
                                       kl_divergence,
                                       run_cache,
)
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
                                       variant_model,
)
from kvviz.compress.variants import KEY_AXES, KINDS, SETTINGS, Variant, grouped_network, page_variants

__all__ = ["KEY_AXES", "KINDS", "SETTINGS", "compare_steps", "evaluate", "Evaluation", "Forced", "grouped_network",
           "held_out_prompts", "held_out_stream", "HeldOutPrompt", "key_positions", "kl_divergence", "page_variants",
           "pass_event", "row_errors", "RowErrors", "run_cache", "sink_mass", "StepComparison", "StepScore", "Variant",
           "variant_model", "VariantResult"]
