"""Tables and marked texts of the tiny GPT's long runs (kvviz.decoding.long_runs): greedy's loop and the
uncached loop's crop. Pure functions of engine records; the words come in translated (``tr``)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from kvviz.decoding.long_runs import CropRun, Repeat

Tr = Callable[..., str]


def marked_text(tokens: Sequence[str], repeat: Repeat | None) -> str:
    """The tokens as Markdown, each occurrence of the repeated span in bold."""
    starts = set(repeat.starts) if repeat else set()
    out: list[str] = []
    i = 0
    while i < len(tokens):
        if i in starts:
            span = tokens[i:i + len(repeat.span)]                  # type: ignore[union-attr]
            out.append("**" + " ".join(_md(w) for w in span) + "**")
            i += len(span)
        else:
            out.append(_md(tokens[i]))
            i += 1
    return " ".join(out)


def _md(word: str) -> str:
    """A token safe inside Markdown (the tiny GPT's punctuation: ``!``, ``.``, ``,``)."""
    return "".join("\\" + c if c in "\\`*_[]<>#|~$" else c for c in word)


def loop_table(runs: dict[str, tuple[list[str], Repeat | None]], tr: Tr) -> pd.DataFrame:
    """One row per new token of each run: the rule, the step, the token, whether it is in the repeated span."""
    rows = []
    for rule, (tokens, repeat) in runs.items():
        inside = repeat.positions() if repeat else set()
        rows += [{tr("lesson.col_rule"): rule, tr("lesson.col_step"): i + 1, tr("lesson.col_token"): w,
                  tr("lesson.col_in_loop"): i in inside} for i, w in enumerate(tokens)]
    return pd.DataFrame(rows)


def crop_table(run: CropRun, words: Sequence[str], tr: Tr, last: int | None = None) -> pd.DataFrame:
    """The uncached loop's window at each step (1-based new tokens and positions): what it sees, what
    was cropped, what it chose. ``words``: prompt and new tokens as text. ``last``: only the last steps."""
    windows = run.windows if last is None else run.windows[-last:]
    rows = []
    for w in windows:
        rows.append({tr("lesson.col_new"): w.step + 1,
                     tr("lesson.col_sees"): f"{w.start + 1}–{w.end}",
                     tr("lesson.col_dropped"): _dropped(words, w.start),
                     tr("lesson.col_chosen"): words[len(run.prompt) + w.step]})
    return pd.DataFrame(rows)


def _dropped(words: Sequence[str], n: int) -> str:
    """The first ``n`` words, shortened in the middle when long ("Today the weather is … so wild")."""
    if n == 0:
        return "—"
    return " ".join(words[:n]) if n <= 8 else " ".join(words[:4]) + " … " + " ".join(words[n - 2:n])
