"""Hard caps enforced by the engine, so one visitor of a public deployment cannot exhaust it.

Widgets use the same numbers, but the engine checks them again: a URL or a script can bypass a widget.
"""

MAX_PROMPT_TOKENS = 64      # toy models: tokens in a prompt
MAX_NEW_TOKENS = 32         # toy models: tokens generated per run
MAX_PROMPT_CHARS = 2_000    # raw prompt text accepted before tokenising


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

# Cost calculator (kvviz/cost.py): formulas only, but the inputs are typed by visitors.
MAX_COST_LAYERS = 1_000
MAX_COST_HEADS = 1_024
MAX_COST_HEAD_DIM = 4_096
MAX_COST_WIDTH = 100_000          # d_model, d_ff
MAX_COST_VOCAB = 10_000_000
MAX_COST_TOKENS = 10_000_000      # context length in the calculator
MAX_COST_BATCH = 100_000
MAX_COST_GEN_TOKENS = 1_000_000   # N in the FLOP formulas

# Batched A/B/C stepper (kvviz/batching.py)
MAX_BATCH_PROMPTS = 3

# Timing on this machine (kvviz/cost_measure.py): keep one visitor from hogging a shared server.
MAX_MEASURE_BATCH = 32
MAX_MEASURE_CONTEXT = 1_024
MAX_MEASURE_STEPS = 32
MAX_MEASURE_CACHE_BYTES = 256 * 2**20   # preallocated K/V cache of one measurement
MAX_MEASURE_GFLOP = 300                 # arithmetic of one measurement (≈ 15 s on one slow core)
