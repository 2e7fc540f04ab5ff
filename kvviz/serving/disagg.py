"""Prefill/decode disaggregation (DistServe, Mooncake) on one machine: a prefill worker process
computes a request's cache and sends its bytes over a local socket (a ``multiprocessing`` Pipe, a
Unix socketpair) to a decode worker process that continues the generation from it.

The wire: a small header (the first token, each layer's K/V shape), then every layer's K and V as raw
bytes, so the bytes sent are the cache itself (``kvviz.cost.cache_bytes`` of the prompt). Both
workers are started and joined here with timeouts and killed in ``finally``: no worker outlives
the call. Greedy, as the solo run it is compared with.

The workers' bodies (``prefill_worker``, ``decode_worker``) take a model by name (a worker process
loads it) or a model instance (``ship_in_threads``: both in one process, over the same kind of
socket; what a test of a transformers model runs, without two more imports of its model code).

The workers are forked from multiprocessing's fork server, which imports this module (torch, the
engine) once: a worker then starts in milliseconds instead of importing torch again (2-3 s each
with "spawn"), and it is not a fork of a threaded server process (what "fork" would be). The fork
server is one idle process for the server's lifetime."""
from __future__ import annotations

import multiprocessing as mp
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.limits import LimitError, check_int
from kvviz.measure.clock import time_runs
from kvviz.models.base import Model
from kvviz.models.registry import get_model

MAX_WIRE_BYTES = 256 * 2**20          # one request's cache on the wire (256 MiB)
WORKER_TIMEOUT_S = 120.0              # each worker's lifetime


@dataclass(frozen=True)
class Shipped:
    """One request served by two processes."""

    tokens: tuple[int, ...]           # the first from the prefill worker, the rest from the decode worker
    bytes_sent: int                   # K/V bytes over the socket (the header not counted)
    transfer_s: float                 # decode worker: header received to cache rebuilt (measured)


def _load(model: str | Model) -> Model:
    return get_model(model) if isinstance(model, str) else model


def prefill_worker(model: str | Model, prompt_ids: list[int], conn) -> None:
    """Prefill ``prompt_ids``, send the first token and each layer's K/V shape, then the bytes."""
    m = _load(model)
    cache = m.new_cache()
    with torch.no_grad():
        logits = m.logits(prompt_ids, cache, 0, keep=1)
    kv = [layer.kv() for layer in cache.layers]
    conn.send({"first": int(logits[-1].argmax()), "shapes": [(tuple(k.shape), tuple(v.shape)) for k, v in kv],
               "dtype": str(kv[0][0].dtype)})
    for k, v in kv:
        conn.send_bytes(k.contiguous().numpy().tobytes())
        conn.send_bytes(v.contiguous().numpy().tobytes())
    conn.close()


def decode_worker(model: str | Model, n_prompt: int, new_tokens: int, conn, out) -> None:
    """Rebuild the cache from the bytes ``conn`` brings, decode greedily from it, send back
    (tokens, bytes received, seconds from the header to the rebuilt cache) on ``out``."""
    m = _load(model)
    cache = m.new_cache()
    got: dict = {}

    head = conn.recv()           # waits for the prefill worker: its start-up and prefill are not the transfer

    def receive() -> None:
        dtype = getattr(torch, head["dtype"].removeprefix("torch."))
        n = 0
        for layer, (ks, vs) in zip(cache.layers, head["shapes"]):
            kb, vb = conn.recv_bytes(MAX_WIRE_BYTES), conn.recv_bytes(MAX_WIRE_BYTES)
            n += len(kb) + len(vb)
            k = torch.frombuffer(bytearray(kb), dtype=dtype).reshape(ks)
            v = torch.frombuffer(bytearray(vb), dtype=dtype).reshape(vs)
            layer.update(k, v)
        got.update(first=head["first"], n=n)

    seconds = time_runs(receive, 1, warmups=0).median
    tokens = [got["first"]]
    with torch.no_grad():
        for i in range(new_tokens - 1):
            tokens.append(int(m.logits([tokens[-1]], cache, n_prompt + i, keep=1)[-1].argmax()))
    out.send((tokens, got["n"], seconds))
    out.close()


def _check(prompt_ids: Sequence[int], new_tokens: int) -> None:
    check_int("New tokens", new_tokens, 1, 64)
    check_int("Prompt length", len(prompt_ids), 1, 4096)


def serve_disaggregated(model_name: str, prompt_ids: Sequence[int], new_tokens: int) -> Shipped:
    """Prefill in one process, decode in another, the cache sent between them (see the module notes)."""
    _check(prompt_ids, new_tokens)
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])           # read when the fork server starts (the first call)
    wire_a, wire_b = ctx.Pipe()
    res_a, res_b = ctx.Pipe(duplex=False)
    workers = [ctx.Process(target=prefill_worker, args=(model_name, list(prompt_ids), wire_a), daemon=True),
               ctx.Process(target=decode_worker, args=(model_name, len(prompt_ids), new_tokens, wire_b, res_b),
                           daemon=True)]
    try:
        for w in workers:
            w.start()
        waited = 0.0
        while not res_a.poll(0.5):
            waited += 0.5
            failed = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if failed:
                raise LimitError(f"A worker failed (exit code {failed[0]}).")
            if waited >= WORKER_TIMEOUT_S:
                raise LimitError(f"The workers did not finish within {WORKER_TIMEOUT_S:.0f} s.")
        tokens, n, seconds = res_a.recv()
        for w in workers:
            w.join(timeout=10)
        return Shipped(tuple(tokens), n, seconds)
    finally:
        for w in workers:
            if w.pid is None:
                continue                  # never started
            if w.is_alive():
                w.kill()
            w.join(timeout=5)
        for c in (wire_a, wire_b, res_a, res_b):
            c.close()


def ship_in_threads(model: Model, prompt_ids: Sequence[int], new_tokens: int) -> Shipped:
    """The two workers' bodies on ``model`` in two threads of this process, over a local socket
    (a duplex Pipe) as ``serve_disaggregated``'s processes: the decode worker's cache is only what
    the bytes rebuild. Each thread has its own cache; the decode worker waits for the header."""
    _check(prompt_ids, new_tokens)
    wire_a, wire_b = mp.Pipe()
    res_a, res_b = mp.Pipe(duplex=False)
    errors: list[BaseException] = []

    def run(target, *args) -> None:
        try:
            target(*args)
        except BaseException as e:        # noqa: BLE001 - re-raised in the caller's thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(prefill_worker, model, list(prompt_ids), wire_a), daemon=True),
               threading.Thread(target=run, args=(decode_worker, model, len(prompt_ids), new_tokens, wire_b, res_b),
                                daemon=True)]
    try:
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=WORKER_TIMEOUT_S)
        if errors:
            raise errors[0]
        tokens, n, seconds = res_a.recv()
        return Shipped(tuple(tokens), n, seconds)
    finally:
        for c in (wire_a, wire_b, res_a, res_b):
            c.close()
