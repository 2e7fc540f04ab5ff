"""Early-exit self-speculation (LayerSkip, Elhoushi et al. 2024): the draft is the target itself cut
after its first k layers — those layers, then the final norm and the vocabulary projection
(``lm_head``) — so no second model is needed; the verification is prompt lookup's
(kvviz.speculative.verify.verify_draft).

The cache: the draft **shares the target's cache for its k layers**. It reads the rows the target's
passes wrote for the accepted text (no second cache, no second prefill), appends its own rows for the
tokens it drafts, and those rows are cropped away before the verification pass, which computes
those positions again in all the layers. LayerSkip also reuses the draft's rows of the first k
layers in the verification (only the remaining layers run there); we do not, so that the target's
pass is the same one prompt lookup makes.

The first round is the prefill (the draft has no cache rows to read yet): a plain step. SmolLM2 was
not trained for early exit (LayerSkip trains with layer dropout and an early-exit loss), so its
first layers' guesses agree with the whole network less often, and a draft pass of k of 30 layers
costs k/30 of a target pass: measured on this machine, it is slower than plain decoding
(docs/measured-smollm2.md).
"""
from __future__ import annotations

import time
from collections.abc import Collection, Sequence

import torch
from transformers.masking_utils import create_causal_mask

from kvviz.cache import Cache
from kvviz.decoding.sampling import SelectionRule
from kvviz.limits import EARLY_EXIT_MAX_TOKENS, LimitError, check_int
from kvviz.models.hf import HFCausalLM
from kvviz.speculative.prompt_lookup import LookupRound, PromptLookup, check_prompt_lookup
from kvviz.speculative.verify import check_prompt_ids, self_speculate, verify_draft

DEFAULT_EXIT_LAYER = 24          # of SmolLM2's 30: fewer layers draft faster but are accepted less
DEFAULT_DRAFT_TOKENS = 4         # draft tokens per round (γ)


def check_early_exit(model: HFCausalLM | None, exit_layer: object, draft_tokens: object,
                     n_layers: int | None = None) -> tuple[int, int]:
    """k within 1..layers − 1 (all layers would be the target itself) and the draft tokens per round
    within kvviz.limits. Returns (k, draft tokens)."""
    layers = n_layers if model is None else model.n_layers
    if layers is None or layers < 2:
        raise LimitError("Early exit needs a model with at least two layers.")
    k = check_int("Exit layer", exit_layer, 1, layers - 1)
    d = check_int("Draft tokens per round", draft_tokens, 1, EARLY_EXIT_MAX_TOKENS)
    return k, d


@torch.inference_mode()
def early_exit_logits(model: HFCausalLM, ids: Sequence[int], cache: Cache, exit_layer: int) -> torch.Tensor:
    """The draft's pass: ``ids`` at the positions after the cache's, through the first ``exit_layer``
    decoder layers (appending their rows to those layers of ``cache``), the final norm and lm_head;
    the logits of the last position [V] in float32. The same calls as transformers' LlamaModel.forward,
    stopped early."""
    net = model.model.model                                  # the decoder stack (LlamaModel)
    start = cache.get_seq_length()
    x = net.embed_tokens(torch.tensor([list(ids)]))                                    # [1, N, C]
    positions = torch.arange(start, start + len(ids)).unsqueeze(0)
    mask = create_causal_mask(config=net.config, inputs_embeds=x, attention_mask=None, past_key_values=cache,
                              position_ids=positions)
    rope = net.rotary_emb(x, position_ids=positions)
    for layer in net.layers[:exit_layer]:
        x = layer(x, attention_mask=mask, position_embeddings=rope, position_ids=positions, past_key_values=cache,
                  use_cache=True)
    return model.model.lm_head(net.norm(x[:, -1:]))[0, -1].float()


@torch.inference_mode()
def early_exit_round(model: HFCausalLM, cache: Cache, sequence: Sequence[int], exit_layer: int, draft_tokens: int,
                     max_draft: int, end_ids: Collection[int] = (), index: int = 0) -> LookupRound:
    """One round on a cache holding a prefix of ``sequence``: the first ``exit_layer`` layers draft
    at most min(``draft_tokens``, ``max_draft``) tokens greedily (cut before an end token), their rows
    are cropped, the whole model verifies them in one pass (``verify_draft``). Round 0 (an empty cache)
    is the prefill, a plain step. ``sequence`` is not changed: append ``round.emitted``."""
    start = cache.get_seq_length()
    if not 0 <= start < len(sequence):
        raise ValueError(f"the cache must hold a proper prefix of the text: {start} positions for "
                         f"{len(sequence)} tokens")
    draft: list[int] = []
    grown = start
    t0 = time.perf_counter()
    if start > 0:
        fed = list(sequence[start:])
        for _ in range(min(draft_tokens, max_draft)):
            tok = int(early_exit_logits(model, fed, cache, exit_layer).argmax())
            if tok in end_ids:                   # the target's own token says whether the text ends here
                break
            draft.append(tok)
            fed = [tok]
        grown = cache.get_seq_length()
        cache.crop(start)                        # the draft's rows go: the verification writes them in every layer
    draft_s = time.perf_counter() - t0
    v = verify_draft(model, cache, sequence, draft)
    return LookupRound(index=index, start=start, fed=v.fed, match=None, draft=tuple(draft), argmax=v.argmax,
                       n_accepted=v.n_accepted, cache=v.cache, seconds=v.seconds, draft_seconds=draft_s,
                       draft_grown=grown)


@torch.inference_mode()
def early_exit_generate(model: HFCausalLM, ids: Sequence[int], max_new_tokens: int,
                        exit_layer: int = DEFAULT_EXIT_LAYER, draft_tokens: int = DEFAULT_DRAFT_TOKENS,
                        rule: SelectionRule | None = None, stop: bool = True,
                        cache: Cache | None = None) -> PromptLookup:
    """Early-exit self-speculation of ``model`` (greedy): rounds of ``early_exit_round`` until
    ``max_new_tokens`` tokens are out or an end token is chosen. The tokens equal plain cached greedy
    decoding's (tests/test_early_exit.py). The record is a PromptLookup with ``method="early-exit"``,
    ``exit_layer`` k, ``lookup_tokens`` the draft tokens per round and ``max_ngram`` 0."""
    prompt = check_prompt_ids(model, ids)
    k, d = check_early_exit(model, exit_layer, draft_tokens)
    n_new, _, _ = check_prompt_lookup(max_new_tokens, 1, 1, rule, model.limits.max_new_tokens)

    def one(m: HFCausalLM, c: Cache, seq: list[int], max_draft: int, end_ids: frozenset[int], i: int) -> LookupRound:
        return early_exit_round(m, c, seq, k, d, max_draft, end_ids, i)
    tokens, rounds, seconds = self_speculate(model, prompt, n_new, one, stop, cache)
    return PromptLookup(prompt, tokens, tuple(rounds), d, 0, n_new, seconds, method="early-exit", exit_layer=k)
