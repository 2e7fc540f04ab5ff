"""Serving many requests from one paged KV cache: a scheduler with continuous or static batching.

A stream of requests (prompt, tokens to generate, arrival step) is served step by step. Every step
runs **one batched pass** of the model (``forward_batch``, kvviz.decoding.batching's protocol) over a
paged cache shared by all running requests, then picks each request's next token (greedy). The
``Scheduler`` sees that cache only through a KVCacheManager (kvviz.serving.kv_manager). A step, in
this order, one method each:

1. ``arrive``: requests arriving at this step join the waiting queue (first come, first served).
2. ``preempt``: **running requests first**. Each running request will decode one token and may
   need a block (its last block is full) or a copy (a shared last block). While the free blocks do
   not cover that, the newest running request is **preempted**: its blocks are released and it goes
   back to the front of the queue, keeping the tokens it generated; when admitted again its prompt
   and those tokens are prefilled again (recompute, as vLLM does by default).
3. ``admit`` (``continuous``, Orca's iteration-level scheduling): waiting requests are admitted in
   order while fewer than ``max_batch`` run and the free blocks cover their prefill; the first that
   does not fit stops admission (no overtaking). With prefix caching, an admitted request first
   attaches the cached blocks of its prompt and prefills only the rest. ``static``: nothing is
   admitted while a batch runs; a new batch starts when ``max_batch`` requests wait (or no more
   will arrive) and runs until its last request finishes.
   With ``chunk_budget`` (chunked prefill, Sarathi-Serve's stall-free schedule) admission stops
   when the step's token budget is spoken for, and ``fill_budget`` gives each running request its
   share of the pass: the decodes first (one token each), then the prompts in admission order,
   each a chunk of what is left; a prompt whose chunk stops short of its end chooses no token yet
   and continues in the next step, its cache positions already written.
4. ``run_pass``: **one pass** over the newcomers' prefill (their whole remaining prompt) and the
   running requests' decode (their pending token) together, each sequence at its own positions,
   left-padded to the longest (``KVCacheManager.set_rows`` maps batch rows to sequences and gives
   the key mask). Each row's last logits choose its next token; a request that has all its tokens,
   or has just chosen the model's end token (where its solo run stops too), finishes and its blocks
   are released at once (its full blocks keep their prefix-cache names).
5. ``record``: the step's immutable ``StepRecord`` (kvviz.serving.records: who prefilled, decoded,
   waited, finished or was preempted; block tables, reference counts, filled slots and free blocks
   after the step; blocks taken, copied, shared and freed; memory under paging vs contiguous
   reservation).

Every request ends with a ``RequestResult`` (tokens, first-token and finish steps, preemptions, TTFT
and time per output token in steps). ``check=True`` compares every row's logits with the request's
cold solo run (``run_generation``, a contiguous cache).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvviz.decoding.batching import BatchModel
from kvviz.limits import (
    MAX_SERVE_BATCH,
    MAX_SERVE_BLOCK_SIZE,
    MAX_SERVE_BLOCKS,
    MAX_SERVE_NEW_TOKENS,
    MAX_SERVE_REQUESTS,
    MAX_SERVE_STEPS,
    LimitError,
    check_int,
)
from kvviz.measure.clock import time_runs
from kvviz.models.base import FLOAT32_TOLERANCE, FLOAT64_TOLERANCE, encode
from kvviz.serving.kv_manager import KVCacheManager
from kvviz.serving.records import Memory, RequestResult, ServeRun, StepRecord
from kvviz.serving.workload import GREEDY, Request, solo_run

POLICIES = ("continuous", "static")
PREFIX_CACHES = ("hash", "radix")     # full blocks named by hash (vLLM); a radix tree's match to the token (SGLang)
MAX_CHUNK_BUDGET = 4096      # tokens one step's pass may process (a cap on the batch's width)


class _Live:
    """A request's mutable state inside the scheduler (records are built from it)."""

    def __init__(self, req: Request, ids: list[int]) -> None:
        self.req, self.prompt_ids = req, ids
        self.generated: list[int] = []
        self.admitted = self.first = self.finish = -1
        self.computed = 0                    # positions in the cache (mirrors KVCacheManager.computed)
        self.preemptions = self.saved = self.hits = 0
        self.diff: float | None = None

    @property
    def id(self) -> int:
        return self.req.id

    @property
    def ids(self) -> list[int]:
        return self.prompt_ids + self.generated

    @property
    def pending(self) -> int:
        """Positions not yet in the cache that its next passes must process (1 while decoding)."""
        return len(self.ids) - self.computed

    @property
    def max_length(self) -> int:
        """Positions its cache reaches: the last chosen token is never processed."""
        return len(self.prompt_ids) + self.req.max_new_tokens - 1


