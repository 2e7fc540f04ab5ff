"""The stepper: prefill -> choose -> decode -> choose -> ...

Every event is an immutable record, so stepping back and forth only replays records. After a
``choose`` the chosen token is *pending*: it is not in the cache until the next ``decode`` processes it.

The cache (kvviz.cache, any kind) holds tensors only; the stepper keeps the log of which event
computed each cached row (``CacheRow``), and every event carries a ``CacheSnapshot``: the K/V
tensors as attention read them after the event, with those rows.

Snapshots share memory where they can: most caches only ever append, so event i's K/V are the
first rows of event i + 1's. The stepper copies each layer's K/V into one growing buffer per layer
and hands out views of its first rows (``_SnapshotBuffers``), after checking the earlier rows are
unchanged (``torch.equal``); a cache that evicts, quantizes or rewrites rows gets a fresh buffer.
A run then holds about one cache's worth of K/V instead of one per event (SmolLM2 after a
256-token prompt: ≈ 30 MB instead of ≈ 850 MB over 64 steps).

A model may name tokens that end its text (``end_tokens``, e.g. a chat model's end of turn): the
run stops once one is chosen.

Smaller caches: the log also says which event evicted a row (``evicted_at``, a sliding window: the
snapshot's K/V hold only ``held_rows``) and which stored it as quantized codes (``quantized_at``:
the snapshot holds the dequantized values attention reads, the original row is in the pass record
of the event that computed it, so kvviz.compress.row_errors gives each row's quantization error).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace

import torch

from kvviz.cache import Cache, DynamicCache
from kvviz.decoding.sampling import Choice, Greedy, SelectionRule
from kvviz.limits import MAX_RUN_RECORD_BYTES, MAX_SEED, LimitError, check_int
from kvviz.models.base import Keep, Model, PassRecord, encode


@dataclass(frozen=True)
class CacheRow:
    """The stepper's record of one cached position (the tensors live in the cache)."""

    position: int
    token: str
    event: int        # index of the stepper event whose pass computed this row
    phase: str        # "prefill" or "decode"
    rewritten_at: int | None = None  # event index if the row was overwritten later (never in a real cache)
    evicted_at: int | None = None    # event whose pass evicted the row (a sliding window): no longer held
    quantized_at: int | None = None  # event whose pass stored the row as quantized codes (QuantizedCache)


@dataclass(frozen=True)
class CacheSnapshot:
    """What the cache held after one event: K and V per layer ``[batch, kv_heads, seq, head_dim]``
    (None for a layer not yet written), one row per position, and the bytes the cache held."""

    keys: tuple[torch.Tensor | None, ...]
    values: tuple[torch.Tensor | None, ...]
    rows: tuple[CacheRow, ...]
    held_bytes: int = 0

    @property
    def seq_length(self) -> int:
        """Positions processed so far (held or evicted)."""
        return len(self.rows)

    @property
    def held_rows(self) -> tuple[CacheRow, ...]:
        """The rows the cache still holds, in the order of ``keys`` / ``values`` (row i of a layer's
        K is ``held_rows[i]``); every row unless a sliding window evicted some."""
        return tuple(r for r in self.rows if r.evicted_at is None)

    def nbytes(self) -> int:
        """Bytes the cache object really held after the event (its storages)."""
        return self.held_bytes


@dataclass(frozen=True)
class RecomputeCheck:
    """The same positions computed again from scratch, without any cache."""

    output: torch.Tensor          # [N, d_out] recomputed output of the new positions
    logits: torch.Tensor          # [N, V_out]
    output_max_abs_diff: float
    logits_max_abs_diff: float

    @property
    def max_abs_diff(self) -> float:
        return max(self.output_max_abs_diff, self.logits_max_abs_diff)


@dataclass(frozen=True)
class Event:
    """One step of generation. ``record``/``check`` on passes, ``choice`` on choose events."""

    index: int
    phase: str                     # "prefill" | "decode" | "choose"
    tokens: list[str]              # prefill/decode: tokens processed; choose: [chosen]
    positions: list[int]           # absolute positions of those tokens
    sequence: list[str]            # every token known after this event (prompt + chosen)
    pending: str | None            # chosen but not yet processed, after this event
    cache: CacheSnapshot           # the cache after this event
    record: PassRecord | None      # pass events
    check: RecomputeCheck | None   # pass events
    choice: Choice | None          # choose events
    logits: torch.Tensor           # [V_out] logits of the last processed position (current for choose)
    kv_computed: int               # cumulative K/V positions computed with the cache
    kv_recompute: int              # cumulative positions a no-cache run would have computed
    repaired: bool = False         # the weather model's manual key rewrite happened in this pass

    @property
    def cache_len(self) -> int:
        return self.cache.seq_length

    @property
    def chosen(self) -> str | None:
        return self.tokens[0] if self.phase == "choose" else None


