"""Serving many requests from one paged KV cache: a scheduler with continuous or static batching.

A stream of requests (prompt, tokens to generate, arrival step) is served step by step. Every step
runs **one batched pass** of the model (``forward_batch``, kvviz.decoding.batching's protocol) over a
PagedCache (kvviz.cache) shared by all running requests, then picks each request's next token
(greedy). What happens at a step, in this order:

1. Requests arriving at this step join the waiting queue (first come, first served).
2. **Running requests first**: each running request will decode one token and may need a block
   (its last block is full) or a copy (a shared last block). While the free blocks do not cover
   that, the newest running request is **preempted**: its blocks are released and it goes back to
   the front of the queue, keeping the tokens it generated; when admitted again its prompt and
   those tokens are prefilled again (recompute, as vLLM does by default).
3. **Admission** (``continuous``, Orca's iteration-level scheduling): waiting requests are admitted
   in order while fewer than ``max_batch`` run and the free blocks cover their prefill; the first
   that does not fit stops admission (no overtaking). With prefix caching, an admitted request
   first attaches the cached blocks of its prompt and prefills only the rest.
   ``static``: nothing is admitted while a batch runs; a new batch starts when ``max_batch``
   requests wait (or no more will arrive) and runs until its last request finishes.
4. **One pass**: the newcomers' prefill (their whole remaining prompt) and the running requests'
   decode (their pending token) together, each sequence at its own positions, left-padded to the
   longest (``PagedCache.set_active`` maps batch rows to sequences and gives the key mask).
5. Each row's last logits choose its next token; a request that has all its tokens finishes and
   its blocks are released at once (its full blocks keep their prefix-cache names).

Every step leaves an immutable ``StepRecord`` (who prefilled, decoded, waited, finished or was
preempted; block tables, reference counts, filled slots and free blocks after the step; blocks
taken, copied, shared and freed; memory under paging vs contiguous reservation), and every request
a ``RequestResult`` (tokens, first-token and finish steps, preemptions, TTFT and time per output
token in steps). ``check=True`` compares every row's logits with the request's cold solo run
(``run_generation``, a contiguous cache).

The CLI ``python -m kvviz serve`` prints a run as JSON (kvviz.serving.export).
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Sequence

import torch

from kvviz.decoding.batching import BatchModel
from kvviz.cache import PagedCache
from kvviz.decoding.stepper import run_generation
from kvviz.limits import (
    MAX_SEED,
    MAX_SERVE_BATCH,
    MAX_SERVE_BLOCK_SIZE,
    MAX_SERVE_BLOCKS,
    MAX_SERVE_NEW_TOKENS,
    MAX_SERVE_REQUESTS,
    MAX_SERVE_SHARED_PREFIX,
    MAX_SERVE_STEPS,
    LimitError,
    check_int,
)
from kvviz.models.base import encode
from kvviz.models.gpt.corpus import corpus_tokens, sentence
from kvviz.decoding.sampling import Greedy, Sampler, SelectionRule

POLICIES = ("continuous", "static")
GREEDY = Greedy()


@dataclass(frozen=True)
class Request:
    id: int
    prompt: tuple[str, ...]            # tokens of the model's vocabulary
    max_new_tokens: int
    arrival_step: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt", tuple(self.prompt))     # a list would make the record mutable


def request_stream(n_requests: int, seed: int = 0, max_new_tokens: int = 12,
                   shared_prefix: int = 0) -> tuple[Request, ...]:
    """A seeded stream of requests for the tiny GPT: prompts are the first 2–7 words of sentences of
    its weather corpus, each request generates between a quarter of ``max_new_tokens`` and all of
    them, and requests arrive 0–3 steps apart (the first at step 0). ``shared_prefix`` P: every
    prompt begins with the same P words of the corpus (a "system prompt") and then 1–6 own words."""
    n = check_int("Requests", n_requests, 1, MAX_SERVE_REQUESTS)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    max_new = check_int("New tokens", max_new_tokens, 1, MAX_SERVE_NEW_TOKENS)
    p = check_int("Shared prefix", shared_prefix, 0, MAX_SERVE_SHARED_PREFIX)
    rng = random.Random(seed)
    prefix = tuple(corpus_tokens(p // 4 + 1, seed)[:p])
    out, arrival = [], 0
    for i in range(n):
        words = sentence(rng)
        own = rng.randint(1, min(6, len(words))) if p else rng.randint(2, min(7, len(words)))
        new = rng.randint(max(1, max_new // 4), max_new)
        out.append(Request(i, prefix + tuple(words[:own]), new, arrival))
        arrival += rng.choice([0, 1, 1, 2, 3])
    return tuple(out)


@dataclass(frozen=True)
class Memory:
    """KV memory during one step's pass, in positions ("slots") of every layer; × ``slot_bytes``
    (one position's K and V in every layer, measured from the pool) gives bytes.

    used         positions the running requests' blocks hold (a shared block counted once)
    logical      the running requests' cache lengths summed (what they hold without sharing)
    paged        blocks held × block size: what paging reserves
    contiguous   each running request's maximum length (prompt + new tokens − 1) summed: what a
                 system that reserves one contiguous region per request at admission holds
    """

    slot_bytes: int
    used: int
    logical: int
    paged: int
    contiguous: int

    @property
    def slack(self) -> int:
        """Reserved but empty slots under paging: only the last block of each sequence."""
        return self.paged - self.used

    def bytes(self, what: str) -> int:
        return getattr(self, what) * self.slot_bytes

    def waste(self, what: str) -> float:
        """Fraction of ``what`` ("paged" or "contiguous") reserved but not holding K/V."""
        total = getattr(self, what)
        return (total - self.used) / total if total else 0.0


@dataclass(frozen=True)
class StepRecord:
    """One step of a run; the block state (tables, refcounts, filled, cached, free) is after the
    step (finished requests' blocks already freed), ``memory`` during its pass.

    Per block (index = block id): ``refcounts`` holders, ``filled`` slots holding a position,
    ``cached`` named for prefix caching (a free cached block can still be shared).
    ``taken`` / ``freed``: blocks taken from / returned to the free list this step; ``copied``:
    (source, copy) pairs of copy-on-write; ``shared``: blocks attached by prefix hits this step.
    ``chosen``: (request, token) picked this step; ``contexts``: (request, tokens in its cache
    after the pass). ``pool_keys``: layer 0's K pool after the pass when the run keeps it.
    """

    step: int
    prefill: tuple[int, ...]           # prefilled this step (admitted; a recompute too)
    decode: tuple[int, ...]
    waiting: tuple[int, ...]           # arrived and not running, after admission
    finished: tuple[int, ...]
    preempted: tuple[int, ...]         # preempted at the start of this step (blocks released)
    recomputed: tuple[int, ...]        # prefilled again after a preemption (prompt + tokens so far)
    block_tables: tuple[tuple[int, tuple[int, ...]], ...]
    refcounts: tuple[int, ...]
    filled: tuple[int, ...]
    cached: tuple[bool, ...]
    free_blocks: tuple[int, ...]
    taken: tuple[int, ...]
    freed: tuple[int, ...]
    copied: tuple[tuple[int, int], ...]
    shared: tuple[int, ...]
    chosen: tuple[tuple[int, str], ...]
    contexts: tuple[tuple[int, tuple[str, ...]], ...]
    memory: Memory
    prefill_saved: int                 # prompt positions not computed this step thanks to prefix hits
    max_abs_diff: float | None         # this step's rows vs their cold solo runs (check=True)
    pool_keys: torch.Tensor | None = field(default=None, repr=False)

    @property
    def tables(self) -> dict[int, tuple[int, ...]]:
        return dict(self.block_tables)

    @property
    def running(self) -> tuple[int, ...]:
        return self.prefill + self.decode

    def logical_keys(self, request_id: int) -> torch.Tensor | None:
        """Layer 0's K of a request still running after this step, read from ``pool_keys`` through
        its block table: ``[kv_heads, T, head_dim]`` in position order (None without a kept pool)."""
        table = self.tables.get(request_id)
        if self.pool_keys is None or table is None:
            return None
        k = self.pool_keys[list(table)]                                  # [blocks, H, block_size, d]
        n_blocks, heads, size, d = k.shape
        return k.permute(1, 0, 2, 3).reshape(heads, n_blocks * size, d)[:, :len(dict(self.contexts)[request_id])]


@dataclass(frozen=True)
class RequestResult:
    request: Request
    tokens: tuple[str, ...]            # generated
    admitted_step: int                 # first admission
    first_token_step: int
    finish_step: int
    preemptions: int
    prefill_saved: int                 # prompt positions taken from cached blocks (all admissions)
    blocks_saved: int                  # blocks attached instead of taken (prefix hits)
    max_abs_diff: float | None         # vs its cold solo run, over every step (check=True)
    solo_tokens: tuple[str, ...] | None = None

    @property
    def id(self) -> int:
        return self.request.id

    @property
    def ttft(self) -> int:
        """Time to first token in steps: from arrival to the step that chose it, inclusive."""
        return self.first_token_step - self.request.arrival_step + 1

    @property
    def tpot(self) -> float | None:
        """Steps per output token after the first (None for a one-token request)."""
        n = len(self.tokens)
        return (self.finish_step - self.first_token_step) / (n - 1) if n > 1 else None


@dataclass(frozen=True)
class ServeRun:
    model_name: str
    policy: str
    block_size: int
    num_blocks: int
    max_batch: int
    prefix_caching: bool
    requests: tuple[RequestResult, ...]
    steps: tuple[StepRecord, ...]
    tolerance: float                   # how close a row must come to its solo run (1e-4 fp32, 1e-9 fp64)

    @property
    def total_steps(self) -> int:
        return len(self.steps)

    @property
    def mean_ttft(self) -> float:
        return sum(r.ttft for r in self.requests) / len(self.requests)

    @property
    def mean_tpot(self) -> float | None:
        vals = [r.tpot for r in self.requests if r.tpot is not None]
        return sum(vals) / len(vals) if vals else None

    @property
    def preemptions(self) -> int:
        return sum(r.preemptions for r in self.requests)

    @property
    def prefill_saved(self) -> int:
        return sum(r.prefill_saved for r in self.requests)

    @property
    def blocks_saved(self) -> int:
        return sum(r.blocks_saved for r in self.requests)

    def peak(self, what: str) -> int:
        """The largest ``Memory`` count ``what`` over the steps, in bytes."""
        return max((s.memory.bytes(what) for s in self.steps), default=0)


class _Live:
    """A request's mutable state inside ``serve`` (records are built from it)."""

    def __init__(self, req: Request, ids: list[int]) -> None:
        self.req, self.prompt_ids = req, ids
        self.generated: list[int] = []
        self.admitted = self.first = self.finish = -1
        self.preemptions = self.saved = self.hits = 0
        self.diff: float | None = None

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.generated

    @property
    def max_length(self) -> int:
        """Positions its cache reaches: the last chosen token is never processed."""
        return len(self.prompt_ids) + self.req.max_new_tokens - 1


def _check_requests(model: BatchModel, requests: Sequence[Request], capacity: int) -> list[_Live]:
    check_int("Requests", len(requests), 1, MAX_SERVE_REQUESTS)
    if len({r.id for r in requests}) != len(requests):
        raise LimitError("Request ids must be distinct.")
    live = []
    for r in requests:
        check_int(f"Request {r.id}'s prompt length", len(r.prompt), 1, model.limits.max_prompt_tokens)
        check_int(f"Request {r.id}'s new tokens", r.max_new_tokens, 1,
                  min(MAX_SERVE_NEW_TOKENS, model.limits.max_new_tokens))
        check_int(f"Request {r.id}'s arrival step", r.arrival_step, 0, MAX_SERVE_STEPS)
        one = _Live(r, encode(model, r.prompt))
        if one.max_length > capacity:
            raise LimitError(f"Request {r.id} needs {one.max_length} positions but the pool holds only "
                             f"{capacity}: it could never run, even alone.")
        live.append(one)
    return live


def serve(model: BatchModel, requests: Sequence[Request], block_size: int = 4, num_blocks: int = 32,
          policy: str = "continuous", max_batch: int = 4, prefix_caching: bool = False,
          check: bool = False, keep_kv: bool = False) -> ServeRun:
    """Serve ``requests`` step by step (see the module notes) and return every step and request.

    ``prefix_caching``: share the full blocks of common prompt beginnings (PagedCache.match_prefix).
    ``check``: compare every row with the request's cold solo run (costs one stepper run per
    request). ``keep_kv``: keep layer 0's K pool in every step record (for drawing the rows)."""
    if policy not in POLICIES:
        raise LimitError(f"Unknown policy {policy!r}; choose one of {', '.join(POLICIES)}.")
    block_size = check_int("Block size", block_size, 1, MAX_SERVE_BLOCK_SIZE)
    num_blocks = check_int("Number of blocks", num_blocks, 1, MAX_SERVE_BLOCKS)
    max_batch = check_int("Batch size", max_batch, 1, MAX_SERVE_BATCH)
    live = _check_requests(model, requests, block_size * num_blocks)
    cache = PagedCache(model.n_layers, block_size, num_blocks)
    solo: dict[int, tuple[list[int], torch.Tensor]] = {}
    pending = sorted(live, key=lambda x: (x.req.arrival_step, x.req.id))
    waiting: list[_Live] = []
    running: list[_Live] = []          # in admission order: the newest is preempted first
    steps: list[StepRecord] = []
    done = 0
    dtype = None

    for step in range(MAX_SERVE_STEPS + 1):
        if done == len(live):
            break
        if step == MAX_SERVE_STEPS:
            raise LimitError(f"The run did not finish within {MAX_SERVE_STEPS} steps.")
        while pending and pending[0].req.arrival_step <= step:
            waiting.append(pending.pop(0))

        # 2. running requests first: preempt the newest until their decode fits
        preempted: list[int] = []
        while running and sum(cache.blocks_needed(r.req.id, 1) for r in running) > cache.num_free_blocks:
            victim = running.pop()
            cache.free_sequence(victim.req.id)
            victim.preemptions += 1
            waiting.insert(0, victim)
            preempted.append(victim.req.id)
        reserved = sum(cache.blocks_needed(r.req.id, 1) for r in running)

        # 3. admission
        newcomers: list[_Live] = []
        if policy == "continuous" or not running:
            batch_ready = policy == "continuous" or len(waiting) >= max_batch or not pending
            while batch_ready and waiting and len(running) + len(newcomers) < max_batch:
                cand = waiting[0]
                ids = cand.ids
                hits = cache.prefix_hits(ids) if prefix_caching else []
                revived = sum(1 for b in hits if cache.pool.refcount[b] == 0)
                fresh = -(-len(ids) // block_size) - len(hits)
                if fresh + revived > cache.num_free_blocks - reserved:
                    break
                waiting.pop(0)
                saved = cache.match_prefix(cand.req.id, ids) if prefix_caching else 0
                cand.saved += saved
                cand.hits += len(hits)
                if cand.admitted < 0:
                    cand.admitted = step
                reserved += fresh
                newcomers.append(cand)

        # 4. one pass: running decode their pending token, newcomers prefill what is not cached
        rows = running + newcomers
        chosen: list[tuple[int, str]] = []
        finished: list[int] = []
        step_diff: float | None = None
        memory = Memory(0, 0, 0, 0, 0)
        saved_now = sum(cache.seq_length(r.req.id) for r in newcomers)
        pool_keys = None
        if rows:
            inputs = [(r, r.ids[cache.seq_length(r.req.id):]) for r in rows]
            n_cols = max(len(t) for _, t in inputs)
            key_mask = cache.set_active([r.req.id for r in rows], [len(t) for _, t in inputs])
            tok = torch.tensor([[0] * (n_cols - len(t)) + t for _, t in inputs])                  # [B, N]
            start = [cache.seq_length(r.req.id) for r in rows]
            pos = torch.tensor([[-1] * (n_cols - len(t)) + list(range(a, a + len(t)))
                                for (_, t), a in zip(inputs, start)])                             # [B, N]
            with torch.no_grad():
                logits = model.forward_batch(tok, pos, key_mask, cache).logits[:, -1]             # [B, V]
            dtype = logits.dtype
            memory = _memory(cache, rows)
            if keep_kv:
                pool_keys = cache.layers[0].keys.clone()
            for b, r in enumerate(rows):
                if check:
                    if r.req.id not in solo:
                        solo[r.req.id] = _solo(model, r.req)
                    d = float((logits[b] - solo[r.req.id][1][len(r.generated)]).abs().max())
                    r.diff = d if r.diff is None else max(r.diff, d)
                    step_diff = d if step_diff is None else max(step_diff, d)
                nxt = GREEDY.draw(logits[b])
                r.generated.append(nxt)
                chosen.append((r.req.id, model.logit_tokens[nxt]))
                if r.first < 0:
                    r.first = step
                if prefix_caching:
                    cache.register(r.req.id, r.ids)
            contexts = tuple((r.req.id, tuple(model.vocab[i] for i in r.ids[:cache.seq_length(r.req.id)]))
                             for r in rows)
            for r in rows:
                if len(r.generated) == r.req.max_new_tokens:     # 5. finished: its blocks go back at once
                    r.finish = step
                    cache.free_sequence(r.req.id)
                    finished.append(r.req.id)
                    done += 1
            running = [r for r in rows if r.finish < 0]
        else:
            contexts = ()
        events = cache.drain_events()
        steps.append(StepRecord(
            step=step, prefill=tuple(r.req.id for r in newcomers),
            decode=tuple(r.req.id for r in rows if r not in newcomers),
            waiting=tuple(r.req.id for r in waiting), finished=tuple(finished), preempted=tuple(preempted),
            recomputed=tuple(r.req.id for r in newcomers if r.preemptions),
            block_tables=tuple((r.req.id, cache.block_table(r.req.id)) for r in running),
            refcounts=cache.refcounts(), filled=cache.filled(),
            cached=cache.named(), free_blocks=cache.free_blocks(),
            taken=tuple(e.block for e in events if e.kind in ("take", "copy")),
            freed=tuple(e.block for e in events if e.kind == "free"),
            copied=tuple((e.source, e.block) for e in events if e.kind == "copy"),   # type: ignore[misc]
            shared=tuple(e.block for e in events if e.kind == "share"),
            chosen=tuple(chosen), contexts=contexts, memory=memory, prefill_saved=saved_now,
            max_abs_diff=step_diff, pool_keys=pool_keys))

    results = tuple(
        RequestResult(r.req, tuple(model.logit_tokens[i] for i in r.generated), r.admitted, r.first, r.finish,
                      r.preemptions, r.saved, r.hits, r.diff,
                      tuple(model.logit_tokens[i] for i in solo[r.req.id][0]) if r.req.id in solo else None)
        for r in sorted(live, key=lambda x: x.req.id))
    tol = 1e-9 if dtype == torch.float64 else 1e-4
    return ServeRun(model.name, policy, block_size, num_blocks, max_batch, prefix_caching, results,
                    tuple(steps), tol)


def _memory(cache: PagedCache, rows: Sequence[_Live]) -> Memory:
    return _memory_of(cache, [r.req.id for r in rows], [r.max_length for r in rows])


def _memory_of(cache: PagedCache, seq_ids: Sequence[int], max_lengths: Sequence[int]) -> Memory:
    held = [b for b, n in enumerate(cache.refcounts()) if n > 0]
    filled = cache.filled()
    return Memory(slot_bytes=cache.slot_bytes(), used=sum(filled[b] for b in held),
                  logical=sum(cache.seq_length(i) for i in seq_ids),
                  paged=len(held) * cache.block_size, contiguous=sum(max_lengths))


def _solo(model: BatchModel, req: Request, rule: SelectionRule = GREEDY, seed: int = 0) -> tuple[list[int], torch.Tensor]:
    """The request alone through the stepper with a contiguous cache (greedy unless ``rule``): its
    token ids and the logits [new, V] each choice used (no recompute check: only the logits count)."""
    run = run_generation(model, list(req.prompt), req.max_new_tokens, rule, seed,    # type: ignore[arg-type]
                         recheck=False)
    chooses = [e for e in run.events if e.phase == "choose"]
    return [model.logit_tokens.index(e.chosen) for e in chooses], torch.stack([e.logits for e in chooses])


@dataclass(frozen=True)
class SizePoint:
    """One block size in ``block_size_sweep``: peak bytes and mean waste over the steps with a pass."""

    block_size: int
    num_blocks: int
    used: int                  # peak bytes holding K/V
    paged: int                 # peak bytes in held blocks
    contiguous: int            # peak bytes under contiguous reservation
    waste_paged: float         # mean fraction of held block bytes not holding K/V (the slack)
    waste_contiguous: float    # the same for contiguous reservation
    total_steps: int
    preemptions: int


def block_size_sweep(model: BatchModel, requests: Sequence[Request], sizes: Sequence[int] = (1, 2, 4, 8, 16),
                     pool_positions: int = 256, **options) -> tuple[SizePoint, ...]:
    """The same stream served from pools of ``pool_positions`` positions cut into blocks of each
    size: what the block size does to paging's slack (only the last block of a sequence has any)."""
    out = []
    for bs in sizes:
        run = serve(model, requests, block_size=bs, num_blocks=max(1, pool_positions // bs), **options)
        busy = [s.memory for s in run.steps if s.running]
        out.append(SizePoint(bs, run.num_blocks, run.peak("used"), run.peak("paged"), run.peak("contiguous"),
                             sum(m.waste("paged") for m in busy) / len(busy),
                             sum(m.waste("contiguous") for m in busy) / len(busy),
                             run.total_steps, run.preemptions))
    return tuple(out)


def compare_policies(model: BatchModel, requests: Sequence[Request], **options) -> dict[str, ServeRun]:
    """The same stream under continuous and static batching (same pool, batch size, caching)."""
    return {p: serve(model, requests, policy=p, **options) for p in POLICIES}


@dataclass(frozen=True)
class ForkRun:
    """Parallel sampling from one paged cache: the prompt is prefilled once, then ``len(seeds)``
    samples continue it, sharing its blocks (``PagedCache.fork``); the first write into the shared,
    partly filled last block copies it (copy-on-write). Step 0 is the prefill and the fork, step t
    each sample's decode of its token t − 1; after the last step every block is freed.

    ``identical[t]``: at step t every sample's logits equal, bit for bit (``torch.equal``), those of
    its own run alone through a contiguous cache (the stepper with a DynamicCache, same seed)."""

    prompt: tuple[str, ...]
    block_size: int
    num_blocks: int
    seeds: tuple[int, ...]
    samples: tuple[tuple[str, ...], ...]     # each sample's generated tokens
    steps: tuple[StepRecord, ...]
    identical: tuple[bool, ...]

    @property
    def copies(self) -> tuple[tuple[int, int, int], ...]:
        """(step, source block, its copy) of every copy-on-write."""
        return tuple((s.step, a, b) for s in self.steps for a, b in s.copied)


def fork_run(model: BatchModel, prompt: Sequence[str], new_tokens: int = 3, block_size: int = 4,
             num_blocks: int = 16, samples: int = 2, seed: int = 0, temperature: float = 1.0) -> ForkRun:
    """``samples`` sampled continuations of one prompt from one paged cache (see ``ForkRun``):
    sample i draws with ``temperature`` and seed ``seed + i``, the draws of its contiguous run."""
    check_int("Prompt length", len(prompt), 1, model.limits.max_prompt_tokens)
    new_tokens = check_int("New tokens", new_tokens, 1, min(MAX_SERVE_NEW_TOKENS, model.limits.max_new_tokens))
    block_size = check_int("Block size", block_size, 1, MAX_SERVE_BLOCK_SIZE)
    num_blocks = check_int("Number of blocks", num_blocks, 1, MAX_SERVE_BLOCKS)
    n = check_int("Samples", samples, 1, MAX_SERVE_BATCH)
    seed = check_int("Seed", seed, 0, MAX_SEED)
    seeds = tuple((seed + i) % (MAX_SEED + 1) for i in range(n))
    ids = encode(model, prompt)
    rule = Sampler(temperature)
    req = Request(0, tuple(prompt), new_tokens)
    solo = [_solo(model, req, rule, s) for s in seeds]                  # contiguous: the reference
    max_length = len(ids) + new_tokens - 1
    shared = len(ids) // block_size
    if shared + n * (-(-max_length // block_size) - shared) > num_blocks:
        raise LimitError(f"{n} samples of {max_length} positions need more than the {num_blocks} blocks of the pool.")
    cache = PagedCache(model.n_layers, block_size, num_blocks)
    steps: list[StepRecord] = []
    identical: list[bool] = []
    with torch.no_grad():
        for t in range(new_tokens):
            rows: list[torch.Tensor] = []
            if t == 0:                                                   # prefill once, then fork
                cache.set_active([0])
                rows = [model.forward(ids, cache, 0).logits[-1]] * n
                for i in range(1, n):
                    cache.fork(0, i)
            else:
                for i in range(n):
                    cache.set_active([i])
                    rows.append(model.forward([solo[i][0][t - 1]], cache, len(ids) + t - 1).logits[-1])
            identical.append(all(torch.equal(r, solo[i][1][t]) for i, r in enumerate(rows)))
            diff = max(float((r - solo[i][1][t]).abs().max()) for i, r in enumerate(rows))
            memory = _memory_of(cache, range(n), [max_length] * n)
            contexts = tuple((i, tuple(prompt) + tuple(model.vocab[x] for x in solo[i][0][:t])) for i in range(n))
            last = t == new_tokens - 1
            tables = tuple((i, cache.block_table(i)) for i in range(n))
            if last:                                                     # done: every block goes back
                for i in range(n):
                    cache.free_sequence(i)
            events = cache.drain_events()
            steps.append(StepRecord(
                step=t, prefill=(0,) if t == 0 else (), decode=tuple(range(n)) if t else (), waiting=(),
                finished=tuple(range(n)) if last else (), preempted=(), recomputed=(),
                block_tables=() if last else tables, refcounts=cache.refcounts(), filled=cache.filled(),
                cached=cache.named(), free_blocks=cache.free_blocks(),
                taken=tuple(e.block for e in events if e.kind in ("take", "copy")),
                freed=tuple(e.block for e in events if e.kind == "free"),
                copied=tuple((e.source, e.block) for e in events if e.kind == "copy"),   # type: ignore[misc]
                shared=tuple(e.block for e in events if e.kind == "share"),
                chosen=tuple((i, model.logit_tokens[solo[i][0][t]]) for i in range(n)),
                contexts=contexts, memory=memory, prefill_saved=len(ids) * (n - 1) if t == 0 else 0,
                max_abs_diff=diff))
    return ForkRun(tuple(prompt), block_size, num_blocks, seeds,
                   tuple(tuple(model.logit_tokens[x] for x in s[0]) for s in solo), tuple(steps), tuple(identical))
