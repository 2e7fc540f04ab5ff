"""The tiny GPT's tokenizer: **word level**.

Words and the punctuation marks ``. , !`` are tokens; the vocabulary is the words the corpus can
produce (kvviz.models.gpt.corpus.vocabulary), in a fixed order. A word is matched exactly, else in
lower case, else capitalised ("THE" → "the", "today" → "Today"); anything else is refused with
an UnknownWordsError naming the unknown words.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from kvviz.models.base import UnknownTokenError

PUNCT = ".,!"


class UnknownWordsError(UnknownTokenError):
    """The prompt has words the vocabulary lacks (``tokens`` and the message name them)."""

    def __init__(self, words: Sequence[str], vocab_size: int) -> None:
        super().__init__(words, [])
        names = ", ".join(repr(u) for u in self.tokens)
        self.args = (f"Unknown word(s) {names}: the tiny GPT knows only the {vocab_size} words of its "
                     "weather corpus.",)


class WordTokenizer:
    """Word-level tokenizer over a fixed vocabulary; punctuation marks are tokens of their own."""

    def __init__(self, vocab: Sequence[str]) -> None:
        self.vocab = list(vocab)
        self.index = {w: i for i, w in enumerate(self.vocab)}

    def _match(self, word: str) -> str | None:
        for form in (word, word.lower(), word.capitalize()):
            if form in self.index:
                return form
        return None

    def split(self, text: str) -> list[str]:
        """Raw words: punctuation split off, whitespace dropped."""
        return re.findall(rf"[^\s{re.escape(PUNCT)}]+|[{re.escape(PUNCT)}]", text)

    def tokenize(self, text: str) -> list[str]:
        """Text to vocabulary tokens; raises UnknownWordsError naming every unknown word."""
        out, unknown = [], []
        for w in self.split(text):
            tok = self._match(w)
            if tok is None:
                unknown.append(w)
            else:
                out.append(tok)
        if unknown:
            raise UnknownWordsError(unknown, len(self.vocab))
        return out

    def encode(self, text: str) -> list[int]:
        return [self.index[t] for t in self.tokenize(text)]

    def decode(self, ids: Sequence[int]) -> str:
        """Ids to text, with no space before punctuation."""
        text = ""
        for i in ids:
            w = self.vocab[int(i)]
            text += w if (w in PUNCT or not text) else " " + w
        return text
