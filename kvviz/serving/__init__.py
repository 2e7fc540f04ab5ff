"""Serving many requests from one paged KV cache (continuous or static batching, prefix caching,
preemption, forks): ``serve`` and its records (kvviz.serving.scheduler), the block-size sweep and
the policy comparison, and the run as JSON (kvviz.serving.export)."""
from kvviz.serving.export import serve_run_dict
from kvviz.serving.scheduler import (POLICIES, ForkRun, Memory, Request, RequestResult, ServeRun, SizePoint,
                                     StepRecord, block_size_sweep, compare_policies, fork_run, request_stream, serve)

__all__ = ["POLICIES", "ForkRun", "Memory", "Request", "RequestResult", "ServeRun", "SizePoint", "StepRecord",
           "block_size_sweep", "compare_policies", "fork_run", "request_stream", "serve", "serve_run_dict"]
