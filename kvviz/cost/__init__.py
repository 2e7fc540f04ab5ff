"""What inference costs, as formulas: the one home of every cost formula in kvviz.

- ``shapes``: ``ModelConfig``, the named presets and the input checks;
- ``memory``: KV-cache bytes (full, windowed, quantized, shared by grouped heads) and weights;
- ``flops``: FLOPs with and without the cache, in closed form and counted over a run's passes;
- ``bandwidth``: arithmetic intensity, cache transfers, the memory-bound decode floor;
- ``speculative``: speculative decoding's expected tokens per pass and speed-up.

Everything is exact arithmetic on a model's shape, without torch and without a model. What this
machine measures lives above the loops, in kvviz.measure.
"""
from kvviz.cost.bandwidth import (
                               Intensity,
                               Transfer,
                               cache_transfer,
                               decode_intensity,
                               decode_intensity_limit,
                               decode_step_floor,
                               prefill_intensity,
)
from kvviz.cost.flops import (
                               FlopCount,
                               Flops,
                               attention_flops_per_pair,
                               block_flops_per_token,
                               count_flops,
                               flops_curve,
                               generation_flops,
                               linear_flops_per_token,
                               loop_flops,
                               pass_flops,
                               readout_flops,
                               step_flops,
)
from kvviz.cost.memory import (
                               MemoryReport,
                               cache_bytes,
                               cache_bytes_per_token,
                               context_grid,
                               fp8_cache_bytes,
                               kv_sharing,
                               memory_report,
                               param_count,
                               quantized_cache_bytes,
                               quantized_rows,
                               tokens_that_fit,
                               weight_bytes,
                               window_cache_bytes,
)
from kvviz.cost.shapes import (
                               ABC_CONFIG,
                               ACCELERATOR_GB,
                               DEEPSEEK_V2,
                               DEEPSEEK_V3,
                               DTYPE_BITS,
                               FALCON_7B,
                               GIB,
                               GPT2_SMALL,
                               LLAMA3_8B,
                               LLAMA31_70B,
                               MISTRAL_7B,
                               MLA_SHAPES,
                               PRESETS,
                               QWEN25_7B,
                               SHAPES,
                               SMOLLM2_135M,
                               TINY_GPT,
                               TRAINED_TINY_GPT,
                               WEATHER_CONFIG,
                               MLAShape,
                               ModelConfig,
                               accelerator_bytes,
                               attention_kind,
                               cache_config,
                               check_config,
                               check_dtype,
                               check_heads,
                               config_of,
                               gpt2_layout,
                               mla_cache_config,
                               mla_expanded_config,
)
from kvviz.cost.speculative import best_gamma, speculative_speedup, speculative_tokens_per_pass

__all__ = ["ABC_CONFIG", "ACCELERATOR_GB", "DTYPE_BITS", "FALCON_7B", "GIB", "GPT2_SMALL", "LLAMA31_70B", "LLAMA3_8B",
           "accelerator_bytes",
           "MISTRAL_7B", "PRESETS", "QWEN25_7B", "SHAPES", "SMOLLM2_135M", "TINY_GPT", "TRAINED_TINY_GPT",
           "WEATHER_CONFIG",
           "attention_flops_per_pair", "attention_kind", "best_gamma", "block_flops_per_token", "cache_bytes",
           "cache_bytes_per_token", "cache_config", "cache_transfer", "check_config", "check_dtype", "check_heads",
           "config_of", "context_grid", "count_flops", "decode_intensity", "decode_intensity_limit",
           "decode_step_floor", "FlopCount", "Flops", "flops_curve", "generation_flops", "gpt2_layout", "Intensity",
           "kv_sharing", "linear_flops_per_token", "loop_flops", "memory_report", "MemoryReport", "ModelConfig",
           "param_count", "pass_flops", "prefill_intensity", "quantized_cache_bytes", "quantized_rows", "readout_flops",
           "speculative_speedup", "speculative_tokens_per_pass", "step_flops", "tokens_that_fit", "Transfer",
           "weight_bytes", "window_cache_bytes"]
__all__ += ["DEEPSEEK_V2", "DEEPSEEK_V3", "MLA_SHAPES", "MLAShape", "fp8_cache_bytes", "mla_cache_config",
            "mla_expanded_config"]
