"""Frames of the Paged cache page's prefix-caching view: one frame per request of a chat trace
(``kvviz.cache.radix.PrefixTrace``), as the stream arrives. Each frame: what to notice, both caches'
hits for this request (block hashing: full blocks only; the radix tree: to the token), what each
holds and evicted, the tree drawn after this request (what it reused marked), the hits so far, and
the tree's nodes as the table (CSV). Pure: records and ``tr`` in, dicts out."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from kvviz.cache.radix import PrefixTrace
from kvviz.ui.frames import Payload, Tr, md, metrics, moments, note_block, notice_block
from kvviz.viz.paged_serving import WORDS, hits_spec, tree_spec

CSV_COLS = ["node", "parent", "depth", "tokens", "edge", "reused"]
LABEL_TOKENS = 4            # tokens of an edge written beside its node (all of them on hover and in the table)


def words(tr: Tr) -> dict[str, str]:
    return {k: tr(f"serving.fw_{k}") for k in WORDS}


def _label(text: Callable[[Sequence[int]], str], tokens: Sequence[int]) -> str:
    shown = text(tokens[:LABEL_TOKENS]).replace("\n", "↵")
    return shown + (" …" if len(tokens) > LABEL_TOKENS else "")


def notice(trace: PrefixTrace, i: int, tr: Tr) -> dict:
    """What to notice for request ``i``: the tree's new branch, or both designs' hits and why they differ."""
    s = trace.steps[i]
    if s.radix_hit == 0:
        return notice_block(tr("notice_pages.px_cold", r=i))
    if s.radix_hit > s.hash_hit:
        return notice_block(tr("notice_pages.px_more", r=i, radix=s.radix_hit, hashed=s.hash_hit, bs=trace.block_size))
    return notice_block(tr("notice_pages.px_same", r=i, n=s.radix_hit))


def build(trace: PrefixTrace, text: Callable[[Sequence[int]], str], tr: Tr) -> Payload:
    """One frame per request of ``trace``; ``text(ids)`` writes token ids as the model's text."""
    pl = Payload(tr, ratio=(3, 2), csv="prefix_tree")
    w = words(tr)
    headers = [tr(f"serving.px_col_{c}") for c in CSV_COLS]
    n = len(trace.prompts)
    for i, s in enumerate(trace.steps):
        prompt = trace.prompts[i]
        lines = [tr("serving.px_did_hash", hit=s.hash_hit, n=len(prompt), bs=trace.block_size,
                    blocks=s.hash_hit // trace.block_size),
                 tr("serving.px_did_radix", hit=s.radix_hit, n=len(prompt), nodes=len(s.tree))]
        before = trace.steps[i - 1] if i else None
        gone = (s.hash_evicted - before.hash_evicted, s.radix_evicted - before.radix_evicted) if before else (0, 0)
        if any(gone):
            lines.append(tr("serving.px_did_evicted", blocks=gone[0], leaves=gone[1]))
        top = [{"lines": [["did", md(x)] for x in lines]},
               note_block(tr("serving.px_prompt", r=i, text=text(prompt).replace("\n", "↵")), explain=True)]
        nodes = [(x.uid, x.parent, x.depth, _label(text, x.tokens), len(x.tokens), x.reused) for x in s.tree]
        tree = tree_spec(nodes, words=w, title=tr("serving.px_tree_title", r=i, nodes=len(s.tree),
                                                      tokens=s.radix_tokens))
        hits = hits_spec(trace, upto=i, words=w, title=tr("serving.px_hits_title"))
        rows = [[x.uid, x.parent if x.parent >= 0 else "—", x.depth, len(x.tokens),
                 text(x.tokens).replace("\n", "↵"), tr("serving.px_yes") if x.reused else ""] for x in s.tree]
        reused = [j for j, x in enumerate(s.tree) if x.reused]
        m = metrics([
            (tr("serving.px_m_hash"), s.hash_hit, tr("serving.px_m_hash_help"), None),
            (tr("serving.px_m_radix"), s.radix_hit, tr("serving.px_m_radix_help"), None),
            (tr("serving.px_m_blocks"), s.hash_blocks, tr("serving.px_m_blocks_help"), None),
            (tr("serving.px_m_tokens"), f"{s.radix_tokens} / {trace.capacity_tokens}", tr("serving.px_m_tokens_help"),
             None),
        ])
        pl.add(tr("serving.px_heading", i=i, last=n - 1, hit=s.radix_hit, n=len(prompt)), top=top,
               main=[pl.fig(tree, tr("serving.px_tree_alt")), note_block(tr("serving.px_tree_note"), explain=True)],
               side=[pl.fig(hits, tr("serving.px_hits_alt"))], metrics=m,
               table=pl.cache_table(CSV_COLS, headers, rows, tr("serving.px_rows_title", n=len(rows)), new=reused),
               notice=notice(trace, i, tr))
    moments.prefix(pl, trace, tr)
    return pl
