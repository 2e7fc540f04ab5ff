"""Attention sinks plus a sliding window (StreamingLLM): a smaller cache (docs/design.md §5; the tiny
GPT's evaluation is kvviz.compress).

``SlidingWindowCache(n_layers, window, sinks=0)`` keeps the first ``sinks`` positions and the last
``window``; evicted rows are freed and gone from attention. ``get_seq_length`` counts every position
processed (the next one's index), ``held_positions`` says which rows the cache still holds (and
returns from ``update``, in that order).

Positions of the kept keys, two ways (``positions``):

- ``"own"``: every key keeps the position it was computed at (learned positions are added before the
  cache; rotary keys stay rotated at their own position), so a sink is as far from a late query as
  it is in the text;
- ``"cache"``: StreamingLLM's rule (and transformers' former ``SinkCache``): positions *in the
  cache*, the held keys contiguous up to the newest one. With rotary positions a score depends only
  on the distance between query and key, so placing the keys at cache positions plus a constant
  offset (the query keeps its own position) is the same attention: the window's keys are where they
  were, the sinks are re-rotated to sit just before the window (``rerotate``; transformers'
  ``_get_rerotation_cos_sin``). Each read rotates the stored key once, from the position it was
  computed at, so rounding does not build up over the steps. Needs the model's rotary frequencies
  (``inv_freq``).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from kvviz.cache.base import KV, Cache, CacheLayer
from kvviz.limits import MAX_CACHE_SINKS, MAX_CACHE_WINDOW, LimitError, check_int

POSITIONS = ("own", "cache")


def per_layer_freqs(inv_freq: torch.Tensor | Sequence[torch.Tensor] | None, n_layers: int) -> list:
    """Rotary frequencies per layer (float64 copies): one set for every layer, or one per layer."""
    if inv_freq is None:
        return [None] * n_layers
    if isinstance(inv_freq, torch.Tensor):
        inv_freq = [inv_freq] * n_layers
    if len(inv_freq) != n_layers:
        raise LimitError(f"{len(inv_freq)} sets of rotary frequencies for {n_layers} layers.")
    return [f.detach().to(torch.float64).clone() for f in inv_freq]


def rerotate(keys: torch.Tensor, shift: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Keys ``[..., n, d]`` already rotated (Llama's ``rotate_half`` layout: pair i is dimensions i
    and i + d/2) turned by ``shift`` [n] more positions each: R(p + s)·k = R(s)·R(p)·k. Angles in
    float64, the result in the keys' dtype."""
    angles = shift.to(torch.float64).unsqueeze(-1) * inv_freq.to(torch.float64)      # [n, d/2]
    emb = torch.cat([angles, angles], dim=-1)                                        # [n, d]
    cos, sin = emb.cos().to(keys.dtype), emb.sin().to(keys.dtype)
    half = keys.shape[-1] // 2
    turned = torch.cat([-keys[..., half:], keys[..., :half]], dim=-1)               # rotate_half
    return keys * cos + turned * sin


def _take_rows(keys: torch.Tensor, values: torch.Tensor, rows: Sequence[int], n: int) -> KV:
    """Rows ``rows`` (indices along the seq axis, of ``n``) of K and V; all of them: the tensors themselves."""
    if len(rows) == n:
        return keys, values
    idx = torch.tensor(list(rows), dtype=torch.long, device=keys.device)
    return keys.index_select(-2, idx), values.index_select(-2, idx)   # new storages: dropped rows are freed


