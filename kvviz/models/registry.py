"""Models by name, for the CLI and the pages."""
from __future__ import annotations

from kvviz.models.abc import ABCModel
from kvviz.models.base import Model, ModelLimits
from kvviz.models.gpt import GPTModel
from kvviz.models.smollm2 import SmolLM2  # transformers' model code loads with the weights
from kvviz.models.weather import WeatherModel

MODELS = {"abc": ABCModel, "weather": WeatherModel, "gpt": GPTModel, "smollm2": SmolLM2}


def limits_before_loading(name: str) -> ModelLimits | None:
    """The caps of the model called ``name`` known before it loads (SmolLM2's weights take a second
    and half a gigabyte): a bad request is refused first. None: only an instance knows them."""
    return getattr(MODELS.get(name), "LIMITS", None)


def get_model(name: str, **options) -> Model:
    """A fresh model; ``options`` go to its constructor (e.g. ``values=`` for the weather model)."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None
    return cls(**options)
