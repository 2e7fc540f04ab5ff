"""Speculative decoding (docs/design.md §5), written once for every model of the protocol
(kvviz.models.base.CausalLM) and every draft source: a draft model proposes γ tokens
(kvviz.speculative.decoding), or the text itself (prompt lookup, kvviz.speculative.prompt_lookup), or
the target's own first layers (early exit, kvviz.speculative.early_exit); the target verifies the
draft in one pass with the acceptance test min(1, p/q), greedy being one case of it, and the cache
rolls back (kvviz.speculative.verify); one round record and one run record for all
(kvviz.speculative.records); a run as JSON (kvviz.speculative.export); the speed-up measured on this
machine (kvviz.speculative.measure). The expected speed-up's formulas are kvviz.cost.speculative."""
from kvviz.speculative.decoding import check_speculation, load_pair, propose, speculative_generate, speculative_round
from kvviz.speculative.early_exit import check_early_exit, early_exit_generate, early_exit_round
from kvviz.speculative.export import prompt_lookup_dict, speculation_dict
from kvviz.speculative.measure import SpeedMeasurement, SpeedPoint, measure_speedup
from kvviz.speculative.prompt_lookup import check_prompt_lookup, find_draft, prompt_lookup_generate, prompt_lookup_round
from kvviz.speculative.records import (
                                       SOURCES,
                                       CacheLengths,
                                       CacheRowState,
                                       LookupMatch,
                                       Proposal,
                                       Speculation,
                                       SpeculativeRound,
)
from kvviz.speculative.verify import Drafted, Verification, check_prompt_ids, speculate, verify

__all__ = ["SOURCES", "CacheLengths", "CacheRowState", "check_early_exit", "check_prompt_ids", "check_prompt_lookup",
           "check_speculation", "Drafted", "early_exit_generate", "early_exit_round", "find_draft", "load_pair",
           "LookupMatch", "measure_speedup", "prompt_lookup_dict", "prompt_lookup_generate", "prompt_lookup_round",
           "Proposal", "propose", "speculate", "Speculation", "speculation_dict", "speculative_generate",
           "speculative_round", "SpeculativeRound", "SpeedMeasurement", "SpeedPoint", "Verification", "verify"]
