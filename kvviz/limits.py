"""Hard caps enforced by the engine, so one visitor of a public deployment cannot exhaust it.

Widgets use the same numbers, but the engine checks them again: a URL or a script can bypass a widget.
"""

MAX_PROMPT_TOKENS = 64      # toy models: tokens in a prompt
MAX_NEW_TOKENS = 32         # toy models: tokens generated per run
MAX_PROMPT_CHARS = 2_000    # raw prompt text accepted before tokenising
MAX_SEED = 2**32 - 1        # sampling seeds: 0..MAX_SEED
MAX_DRAWS = 100_000         # "Draw N times" on the sampling page
MAX_TYPED_TOKENS = 50       # logits a user types on the sampling page
MAX_TYPED_CHARS = 4_000     # raw text of those logits
GPT_MAX_PROMPT_TOKENS = 64  # tiny GPT: prompt words
GPT_MAX_NEW_TOKENS = 48     # tiny GPT: tokens per stepped run (every event keeps its attention and cache)
GPT_MAX_SWEEP_TOKENS = 248  # tiny GPT: largest N the timing sweep generates (prompt + N − 1 ≤ block_size 256)
SMOLLM2_MAX_PROMPT_TOKENS = 256  # SmolLM2: prompt tokens, the chat template's included
SMOLLM2_MAX_NEW_TOKENS = 64      # SmolLM2: tokens per run (a decode step ≈ 60-70 ms; every event keeps its attention)
# Speculative decoding (kvviz.speculative.decoding.speculative_generate; prompt ≤ GPT_MAX_PROMPT_TOKENS)
SPECULATIVE_MAX_GAMMA = 8             # draft proposals per round
SPECULATIVE_MAX_NEW_TOKENS = 128      # tokens per run (every round keeps p and q over the vocabulary)
SPECULATIVE_MAX_ATTENTION_TOKENS = 48  # tokens per run that keeps the verification passes' attention
SPECULATIVE_MAX_STEP_TOKENS = 24      # tokens the page steps through (a round: up to 2γ + 3 events with figures)
SPECULATIVE_MEASURE_MAX_TOKENS = 64   # tokens per timed run of the speed-up measurement
SPECULATIVE_MEASURE_MAX_RUNS = 10     # timed runs per γ (speculative and plain each)
MAX_SPECULATIVE_FORMULA_GAMMA = 1_000  # γ in the expected speed-up formulas (kvviz.cost)
# Prompt-lookup decoding (kvviz.speculative.prompt_lookup; prompt and new tokens: the model's limits,
# SmolLM2: SMOLLM2_MAX_PROMPT_TOKENS and SMOLLM2_MAX_NEW_TOKENS)
PROMPT_LOOKUP_MAX_TOKENS = 16         # k: draft tokens per round (transformers' default is 10)
PROMPT_LOOKUP_MAX_NGRAM = 8           # n: the largest n-gram looked up (transformers' default is 2)
# Early-exit self-speculation (kvviz.speculative.early_exit): the first k layers draft
EARLY_EXIT_MAX_TOKENS = 8             # draft tokens per round (each a pass of k layers)
# The real model's speed-up measurement (kvviz.speculative.measure.measure_self_speedup): one visitor
# holds the server's two cores while it runs (≈ 60-70 ms a plain SmolLM2 step)
SELF_SPEC_MEASURE_MAX_TOKENS = 48     # new tokens per timed run
SELF_SPEC_MEASURE_MAX_RUNS = 3        # timed runs per prompt and method (each: speculative and plain)
SELF_SPEC_MEASURE_MAX_PROMPTS = 2     # prompts per measurement (the repeat-a-text one and the open question)


class LimitError(ValueError):
    """A request beyond a documented cap or otherwise invalid; the message is shown to the user."""


