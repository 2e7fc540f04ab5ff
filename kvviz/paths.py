"""Where kvviz keeps what it prepares (converted weights, the warm-up's durations): the cache directory,
``$KVVIZ_CACHE_DIR`` or ``~/.cache/kvviz``. Imports nothing of the engine, so the server's start-up
(kvviz/ui/app/warmup_state.py) reads it before torch loads."""
from __future__ import annotations

import os
from pathlib import Path

ENV_CACHE = "KVVIZ_CACHE_DIR"


def cache_root(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    root = env.get(ENV_CACHE)
    return Path(root).expanduser() if root else Path.home() / ".cache" / "kvviz"