class SlidingWindowLayer(CacheLayer):
    """The first ``sinks`` positions and the last ``window`` positions of one layer.

    What a query at position p reads: keys at positions j ≤ p with j < sinks or j > p − window (the
    ``window`` most recent positions, itself included, plus the sinks). Rows no later query can read
    are evicted (freed). ``update`` returns every held or new row that at least one of the new
    queries reads; for a pass of several positions the cache's ``attention_mask`` then gives each
    query its own view, so a long prefill computes exactly what feeding the prompt one token at a
    time would. Positions stay absolute (learned position embeddings are added before the cache).
    """

    def __init__(self, window: int, sinks: int = 0, positions: str = "own",
                 inv_freq: torch.Tensor | None = None) -> None:
        self.window, self.sinks = window, sinks
        self.position_rule, self.inv_freq = positions, inv_freq
        self.keys = self.values = None
        self.positions: list[int] = []     # absolute positions of the held rows (ascending)
        self.seen = 0                      # positions processed: the next one's index
        self.returned: list[int] = []      # positions of the K/V the last update returned

    def reads(self, key_pos: int, query_pos: int) -> bool:
        """Does the query at ``query_pos`` read the key at ``key_pos``?"""
        return key_pos <= query_pos and (key_pos < self.sinks or key_pos > query_pos - self.window)

    def _kept(self, positions: Sequence[int], last: int) -> list[int]:
        """Indices of ``positions`` still readable by a query at ``last`` or later."""
        return [i for i, p in enumerate(positions) if p < self.sinks or p > last - self.window]

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        start, n = self.seen, key.shape[-2]
        new = list(range(start, start + n))
        if self.keys is None:
            keys, values, held = key.detach().clone(), value.detach().clone(), new
        else:
            keys = torch.cat([self.keys, key.detach()], dim=-2)
            values = torch.cat([self.values, value.detach()], dim=-2)
            held = self.positions + new
        ret = self._kept(held, start)              # the first new query reads the fewest rows
        keys, values = _take_rows(keys, values, ret, len(held))
        self.returned = [held[i] for i in ret]
        keep = self._kept(self.returned, start + n - 1)
        self.keys, self.values = _take_rows(keys, values, keep, len(self.returned))
        self.positions = [self.returned[i] for i in keep]
        self.seen = start + n
        if self.position_rule == "cache":
            keys = self._at_cache_positions(keys, start + n - 1, n)
        return keys, values

    def read_positions(self, last: int | None = None) -> list[int]:
        """The position each returned key is rotated to for a query at ``last`` (default: the newest
        position): its own (``"own"``), or contiguous up to ``last`` (``"cache"``; equal to the own
        positions while nothing was evicted)."""
        last = self.seen - 1 if last is None else last
        if self.position_rule == "own":
            return list(self.returned)
        return list(range(last - len(self.returned) + 1, last + 1))

    def _at_cache_positions(self, keys: torch.Tensor, last: int, n_new: int) -> torch.Tensor:
        """The returned keys re-rotated from their own positions to cache positions ending at ``last``
        (only the rows that moved: the sinks once the window slides)."""
        shift = torch.tensor(self.read_positions(last)) - torch.tensor(self.returned)
        moved = torch.nonzero(shift).flatten()
        if moved.numel() == 0:
            return keys
        if n_new > 1:       # each query of the pass would need its own rotation of the sinks
            raise LimitError(f"With cache positions a pass of {n_new} positions cannot cross the window; "
                             "feed the text one position at a time.")
        out = keys.clone()
        out[..., moved, :] = rerotate(keys[..., moved, :], shift[moved], self.inv_freq)   # type: ignore[arg-type]
        return out

    def attention_mask(self, start_pos: int, n_new: int) -> torch.Tensor | None:
        """[n_new, T] over what the last ``update`` returned: True where query start_pos + i reads
        key j. None when that is the plain causal rule over positions 0..T-1 (nothing evicted or
        hidden yet), so such a pass runs exactly the full cache's arithmetic."""
        pos = torch.tensor(self.returned)                                  # [T]
        q = torch.arange(start_pos, start_pos + n_new).unsqueeze(1)         # [N, 1]
        allowed = (pos <= q) & ((pos < self.sinks) | (pos > q - self.window))
        if self.returned == list(range(len(self.returned))) and bool(allowed.equal(pos <= q)):
            return None
        return allowed

    def get_seq_length(self) -> int:
        return self.seen

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        """For a transformers model (its causal mask over kv positions kv_offset .. kv_offset +
        kv_length − 1). A one-token pass reads every row ``update`` returns: the offset places the
        last of them at the query. A longer pass is exact while every query reads every earlier
        returned row (nothing evicted or hidden yet); past that it would need a mask per query,
        which transformers' causal mask cannot express: refused (feed such a text one token at a
        time)."""
        start, n = self.seen, int(query_length)
        held = self.positions + list(range(start, start + n))
        ret = [held[i] for i in self._kept(held, start)]
        if n == 1:
            return len(ret), start + 1 - len(ret)
        if ret == list(range(len(ret))) and all(self.reads(p, q) for q in range(start, start + n)
                                                for p in ret if p <= q):
            return len(ret), 0
        raise LimitError(f"A pass of {n} positions from position {start} crosses the window of {self.window} "
                         f"(+ {self.sinks} sinks); with a transformers model feed it one position at a time.")

    def held_positions(self) -> list[int]:
        return list(self.positions)

    def crop(self, max_length: int) -> None:
        """Back to the first ``max_length`` positions; refused (LimitError) when the next query (at
        position ``max_length``) would read a row the window already evicted: eviction cannot be
        undone."""
        m = max(0, max_length)
        if m >= self.seen:
            return
        need = [p for p in range(m) if self.reads(p, m)]
        missing = sorted(set(need) - set(self.positions))
        if missing:
            raise LimitError(f"The window cache already evicted position {missing[0]}; going back to "
                             f"{m} positions would need it again.")
        if m == 0:
            self.reset()
            return
        keep = [i for i, p in enumerate(self.positions) if p < m and (p < self.sinks or p > m - 1 - self.window)]
        self.keys, self.values = _take_rows(self.keys, self.values, keep, len(self.positions))
        self.positions, self.seen = [self.positions[i] for i in keep], m
        self.returned = []

    def reset(self) -> None:
        self.keys = self.values = None
        self.positions, self.returned, self.seen = [], [], 0

    def kv(self) -> KV | None:
        return None if self.keys is None else (self.keys, self.values)


