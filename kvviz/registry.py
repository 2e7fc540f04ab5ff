"""Models by name, for the CLI and the pages."""
from __future__ import annotations

from kvviz.models.abc import ABCModel
from kvviz.models.base import Model
from kvviz.models.gpt import GPTModel

MODELS = {"abc": ABCModel, "gpt": GPTModel}


def get_model(name: str) -> Model:
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None
