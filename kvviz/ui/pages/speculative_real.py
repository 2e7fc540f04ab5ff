"""Which real model drafts for itself on the Speculative decoding page (``?sd_model=``, SmolLM2 by
default, any real model the server loads): its runs' keys, its defaults, the choice (a part
of kvviz/ui/pages/speculative.py's body; the message when its weights are missing is kvviz.ui.app.models.missing)."""
from __future__ import annotations

from kvviz.models.real import RealLM
from kvviz.ui.app import models
from kvviz.ui.app.i18n import t

DEFAULT_EXIT = 24         # SmolLM2's exit layer of 30 (kvviz.speculative.early_exit): four fifths

RunKey = tuple


def model_name(key: RunKey) -> str:
    """The real model a run key names (SmolLM2's keys name none: the page's default)."""
    return key[5] if len(key) > 5 else models.DEFAULT_REAL


def named(name: str) -> tuple[str, ...]:
    """The tail a run key gets for the real model ``name`` (none for SmolLM2)."""
    return () if name == models.DEFAULT_REAL else (name,)


def default_exit(model: RealLM) -> int:
    """The default exit layer: four fifths of the layers (SmolLM2: 24 of 30; Gemma 3: 14 of 18)."""
    return max(1, min(model.n_layers - 1, round(model.n_layers * DEFAULT_EXIT / 30)))


def chat(model: RealLM) -> bool:
    """The case's text goes into the chat template where the model has one (a base model: plain text)."""
    return model.SPEC.chat_template


def model_choice() -> str:
    """?sd_model=: the real model drafting for itself (one this server loads; SmolLM2 by default)."""
    names = models.enabled() or [models.DEFAULT_REAL]
    return models.choose("sd_model", names, t("specllm.model"), t("specllm.model_help"))