@dataclass(frozen=True)
class _Pass:
    """What one step's pass produced, for its record."""

    chosen: tuple[tuple[int, str], ...] = ()
    finished: tuple[int, ...] = ()
    contexts: tuple[tuple[int, tuple[str, ...]], ...] = ()
    memory: Memory = Memory(0, 0, 0, 0, 0)
    max_abs_diff: float | None = None
    pool_keys: torch.Tensor | None = None
    seconds: float | None = None


class Scheduler:
    """Serves ``requests`` on ``model`` from one paged cache (see the module notes); ``run`` returns
    every step and request. Checks its settings and every request before any work.

    ``prefix_caching``: share the full blocks of common prompt beginnings. ``check``: compare every
    row with the request's cold solo run (costs one stepper run per request). ``keep_kv``: keep
    layer 0's K pool in every step record (for drawing the rows)."""

    def __init__(self, model: BatchModel, requests: Sequence[Request], block_size: int = 4, num_blocks: int = 32,
                 policy: str = "continuous", max_batch: int = 4, prefix_caching: bool = False,
                 check: bool = False, keep_kv: bool = False,
                 progress: Callable[[int, int], None] | None = None, chunk_budget: int | None = None,
                 timed: bool = False, prefix_cache: str = "hash") -> None:
        if policy not in POLICIES:
            raise LimitError(f"Unknown policy {policy!r}; choose one of {', '.join(POLICIES)}.")
        if prefix_cache not in PREFIX_CACHES:
            raise LimitError(f"Unknown prefix cache {prefix_cache!r}; choose one of {', '.join(PREFIX_CACHES)}.")
        self.model, self.policy, self.prefix_cache = model, policy, prefix_cache
        self.block_size = check_int("Block size", block_size, 1, MAX_SERVE_BLOCK_SIZE)
        self.num_blocks = check_int("Number of blocks", num_blocks, 1, MAX_SERVE_BLOCKS)
        self.max_batch = check_int("Batch size", max_batch, 1, MAX_SERVE_BATCH)
        self.prefix_caching, self.check, self.keep_kv, self.timed = prefix_caching, check, keep_kv, timed
        # every running request decodes each step, so the budget covers a full batch's decodes
        self.chunk_budget = None if chunk_budget is None else check_int(
            "Chunk budget", chunk_budget, self.max_batch, MAX_CHUNK_BUDGET)
        self.progress = progress
        self.live = self._checked(requests, self.block_size * self.num_blocks)
        self.kv = KVCacheManager(model.n_layers, self.block_size, self.num_blocks)
        self.solo: dict[int, tuple[list[int], torch.Tensor]] = {}
        self.pending = sorted(self.live, key=lambda x: (x.req.arrival_step, x.id))
        self.waiting: list[_Live] = []
        self.running: list[_Live] = []     # in admission order: the newest is preempted first
        self.steps: list[StepRecord] = []
        self.done = 0
        self.dtype: torch.dtype | None = None

    def _checked(self, requests: Sequence[Request], capacity: int) -> list[_Live]:
        check_int("Requests", len(requests), 1, MAX_SERVE_REQUESTS)
        limits = self.model.limits
        limits.check_serve_pool(len(requests), self.block_size, self.num_blocks)
        if len({r.id for r in requests}) != len(requests):
            raise LimitError("Request ids must be distinct.")
        live = []
        for r in requests:
            check_int(f"Request {r.id}'s prompt length", len(r.prompt), 1, limits.max_prompt_tokens)
            check_int(f"Request {r.id}'s new tokens", r.max_new_tokens, 1,
                      min(MAX_SERVE_NEW_TOKENS, limits.max_new_tokens, limits.serve_new_tokens))
            check_int(f"Request {r.id}'s arrival step", r.arrival_step, 0, MAX_SERVE_STEPS)
            one = _Live(r, encode(self.model, r.prompt))
            if one.max_length > capacity:
                raise LimitError(f"Request {r.id} needs {one.max_length} positions but the pool holds only "
                                 f"{capacity}: it could never run, even alone.")
            live.append(one)
        return live

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> ServeRun:
        for step in range(MAX_SERVE_STEPS + 1):
            if self.done == len(self.live):
                break
            if step == MAX_SERVE_STEPS:
                raise LimitError(f"The run did not finish within {MAX_SERVE_STEPS} steps.")
            self.arrive(step)
            preempted = self.preempt()
            newcomers = self.admit(step)
            saved = sum(self.kv.computed(r.id) for r in newcomers)
            for r in newcomers:
                r.computed = self.kv.computed(r.id)
            live = self.running + newcomers
            chunks = self.fill_budget(live)
            rows = [r for r in live if chunks[r.id]]
            decode = [r.id for r in rows if r not in newcomers and r.generated and r.pending == 1]
            done = self.run_pass(step, rows, chunks, live) if rows else _Pass()
            self.steps.append(self.record(step, decode, rows, preempted, done, saved, chunks))
            if self.progress is not None:
                self.progress(self.done, len(self.live))
        return self.result()

    def arrive(self, step: int) -> None:
        while self.pending and self.pending[0].req.arrival_step <= step:
            self.waiting.append(self.pending.pop(0))

    def preempt(self) -> list[int]:
        """Preempt the newest running requests until every running one's decode fits; their ids."""
        preempted: list[int] = []
        while self.running and self._growth(self.running) > self.kv.num_free_blocks:
            victim = self.running.pop()
            self.kv.free(victim.id)
            victim.computed = 0
            victim.preemptions += 1
            self.waiting.insert(0, victim)
            preempted.append(victim.id)
        return preempted

    def _growth(self, live: Sequence[_Live]) -> int:
        """Free blocks the running requests' remaining work takes: one decode token each, or the rest
        of a prompt still being prefilled in chunks (reserved whole, as at admission)."""
        return sum(self.kv.blocks_to_grow([r.id], max(1, r.pending)) for r in live)

    def fill_budget(self, live: Sequence[_Live]) -> dict[int, int]:
        """Positions each request processes this step. Without a budget: all that is pending. With
        ``chunk_budget`` (Sarathi-Serve's stall-free schedule): the decodes first (one token each),
        then the prompts in admission order, each a chunk of what the budget has left."""
        if self.chunk_budget is None:
            return {r.id: r.pending for r in live}
        decoding = [r for r in live if r.generated and r.pending == 1]
        chunks = {r.id: 1 for r in decoding}
        left = self.chunk_budget - len(decoding)
        for r in live:
            if r.id not in chunks:
                chunks[r.id] = min(r.pending, left)
                left -= chunks[r.id]
        return chunks

    def _budget_left(self) -> int | None:
        """Budget not yet spoken for by the running requests (None without a budget)."""
        if self.chunk_budget is None:
            return None
        return self.chunk_budget - sum(r.pending for r in self.running)

    def admit(self, step: int) -> list[_Live]:
        """Admit waiting requests (policy, batch size and free blocks permitting); the newcomers."""
        newcomers: list[_Live] = []
        if self.policy != "continuous" and self.running:
            return newcomers
        reserved = self._growth(self.running)     # the running ones' decode (and prefill chunks) first
        budget = self._budget_left()
        batch_ready = self.policy == "continuous" or len(self.waiting) >= self.max_batch or not self.pending
        while batch_ready and self.waiting and len(self.running) + len(newcomers) < self.max_batch:
            if budget is not None and budget <= 0:
                break                                  # this step's tokens are spoken for
            cand = self.waiting[0]
            ids = cand.ids
            need = self.kv.prompt_blocks(ids, self.prefix_caching, self.prefix_cache)
            if need.taken > self.kv.num_free_blocks - reserved:
                break
            self.waiting.pop(0)
            cand.saved += self.kv.attach_prefix(cand.id, ids, self.prefix_cache) if self.prefix_caching else 0
            cand.hits += need.hits
            if cand.admitted < 0:
                cand.admitted = step
            reserved += need.fresh
            if budget is not None:
                budget -= len(ids) - self.kv.computed(cand.id)
            newcomers.append(cand)
        return newcomers

    def run_pass(self, step: int, rows: list[_Live], chunks: dict[int, int] | None = None,
                 live: list[_Live] | None = None) -> _Pass:
        """One batched pass: the running rows decode their pending token, the newcomers prefill what
        is not cached (or, under a chunk budget, the next ``chunks[id]`` positions); a row whose
        input reaches its last token chooses its next token; finished requests release their blocks.
        ``live``: every running request (rows without budget this step wait in place)."""
        chunks = chunks if chunks is not None else {r.id: r.pending for r in rows}
        live = live if live is not None else rows
        inputs = [r.ids[r.computed:r.computed + chunks[r.id]] for r in rows]
        n_cols = max(len(t) for t in inputs)
        key_mask = self.kv.set_rows([r.id for r in rows], [len(t) for t in inputs])
        tok = torch.tensor([[0] * (n_cols - len(t)) + t for t in inputs])                               # [B, N]
        start = [self.kv.computed(r.id) for r in rows]
        pos = torch.tensor([[-1] * (n_cols - len(t)) + list(range(a, a + len(t))) for t, a in zip(inputs, start)])
        out: list[torch.Tensor] = []

        def forward() -> None:
            with torch.no_grad():
                out.append(self.model.forward_batch(tok, pos, key_mask, self.kv.cache).logits[:, -1])    # [B, V]

        if self.timed:      # one sample of the one timing helper: the pass writes the cache, so it runs once
            seconds: float | None = time_runs(forward, 1, warmups=0).median
        else:
            forward()
            seconds = None
        logits = out[0]
        self.dtype = logits.dtype
        memory = self.kv.memory([r.id for r in rows], [r.max_length for r in rows])
        pool_keys = self.kv.pool_keys() if self.keep_kv else None
        chosen: list[tuple[int, str]] = []
        step_diff: float | None = None
        for b, r in enumerate(rows):
            r.computed += chunks[r.id]
            if r.pending:                    # a prompt chunk that stops short of its end chooses nothing
                continue
            if self.check:
                d = self._solo_diff(r, logits[b])
                step_diff = d if step_diff is None else max(step_diff, d)
            nxt = GREEDY.draw(logits[b])
            r.generated.append(nxt)
            chosen.append((r.id, self.model.logit_tokens[nxt]))
            if r.first < 0:
                r.first = step
            if self.prefix_caching:
                self.kv.name_blocks(r.id, r.ids, self.prefix_cache)
        vocab = self.model.vocab
        contexts = tuple((r.id, tuple(vocab[i] for i in r.ids[:self.kv.computed(r.id)])) for r in rows)
        finished = []
        ends = {self.model.logit_tokens.index(t) for t in getattr(self.model, "end_tokens", ())}
        chose = {i for i, _ in chosen}
        for r in rows:
            if r.id not in chose:
                continue
            # finished at its length or at the model's end token (as its solo run stops): its blocks go back at once
            if len(r.generated) == r.req.max_new_tokens or r.generated[-1] in ends:
                r.finish = step
                self.kv.free(r.id)
                finished.append(r.id)
                self.done += 1
        self.running = [r for r in live if r.finish < 0]
        return _Pass(tuple(chosen), tuple(finished), contexts, memory, step_diff, pool_keys, seconds)

    def _solo_diff(self, r: _Live, logits: torch.Tensor) -> float:
        """Largest |difference| of a row's logits from its request's solo run at the same token."""
        if r.id not in self.solo:
            self.solo[r.id] = solo_run(self.model, r.req)
        d = float((logits - self.solo[r.id][1][len(r.generated)]).abs().max())
        r.diff = d if r.diff is None else max(r.diff, d)
        return d

    def record(self, step: int, decode: list[int], rows: list[_Live], preempted: list[int], done: _Pass,
               saved: int, chunks: dict[int, int]) -> StepRecord:
        """``decode``: rows decoding one token; every other row of the pass prefilled (a chunk, or the
        whole rest of its prompt; a recompute too)."""
        return StepRecord.of(
            step, self.kv.state([r.id for r in self.running]), done.memory,
            prefill=[r.id for r in rows if r.id not in decode], decode=decode,
            waiting=[r.id for r in self.waiting], finished=done.finished, preempted=preempted,
            recomputed=[r.id for r in rows if r.preemptions and r.id not in decode], chosen=done.chosen,
            contexts=done.contexts,
            prefill_saved=saved, max_abs_diff=done.max_abs_diff, pool_keys=done.pool_keys,
            budget=self.chunk_budget, chunks=[(r.id, chunks[r.id]) for r in rows], seconds=done.seconds)

    def result(self) -> ServeRun:
        tokens = self.model.logit_tokens
        chose: dict[int, list[int]] = {}
        for s in self.steps:
            for i, _ in s.chosen:
                chose.setdefault(i, []).append(s.step)
        results = tuple(
            RequestResult(r.req, tuple(tokens[i] for i in r.generated), r.admitted, r.first, r.finish,
                          r.preemptions, r.saved, r.hits, r.diff,
                          tuple(tokens[i] for i in self.solo[r.id][0]) if r.id in self.solo else None,
                          tuple(chose.get(r.id, [])[-len(r.generated):]) if r.generated else ())
            for r in sorted(self.live, key=lambda x: x.id))
        tol = FLOAT64_TOLERANCE if self.dtype == torch.float64 else FLOAT32_TOLERANCE
        return ServeRun(self.model.name, self.policy, self.block_size, self.num_blocks, self.max_batch,
                        self.prefix_caching, results, tuple(self.steps), tol, self.chunk_budget)