class SlidingWindowCache(Cache):
    """Attention sinks plus a sliding window (Xiao et al., StreamingLLM, ICLR 2024): every layer
    keeps its first ``sinks`` positions and its last ``window`` (the current one included).

    ``get_seq_length()`` counts every position processed; ``held_positions()`` lists the rows still
    held (at most sinks + window). With window ≥ the sequence length nothing is evicted and every
    pass runs the full cache's arithmetic exactly. One sequence at a time (no batched positions).

    ``positions``: ``"own"`` (every key at the position it was computed at) or ``"cache"``
    (StreamingLLM: the kept keys re-rotated to their positions in the cache; rotary models only,
    ``inv_freq`` their rotary frequencies, e.g. ``HFCausalLM.rope_inv_freq()``, or one set per layer
    where the model's layers rotate with different bases, as Gemma 3's)."""

    def __init__(self, n_layers: int, window: int, sinks: int = 0, positions: str = "own",
                 inv_freq: torch.Tensor | Sequence[torch.Tensor] | None = None) -> None:
        self.window = check_int("Window", window, 1, MAX_CACHE_WINDOW)
        self.sinks = check_int("Sink tokens", sinks, 0, MAX_CACHE_SINKS)
        if positions not in POSITIONS:
            raise LimitError(f"Key positions must be 'own' or 'cache', got {positions!r}.")
        if positions == "cache" and inv_freq is None:
            raise LimitError("Cache positions re-rotate the kept keys: they need a model with rotary positions "
                             "(the tiny GPT learns absolute positions).")
        self.position_rule = positions
        super().__init__([SlidingWindowLayer(self.window, self.sinks, positions, inv)
                          for inv in per_layer_freqs(inv_freq, n_layers)])

    def attention_mask(self, layer_idx: int, start_pos: int, n_new: int) -> torch.Tensor | None:
        return self.layers[layer_idx].attention_mask(start_pos, n_new)
