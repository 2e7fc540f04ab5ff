"""The held-out text the real model's smaller caches are measured on: a short English text written
for kvviz (no web page, no data set), so no training corpus saw it word for word. Fixed, so every
run, page and document measures the same positions; ``held_out_ids`` takes its first ``length``
tokens (capped: kvviz.limits.LLM_COMPRESS_MAX_TOKENS)."""
from __future__ import annotations

from typing import Any

from kvviz.limits import LLM_COMPRESS_MAX_TOKENS, LLM_COMPRESS_MIN_TOKENS, check_int

HELD_OUT_TEXT = (
    "The lighthouse keeper on the northern island kept a notebook for every storm. In the first week of "
    "March the wind turned east, and the boats stayed in the harbour for three days. On the fourth morning "
    "the sea was calm again, so the fishermen went out before sunrise and came back with more herring than "
    "the market could sell. The keeper wrote that the birds had known it a day earlier: they had left the "
    "cliffs on the evening of the third day and returned at noon. His daughter, who later became a teacher "
    "in the town, read the notebooks aloud to her pupils. She asked them to guess the weather of the next "
    "day from the notes alone, and to explain their guess in one sentence. Most children looked at the "
    "wind first, then at the clouds, and only a few remembered the birds. Years later one of those pupils "
    "built a small weather station on the same cliff. It measures the wind, the pressure and the "
    "temperature every ten minutes, and it sends the numbers to the school, where the children still "
    "try to guess tomorrow before the forecast does."
)


def held_out_ids(tokenizer: Any, length: int) -> list[int]:
    """The first ``length`` token ids of ``HELD_OUT_TEXT`` (plain text, no chat template)."""
    ids = tokenizer.encode(HELD_OUT_TEXT, add_special_tokens=False)
    length = check_int("Text tokens", length, LLM_COMPRESS_MIN_TOKENS, min(LLM_COMPRESS_MAX_TOKENS, len(ids)))
    return ids[:length]
