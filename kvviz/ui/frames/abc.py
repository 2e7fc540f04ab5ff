"""Frames of the A/B/C miniature page (docs/design.md §1): one per event of a ``Run``."""
from __future__ import annotations

from kvviz.decoding.stepper import Event, Run
from kvviz.ui.app import fmt
from kvviz.ui.frames import Payload, Tr, counters, html_block, lang_of, lines_block, moments, strip_block
from kvviz.ui.frames.steps import (
    attention_blocks,
    cache_frame_table,
    choice_sentence,
    logits_blocks,
    next_choice,
    run_notice,
    source,
)

LOGIT_TOKENS = ["A", "B", "C"]      # kvviz.models.abc.ABCModel.logit_tokens


def sentences(ev: Event, run: Run, tr: Tr, logit_tokens=LOGIT_TOKENS) -> tuple[str, str]:
    """What just happened, and what has not happened yet, in plain words."""
    seq = " ".join(ev.sequence)
    if ev.phase == "prefill":
        h = ev.record.output[-1].tolist()
        return (tr("abc.did_prefill", prompt=" ".join(run.prompt), n=len(run.prompt), last=len(run.prompt) - 1,
                   h0=fmt.fixed(h[0], 3, lang=lang_of(tr)), h1=fmt.fixed(h[1], 3, lang=lang_of(tr))),
                tr("abc.not_yet_prefill"))
    if ev.phase == "choose":
        logit = fmt.fixed(ev.logits[ev.choice.index], 3, lang=lang_of(tr))
        did = choice_sentence(ev, logit_tokens, tr("abc.did_choose", tok=ev.chosen, logit=logit, seq=seq), tr)
        return did, tr("abc.not_yet_choose", tok=ev.chosen, n=ev.cache_len, pos=ev.positions[0])
    return (tr("abc.did_decode", tok=ev.tokens[0], pos=ev.positions[0], n=ev.cache_len),
            tr("abc.not_yet_decode"))


def build(run: Run, tr: Tr, logit_tokens=LOGIT_TOKENS) -> Payload:
    pl = Payload(tr, ratio=(1, 1), csv="abc")
    last = len(run.events) - 1
    for ev in run.events:
        src = source(run, ev)
        did, todo = sentences(ev, run, tr, logit_tokens)
        h = src.record.output[-1].tolist()
        pl.add(tr("abc.event_heading", i=ev.index, last=last, phase=tr("abc.phase_" + ev.phase)),
               top=[strip_block(ev.sequence, len(run.prompt), ev.cache_len), lines_block(did, todo)],
               main=attention_blocks(pl, ev, src, tr),
               side=logits_blocks(pl, ev, logit_tokens, next_choice(run, ev), tr)
               + [html_block(tr("abc.h_line", h0=fmt.fixed(h[0], 3, lang=pl.lang), h1=fmt.fixed(h[1], 3, lang=pl.lang),
                                pos=src.positions[-1]), explain=True)],
               metrics=counters(ev, tr),
               table=cache_frame_table(pl, ev, tr), notice=run_notice(run, ev, tr))
    moments.run(pl, run, tr)
    return pl
