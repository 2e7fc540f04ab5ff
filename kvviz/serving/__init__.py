"""Serving many requests from one paged KV cache (docs/design.md §5): continuous or static batching,
prefix caching, preemption and forks.

- ``workload``: requests, a seeded stream of them (the tiny GPT) or of chat requests (SmolLM2), each
  one's solo reference run;
- ``scheduler``: the ``Scheduler`` (admit, preempt, run a pass, record) and ``serve``;
- ``kv_manager``: the scheduler's one seam to the paged cache (kvviz.cache.paged on its block pool);
- ``records``: ``StepRecord`` (built in one place, ``StepRecord.of``), ``RequestResult``, ``ServeRun``;
- ``fork``: parallel sampling from one prompt with copy-on-write;
- ``sweeps``: the same stream over block sizes and under both policies;
- ``stall``: a long prompt among running decodes, with and without chunked prefill, measured;
- ``export``: a run as the CLI's JSON.
"""
from kvviz.serving.export import serve_run_dict
from kvviz.serving.fork import ForkRun, fork_run
from kvviz.serving.kv_manager import KVCacheManager, PromptBlocks
from kvviz.serving.records import BlockState, Memory, RequestResult, ServeRun, StepRecord
from kvviz.serving.scheduler import POLICIES, Scheduler, serve
from kvviz.serving.stall import StallRun, measure_stall, stall_stream
from kvviz.serving.sweeps import SizePoint, block_size_sweep, compare_policies
from kvviz.serving.workload import (
    CHAT_MESSAGES,
    Request,
    chat_stream,
    common_prefix,
    conversation_trace,
    request_stream,
    solo_run,
)

__all__ = ["CHAT_MESSAGES", "POLICIES", "BlockState", "ForkRun", "KVCacheManager", "Memory", "PromptBlocks",
           "Request", "RequestResult", "Scheduler", "ServeRun", "SizePoint", "StallRun", "StepRecord",
           "block_size_sweep", "chat_stream", "common_prefix", "conversation_trace", "compare_policies", "fork_run",
           "measure_stall", "request_stream", "serve", "serve_run_dict", "solo_run", "stall_stream"]
