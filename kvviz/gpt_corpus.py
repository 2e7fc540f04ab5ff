"""A small templated English corpus about the weather, and the word-level tokenizer of the tiny GPT.

The corpus is generated (no download): sentences such as "Today the weather is so sunny ." or
"It is rainy in London , so we take an umbrella ." A city leans towards its own weather, and what
"we" do depends on the weather word earlier in the sentence, so a trained model has something to
attend to. Same seed ⇒ same text.

Tokenizer: **word level**. Words and the punctuation marks ``. , !`` are tokens; the vocabulary is
exactly the words the corpus can produce, in a fixed order. A word is matched exactly, else in
lower case, else capitalised ("THE" → "the", "today" → "Today"); anything else is refused with a
message naming the unknown words.
"""
from __future__ import annotations

import random
import re
from typing import Sequence

# weather kind -> adjectives; a sentence never mixes two kinds
WEATHER = {
    "sun": ["sunny", "warm", "hot", "nice", "lovely", "bright"],
    "rain": ["rainy", "wet", "grey", "gloomy"],
    "cold": ["cold", "snowy", "freezing", "icy"],
    "wind": ["windy", "stormy", "wild"],
}
# what we do, by kind: a dependency across the sentence (each first word belongs to one kind)
ACTIONS = {
    "sun": ["go to the beach", "eat ice cream", "sit in the park"],
    "rain": ["take an umbrella", "read a book", "stay inside"],
    "cold": ["wear a warm coat", "drink hot tea", "light the fire"],
    "wind": ["fly a kite", "close the windows", "hold on to the hat"],
}
SKY = {"sun": "blue", "rain": "grey", "cold": "white", "wind": "dark"}
WIND = {"sun": "calm", "rain": "cool", "cold": "icy", "wind": "strong"}
# each city leans towards its own weather (weights over sun, rain, cold, wind)
CITIES = {
    "Madrid": (8, 1, 1, 1), "Rome": (7, 2, 1, 1), "London": (1, 8, 1, 2), "Paris": (3, 4, 1, 2),
    "Oslo": (1, 1, 8, 1), "Berlin": (2, 2, 4, 2), "Dublin": (1, 4, 1, 6),
}
DAYS = {"Today": ["is"], "Yesterday": ["was"], "Tomorrow": ["will", "be"]}
KINDS = list(WEATHER)
PUNCT = ".,!"


def _kind(rng: random.Random, city: str | None = None) -> str:
    """A kind of weather: uniform, or leaning towards the city's own when the sentence names one."""
    if city is None:
        return rng.choice(KINDS)
    return rng.choices(KINDS, weights=CITIES[city])[0]


def sentence(rng: random.Random) -> list[str]:
    """One templated sentence as a list of tokens (ends with '.' or '!')."""
    day = rng.choice(list(DAYS))
    verb = DAYS[day]
    city = rng.choice(list(CITIES))
    form = rng.randrange(7)
    kind = _kind(rng, city if form in (2, 3, 5, 6) else None)      # forms 2, 3, 5, 6 name the city
    adj, adj2 = rng.sample(WEATHER[kind], 2)
    if form == 0:
        words = [day, "the", "weather", *verb, "so", adj, rng.choice([".", "!"])]
    elif form == 1:
        words = [day, "the", "weather", *verb, adj, "and", adj2, "."]
    elif form == 2:
        words = [day, "the", "weather", "in", city, *verb, "so", adj, "."]
    elif form == 3:
        words = ["It", *verb, adj, "in", city, ",", "so", "we", *rng.choice(ACTIONS[kind]).split(), "."]
    elif form == 4:
        words = [day, "it", *verb, "so", adj, "that", "we", *rng.choice(ACTIONS[kind]).split(), "."]
    elif form == 5:
        words = ["In", city, "the", "sky", *verb, SKY[kind], "and", "the", "wind", *verb, WIND[kind], "."]
    else:
        words = ["The", "weather", "in", city, *verb, "so", adj, ",", "so", "we",
                 *rng.choice(ACTIONS[kind]).split(), "."]
    return words


def corpus_tokens(n_sentences: int, seed: int = 0) -> list[str]:
    """``n_sentences`` sentences as one stream of tokens (same seed ⇒ same stream)."""
    rng = random.Random(seed)
    out: list[str] = []
    for _ in range(n_sentences):
        out.extend(sentence(rng))
    return out


def vocabulary() -> list[str]:
    """Every token the corpus can produce, in a fixed order (punctuation first, then first use in a
    canonical enumeration), independent of the random seed."""
    words: list[str] = list(PUNCT)
    fixed = ["Today", "Yesterday", "Tomorrow", "It", "In", "The", "the", "weather", "is", "was", "will",
             "be", "so", "and", "in", "it", "that", "we", "sky", "wind"]
    pools = [fixed, [w for ws in WEATHER.values() for w in ws], list(CITIES), list(SKY.values()),
             list(WIND.values()), [w for acts in ACTIONS.values() for a in acts for w in a.split()]]
    for pool in pools:
        for w in pool:
            if w not in words:
                words.append(w)
    return words


class UnknownWordsError(ValueError):
    """The prompt has words the vocabulary lacks (the message names them)."""


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
            names = ", ".join(repr(u) for u in dict.fromkeys(unknown))
            raise UnknownWordsError(f"Unknown word(s) {names}: the tiny GPT knows only the "
                                    f"{len(self.vocab)} words of its weather corpus.")
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
