"""Speculative decoding (docs/design.md §5): a draft model proposes γ tokens, the target verifies them
in one pass, both caches roll back (kvviz.speculative.decoding); a run as JSON
(kvviz.speculative.export); the speed-up measured on this machine (kvviz.speculative.measure). The
expected speed-up's formulas are kvviz.cost.speculative."""
from kvviz.speculative.decoding import (
                                        CacheLengths,
                                        CacheRowState,
                                        Proposal,
                                        Speculation,
                                        SpeculativeRound,
                                        check_speculation,
                                        load_pair,
                                        speculative_generate,
                                        speculative_round,
)
from kvviz.speculative.export import speculation_dict
from kvviz.speculative.measure import SpeedMeasurement, SpeedPoint, measure_speedup

__all__ = ["CacheLengths", "CacheRowState", "check_speculation", "load_pair", "measure_speedup", "Proposal",
           "Speculation", "speculation_dict", "speculative_generate", "speculative_round", "SpeculativeRound",
           "SpeedMeasurement", "SpeedPoint"]
