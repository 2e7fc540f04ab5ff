"""Speculative decoding (docs/design.md §5): a draft model proposes γ tokens, the target verifies them
in one pass, both caches roll back (kvviz.speculative.decoding); prompt-lookup decoding, whose draft is
looked up in the text itself, on a transformers model (kvviz.speculative.prompt_lookup), and early
exit, whose draft is the target's own first layers (kvviz.speculative.early_exit), both verified by
kvviz.speculative.verify; a run as JSON (kvviz.speculative.export); the speed-up measured on this
machine (kvviz.speculative.measure). The expected speed-up's formulas are kvviz.cost.speculative."""
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
from kvviz.speculative.early_exit import check_early_exit, early_exit_generate, early_exit_round
from kvviz.speculative.export import prompt_lookup_dict, speculation_dict
from kvviz.speculative.measure import SpeedMeasurement, SpeedPoint, measure_speedup
from kvviz.speculative.prompt_lookup import (
                                        LookupMatch,
                                        LookupRound,
                                        PromptLookup,
                                        check_prompt_lookup,
                                        find_draft,
                                        prompt_lookup_generate,
                                        prompt_lookup_round,
)
from kvviz.speculative.verify import Verification, self_speculate, verify_draft

__all__ = ["CacheLengths", "CacheRowState", "check_early_exit", "check_prompt_lookup", "check_speculation",
           "early_exit_generate", "early_exit_round", "find_draft", "load_pair", "LookupMatch", "LookupRound",
           "measure_speedup", "prompt_lookup_dict", "prompt_lookup_generate", "prompt_lookup_round",
           "PromptLookup", "Proposal", "self_speculate", "Speculation", "speculation_dict",
           "speculative_generate", "speculative_round", "SpeculativeRound", "SpeedMeasurement", "SpeedPoint",
           "Verification", "verify_draft"]
