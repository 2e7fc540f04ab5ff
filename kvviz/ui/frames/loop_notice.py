"""What to notice on the loop views without a stepper: the Real LLM page's three at its foot
(kvviz/ui/pages/llm_loop.py: one word changed, greedy's loop, the whole run) and the Tiny GPT page's
whole run (kvviz/ui/pages/gpt_whole_run.py, which shares the whole-run view). One line each, from the
engine's records (kvviz.decoding.one_word, kvviz.decoding.long_runs.loop_pair, kvviz.decoding.whole_run),
saying what to look at and why it matters. Pure: records and ``tr`` in, text out (the page shows it
with ``step_view.notice``)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from kvviz.decoding.long_runs import LoopPair, Repeat
from kvviz.decoding.one_word import OneWord
from kvviz.decoding.whole_run import WholeRun
from kvviz.ui.app import fmt
from kvviz.ui.frames import Tr, lang_of


def one_word_notice(got: OneWord, shown: int, token: Callable[[int], str], tr: Tr) -> str:
    """The two bar charts (the ``shown`` most likely next tokens after each prompt): how much of the
    probability the changed word moved (total variation), how many tokens both lists share and each
    list's first; then the new token where the two greedy texts part (``token``: an id as the page
    writes it), or that they never do."""
    lang = lang_of(tr)
    (a_top, a_p), (b_top, b_p) = got.a.top(1)[0], got.b.top(1)[0]
    bars = tr("loop_notice.bars", tv=fmt.percent(got.total_variation(), 1, lang=lang),
              shared=len(got.shared_top(shown)), a_top=token(a_top), a_p=fmt.percent(a_p, 1, lang=lang),
              b_top=token(b_top), b_p=fmt.percent(b_p, 1, lang=lang))
    split = got.first_differing_token
    if split is None:
        return bars + " " + tr("loop_notice.same", n=min(len(got.a.generation.tokens), len(got.b.generation.tokens)))
    return bars + " " + tr("loop_notice.split", step=split + 1, before=split,
                           a=token(got.a.generation.tokens[split]), b=token(got.b.generation.tokens[split]))


def _sampled(pair: LoopPair, text: Callable[[Sequence[int]], str], tr: Tr) -> str:
    """What the sampled text does: no span comes back, or which one and how much of the text it fills."""
    lang = lang_of(tr)
    rep, n = pair.sampled_repeat, len(pair.sampled.tokens)
    common = dict(tau=fmt.sig(pair.tau, lang=lang), seed=pair.seed)
    if rep is None:
        return tr("loop_notice.sampled_none", **common)
    return tr("loop_notice.sampled_found", span=_span(rep, text), count=rep.count,
              share=fmt.percent(rep.covered / n, lang=lang), **common)


def _span(rep: Repeat, text: Callable[[Sequence[int]], str]) -> str:
    return text(list(rep.span)).strip()


def loop_notice(pair: LoopPair, text: Callable[[Sequence[int]], str], tr: Tr, try_prompt: str | None = None) -> str:
    """The bold span of the greedy text: what it repeats, how often and how much of the text it fills,
    against the sampled text; why greedy cannot leave a loop. When greedy repeats nothing, that, and
    ``try_prompt`` (a prompt on which it does) when given. ``text``: token ids as the page writes them."""
    lang = lang_of(tr)
    rep, n = pair.greedy_repeat, len(pair.greedy.tokens)
    sampled = _sampled(pair, text, tr)
    if rep is None:
        tail = " " + tr("loop_notice.greedy_try", prompt=try_prompt) if try_prompt else ""
        return tr("loop_notice.greedy_none", n=n, sampled=sampled) + tail
    return tr("loop_notice.greedy_found", span=_span(rep, text), count=rep.count, covered=rep.covered, n=n,
              share=fmt.percent(rep.covered / n, lang=lang), sampled=sampled)


def whole_notice(w: WholeRun, tr: Tr) -> str:
    """The whole-run matrix: the prefill's rows at once, then one row per decode pass, and only the lower
    triangle filled (the Tiny GPT page's and the Real LLM page's, the same words)."""
    return tr("notice.gpt_whole", prompt=w.prompt_len, decodes=w.passes - 1)