@dataclass(frozen=True)
class Run:
    model_name: str
    prompt: list[str]
    events: list[Event]
    rule: dict
    seed: int = 0                  # the draws' torch.Generator seed (same seed, same tokens)


# A hook a model may provide to fix its cache before a decode pass (the weather lesson's repair, docs/design.md §2):
# (cache, start_pos of the pass) -> the positions whose cached rows it rewrote.
RepairHook = Callable[[Cache, int], list[int]]


def _forward(model: Model, ids: list[int], cache: Cache | None, start: int, keep: Keep | None) -> PassRecord:
    """``model.forward``; with ``keep`` (a long text's record, kvviz.models.base.Keep) for a model that takes it."""
    return model.forward(ids, cache, start) if keep is None else model.forward(ids, cache, start, keep=keep)


def _check(model: Model, ids: list[int], rec: PassRecord, keep: Keep | None = None) -> RecomputeCheck:
    """Rerun the whole prefix without a cache and compare the new positions (the rows ``rec`` kept)."""
    full = _forward(model, ids, None, 0, keep and replace(keep, logits=rec.logits.shape[0], rows=1, map_side=0))
    n = rec.logits.shape[0]
    return _compare(full.output[-n:], full.logits[-n:], rec)


def _compare(out: torch.Tensor, lg: torch.Tensor, rec: PassRecord) -> RecomputeCheck:
    """The recomputed rows against the record's own (a long pass recorded with ``Keep`` keeps its last
    rows of logits and output only: those are compared)."""
    return RecomputeCheck(out, lg, float((out - rec.output[-out.shape[0]:]).abs().max()),
                          float((lg - rec.logits[-lg.shape[0]:]).abs().max()))


class _SnapshotBuffers:
    """One growing buffer per layer and kind (K, V); ``keep`` returns a snapshot of a layer's
    tensor ``[B, H, T, D]`` as a view of its buffer's first T rows. Rows already in the buffer are
    never written again, so earlier views stay what they were; when the cache changed an earlier
    row (or the shape), the tensor starts a new buffer. Buffers grow by doubling: at most about
    twice the last cache's bytes in all."""

    def __init__(self) -> None:
        # per key: the buffer, the rows written to it, the rows of the last view (its last rows)
        self.bufs: dict[tuple[int, int], tuple[torch.Tensor, int, int]] = {}

    def keep(self, key: tuple[int, int], t: torch.Tensor | None, new: int | None = None) -> torch.Tensor | None:
        """``new``: the rows this pass appended to the layer. Given, a layer that dropped its oldest rows
        as it appended (a sliding-window layer: its first T − new rows are the last ones of the
        previous view) shares the buffer too: views of its last T rows, the buffer holding every row
        once."""
        if t is None:
            return None
        T = t.shape[-2]
        got = self.bufs.get(key)
        if got is not None:
            buf, n, m = got
            kept = m if new is None else T - new            # rows t shares with the end of the last view
            if (buf.shape[:2] == t.shape[:2] and buf.shape[-1] == t.shape[-1] and buf.dtype == t.dtype
                    and 0 <= kept <= min(m, T) and torch.equal(buf[..., n - kept:n, :], t[..., :kept, :])):
                end = n + T - kept
                if end > buf.shape[-2]:                         # grow: the old buffer stays with old views
                    bigger = t.new_empty(*t.shape[:2], max(end, 2 * buf.shape[-2]), t.shape[-1])
                    bigger[..., :n, :] = buf[..., :n, :]
                    buf = bigger
                buf[..., n:end, :] = t[..., kept:, :]
                self.bufs[key] = (buf, end, T)
                return buf[..., end - T:end, :]
        buf = t.new_empty(*t.shape[:2], max(2 * T, 16), t.shape[-1])
        buf[..., :T, :] = t
        self.bufs[key] = (buf, T, T)
        return buf[..., :T, :]


