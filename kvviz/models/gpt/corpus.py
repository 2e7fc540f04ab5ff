"""A small templated English corpus about the weather, the tiny GPT's training text.

The corpus is generated (no download): sentences such as "Today the weather is so sunny ." or
"It is rainy in London , so we take an umbrella ." A city leans towards its own weather, and what
"we" do depends on the weather word earlier in the sentence, so a trained model has something to
attend to. Same seed ⇒ same text.

``vocabulary()`` is exactly the words and punctuation marks the corpus can produce, in a fixed
order; the word-level tokenizer over it is kvviz.models.gpt.tokenizer.
"""
from __future__ import annotations

import random

from kvviz.models.gpt.tokenizer import PUNCT

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