def check_int(name: str, value: object, low: int, high: int) -> int:
    """Return ``value`` as an int in [low, high] or raise LimitError with a readable message."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            as_float = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise LimitError(f"{name} must be a whole number, got {value!r}.") from None
        if as_float != as_float or as_float in (float("inf"), float("-inf")) or not as_float.is_integer():
            raise LimitError(f"{name} must be a whole number, got {value!r}.")
        value = int(as_float)
    if not low <= value <= high:
        raise LimitError(f"{name} must be between {low} and {high}, got {value}.")
    return value


MAX_ABS_TOKEN_VALUE = 1_000.0   # weather model: |scalar value| of a token (keeps every number readable)


def check_float(name: str, value: object, low: float, high: float) -> float:
    """Return ``value`` as a finite float in [low, high] or raise LimitError with a readable message.

    Accepts numbers and numeric text; empty cells (None, NaN), text, inf and huge numbers are refused.
    """
    if value is None or isinstance(value, bool):
        raise LimitError(f"{name} is empty.")
    try:
        as_float = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LimitError(f"{name} must be a number, got {str(value)[:40]!r}.") from None
    if as_float != as_float:
        raise LimitError(f"{name} is empty or not a number.")
    if as_float in (float("inf"), float("-inf")):
        raise LimitError(f"{name} must be a finite number, got {as_float}.")
    if not low <= as_float <= high:
        raise LimitError(f"{name} must be between {low:g} and {high:g}, got {as_float:g}.")
    return as_float

# Cost calculator (kvviz/cost/): formulas only, but the inputs are typed by visitors.
MAX_COST_LAYERS = 1_000
MAX_COST_HEADS = 1_024
MAX_COST_HEAD_DIM = 4_096
MAX_COST_WIDTH = 100_000          # d_model, d_ff
MAX_COST_VOCAB = 10_000_000
MAX_COST_TOKENS = 10_000_000      # context length in the calculator
MAX_COST_BATCH = 100_000
MAX_COST_GEN_TOKENS = 1_000_000   # N in the FLOP formulas

# Batched A/B/C stepper (kvviz/decoding/batching.py)
MAX_BATCH_PROMPTS = 3

# Timing on this machine (kvviz/measure/scaling.py): keep one visitor from hogging a shared server.
MAX_MEASURE_BATCH = 32
MAX_MEASURE_CONTEXT = 1_024
MAX_MEASURE_STEPS = 32
MAX_MEASURE_CACHE_BYTES = 256 * 2**20   # preallocated K/V cache of one measurement
MAX_MEASURE_GFLOP = 300                 # arithmetic of one measurement (≈ 15 s on one slow core)

# Paged KV cache (kvviz/cache/ PagedCache): the pool is allocated per layer, so cap its size.
MAX_PAGED_BLOCK_SIZE = 64       # positions per block (vLLM's default is 16)
MAX_PAGED_BLOCKS = 4_096        # physical blocks in the pool (per-block bookkeeping is Python lists)
MAX_PAGED_SLOTS = 8_192         # blocks × block size (tiny GPT, fp32: 32 MiB of K/V)

# Serving: the scheduler with continuous batching (kvviz/serving/, `python -m kvviz serve`)
MAX_SERVE_REQUESTS = 16         # requests in one stream
MAX_SERVE_BLOCKS = 256          # blocks in the pool of one run
MAX_SERVE_BLOCK_SIZE = 32       # positions per block
MAX_SERVE_NEW_TOKENS = 32       # tokens one request may generate
MAX_SERVE_SHARED_PREFIX = 32    # words every prompt of a stream begins with
MAX_SERVE_BATCH = 8             # requests running together (one pass per step)
MAX_SERVE_STEPS = 1_000         # steps of one run (a guard: a valid stream needs far fewer)
# Serving SmolLM2 (ModelLimits.check_serve_pool; the Paged cache page's real case): one position of
# its pool is 46,080 bytes in float32 (30 layers × 3 K/V heads × 64 × K and V), and a served run
# also makes every request's solo run (the check), ≈ 0.1 s a token on this machine's two cores
SMOLLM2_SERVE_MAX_REQUESTS = 6        # chat requests in one stream
SMOLLM2_SERVE_MAX_NEW_TOKENS = 16     # tokens one request generates
SMOLLM2_SERVE_MAX_SLOTS = 1_024       # blocks × block size: 47 MB of K/V in float32
# Gemma 3 270M (kvviz.models.gemma3): long texts past its 512-position sliding window; 2 KB of K/V
# per position and layer, the 15 sliding layers keeping ≤ 511 positions (docs/measured-gemma3.md)
GEMMA3_MAX_PROMPT_TOKENS = 1_100      # prompt tokens: the window twice over
GEMMA3_MAX_PROMPT_CHARS = 8_000       # characters of such a text (≈ 4.5 per token in English)
GEMMA3_MAX_NEW_TOKENS = 32            # tokens per run (a decode step ≈ 150 ms here)
GEMMA3_SERVE_MAX_REQUESTS = 4         # requests in one served stream
GEMMA3_SERVE_MAX_NEW_TOKENS = 12      # tokens one served request generates
GEMMA3_SERVE_MAX_SLOTS = 1_024        # blocks × block size: 38 MB of K/V in float32 (every layer paged)
# A long text's stepped run (kvviz.models.base.Keep, the Real LLM page): a pass of more positions than
# LONG_KEEP_ROWS keeps its last query rows, each attention map pooled to LONG_MAP_SIDE² cells and the
# last LONG_KEEP_LOGITS positions' logits, so Gemma 3's 1,100-token prompt does not hold 18 × 4 maps
# of 1,100² and 1,100 × 262,144 logits (docs/measured-gemma3.md: 6.6 GB before, for 727 tokens)
LONG_KEEP_ROWS = 128                  # a pass of more positions is long (the last 128 query rows kept)
LONG_MAP_SIDE = 128                   # a long pass's whole map: at most 128 × 128 pooled cells a head
LONG_KEEP_LOGITS = 16                 # positions of a long pass whose logits and output are kept (1 MB each)
MAX_RUN_RECORD_BYTES = 500_000_000  # bytes of the records of one stepped run on a real model (estimated first)

# Smaller caches (kvviz.cache SlidingWindowCache / QuantizedCache, kvviz.compress): the evaluation
# runs every variant over every held-out prompt, so its size is capped as a whole.
MAX_CACHE_WINDOW = 256            # sliding window: recent positions kept (the tiny GPT has 256)
MAX_CACHE_SINKS = 16              # sliding window: first positions always kept (StreamingLLM uses 4)
MAX_QUANT_GROUP_SIZE = 128        # quantized cache: values sharing one scale and zero point
MAX_QUANT_RESIDUAL = 256          # quantized cache: newest positions kept in full precision
QUANT_BITS = (2, 4, 8)            # quantized cache: int2 (four codes per byte), int4 (two) or int8
COMPRESS_MAX_PROMPTS = 16         # evaluation: held-out prompts per run
COMPRESS_MAX_NEW_TOKENS = 64      # evaluation: tokens the full cache generates per prompt
COMPRESS_MAX_VARIANTS = 40        # evaluation: cache variants compared in one call
COMPRESS_PROMPT_TOKENS = 16       # evaluation: length of every held-out prompt (tokens)
# Smaller caches on SmolLM2 (kvviz.compress.evaluate_text): every variant but the pooled model runs the text one
# position at a time (≈ 60-130 ms a step here), so the text and the set of variants are capped.
LLM_COMPRESS_MIN_TOKENS = 8       # held-out text: fewest tokens measured
LLM_COMPRESS_MAX_TOKENS = 192     # held-out text: most tokens measured (kvviz.compress.text)
LLM_COMPRESS_MAX_VARIANTS = 10    # variants in one evaluation on the real model

# The long tail on the Sampling page (kvviz.decoding.tail, SmolLM2's next-token distribution)
TAIL_MAX_K = 1_000          # top-k offered there (the vocabulary has 49,152 tokens)
TAIL_DRAWS = 1_000          # seeded draws at τ = 1 that show how often the tail comes up
