"""The Smaller caches page's trade-off display, for every model and every measurement: the figure
(both panels), the caption, the table in the page's language and the CSV with the engine's names
(kvviz.ui.pages.compress and compress_evict call ``show`` with an ``Evaluation``)."""
from __future__ import annotations

import io

import pandas as pd
import streamlit as st

from kvviz.compress import DEFAULT_PREFILL, Evaluation
from kvviz.ui.app import fmt
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import compress as frames_compress
from kvviz.ui.frames import measure_notice, translator
from kvviz.viz.compress import tradeoff_figure


def tradeoff_table(ev: Evaluation) -> pd.DataFrame:
    """One row per variant, numbers as numbers (sortable), shown in the page's language."""
    tr = translator(current_lang())
    kinds = frames_compress.figure_labels(tr)["kinds"]      # every kind's name, the eviction policies' too
    return pd.DataFrame([{
        t("compress.col_variant"): frames_compress.variant_name(r.variant, tr),
        t("compress.col_kind"): kinds[r.variant.kind],
        t("compress.col_bytes"): r.bytes_per_token,
        t("compress.col_kl"): r.kl_mean,
        t("compress.col_top1"): r.top1_agreement,
    } for r in ev.results])


NEW_KINDS = ("h2o", "snapkv", "pyramid", "fp8", "latent")
NEW_SETTINGS = ("budget", "recent", "obs_window", "kernel", "hold", "scale", "rank")


def tradeoff_csv(ev: Evaluation) -> bytes:
    """Machine-readable (dot decimals, engine names): the CLI's JSON fields, one row per variant."""
    rows = []
    new_kinds = any(r.variant.kind in NEW_KINDS for r in ev.results)   # older runs keep their columns
    for r in ev.results:
        d = r.as_dict()
        settings = r.variant.settings()
        rows.append({"variant": r.variant.label(), "kind": d["kind"], **{k: settings.get(k) for k in
                     ("window", "sinks")}, "key_positions": settings.get("positions"),   # own | cache
                     **{k: settings.get(k) for k in ("bits", "group_size", "key_axis", "residual", "kv_heads")},
                     "bytes_per_token": d["bytes_per_token"], "kl_mean": d["kl_mean"],
                     "top1_agreement": d["top1_agreement"], "prompts": d["prompts"], "positions": d["positions"],
                     "new_tokens": ev.new_tokens, "seed": ev.seed,
                     **({k: settings.get(k) for k in NEW_SETTINGS} if new_kinds else {}),
                     **({"answer_changed": d.get("answer_changed")} if r.answers else {})})
    buf = io.StringIO()
    pd.DataFrame(rows).to_csv(buf, index=False)
    return buf.getvalue().encode()


def text_caption(ev: Evaluation, title: str) -> str:
    """What a real model's trade-off measured: ``title`` on the held-out text's first tokens, the
    prefill, the positions scored per variant (its own trade-off and the policies at equal bytes)."""
    return t("compress.llm_caption", title=title, tokens=len(ev.prompts[0].ids), prefill=DEFAULT_PREFILL,
             positions=ev.results[0].positions)


def show(ev: Evaluation, chart_key: str, caption: str, file_name: str, download_key: str | None = None) -> None:
    """A trade-off of either model: what to notice in it, both panels, the caption, the table and its CSV."""
    tr = translator(current_lang())
    step_view.notice(measure_notice.tradeoff_notice(ev, tr))          # the points it names, in the chart below
    names = [frames_compress.variant_name(r.variant, tr) for r in ev.results]
    fig = tradeoff_figure(ev.results, labels=frames_compress.figure_labels(tr), names=names)
    cache_positions = any(r.variant.positions == "cache" for r in ev.results)
    for trace in fig.data:          # most variants agree 100 %: their names would pile up on the right
        if trace.xaxis == "x2":     # panel; the left one names every point, hovering names them here
            trace.mode = "markers"
        elif cache_positions and trace.legendgroup == "window":    # own and cache positions share bytes
            trace.textposition = ["top center" if i % 2 else "bottom center" for i in range(len(trace.x))]
    chart(fig, t("compress.tradeoff_alt"), key=chart_key)
    st.caption(caption)
    df = tradeoff_table(ev)
    digits = {t("compress.col_bytes"): lambda v: fmt.integer(round(v)),
              t("compress.col_kl"): lambda v: fmt.num(v, ".3g"),
              t("compress.col_top1"): lambda v: fmt.percent(v, 1)}
    st.dataframe(df.style.format(digits), hide_index=True, width="stretch")
    st.download_button(t("compress.csv"), tradeoff_csv(ev), file_name=file_name, mime="text/csv",
                       icon=":material/download:", on_click="ignore", key=download_key)