def run_generation(model: Model, prompt: Sequence[str], new_tokens: int,
                   rule: SelectionRule | None = None, seed: int = 0,
                   repair: RepairHook | None = None, cache: Cache | None = None,
                   recheck: bool | str = True, keep: Keep | None = None,
                   progress: Callable[[int, int], None] | None = None) -> Run:
    """Generate ``new_tokens`` tokens and return every event.

    Events: prefill, choose, then (decode, choose) for each further token, so 2 * new_tokens
    events; the last chosen token stays pending. ``cache``: the cache kind to run with (an empty
    cache object; default a DynamicCache). The model's ``limits`` cap the prompt and the run.
    ``recheck``: recompute every pass without a cache (``Event.check``); a reference run that
    only needs its logits (kvviz.serving's solo runs) leaves it out: it is most of the run's time.
    ``recheck="final"``: one pass without a cache over the whole processed text at the end, each
    event compared with its positions' rows of it. For a causal model that is the same
    recomputation (position p reads only positions ≤ p) at the cost of one pass instead of one per
    event (SmolLM2: a prefix of 300 tokens takes ≈ 1 s); not for the weather model, whose keys
    depend on the future. ``keep``: what a long pass keeps (kvviz.models.base.Keep; a transformers
    model): a long text's run then holds the views' summaries, not every map and logit, and the
    run's records are capped (``record_bytes_estimate`` ≤ MAX_RUN_RECORD_BYTES). ``progress(done, total)``:
    called before each pass (and the final check) with the passes done and the passes at most.
    """
    prompt = list(prompt)
    if not prompt:
        raise LimitError("The prompt is empty: give at least one token.")
    check_int("Prompt length", len(prompt), 1, model.limits.max_prompt_tokens)
    new_tokens = check_int("New tokens", new_tokens, 1, model.limits.max_new_tokens)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    if keep is not None:       # a real model's stepped run: its records are capped
        need = record_bytes_estimate(model, len(prompt), new_tokens, keep)
        if need > MAX_RUN_RECORD_BYTES:
            raise LimitError(f"This run would keep about {need / 1e6:,.0f} MB of records; the limit is "
                             f"{MAX_RUN_RECORD_BYTES / 1e6:,.0f} MB: give a shorter text or fewer new tokens.")
    ids = encode(model, prompt)
    rule = rule or Greedy()
    generator = torch.Generator().manual_seed(seed)   # one stream per run: same seed, same draws
    if recheck not in (True, False, "final"):
        raise ValueError(f"recheck must be True, False or 'final', got {recheck!r}")
    if cache is None:       # a network's own growing cache (sliding layers keep their window); the toys' plain one
        fresh = getattr(model, "new_cache", None)
        cache = fresh("dense") if fresh is not None else DynamicCache(model.n_layers)
    ends = set(getattr(model, "end_tokens", ()))
    buffers = _SnapshotBuffers()
    rows: list[CacheRow] = []                          # the stepper's log: who wrote each cached row
    events: list[Event] = []
    sequence = list(prompt)
    kv_computed = kv_recompute = 0
    total = new_tokens + (recheck == "final")        # passes at most (an end token stops earlier)

    def snapshot(new: int) -> CacheSnapshot:
        keys, values = cache.snapshot()
        keys = tuple(buffers.keep((i, 0), k, new) for i, k in enumerate(keys))
        values = tuple(buffers.keep((i, 1), v, new) for i, v in enumerate(values))
        return CacheSnapshot(keys, values, tuple(rows), cache.nbytes())

    def do_pass(phase: str, tokens: list[str], start: int) -> None:
        nonlocal kv_computed, kv_recompute
        index = len(events)
        if progress is not None:
            progress(index // 2, total)
        rewritten = repair(cache, start) if repair and phase == "decode" else []
        for pos in rewritten:
            rows[pos] = replace(rows[pos], rewritten_at=index)
        rec = _forward(model, ids[start:start + len(tokens)], cache, start, keep)
        rows.extend(CacheRow(start + i, tok, index, phase) for i, tok in enumerate(tokens))
        held, coded = set(cache.held_positions()), set(cache.quantized_positions())
        for r in rows:                 # a smaller cache evicts or quantizes rows as it goes
            if r.evicted_at is None and r.position not in held:
                rows[r.position] = r = replace(r, evicted_at=index)
            if r.quantized_at is None and r.position in coded:
                rows[r.position] = replace(r, quantized_at=index)
        kv_computed += len(tokens)
        kv_recompute += start + len(tokens)
        check = _check(model, ids[:start + len(tokens)], rec, keep) if recheck is True else None
        events.append(Event(index, phase, tokens, rec.positions, list(sequence), None,
                            snapshot(len(tokens)), rec, check, None, rec.logits[-1], kv_computed,
                            kv_recompute, bool(rewritten)))

    def do_choose() -> None:
        last = events[-1]
        choice = rule.choose(last.logits, generator)
        token = model.logit_tokens[choice.index]
        sequence.append(token)
        ids.append(model.vocab.index(token))
        pos = len(sequence) - 1
        events.append(Event(len(events), "choose", [token], [pos], list(sequence), token,
                            last.cache, None, None, choice, last.logits, kv_computed,
                            kv_recompute))

    do_pass("prefill", prompt, 0)
    do_choose()
    for _ in range(new_tokens - 1):
        if sequence[-1] in ends:
            break
        pos = len(sequence) - 1
        do_pass("decode", [sequence[pos]], pos)
        do_choose()
    if recheck == "final":
        if progress is not None:
            progress(total - 1, total)
        events = _checked_at_the_end(model, ids, events, keep)
    return Run(model.name, prompt, events, rule.describe(), seed)


def _checked_at_the_end(model: Model, ids: list[int], events: list[Event], keep: Keep | None = None) -> list[Event]:
    """Every pass event with its check from one pass without a cache over every processed position
    (the last chosen token, pending, is not processed). With ``keep`` the pass keeps the logits of
    the positions the records kept (from the earliest of them on) and no maps beyond a row."""
    passes = [e for e in events if e.record is not None]
    processed = max(max(e.positions) for e in passes) + 1
    first = min(e.positions[-e.record.logits.shape[0]] for e in passes)       # the earliest position kept
    lean = keep and replace(keep, logits=processed - first, rows=1, map_side=0)
    full = _forward(model, ids[:processed], None, 0, lean)
    base = processed - full.logits.shape[0]                                   # full's row 0 is this position

    def rows(e: Event) -> list[int]:
        return [p - base for p in e.positions[-e.record.logits.shape[0]:]]

    return [e if e.record is None else replace(e, check=_compare(full.output[rows(e)], full.logits[rows(e)],
                                                                 e.record)) for e in events]


def record_bytes_estimate(model: Model, prompt_len: int, new_tokens: int, keep: Keep | None = None) -> int:
    """An upper estimate of ``run_bytes`` for a run of a transformers model (float32 records): the
    prefill's and each decode pass's maps, q (rotated and not), k, v (and unrotated k), logits and
    output as ``keep`` keeps them, the final check's kept rows, the snapshots' buffers (at most twice
    every position's K/V)."""
    L, H, Hkv, d = model.n_layers, model.n_heads, model.n_kv_heads, model.head_dim
    width = len(model.logit_tokens) + model.cost_config.d_model                  # a position's logits + output
    end = prompt_len + new_tokens
    n = prompt_len
    rows = n if keep is None or n <= keep.rows else keep.rows
    kept = n if keep is None or n <= keep.rows else min(n, keep.logits)
    pooled = 0 if keep is None or n <= keep.rows else L * H * keep.map_side ** 2
    prefill = L * H * rows * n + pooled + 2 * L * H * rows * d + 3 * L * Hkv * n * d + kept * width
    decode = (new_tokens - 1) * (L * H * end + 2 * L * H * d + 3 * L * Hkv * d + width)
    check = (kept + new_tokens) * width
    snapshots = 2 * 2 * L * Hkv * d * end
    return 4 * (prefill + decode + check + snapshots)


def run_bytes(run: Run) -> int:
    """Bytes of the tensors a run holds (its records, checks, snapshots and logits), each storage
    counted once (snapshots are views of shared buffers, an event's logits a row of its record's)."""
    seen: dict[int, int] = {}

    def add(x) -> None:
        if isinstance(x, torch.Tensor):
            st = x.untyped_storage()
            seen[st.data_ptr()] = st.nbytes()
        elif isinstance(x, (tuple, list)):
            for y in x:
                add(y)

    for ev in run.events:
        for part in (ev.record, ev.check):
            if part is not None:
                for f in fields(part):
                    add(getattr(part, f.name))
        add(ev.cache.keys)
        add(ev.cache.values)
        add(ev.logits)
    return sum(seen.values())
