"""The GPT's weights: the shipped checkpoint, and the same weights in Hugging Face's layout.

``kvviz/data/tiny_gpt.pt`` is a plain state_dict (nn.Linear layout, no tied lm_head copy) and
``tiny_gpt.json`` beside it the config, vocabulary and how the weights were trained
(kvviz.models.gpt.train). ``draft_gpt.pt`` + ``.json`` are the draft model of speculative decoding in
the same format (1 layer, width 64, the same tokenizer and corpus). GPT-2's Conv1D stores four kinds
of weights ``[in, out]`` where nn.Linear stores ``[out, in]``: ``hf_state_dict`` transposes them, so
``transformers.GPT2LMHeadModel`` loads the same weights (tests and benchmarks compare against it).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path

import torch

from kvviz.models.gpt.config import GPTConfig, draft_config
from kvviz.models.gpt.corpus import vocabulary
from kvviz.models.gpt.model import GPT, random_gpt
from kvviz.models.gpt.tokenizer import WordTokenizer

DATA = Path(__file__).resolve().parents[2] / "data"
CHECKPOINT = DATA / "tiny_gpt.pt"        # plain state_dict (nn.Linear layout, no tied lm_head copy)
CHECKPOINT_META = DATA / "tiny_gpt.json"  # config, vocabulary and how the weights were trained
DRAFT_CHECKPOINT = DATA / "draft_gpt.pt"  # the draft model for speculative decoding (same format)

# GPT-2's Conv1D weights are [in, out]; nn.Linear's are [out, in]
CONV1D_SUFFIXES = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def plain_state_dict(model: GPT) -> dict[str, torch.Tensor]:
    """The checkpoint's content: every parameter under its GPT-2 name, the tied lm_head left out."""
    return {k: v.detach().clone() for k, v in model.state_dict().items() if k != "lm_head.weight"}


def weights_sha256(sd: dict[str, torch.Tensor]) -> str:
    """A hash of the weights themselves (names, shapes, bytes), for checking a retrained checkpoint:
    the file's own hash differs between two saves of the same tensors (torch.save writes a random id)."""
    h = hashlib.sha256()
    for k in sorted(sd):
        t = sd[k].detach().contiguous().cpu()
        h.update(f"{k}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.numpy().tobytes())
    return h.hexdigest()


def hf_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Our plain state_dict → the layout of transformers' GPT2LMHeadModel (Conv1D weights transposed)."""
    out = {k: (v.t().contiguous() if k.endswith(CONV1D_SUFFIXES) else v) for k, v in sd.items()}
    out["lm_head.weight"] = sd["transformer.wte.weight"]
    return out


def from_hf_state_dict(sd: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """transformers' GPT2LMHeadModel state_dict → our plain layout (the inverse of hf_state_dict)."""
    return {k: (v.t().contiguous() if k.endswith(CONV1D_SUFFIXES) else v) for k, v in sd.items()
            if k != "lm_head.weight" and not k.endswith((".attn.bias", ".attn.masked_bias"))}


def to_transformers(model: GPT):
    """The same weights in ``transformers.GPT2LMHeadModel`` (tests and benchmarks only: transformers
    is a development dependency, imported here and nowhere else)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    if c.kv_heads != c.n_head:
        raise ValueError("GPT2LMHeadModel has no grouped K/V heads")
    hf_cfg = GPT2Config(vocab_size=c.vocab_size, n_positions=c.block_size, n_embd=c.n_embd, n_layer=c.n_layer,
                        n_head=c.n_head, n_inner=4 * c.n_embd, activation_function="gelu_new",
                        layer_norm_epsilon=c.layer_norm_epsilon, resid_pdrop=0.0, embd_pdrop=0.0,
                        attn_pdrop=0.0, bos_token_id=None, eos_token_id=None, pad_token_id=None,
                        tie_word_embeddings=True)
    hf = GPT2LMHeadModel(hf_cfg)
    hf.load_state_dict(hf_state_dict(plain_state_dict(model)), strict=True)
    return hf.eval()


def load_gpt(sd: dict[str, torch.Tensor], cfg: GPTConfig) -> GPT:
    model = GPT(cfg)
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or set(missing) - {"lm_head.weight"}:
        raise ValueError(f"checkpoint does not fit the config: missing {missing}, unexpected {unexpected}")
    return model.eval()


@dataclass(frozen=True)
class TinyGPT:
    """The shipped model, read-only: network, tokenizer, and where the weights came from."""

    model: GPT
    tokenizer: WordTokenizer
    trained: bool          # False: the checkpoint was missing and seeded random weights stand in
    meta: dict


def _load(ckpt: Path, fallback: GPTConfig, fallback_seed: int) -> TinyGPT:
    """A checkpoint + its .json record; seeded random weights of shape ``fallback`` if either is missing."""
    meta_path = ckpt.with_suffix(".json")
    if ckpt.exists() and meta_path.exists():
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        cfg = GPTConfig(**meta["config"])
        model = load_gpt(torch.load(ckpt, map_location="cpu", weights_only=True), cfg)
        vocab, trained = meta["vocab"], True
    else:
        vocab = vocabulary()
        model, trained = random_gpt(fallback, fallback_seed), False
        meta = {"config": asdict(fallback), "vocab": vocab, "fallback_seed": fallback_seed}
    model.requires_grad_(False)
    model.head()                       # build the readout copy now, before the model is shared
    return TinyGPT(model, WordTokenizer(vocab), trained, meta)


@lru_cache(maxsize=2)
def load_tiny_gpt(path: str | None = None, fallback_seed: int = 0) -> TinyGPT:
    """The trained checkpoint (kvviz/data/tiny_gpt.pt + .json); seeded random weights if it is missing.

    Cached per process and frozen (requires_grad off): callers share it and must not modify it.
    """
    return _load(Path(path) if path else CHECKPOINT, GPTConfig(vocab_size=len(vocabulary())), fallback_seed)


@lru_cache(maxsize=2)
def load_draft_gpt(path: str | None = None, fallback_seed: int = 0) -> TinyGPT:
    """The draft model (kvviz/data/draft_gpt.pt + .json: 1 layer, width 64, the tiny GPT's tokenizer),
    trained by ``python -m kvviz.train_gpt --draft``; seeded random weights of that shape if missing.
    Cached and frozen like ``load_tiny_gpt``."""
    return _load(Path(path) if path else DRAFT_CHECKPOINT, draft_config(len(vocabulary())), fallback_seed)
