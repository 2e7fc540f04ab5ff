"""Any transformers causal LM behind kvviz's model protocol (SmolLM2 first: kvviz.models.smollm2).

``HFCausalLM(model, tokenizer)`` runs the network through transformers' own forward (no copy of its
arithmetic): ``forward(token_ids, cache, start_pos)`` calls ``model(input_ids, position_ids,
past_key_values=cache, output_attentions=True)`` with one of kvviz's caches (they are transformers
caches, kvviz.cache) or without one (``use_cache=False``: the recompute check), and returns the
``PassRecord`` the stepper, the trace and the pages read:

- attention ``[L, H, N, T]``: transformers' own weights (eager attention, ``output_attentions``);
- k, v ``[L, H_kv, N, d]``: the rows the pass appended to the cache (keys after the rotary
  rotation, as the model caches them); without a cache, the same rows as computed;
- q ``[L, H, N, d]``: the queries after the rotation, captured with forward hooks on the
  projections (``q_proj``/``k_proj``/``v_proj``, the Llama family's names), on the per-head norms
  a model applies before the rotation where it has them (``q_norm``/``k_norm``: Gemma 3, Qwen 3),
  and on each attention module's own ``position_embeddings`` (cos, sin: a model whose layers use
  different rotary bases, Gemma 3's sliding and global layers, rotates each layer by its own),
  rotated with the model's ``apply_rotary_pos_emb``; a model without these gives an empty q;
- ``k_unrotated``: the keys before the rotation (the RoPE view of the page);
- output: the hidden state the vocabulary projection reads (a pre-hook on it), logits ``[N, V]``.

A long text's pass (``forward(..., keep=Keep())``, kvviz.models.base.Keep: more than 128 positions)
keeps what the views draw: its last query rows of attention and q, the whole map average-pooled
(``attention_map``), the logits and output of its last positions (``logits_to_keep``).

The hooks exist only during a recording forward and ignore other threads. The fast loop (no
attention weights, no snapshots), to be timed against transformers' ``generate``, is
kvviz.decoding.loops.generate_cached (``logits`` below).
"""
from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache

import torch
import torch.nn.functional as F

from kvviz.cache import Cache, PagedCache, ScoredCache, layer_windows
from kvviz.cost.shapes import ModelConfig
from kvviz.limits import LimitError
from kvviz.models.base import BatchPassRecord, Keep, LayerLayout, ModelLimits, PassRecord, allowed_keys, new_cache
from kvviz.models.grouped import pooled_network


class Vocab(list):
    """The tokenizer's token strings in id order, with a dict behind ``index`` and ``in``: kvviz's
    stepper looks tokens up by string (``vocab.index``), which a 49,152-entry list does slowly."""

    def __init__(self, tokens: Sequence[str]) -> None:
        super().__init__(tokens)
        self._ids = {tok: i for i, tok in enumerate(tokens)}
        if len(self._ids) != len(tokens):
            raise ValueError("token strings must be unique")

    def index(self, token, *args) -> int:      # noqa: D401 - list.index's meaning
        try:
            return self._ids[token]
        except (KeyError, TypeError):
            raise ValueError(f"{token!r} is not in the vocabulary") from None

    def __contains__(self, token) -> bool:
        try:
            return token in self._ids
        except TypeError:
            return False


@dataclass(frozen=True)
class HFPassRecord(PassRecord):
    """A PassRecord plus what a rotary model adds: ``q_unrotated`` [L, H, N, d] and ``k_unrotated``
    [L, H_kv, N, d], the projections before the rotation (None when not captured)."""

    q_unrotated: torch.Tensor | None = None
    k_unrotated: torch.Tensor | None = None
    # a long pass recorded with ``Keep`` (kvviz.models.base): the whole map pooled, [L, H, ⌈N/b⌉, ⌈T/b⌉]
    # with b = map_block (``attention``, q and logits then hold the last rows only); None: in full
    attention_map: torch.Tensor | None = None
    map_block: int = 1


