"""Server-side timing of page renders, for bench/ only: off unless KVVIZ_TIMING_LOG names a file."""
from __future__ import annotations

import functools
import os
import time
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def timed(label: str) -> Callable[[F], F]:
    """Append ``label,milliseconds`` to $KVVIZ_TIMING_LOG after each call of the wrapped function."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            path = os.environ.get("KVVIZ_TIMING_LOG")
            if not path:
                return fn(*args, **kwargs)
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                with open(path, "a") as f:
                    f.write(f"{label},{(time.perf_counter() - t0) * 1000:.2f}\n")
        return inner  # type: ignore[return-value]
    return wrap
