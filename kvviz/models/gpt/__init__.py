"""The tiny GPT's whole story in one package: its shape (config), the network (model), its
weights and checkpoint (weights), tokenizer, training corpus, training script (train), the adapter
that puts it behind kvviz's Model protocol (adapter) and its conversion to grouped K/V heads
(grouped)."""
from kvviz.models.gpt.adapter import GPTModel
from kvviz.models.gpt.config import GPTConfig, check_positions, cost_config, draft_config, gpt_config
from kvviz.models.gpt.grouped import to_grouped
from kvviz.models.gpt.model import GPT, LayerTrace, random_gpt
from kvviz.models.gpt.tokenizer import UnknownWordsError, WordTokenizer
from kvviz.models.gpt.weights import (
                                      CHECKPOINT,
                                      CHECKPOINT_META,
                                      DRAFT_CHECKPOINT,
                                      TinyGPT,
                                      from_hf_state_dict,
                                      hf_state_dict,
                                      load_draft_gpt,
                                      load_gpt,
                                      load_tiny_gpt,
                                      plain_state_dict,
                                      to_transformers,
                                      weights_sha256,
)

__all__ = ["CHECKPOINT", "CHECKPOINT_META", "DRAFT_CHECKPOINT", "GPT", "GPTConfig", "GPTModel", "LayerTrace",
           "TinyGPT", "UnknownWordsError", "WordTokenizer", "check_positions", "cost_config", "draft_config",
           "from_hf_state_dict", "gpt_config", "hf_state_dict", "load_draft_gpt", "load_gpt", "load_tiny_gpt",
           "plain_state_dict", "random_gpt", "to_grouped", "to_transformers", "weights_sha256"]
