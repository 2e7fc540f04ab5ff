"""What this machine measures: wall times of kvviz's own loops and passes, above kvviz.decoding and
kvviz.models (kvviz.cost holds the formulas only: no torch, no model).

- ``clock``: the one timing helper (``interleaved``: warm-ups, then repeated runs taking turns,
  every sample kept in a ``Timing``; the number a page shows is the **median** of the runs, their
  range says how much to trust it) and the lock every measurement shares (``run_locked``);
- ``timing``: the tiny GPT's two generation loops against each other (``time_loops``,
  ``measure_sweep``) and a transformers model in two dtypes (``measure_dtypes``);
- ``scaling``: decode step time against batch, context and prompt length on a GPT built in a
  kvviz.cost shape (``MeasuredGPT``, ``measure_all``).

Speculative decoding's speed-up is measured by kvviz.speculative.measure with the same helper and
lock. Nothing here is re-exported: importing a module of this package imports torch.
"""
