"""Server-side timing of page renders, for bench/ only: off unless KVVIZ_TIMING_LOG names a file."""
from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

F = TypeVar("F", bound=Callable)


@contextlib.contextmanager
def timing(label: str) -> Iterator[None]:
    """Append ``label,milliseconds`` to $KVVIZ_TIMING_LOG when the block ends."""
    path = os.environ.get("KVVIZ_TIMING_LOG")
    if not path:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        with open(path, "a") as f:
            f.write(f"{label},{(time.perf_counter() - t0) * 1000:.2f}\n")


def timed(label: str) -> Callable[[F], F]:
    """``timing(label)`` around each call of the wrapped function."""
    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def inner(*args, **kwargs):
            with timing(label):
                return fn(*args, **kwargs)
        return inner  # type: ignore[return-value]
    return wrap
