"""Eviction by attention score: H2O, SnapKV and PyramidKV-style per-layer budgets as cache kinds.

The scores are the attention the model computes anyway. A pass runs against the cache as against a
full one (``update`` returns every held row plus the new ones); the caller then hands the pass's
attention weights to the cache, ``cache.observe(record.attention)`` with ``[layers, heads, new,
keys]`` (what ``CausalLM.forward`` returns, over the rows ``update`` returned, in that order), and
the cache scores and evicts. kvviz.compress runs every scoring cache so (``_protocol.next_logits``);
a cache that is never observed evicts nothing.

Each K/V head keeps its own rows: a layer holds ``[1, kv_heads, S, d]`` with S the same for every
head, and per head the absolute position of each row (``positions`` ``[kv_heads, S]``, ascending)
and its score (``scores``, float64): bookkeeping beside the tensors, not counted in ``nbytes()``
(which is the K/V really held). A query head's weights count for its K/V head (summed over the
group: grouped-query attention shares the row).

- ``H2OCache(n_layers, budget, recent, windows)`` (Zhang et al., 2023): after every pass each row's score
  grows by the attention it received; above ``budget`` rows a head keeps its ``recent`` newest rows
  and the ``budget − recent`` heavy hitters (largest accumulated score) among the others.
- ``SnapKVCache(n_layers, budget, window, kernel)`` (Li et al., 2024): once, after the prefill, the
  prompt's last ``window`` queries vote (attention summed over them, pooled over ``kernel``
  neighbouring positions); a head keeps its top ``budget − window`` voted earlier positions plus the
  window itself. Decode rows are appended and never evicted (the paper compresses the prompt only);
  ``hold=True`` keeps the budget while decoding too (every ``window`` decode steps the last
  ``window`` queries vote again), which a comparison at equal bytes needs.
- ``PyramidKVCache(n_layers, budget, ...)`` (Cai et al., 2024): SnapKV's selection with a budget per
  layer, larger in low layers and smaller in high ones (``pyramid_budgets``: a linear ramp whose
  mean is ``budget``).

**A model's sliding-attention layers** (Gemma 3's five of every six; ``windows``: per layer the
model's sliding window or None, from its ``layout``): the policy applies to every layer, and on a
sliding layer it chooses only among the rows the model's own window still reaches. After each pass
such a layer first drops what left the window (positions before ``seen − (window − 1)``, as
kvviz.cache.hybrid's ``DynamicSlidingWindowLayer`` does; every K/V head keeps the same number of rows,
so where heads differ, the fewest any head has inside the window, the newest of them), then the
policy evicts as on a global layer, its budget capped at ``window − 1``. So a sliding layer never
holds a row its query could not read, and it says ``is_sliding``: transformers builds its sliding
mask from such a layer's sizes (every row held is inside the band).

With a budget at least the text's length nothing is evicted, ``update`` concatenates exactly as
``DynamicCache`` does and ``attention_mask`` is None: the full cache's arithmetic, bit for bit.
After an eviction the held rows are not positions 0..S−1: a pass of several queries gets a mask
(every held row visible, the new rows causal), and a transformers model gets kv offsets that place
the held rows before the new ones (``get_mask_sizes``; keys are rotated before the cache, so the
offset changes only the mask).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from kvviz.cache.base import KV, Cache, CacheLayer
from kvviz.limits import LimitError, check_int

MAX_BUDGET = 4096
MAX_OBS_WINDOW = 256
MAX_KERNEL = 31


class ScoredLayer(CacheLayer):
    """One layer's K/V, per K/V head its rows' positions and scores; subclasses decide what to evict
    in ``observe``."""

    def __init__(self, budget: int, window: int | None = None) -> None:
        self.window = window                           # the model's sliding window on this layer (None: global)
        self.is_sliding = window is not None
        self.budget = budget if window is None else max(1, min(budget, window - 1))
        self.reset()

    def reset(self) -> None:
        self.keys = self.values = None
        self.positions: torch.Tensor | None = None     # [H_kv, S] absolute positions, ascending per head
        self.scores: torch.Tensor | None = None        # [H_kv, S] float64, the policy's score of each row
        self.seen = 0                                  # positions processed: the next one's index
        self.n_new = 0                                 # rows the last update appended
        self.evicted: list[torch.Tensor] = []          # per eviction: [H_kv, E] positions dropped
        self.last_scores: torch.Tensor | None = None   # [H_kv, S] the scores that decided the last eviction
        self.last_positions: torch.Tensor | None = None  # [H_kv, S] their positions (kept and evicted)

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        n, heads = key.shape[-2], key.shape[1]
        new_pos = torch.arange(self.seen, self.seen + n).expand(heads, n)
        if self.keys is None:
            self.keys, self.values = key.detach().clone(), value.detach().clone()
            self.positions = new_pos.clone()
            self.scores = torch.zeros(heads, n, dtype=torch.float64)
        else:
            self.keys = torch.cat([self.keys, key.detach()], dim=-2)
            self.values = torch.cat([self.values, value.detach()], dim=-2)
            self.positions = torch.cat([self.positions, new_pos], dim=-1)
            self.scores = torch.cat([self.scores, torch.zeros(heads, n, dtype=torch.float64)], dim=-1)
        self.seen += n
        self.n_new = n
        return self.keys, self.values

    def _contiguous(self) -> bool:
        """Every head holds exactly positions 0..seen−1 (nothing evicted)."""
        return self.positions is None or self.positions.shape[-1] == self.seen

    def attention_mask(self, start_pos: int, n_new: int) -> torch.Tensor | None:
        if self._contiguous():
            return None
        held = self.keys.shape[-2] - n_new
        mask = torch.ones(n_new, held + n_new, dtype=torch.bool)
        mask[:, held:] = torch.ones(n_new, n_new, dtype=torch.bool).tril()
        return mask

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        held = 0 if self.keys is None else self.keys.shape[-2]
        if self.window is not None and int(query_length) == 1:
            # one query reads every row a sliding layer holds (all inside its window): a one-column
            # mask, which broadcasts, fits every sliding layer however many rows each holds
            return 1, self.seen
        return held + int(query_length), self.seen - held

    def get_seq_length(self) -> int:
        return self.seen

    def group_attention(self, attention: torch.Tensor) -> torch.Tensor:
        """[H, N, T] weights of the query heads → [H_kv, N, T] summed over each K/V head's group."""
        heads, kv = attention.shape[0], self.keys.shape[1]
        return attention.double().reshape(kv, heads // kv, *attention.shape[1:]).sum(1)

    def observe(self, attention: torch.Tensor) -> None:
        raise NotImplementedError

    def slide(self) -> int:
        """A sliding layer: drop the rows that left the model's window (see the module doc); returns
        how many leading columns every head dropped (0: none, or a global layer)."""
        if self.window is None or self.positions is None:
            return 0
        inside = int((self.positions >= self.seen - (self.window - 1)).sum(-1).min())
        cut = self.positions.shape[-1] - inside
        if cut > 0:
            rows = self.positions.shape[-1]
            self.keep(torch.arange(cut, rows).expand(self.positions.shape[0], inside))
        return cut

    def keep(self, idx: torch.Tensor) -> None:
        """Keep rows ``idx`` [H_kv, B] of every head (sorted here: positions stay ascending)."""
        idx = idx.sort(dim=-1).values
        self.last_scores, self.last_positions = self.scores.clone(), self.positions.clone()
        dropped = torch.ones_like(self.positions, dtype=torch.bool).scatter(-1, idx, False)
        self.evicted.append(self.positions[dropped].reshape(self.positions.shape[0], -1))
        gather = idx[None, :, :, None].expand(1, -1, -1, self.keys.shape[-1])
        self.keys = self.keys.gather(-2, gather)
        self.values = self.values.gather(-2, gather)
        self.positions = self.positions.gather(-1, idx)
        self.scores = self.scores.gather(-1, idx)

    def head_positions(self) -> list[list[int]]:
        """Per K/V head the positions held, ascending."""
        return [] if self.positions is None else self.positions.tolist()

    def held_positions(self) -> list[int]:
        """Positions some head still holds (ascending)."""
        return [] if self.positions is None else sorted(set(self.positions.flatten().tolist()))

    def crop(self, max_length: int) -> None:
        m = max(0, max_length)
        if m >= self.seen:
            return
        if m == 0:
            self.reset()
            return
        if not self._contiguous():
            raise LimitError("An evicting cache cannot go back: the rows it dropped are gone.")
        self.keys, self.values = self.keys[..., :m, :].clone(), self.values[..., :m, :].clone()
        self.positions, self.scores, self.seen = self.positions[:, :m], self.scores[:, :m], m

    def kv(self) -> KV | None:
        return None if self.keys is None else (self.keys, self.values)


class H2OLayer(ScoredLayer):
    """Heavy hitters (accumulated attention) plus the ``recent`` newest rows, ``budget`` rows per head."""

    def __init__(self, budget: int, recent: int, window: int | None = None) -> None:
        self.recent = recent
        super().__init__(budget, window)

    def observe(self, attention: torch.Tensor) -> None:
        """attention [H, N, T] over the rows the last update returned (T = rows held now)."""
        self.scores += self.group_attention(attention).sum(1)                # [H_kv, T]
        self.slide()
        rows = self.scores.shape[-1]
        if rows <= self.budget:
            return
        recent = min(self.recent, self.budget)
        older = self.scores[:, :rows - recent]
        heavy = older.topk(self.budget - recent, dim=-1).indices               # [H_kv, budget − recent]
        newest = torch.arange(rows - recent, rows).expand(self.scores.shape[0], recent)
        self.keep(torch.cat([heavy, newest], dim=-1))


class SnapKVLayer(ScoredLayer):
    """The prompt's last ``window`` queries vote, pooled over ``kernel`` neighbours; compressed once
    after the prefill. With ``hold`` the budget also holds while decoding: once ``window`` decode rows
    have piled up past the budget, the last ``window`` decode queries vote the same way and the layer
    is compressed back to ``budget`` rows (so it holds between budget and budget + window rows)."""

    def __init__(self, budget: int, window: int, kernel: int, hold: bool = False,
                 sliding: int | None = None) -> None:
        self.obs_window, self.kernel, self.hold = window, kernel, hold
        super().__init__(budget, sliding)

    def reset(self) -> None:
        super().reset()
        self.compressed = False
        self.votes: torch.Tensor | None = None         # [H_kv, S] decode queries' votes since the last compression

    def _compress(self, votes: torch.Tensor, window: int) -> None:
        """Keep the last ``window`` rows and the top ``budget − window`` of the others by pooled votes."""
        rows = votes.shape[-1]
        pooled = votes[:, :0]
        if rows > window:                                                     # neighbours share their votes
            pooled = F.avg_pool1d(votes[:, None, :rows - window], self.kernel, stride=1,
                                  padding=self.kernel // 2, count_include_pad=False)[:, 0]
        self.scores = torch.cat([pooled, votes[:, rows - window:]], dim=-1)   # the window's own rows: kept anyway
        if rows <= self.budget:
            return
        top = pooled.topk(max(self.budget - window, 0), dim=-1).indices       # [H_kv, budget − window]
        last = torch.arange(rows - window, rows).expand(self.scores.shape[0], window)
        self.keep(torch.cat([top, last], dim=-1))

    def observe(self, attention: torch.Tensor) -> None:
        cut = self.slide()                                                  # a sliding layer: out of its window
        attention = attention[..., cut:]
        if self.votes is not None:
            self.votes = self.votes[:, cut:]
        rows = self.scores.shape[-1]
        if not self.compressed:
            self.compressed = True                                           # the prefill's pass
            window = min(self.obs_window, self.budget, attention.shape[1], rows)
            self._compress(self.group_attention(attention[:, -window:, :]).sum(1), window)   # [H_kv, T] votes
            return
        if not self.hold:
            return
        votes = self.group_attention(attention).sum(1)                      # [H_kv, T]
        if self.votes is not None:
            votes[:, :self.votes.shape[-1]] += self.votes
        self.votes = votes
        if rows >= self.budget + self.obs_window:
            self._compress(votes, min(self.obs_window, self.budget))
            self.votes = None


class ScoredCache(Cache):
    """A cache whose layers score rows from the attention fed to ``observe`` (see the module doc)."""

    needs_attention = True        # run it with the recording forward and feed the weights back

    def observe(self, attention: torch.Tensor) -> None:
        """attention [L, H, N, T]: the last pass's weights over the rows ``update`` returned (a layer
        holding fewer rows than T, as PyramidKV's upper layers do, reads its first columns: the
        recording forwards right-pad with zeros)."""
        for layer, att in zip(self.layers, attention):
            layer.observe(att[..., :layer.keys.shape[-2]])

    def attention_mask(self, layer_idx: int, start_pos: int, n_new: int) -> torch.Tensor | None:
        return self.layers[layer_idx].attention_mask(start_pos, n_new)

    def head_positions(self, layer_idx: int = 0) -> list[list[int]]:
        return self.layers[layer_idx].head_positions()

    def budgets(self) -> list[int]:
        return [layer.budget for layer in self.layers]


def _budget(budget: int) -> int:
    return check_int("Budget", budget, 1, MAX_BUDGET)


def _windows(n_layers: int, windows: Sequence[int | None] | None) -> list[int | None]:
    """Per layer the model's sliding window or None (global); None: every layer global."""
    out = [None] * n_layers if windows is None else [None if w is None else int(w) for w in windows]
    if len(out) != n_layers:
        raise LimitError(f"{len(out)} windows for {n_layers} layers.")
    if any(w is not None and w < 2 for w in out):
        raise LimitError("A sliding window must hold at least 2 positions.")
    return out


class H2OCache(ScoredCache):
    """H2O: ``budget`` rows per layer and K/V head, ``recent`` of them the newest (default half)."""

    def __init__(self, n_layers: int, budget: int, recent: int | None = None,
                 windows: Sequence[int | None] | None = None) -> None:
        budget = _budget(budget)
        recent = budget // 2 if recent is None else check_int("Recent positions", recent, 0, budget)
        self.budget, self.recent = budget, recent
        super().__init__([H2OLayer(budget, recent, w) for w in _windows(n_layers, windows)])


def _window(window: int, kernel: int) -> tuple[int, int]:
    window = check_int("Observation window", window, 1, MAX_OBS_WINDOW)
    kernel = check_int("Pooling kernel", kernel, 1, MAX_KERNEL)
    if kernel % 2 == 0:
        raise LimitError(f"The pooling kernel must be odd, got {kernel}.")
    return window, kernel


class SnapKVCache(ScoredCache):
    """SnapKV: the prompt compressed once to ``budget`` rows per layer and K/V head."""

    def __init__(self, n_layers: int, budget: int, window: int = 8, kernel: int = 5, hold: bool = False,
                 windows: Sequence[int | None] | None = None) -> None:
        self.budget = _budget(budget)
        self.window, self.kernel = _window(window, kernel)
        self.hold = bool(hold)
        super().__init__([SnapKVLayer(self.budget, self.window, self.kernel, self.hold, w)
                          for w in _windows(n_layers, windows)])


def pyramid_budgets(n_layers: int, budget: int, spread: float = 0.5) -> list[int]:
    """Per layer, a linear ramp from budget·(1 + spread) (layer 0) down to budget·(1 − spread) (the
    top layer), rounded, each at least 1; the sum is n_layers · budget up to rounding."""
    if not 0.0 <= spread < 1.0:
        raise LimitError(f"The pyramid's spread must be in [0, 1), got {spread}.")
    if n_layers == 1:
        return [budget]
    return [max(1, round(budget * (1 + spread - 2 * spread * i / (n_layers - 1)))) for i in range(n_layers)]


def _mean_budget(budget: int, spread: float) -> int:
    """PyramidKV's budget is the mean over layers and layer 0 gets (1 + spread) times it, which must stay
    within a layer's cap: the limit said is the mean's, so the number refused is the one the user gave."""
    if not 0.0 <= spread < 1.0:
        raise LimitError(f"The pyramid's spread must be in [0, 1), got {spread}.")
    return check_int(f"Budget (the mean per layer; the lowest layer keeps {1 + spread:g} × it)", budget, 1,
                     int(MAX_BUDGET // (1 + spread)))


class PyramidKVCache(ScoredCache):
    """PyramidKV: SnapKV's selection with ``pyramid_budgets`` (larger low, smaller high)."""

    def __init__(self, n_layers: int, budget: int, window: int = 8, kernel: int = 5, hold: bool = False,
                 spread: float = 0.5, budgets: Sequence[int] | None = None,
                 windows: Sequence[int | None] | None = None) -> None:
        self.budget = _budget(budget) if budgets is not None else _mean_budget(budget, spread)
        self.window, self.kernel = _window(window, kernel)
        per_layer = list(budgets) if budgets is not None else pyramid_budgets(n_layers, self.budget, spread)
        if len(per_layer) != n_layers:
            raise LimitError(f"{len(per_layer)} budgets for {n_layers} layers.")
        self.hold = bool(hold)
        super().__init__([SnapKVLayer(_budget(b), self.window, self.kernel, self.hold, w)
                          for b, w in zip(per_layer, _windows(n_layers, windows))])

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        """transformers builds one causal mask for every layer from one layer's sizes, but after a
        compression the layers hold different row counts. A one-token pass reads every held row, so
        it gets a mask of one key column at its own position (0: visible), which broadcasts over any
        layer's rows; a longer pass is masked normally while no layer has evicted, refused after."""
        seen = self.layers[0].seen
        if int(query_length) == 1:
            return 1, seen
        if all(layer._contiguous() for layer in self.layers):
            return seen + int(query_length), 0
        raise LimitError("After PyramidKV's compression a transformers model takes one position per pass.")