def serve(model: BatchModel, requests: Sequence[Request], block_size: int = 4, num_blocks: int = 32,
          policy: str = "continuous", max_batch: int = 4, prefix_caching: bool = False,
          check: bool = False, keep_kv: bool = False,
          progress: Callable[[int, int], None] | None = None, chunk_budget: int | None = None,
          timed: bool = False, prefix_cache: str = "hash") -> ServeRun:
    """Serve ``requests`` step by step (``Scheduler``; see the module notes) and return every step and
    request. ``prefix_caching``: share the full blocks of common prompt beginnings. ``check``: compare
    every row with the request's cold solo run. ``keep_kv``: keep layer 0's K pool in every step record.
    ``progress(finished, total)``: called after every step (a page's progress bar). ``chunk_budget``:
    tokens one step's pass may process, decodes first, prompts prefilled in chunks in what is left
    (None: every newcomer's whole prompt in one pass). ``timed``: each step's pass is timed
    (kvviz.measure.clock; ``StepRecord.seconds``). ``prefix_cache``: "hash" (full blocks by name) or
    "radix" (to the token, a partly matched block copied on write)."""
    return Scheduler(model, requests, block_size, num_blocks, policy, max_batch, prefix_caching, check,
                     keep_kv, progress, chunk_budget, timed, prefix_cache).run()
