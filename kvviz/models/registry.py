"""Models by name, for the CLI and the pages.

The real models are SmolLM2 and Gemma 3 (each off with ``KVVIZ_SMOLLM2=none`` / ``KVVIZ_GEMMA3=none``)
plus any transformers causal LM the host names in ``KVVIZ_MODELS`` (kvviz.models.real.host_entries:
Hub ids or local folders; the name is the entry as written). The list is read when this module is
imported, from the server's environment only."""
from __future__ import annotations

from kvviz.cost import ModelConfig, config_of
from kvviz.models import real
from kvviz.models.abc import ABCModel
from kvviz.models.base import Model, ModelLimits
from kvviz.models.gemma3 import Gemma3
from kvviz.models.gpt import GPTModel
from kvviz.models.smollm2 import LIMITS as SMOLLM2_LIMITS
from kvviz.models.smollm2 import SmolLM2  # transformers' model code loads with the weights
from kvviz.models.weather import WeatherModel

MODELS = {"abc": ABCModel, "weather": WeatherModel, "gpt": GPTModel, "smollm2": SmolLM2, "gemma3": Gemma3}
REAL_MODELS = ["smollm2", "gemma3"]          # the real LLMs, then the host's (``host_models``)


def host_models(entries: list[str] | None = None) -> dict[str, type[real.RealLM]]:
    """A class per model the host names (``KVVIZ_MODELS``), with SmolLM2's caps; a name kvviz
    already has is left out."""
    entries = real.host_entries() if entries is None else entries
    return {e: real.host_model(e, SMOLLM2_LIMITS) for e in entries if e not in MODELS}


_HOST = host_models()
MODELS.update(_HOST)
REAL_MODELS += list(_HOST)


def limits_before_loading(name: str) -> ModelLimits | None:
    """The caps of the model called ``name`` known before it loads (a real model's weights take
    seconds and hundreds of megabytes): a bad request is refused first. None: only an instance knows them."""
    return getattr(MODELS.get(name), "LIMITS", None)


def get_model(name: str, **options) -> Model:
    """A fresh model; ``options`` go to its constructor (e.g. ``values=`` for the weather model)."""
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {', '.join(MODELS)}") from None
    return cls(**options)


def cost_shape(name: str) -> ModelConfig:
    """The cost shape of the model called ``name`` (ValueError where it has none): a real model's from
    its config alone, without loading its weights; a small model's from an instance."""
    cls = MODELS.get(name)
    if isinstance(cls, type) and issubclass(cls, real.RealLM):
        return cls.cost_shape()
    return config_of(get_model(name))
