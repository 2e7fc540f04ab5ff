"""A prompt typed for the tiny GPT, as its words: the one parser of the pages over that GPT (Tiny GPT,
Smaller caches, Speculative decoding), with the page's messages."""
from __future__ import annotations

from kvviz.limits import MAX_PROMPT_CHARS, LimitError
from kvviz.models.gpt import GPTModel
from kvviz.ui.app.i18n import t


def prompt_tokens(model: GPTModel, text: str | None) -> list[str]:
    """A typed prompt as the tiny GPT's words, or a LimitError / UnknownWordsError whose message the
    page shows: too long, empty, unknown words, too many words (every page over this GPT)."""
    if len(text or "") > MAX_PROMPT_CHARS:
        raise LimitError(t("gpt.too_long", cap=MAX_PROMPT_CHARS))
    tokens = model.tokenize(text or "")
    if not tokens:
        raise LimitError(t("gpt.empty"))
    if len(tokens) > model.limits.max_prompt_tokens:
        raise LimitError(t("gpt.too_many", n=len(tokens), cap=model.limits.max_prompt_tokens))
    return tokens
