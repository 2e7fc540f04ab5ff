"""Measurements recorded in docs/measured.md that a page quotes beside its formulas, where timing the
run on every visit would take too long. tests/test_cost_flops.py checks each one against that file.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvviz.cost.flops import loop_flops
from kvviz.cost.shapes import TRAINED_TINY_GPT, ModelConfig


@dataclass(frozen=True)
class RecordedSpeedup:
    """Whole greedy generations at batch 1: the uncached loop's wall time ÷ the cached loop's (medians)."""

    config: ModelConfig
    prompt_len: int
    new_tokens: int
    speedup: float
    where: str              # the table in docs/measured.md that records it

    @property
    def flop_ratio(self) -> float:
        """The FLOPs of the same two loops (kvviz.decoding.loops), uncached ÷ cached."""
        return (loop_flops(self.config, self.prompt_len, self.new_tokens, cached=False).total
                / loop_flops(self.config, self.prompt_len, self.new_tokens, cached=True).total)

    @property
    def share(self) -> float:
        """The part of the FLOP ratio the time shows."""
        return self.speedup / self.flop_ratio


# bench/gpt_speed.py, its third comparison: the tiny GPT, an 8-token prompt, 248 new tokens
GPT_SPEEDUP = RecordedSpeedup(TRAINED_TINY_GPT, 8, 248, 4.9, "Tiny GPT speed")
