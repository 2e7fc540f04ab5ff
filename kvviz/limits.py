"""Hard caps enforced by the engine, so one visitor of a public deployment cannot exhaust it.

Widgets use the same numbers, but the engine checks them again: a URL or a script can bypass a widget.
"""

MAX_PROMPT_TOKENS = 64      # toy models: tokens in a prompt
MAX_NEW_TOKENS = 32         # toy models: tokens generated per run
MAX_PROMPT_CHARS = 2_000    # raw prompt text accepted before tokenising
GPT_MAX_PROMPT_TOKENS = 64  # tiny GPT: prompt words
GPT_MAX_NEW_TOKENS = 48     # tiny GPT: tokens per stepped run (every event keeps its attention and cache)
GPT_MAX_SWEEP_TOKENS = 248  # tiny GPT: largest N the timing sweep generates (prompt + N − 1 ≤ block_size 256)


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
