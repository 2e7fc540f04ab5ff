"""A progress bar fed from inside a cached function (a measurement behind a button)."""
from __future__ import annotations

import contextvars
from collections.abc import Callable


def outside_the_cache(fn: Callable) -> Callable:
    """``fn`` run in the context of the caller: a progress bar drawn from inside a cached function is
    then not recorded for replay (the bar belongs to this run of the page, not to the cache entry)."""
    outer = contextvars.copy_context()
    return lambda *a, **k: outer.run(fn, *a, **k)