def cost_config(config, name: str = "", source: str = "") -> ModelConfig:
    """kvviz.cost's shape of a Llama-family transformers config (gated MLP, RMSNorm, rotary positions)."""
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    bias = bool(getattr(config, "attention_bias", False))
    d_ff = getattr(config, "intermediate_size", None)
    gpt2 = d_ff is None and hasattr(config, "n_inner")     # GPT-2's config: learned positions, GELU MLP, biases
    if gpt2:
        d_ff = config.n_inner or 4 * config.hidden_size
    return ModelConfig(
        name or getattr(config, "name_or_path", "") or config.model_type, n_layers=config.num_hidden_layers,
        n_heads=heads, n_kv_heads=getattr(config, "num_key_value_heads", None) or heads, head_dim=head_dim,
        d_model=config.hidden_size, d_ff=d_ff, vocab=config.vocab_size, mlp="gelu" if gpt2 else "gated",
        learned_positions=config.n_positions if gpt2 else 0,
        max_context=getattr(config, "max_position_embeddings", 0), norm="layernorm" if gpt2 else "rmsnorm",
        qkv_bias=bias or gpt2, out_bias=bias or gpt2, mlp_bias=bool(getattr(config, "mlp_bias", False)) or gpt2,
        tied_embeddings=bool(getattr(config, "tie_word_embeddings", False)), source=source)


def _rope_theta(config, layer_type: str) -> float | None:
    """The rotary base of a layer of ``layer_type``: transformers 5 keeps it in ``rope_parameters``,
    one dict, or one per layer type (``{"full_attention": {...}, "sliding_attention": {...}}``);
    older configs in ``rope_theta``."""
    params = getattr(config, "rope_parameters", None) or {}
    if isinstance(params, dict) and isinstance(params.get(layer_type), dict):
        params = params[layer_type]
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    theta = theta if theta is not None else getattr(config, "rope_theta", None)
    return None if theta is None else float(theta)


def layout(config) -> tuple[LayerLayout, ...]:
    """Each decoder layer's attention as the config says it: full, or sliding with its window by
    transformers' own rule (``layer_windows``: ``layer_types`` with ``sliding_window``), the heads, the
    head size, rotary positions with their base."""
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    types = getattr(config, "layer_types", None) or ["full_attention"] * config.num_hidden_layers
    layers = []
    for kind, window in zip(types, layer_windows(config)):
        theta = _rope_theta(config, kind)
        layers.append(LayerLayout(heads, kv_heads, head_dim, "full" if window is None else "sliding",
                                  None if window is None else int(window),
                                  "rotary" if theta is not None else "none", theta))
    return tuple(layers)


