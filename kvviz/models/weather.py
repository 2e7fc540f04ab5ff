"""The "Today weather is so" model of docs/design.md §2: four hand-made attention heads.

Every token carries one scalar value (editable). All heads share the query Q = ones(d_k), d_k = 64;
each head's key row is +1 or -1 in every dimension, so a score is ±64/sqrt(64) = ±8 and softmax
turns "+1 keys" into (almost exactly) equal weights and "-1 keys" into (almost) nothing:

  head 1 "even positions"  key +1 where the 1-based position is even
  head 2 "last token"      key +1 where the position is the last one *when the key is computed*
  head 3 "first token"     key +1 at position 1
  head 4 "all tokens"      key +1 everywhere

The four head contexts (one number each) times W_vocab give the logits over nice / warm / delicious.

Head 2 is the point of the example: "the last position" is the last one of the pass that computes
the key. In the prefill that is the prompt's last position; in a cached decode it is the new token;
in a full recompute it is the last token of the whole prefix. So the key of the old last position
depends on whether a later token exists, and an append-only KV cache keeps a stale +1 for it.
``WeatherModel.repair`` is the lesson's manual fix (docs/design.md §2): it rewrites that stale key before the next pass.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch

from kvviz.cache import Cache
from kvviz.cost import WEATHER_CONFIG
from kvviz.limits import MAX_ABS_TOKEN_VALUE, LimitError, check_float
from kvviz.models.base import ModelLimits, PassRecord, causal_softmax, tokenize_by_vocab

D_K = 64
VOCAB = ["Today", "weather", "is", "so", "nice", "warm", "delicious"]
LOGIT_TOKENS = ["nice", "warm", "delicious"]
# docs/design.md §2 gives the first five. warm and delicious are ours: warm 8 (close to nice, a weather word),
# delicious 2 (a weak, off-topic word). They only matter once they are chosen or typed into a prompt.
DEFAULT_VALUES: dict[str, float] = {"Today": 10.0, "weather": 20.0, "is": 1.0, "so": 5.0,
                                    "nice": 7.0, "warm": 8.0, "delicious": 2.0}
SEED_PROMPT = ["Today", "weather", "is", "so"]
# [4 heads, 3 words]: row h says how strongly head h's context speaks for nice / warm / delicious
W_VOCAB = torch.tensor([[0.8, 0.6, 0.1],
                        [0.5, 0.4, 0.2],
                        [0.1, 0.2, 0.5],
                        [0.2, 0.3, 0.1]], dtype=torch.float64)


@dataclass(frozen=True)
class HeadRule:
    """One hand-made head: where its key is +1, and whether that depends on later tokens."""

    name: str
    selects: Callable[[int, int], bool]   # (1-based position, 1-based last position of the pass) -> +1?
    depends_on_future: bool               # True: a key may change once later tokens exist (not causal)

    def key_sign(self, position: int, last: int) -> float:
        return 1.0 if self.selects(position, last) else -1.0


HEADS: tuple[HeadRule, ...] = (
    HeadRule("even positions", lambda p, last: p % 2 == 0, False),
    HeadRule("last token", lambda p, last: p == last, True),
    HeadRule("first token", lambda p, last: p == 1, False),
    HeadRule("all tokens", lambda p, last: True, False),
)


def check_values(values: Mapping[str, object] | Iterable[tuple[str, object]] | None) -> dict[str, float]:
    """The full value table: defaults overridden by ``values``; raises LimitError on a bad entry."""
    given = dict(values or {})
    unknown = [tok for tok in given if tok not in VOCAB]
    if unknown:
        raise LimitError(f"No token {unknown[0]!r} in the vocabulary ({' '.join(VOCAB)}).")
    out = dict(DEFAULT_VALUES)
    for tok, val in given.items():
        out[tok] = check_float(f"The value of {tok!r}", val, -MAX_ABS_TOKEN_VALUE, MAX_ABS_TOKEN_VALUE)
    return out


def values_to_text(values: Mapping[str, float]) -> str:
    """The entries that differ from the defaults (docs/design.md §2), as ``so:4,nice:9`` (empty when none do)."""
    return ",".join(f"{tok}:{values[tok]:g}" for tok in VOCAB if values[tok] != DEFAULT_VALUES[tok])


def values_from_text(text: str) -> dict[str, float]:
    """Inverse of values_to_text (a page address carries it); raises LimitError on anything else."""
    pairs = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        tok, sep, val = item.partition(":")
        if not sep:
            raise LimitError(f"Expected token:value, got {item[:40]!r}.")
        pairs[tok.strip()] = val.strip()
    return check_values(pairs)


class WeatherModel:
    name = "weather"
    vocab = VOCAB
    logit_tokens = LOGIT_TOKENS
    n_layers = 1
    n_heads = len(HEADS)
    output_labels = [f"head {i + 1} ({h.name})" for i, h in enumerate(HEADS)]
    limits = ModelLimits()
    cost_config = WEATHER_CONFIG

    def __init__(self, values: Mapping[str, object] | Iterable[tuple[str, object]] | None = None) -> None:
        self.values = check_values(values)
        self._value_of = torch.tensor([self.values[tok] for tok in VOCAB], dtype=torch.float64)  # [V]

    def tokenize(self, text: str) -> list[str]:
        """Words matched to the vocabulary ignoring case ("today" → "Today"); unknown words raise
        UnknownTokenError."""
        return tokenize_by_vocab(text, self.vocab, self.limits.max_prompt_chars)

    def key_signs(self, start_pos: int, n: int) -> torch.Tensor:
        """[H, N] key signs of positions start_pos..start_pos+n-1 for a pass whose last position is theirs."""
        last = start_pos + n                      # 1-based position of the last token this pass sees
        return torch.tensor([[rule.key_sign(p + 1, last) for p in range(start_pos, start_pos + n)]
                             for rule in HEADS], dtype=torch.float64)

    def forward(self, token_ids: Sequence[int], cache: Cache | None, start_pos: int) -> PassRecord:
        n, h = len(token_ids), self.n_heads
        q = torch.ones(1, h, n, D_K, dtype=torch.float64)                      # [L=1, H, N, d_k]
        k = self.key_signs(start_pos, n)[None, :, :, None].expand(1, h, n, D_K).contiguous()  # [1, H, N, d_k]
        # one scalar value per token, shared by every head (as multi-query attention shares V)
        v = self._value_of[list(token_ids)].view(1, 1, n, 1)                   # [1, 1, N, 1]
        if cache is not None:
            k_all, v_all = cache.update(k, v, 0)                              # [1, H, T, d_k], [1, 1, T, 1]
        else:
            k_all, v_all = k, v
        scores = q @ k_all.transpose(-2, -1) / math.sqrt(D_K)                 # [1, H, N, T], entries ±8
        att = causal_softmax(scores, start_pos)                               # [1, H, N, T]
        contexts = (att @ v_all)[0, :, :, 0].T                                # [N, H]
        return PassRecord(
            positions=list(range(start_pos, start_pos + n)),
            q=q, k=k, v=v, attention=att,
            output=contexts,                                                  # [N, H] one context per head
            logits=contexts @ W_VOCAB,                                        # [N, 3]
        )

    def repair(self, cache: Cache, start_pos: int) -> list[int]:
        """The lesson's manual fix (docs/design.md §2), as a ``run_generation(repair=...)`` hook.

        Before the decode pass of position ``start_pos`` (0-based), rewrite every cached key that
        a recompute would now compute differently (head 2: the old last position is no longer last).
        Returns the positions it rewrote. A real cached model never does this: it never revisits
        old rows, which is exactly why its keys must not depend on later tokens.
        """
        layer = cache.layers[0]
        if layer.keys is None:
            return []
        keys = layer.keys.clone()                                             # [1, H, T, d_k]
        rewrote: list[int] = []
        for head, rule in enumerate(HEADS):
            if not rule.depends_on_future:
                continue
            for pos in range(cache.get_seq_length()):
                want = rule.key_sign(pos + 1, start_pos + 1)                   # the new token will be last
                if float(keys[0, head, pos, 0]) != want:
                    keys[0, head, pos] = want
                    rewrote.append(pos)
        if rewrote:
            layer.keys = keys        # a new tensor: snapshots taken before keep the stale key
        return sorted(set(rewrote))