def pooled(m: torch.Tensor, side: int) -> tuple[torch.Tensor, int]:
    """Maps [H, N, T] averaged over blocks of b × b cells, b the smallest block that leaves at most
    ``side`` × ``side`` of them (a last block that overhangs averages the cells it covers) → ([H, ⌈N/b⌉,
    ⌈T/b⌉], b)."""
    b = max(1, -(-max(m.shape[-2:]) // side))
    if b == 1:
        return m, 1
    return F.avg_pool2d(m.unsqueeze(0), b, b, ceil_mode=True)[0], b


def _padded(maps: Sequence[torch.Tensor], right: bool = False) -> list[torch.Tensor]:
    """Attention maps [H, N, T_layer] as [H, N, T]: a layer that holds fewer rows read fewer keys; the
    missing columns are zeros, before its columns (``right=False``: a sliding-attention layer whose cache
    dropped the oldest positions) or after them (a scored cache's own rows)."""
    t = max(m.shape[-1] for m in maps)
    return [_pad_to(m, t, right) for m in maps]


def _pad_to(m: torch.Tensor, t: int, right: bool) -> torch.Tensor:
    return m if m.shape[-1] == t else F.pad(m, (0, t - m.shape[-1]) if right else (t - m.shape[-1], 0))


class _ExitReached(Exception):
    """Raised by the early-exit hook with the hidden state after the exit layer (HFCausalLM.exit_logits)."""

    def __init__(self, hidden: torch.Tensor) -> None:
        super().__init__("exit layer reached")
        self.hidden = hidden


class HFCausalLM:
    """A transformers causal LM and its tokenizer as a kvviz model (see the module docstring).

    Tokens are the tokenizer's own strings (byte-level BPE: ``Ġ`` is a leading space, ``Ċ`` a line
    break); ``tokenize`` never reads special-token text in its input as special tokens."""

    def __init__(self, model, tokenizer, *, name: str = "hf", limits: ModelLimits | None = None,
                 cost: ModelConfig | None = None) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        cfg = model.config
        self.config = cfg
        self.n_layers = cfg.num_hidden_layers
        self.n_heads = cfg.num_attention_heads
        self.n_kv_heads = getattr(cfg, "num_key_value_heads", None) or self.n_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // self.n_heads
        self.vocab = Vocab(tokenizer.convert_ids_to_tokens(list(range(cfg.vocab_size))))
        self.logit_tokens = self.vocab
        self.output_labels = [f"x{i}" for i in range(cfg.hidden_size)]
        self.limits = limits or ModelLimits()
        self.cost_config = cost or cost_config(cfg, name)
        self.dtype = next(model.parameters()).dtype
        self.end_tokens = frozenset(self.vocab[i] for i in self._end_ids())
        self.layout = layout(cfg)
        self.chat_template = getattr(tokenizer, "chat_template", None)
        self.max_positions: int | None = None    # rotary positions: no table to run out of
        self._layers = self._attention_modules()

    @property
    def windows(self) -> list[int | None]:
        """Per layer: the sliding window of a sliding-attention layer, None for a global one."""
        return [layer.window for layer in self.layout]

    def _end_ids(self) -> set[int]:
        """Ids that end the model's text: the generation config's and tokenizer's end of sequence."""
        found: set[int] = set()
        for source in (getattr(self.model, "generation_config", None), self.config, self.tokenizer):
            eos = getattr(source, "eos_token_id", None)
            found |= set(eos) if isinstance(eos, (list, tuple, set)) else ({eos} if isinstance(eos, int) else set())
        return {i for i in found if 0 <= i < len(self.vocab)}

    # ---- tokens --------------------------------------------------------------------------------

    def check_text(self, text: str) -> str:
        if len(text) > self.limits.max_prompt_chars:
            raise LimitError(f"The prompt is {len(text):,} characters long; the limit is "
                             f"{self.limits.max_prompt_chars:,}.")
        return text

    def tokenize(self, text: str) -> list[str]:
        """Plain text → token strings; special-token text (``<|im_end|>``) is split like any text."""
        ids = self.tokenizer.encode(self.check_text(text), add_special_tokens=False, split_special_tokens=True)
        return self.tokens(ids)

    def tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.vocab[int(i)] for i in ids]

    def ids(self, tokens: Sequence[str]) -> list[int]:
        return [self.vocab.index(t) for t in tokens]

    def decode(self, tokens_or_ids: Sequence) -> str:
        """Token strings or ids → text (special tokens kept, as the model wrote them)."""
        ids = [self.vocab.index(t) if isinstance(t, str) else int(t) for t in tokens_or_ids]
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def token_text(self, token: str) -> str:
        """One token's own characters (``Ġthe`` → `` the``); a token that is part of a UTF-8 character
        shows as U+FFFD."""
        return self.decode([token])

    # ---- the forward pass ----------------------------------------------------------------------

    def _attention_modules(self) -> list:
        layers = getattr(getattr(self.model, "model", None), "layers", None)
        if layers is None:
            return []
        mods = [getattr(layer, "self_attn", None) for layer in layers]
        ok = all(m is not None and all(hasattr(m, p) for p in ("q_proj", "k_proj", "v_proj")) for m in mods)
        return mods if ok and len(mods) == self.n_layers else []

    @contextmanager
    def _recording(self) -> Iterator[dict]:
        """Forward hooks for one pass of this thread: q/k/v projections, the rotary cos/sin, the
        readout's input. Removed afterwards (the model object is shared and stays as it was)."""
        me = threading.get_ident()
        got: dict = {"q": {}, "k": {}, "v": {}, "rope": None, "layer_rope": {}, "hidden": None}
        handles = []

        def keep(kind: str, i: int):
            def hook(_mod, _inp, out):
                if threading.get_ident() == me:
                    got[kind][i] = out.detach()
            return hook

        def layer_rope(i: int):
            def hook(_mod, _args, kwargs):
                pe = kwargs.get("position_embeddings")
                if threading.get_ident() == me and isinstance(pe, tuple) and len(pe) == 2:
                    got["layer_rope"][i] = pe
            return hook

        for i, attn in enumerate(self._layers):
            for kind in ("q", "k", "v"):
                # the per-head norm's output where the model has one: what the rotation reads
                module = getattr(attn, f"{kind}_norm", None) if kind != "v" else None
                module = module if isinstance(module, torch.nn.Module) else getattr(attn, f"{kind}_proj")
                handles.append(module.register_forward_hook(keep(kind, i)))
            handles.append(attn.register_forward_pre_hook(layer_rope(i), with_kwargs=True))
        rotary = getattr(getattr(self.model, "model", None), "rotary_emb", None)
        if rotary is not None and self._layers:
            def rope(_mod, _inp, out):
                if threading.get_ident() == me:
                    got["rope"] = out
            handles.append(rotary.register_forward_hook(rope))

        def readout(_mod, args):
            if threading.get_ident() == me:
                got["hidden"] = args[0].detach()
        handles.append(self.model.get_output_embeddings().register_forward_pre_hook(readout))
        try:
            yield got
        finally:
            for h in handles:
                h.remove()

    def _heads(self, t: torch.Tensor, n_heads: int) -> torch.Tensor:
        """A projection's output [1, N, heads·d] → [1, heads, N, d] (as the attention module views it);
        a per-head norm's output is [1, heads, N, d] already."""
        if t.dim() == 4:
            return t
        return t.view(t.shape[0], t.shape[1], n_heads, self.head_dim).transpose(1, 2)

    @torch.no_grad()
    def forward(self, token_ids: Sequence[int], cache: Cache | None, start_pos: int,
                keep: Keep | None = None) -> HFPassRecord:
        """One recorded pass (the module docstring); ``keep``: what a long pass keeps (kvviz.models.base.Keep),
        None: everything."""
        ids = torch.tensor([list(token_ids)], dtype=torch.long)                      # [1, N]
        n = ids.shape[1]
        positions = torch.arange(start_pos, start_pos + n).unsqueeze(0)             # [1, N]
        short = keep is not None and n > keep.rows  # a long pass: its last rows, its map pooled
        n_logits = min(n, keep.logits) if short else 0                              # 0: every position
        with self._recording() as got:
            out = self.model(input_ids=ids, position_ids=positions, past_key_values=cache,
                             use_cache=cache is not None, output_attentions=True, logits_to_keep=n_logits)
        # layers that hold different rows: a sliding layer dropped its oldest (its columns end at the
        # newest position: pad on the left); a scored cache's layers keep their own rows (pad on the right)
        right = isinstance(cache, ScoredCache)
        maps, logits = [a[0] for a in out.attentions], out.logits[0]                # L × [H, N, T_layer], [N, V]
        del out                                                                     # the maps go with their list
        whole, block = None, 1
        if short:                                   # layer by layer: the last rows, the whole map pooled
            t = max(m.shape[-1] for m in maps)
            whole_maps = []
            for i, m in enumerate(maps):
                full = _pad_to(m, t, right).float()                                 # [H, N, T]
                if keep.map_side:
                    small, block = pooled(full, keep.map_side)
                    whole_maps.append(small)
                maps[i] = full[:, -keep.rows:].clone()
                del full
            whole = torch.stack(whole_maps) if whole_maps else None
        att = torch.stack(_padded(maps, right=right)).float()
        del maps
        q = k = q_raw = k_raw = None
        per_layer = len(got["layer_rope"]) == self.n_layers
        if self._layers and len(got["q"]) == self.n_layers and (per_layer or got["rope"] is not None):
            rotate = sys.modules[type(self._layers[0]).__module__].apply_rotary_pos_emb   # the model's own
            qs, ks = [], []
            for i in range(self.n_layers):
                cos, sin = got["layer_rope"][i] if per_layer else got["rope"]     # this layer's rotation
                q_i, k_i = rotate(self._heads(got["q"][i], self.n_heads), self._heads(got["k"][i], self.n_kv_heads),
                                  cos, sin)
                qs.append(q_i[0])
                ks.append(k_i[0])
            q, k = torch.stack(qs).float(), torch.stack(ks).float()               # [L, H, N, d], [L, H_kv, N, d]
            q_raw = torch.stack([self._heads(got["q"][i], self.n_heads)[0] for i in range(self.n_layers)]).float()
            if short:                              # a long pass: the queries of the rows kept
                q, q_raw = q[:, :, -keep.rows:].clone(), q_raw[:, :, -keep.rows:].clone()
            k_raw = torch.stack([self._heads(got["k"][i], self.n_kv_heads)[0] for i in range(self.n_layers)]).float()
        held = [] if cache is None else [(layer.keys, layer.values) for layer in cache.layers]
        if isinstance(cache, PagedCache):     # its tensors are the block pool: the rows through the table
            held = [layer.kv() or (None, None) for layer in cache.layers]
        if held and all(kk is not None and kk.shape[-2] >= n for kk, _ in held):
            # what the cache really holds for these positions (a cache that quantizes or evicts them
            # at once holds no such rows: then the rows as computed, below)
            k = torch.stack([kk[0, :, -n:, :] for kk, _ in held]).float()
            v = torch.stack([vv[0, :, -n:, :] for _, vv in held]).float()
        elif len(got["v"]) == self.n_layers:
            v = torch.stack([self._heads(got["v"][i], self.n_kv_heads)[0] for i in range(self.n_layers)]).float()
        else:
            v = torch.empty(self.n_layers, self.n_kv_heads, n, 0)
        if q is None:
            q = torch.empty(self.n_layers, self.n_heads, n, 0)
        if k is None:
            k = torch.empty(self.n_layers, self.n_kv_heads, n, 0)
        hidden = got["hidden"][0].float() if got["hidden"] is not None else torch.empty(n, 0)
        return HFPassRecord(positions=list(range(start_pos, start_pos + n)), q=q, k=k, v=v, attention=att,
                            output=hidden, logits=logits.float(), q_unrotated=q_raw, k_unrotated=k_raw,
                            attention_map=whole, map_block=block)

    @torch.inference_mode()
    def logits(self, token_ids: Sequence[int] | torch.Tensor, cache: Cache | None, start_pos: int,
               keep: int = 0) -> torch.Tensor:
        """The fast path: transformers' own forward at positions start_pos.., no hooks, no attention
        weights → logits [N, V] float32 (the last ``keep`` positions when keep > 0: ``logits_to_keep``).
        Without a cache the pass runs with ``use_cache=False`` (the recompute check)."""
        ids = torch.as_tensor(token_ids, dtype=torch.long).reshape(1, -1)              # [1, N]
        n = ids.shape[1]
        positions = torch.arange(start_pos, start_pos + n).unsqueeze(0)                # [1, N]
        out = self.model(input_ids=ids, position_ids=positions, past_key_values=cache,
                         use_cache=cache is not None, logits_to_keep=keep)
        return out.logits[0].float()

    def new_cache(self, kind: str = "dense", **options) -> Cache:
        """A fresh cache of ``kind`` for this network (kvviz.models.base.new_cache)."""
        return new_cache(self.layout, kind, **options)

    @torch.inference_mode()
    def exit_logits(self, token_ids: Sequence[int], cache: Cache, exit_layer: int) -> torch.Tensor:
        """The network cut after its first ``exit_layer`` decoder layers (early exit,
        kvviz.speculative.early_exit): ``token_ids`` at the positions after the cache's, through those
        layers (appending their rows to those layers of ``cache``), the final norm and the vocabulary
        projection → the logits of the last position [V] float32. The decoder's own forward runs (its
        masks, its rotary embedding per kind of layer: Gemma 3's sliding and global layers) and is
        stopped by a hook once layer ``exit_layer`` has run; the final norm and the head are the model's."""
        net = getattr(self.model, "model", None) or self.model.transformer         # the decoder (GPT-2: transformer)
        layers = getattr(net, "layers", None) or net.h
        norm = getattr(net, "norm", None) or net.ln_f
        start = cache.get_seq_length()
        me = threading.get_ident()

        def stop(_mod, _args, out):
            if threading.get_ident() == me:
                raise _ExitReached(out[0] if isinstance(out, tuple) else out)

        handle = layers[exit_layer - 1].register_forward_hook(stop)
        try:
            net(input_ids=torch.tensor([list(token_ids)]), past_key_values=cache, use_cache=True,
                position_ids=torch.arange(start, start + len(token_ids)).unsqueeze(0))
            raise RuntimeError("the decoder ran past its exit layer")
        except _ExitReached as reached:
            x = reached.hidden                                                      # [1, N, C]
        finally:
            handle.remove()
        logits = self.model.get_output_embeddings()(norm(x[:, -1:]))[0, -1].float()
        cap = getattr(self.config, "final_logit_softcapping", None)                 # Gemma 2's, as its head does
        return torch.tanh(logits / cap) * cap if cap else logits

    @torch.no_grad()
    def forward_batch(self, token_ids: torch.Tensor, positions: torch.Tensor, key_mask: torch.Tensor,
                      cache: Cache) -> BatchPassRecord:
        """B sequences in one pass through transformers' own forward (kvviz.decoding.batching's
        protocol; kvviz.serving runs it on the paged cache): token_ids, positions [B, N] (padding:
        position -1), key_mask [B, T] for every column after this pass.

        The rule ``models.base.allowed_keys`` gives goes in as a ready 4D additive mask [B, 1, N, T]
        (transformers passes a 4D mask on untouched); a padding query row, which reads nothing,
        may read every column instead (its output is dropped; an all-masked row would only waste
        a softmax). A model with sliding-attention layers gets one mask per layer kind (transformers'
        ``{"full_attention": ..., "sliding_attention": ...}``), the sliding one limited to its window.
        The record keeps the logits [B, N, V] only: q, k, v and attention are empty (no per-head
        hooks or attention weights for a serving step)."""
        n = token_ids.shape[1]
        allowed = allowed_keys(key_mask, n)                                          # [B, N, T]

        def additive(ok: torch.Tensor) -> torch.Tensor:                              # [B, 1, N, T]
            ok = ok | ~ok.any(-1, keepdim=True)
            return torch.zeros(ok.shape, dtype=self.dtype).masked_fill_(~ok, torch.finfo(self.dtype).min).unsqueeze(1)

        mask = additive(allowed)
        windows = {w for w in self.windows if w is not None}
        if windows:     # sliding-attention layers read the last `window` positions only: a mask per layer kind
            key_pos = key_mask.long().cumsum(-1) - 1                                 # [B, T] each column's position
            near = positions.unsqueeze(-1) - key_pos.unsqueeze(1) < min(windows)     # [B, N, T]
            mask = {"full_attention": mask, "sliding_attention": additive(allowed & near)}
        out = self.model(input_ids=token_ids.long(), position_ids=positions.clamp(min=0).long(),
                         attention_mask=mask, past_key_values=cache, use_cache=True)
        b = token_ids.shape[0]
        empty = torch.empty(b, self.n_layers, self.n_heads, n, 0)
        return BatchPassRecord(positions=positions, q=empty, k=empty, v=empty, attention=empty,
                               output=torch.empty(b, n, 0), logits=out.logits.float())

    def kv_projections(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer (W [2·H_kv·d, C], b [2·H_kv·d]) in float64: [k; v] = W x + b (keys before RoPE;
        a latent cache factors them, kvviz.compress.latent). A model whose keys pass a per-head norm
        before the cache (Gemma 3, Qwen3) has its K rows scaled by the norm's gain (``_norm_gain``)."""
        out = []
        for layer in self.model.model.layers:
            k, v = layer.self_attn.k_proj, layer.self_attn.v_proj
            gain = _norm_gain(getattr(layer.self_attn, "k_norm", None), self.head_dim, k.out_features)
            w = torch.cat([gain[:, None] * k.weight.double(), v.weight.double()])
            b = torch.cat([torch.zeros(k.out_features) if k.bias is None else gain * k.bias.double(),
                           torch.zeros(v.out_features) if v.bias is None else v.bias]).double()
            out.append((w.detach(), b.detach()))
        return out

    def with_kv_heads(self, kv_heads: int) -> HFCausalLM:
        """This model with its K/V heads mean-pooled to ``kv_heads`` (kvviz.models.grouped), behind
        the protocol; built once per process (its vocabulary and hooks take ~0.1 s to build)."""
        return _pooled(self.model, self.tokenizer, self.name, self.limits, kv_heads)

    def weight_bytes(self) -> int:
        """Bytes of the weights in memory (the tied embedding once), measured on the tensors."""
        return sum(p.numel() * p.element_size() for p in self.model.parameters())

    def kv_group(self, head: int) -> int:
        """The K/V head query head ``head`` reads (0-based): heads are grouped in order, as
        transformers' ``repeat_kv`` repeats each K/V head n_heads / n_kv_heads times."""
        return head // (self.n_heads // self.n_kv_heads)

    # ---- rotary positions ----------------------------------------------------------------------

    def _layer_type(self, layer: int) -> str | None:
        """transformers' kind of layer ``layer`` (``config.layer_types``), None if it names none."""
        types = getattr(self.config, "layer_types", None)
        return types[layer] if types else None

    def rope_inv_freq(self, layer: int = 0) -> torch.Tensor | None:
        """The rotary embedding's frequencies θ^(−2i/d) of layer ``layer``, [d/2] (None without
        rotary positions). A model whose kinds of layer rotate with different bases (Gemma 3:
        10,000 sliding, 1,000,000 global) keeps one set per kind (``<kind>_inv_freq``)."""
        rotary = getattr(getattr(self.model, "model", None), "rotary_emb", None)
        f = getattr(rotary, "inv_freq", None)
        if f is None and self._layer_type(layer):
            f = getattr(rotary, f"{self._layer_type(layer)}_inv_freq", None)
        return None if f is None else f.detach().float().clone()

    def rope_angles(self, position: int, layer: int = 0) -> torch.Tensor:
        """The angle (radians) by which each dimension pair of a key at ``position`` is rotated,
        [d/2]: pair i is dimensions (i, i + d/2) in the Llama layout (``rotate_half``)."""
        f = self.rope_inv_freq(layer)
        if f is None:
            raise ValueError("this model has no rotary positions")
        return float(position) * f.double()

    @torch.no_grad()
    def rotate(self, x: torch.Tensor, position: int, layer: int = 0) -> torch.Tensor:
        """Vectors ``x`` [..., d] (queries or keys before the rotation) rotated to ``position`` by the
        model's own rotary embedding (layer ``layer``'s, where kinds of layer differ) and
        ``apply_rotary_pos_emb``, as its attention does."""
        rotary = self.model.model.rotary_emb
        rotate = sys.modules[type(self._layers[0]).__module__].apply_rotary_pos_emb
        flat = x.reshape(1, 1, -1, x.shape[-1]).to(self.dtype)                        # [1, 1, n, d]
        where = torch.full((1, flat.shape[2]), int(position))
        kind = self._layer_type(layer) if getattr(rotary, "layer_types", None) else None
        cos, sin = rotary(flat, where, kind) if kind else rotary(flat, where)
        return rotate(flat, flat, cos, sin)[0].reshape(x.shape).float()

    def relative_scores(self, q: torch.Tensor, k: torch.Tensor, query_pos: int, key_pos: int,
                        shifts: Sequence[int], layer: int = 0) -> list[float]:
        """q·k / √d of a query and a key (before the rotation, [d] each) rotated to positions
        (query_pos + s, key_pos + s) for every shift s: with rotary positions the score depends only
        on the distance query_pos − key_pos, so a key rotated once at its own position stays right
        for every later query."""
        return [float(self.rotate(q, query_pos + s, layer) @ self.rotate(k, key_pos + s, layer)) / self.head_dim ** 0.5
                for s in shifts]


def _norm_gain(norm, head_dim: int, width: int) -> torch.Tensor:
    """[width] the per-channel gain of a per-head key norm (Gemma 3, Qwen3: RMSNorm after k_proj,
    before the rotation), 1 without one. The cache receives normed keys: each head's key divided by
    its RMS (a scalar: the direction stays) times the gain, so with one K/V head they lie in the
    range of diag(gain)·W_K, whose SVD is then the right basis (with several heads, a close one)."""
    if not isinstance(norm, torch.nn.Module):
        return torch.ones(width, dtype=torch.float64)
    with torch.no_grad():
        ones = torch.ones(1, head_dim, dtype=next(norm.parameters()).dtype)
        gain = norm(ones)[0].double()                 # RMS of ones is 1: what is left is the gain
    return gain.repeat(width // head_dim)


@lru_cache(maxsize=4)
def _pooled(network: torch.nn.Module, tokenizer, name: str, limits: ModelLimits, kv_heads: int) -> HFCausalLM:
    return HFCausalLM(pooled_network(network, kv_heads), tokenizer, name=name, limits=limits)
