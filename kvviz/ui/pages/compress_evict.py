"""The Smaller caches page's sections on eviction by attention score (H2O, SnapKV, PyramidKV), the
latent cache (MLA-style) and, on a real model, every policy at equal bytes (kvviz.compress.trace,
kvviz.compress.latent, kvviz.compress.budget), for either model; ``render`` is called by the page
body (kvviz.ui.pages.compress) after its trade-off, whose display (compress_tradeoff) the equal-bytes
comparison shares. Runs wait for a press; the settings are in the address (``sc_policy``,
``sc_budget``, ``sc_elayer``, ``sc_estep``). Strings in the ``evict`` locale files.

In presenter mode an address that names the eviction view (``sc_policy``, ``sc_budget``, ``sc_elayer``,
``sc_estep``: the lecture's screen) or the latent cache (``sc_rank``) shows that view alone, on one
1280×720 screen (``presenter_view``, ``render_view``); on the tiny GPT without a press (a run takes
well under a second there)."""
from __future__ import annotations

import io
from collections.abc import Sequence

import pandas as pd
import streamlit as st
import torch

from kvviz.compress import DEFAULT_PREFILL, DEFAULT_TOKENS, Variant, variant_cache
from kvviz.compress.budget import ANSWER_TOKENS, BudgetComparison, compare_at_budgets, verdict
from kvviz.compress.evaluation import held_out_stream, held_out_text, kl_divergence, run_cache
from kvviz.compress.latent import full_rank
from kvviz.compress.trace import TraceStep, trace_variant
from kvviz.limits import LimitError
from kvviz.ui.app import fmt, nav, presenter, urlstate
from kvviz.ui.app.i18n import current_lang, t
from kvviz.ui.app.turns import RunStore, my_turn
from kvviz.ui.components import step_view
from kvviz.ui.components.charts import chart
from kvviz.ui.frames import compress as frames_compress
from kvviz.ui.frames import translator
from kvviz.ui.pages import compress_tradeoff as tradeoff
from kvviz.viz.compress import drift_figure, eviction_figure, latent_figure, remaining_attention_figure

POLICIES = ("h2o", "snapkv", "pyramid")   # ?sc_policy=
BUDGET_RANGE = (2, 128)                   # ?sc_budget=
GPT_TEXT_TOKENS = 48                      # the tiny GPT's held-out text for the eviction view
DEFAULTS: dict[str, object] = {"sc_policy": "h2o", "sc_budget": 16, "sc_elayer": 1, "sc_estep": 0,  # 0: the last
                               "sc_rank": 0}                                                      # 0: the default
EVICT_KEYS = ("sc_policy", "sc_budget", "sc_elayer", "sc_estep")   # an address naming one: the eviction view
PRESENT_FIG_HEIGHT = 215        # presenter mode: two heatmaps stacked beside the step's notice and KL
PRESENT_LATENT_HEIGHT = 330     # presenter mode: the latent cache's figure alone below its notice
POSITION_TICKS = 12             # presenter mode: at most this many position labels (upright numbers)


def render(model, name: str, title: str) -> None:
    """The three sections for ``model`` (``name`` "gpt" or a real model's, ``title`` its name in running
    text); equal bytes on the real models."""
    busy = t("compress.llm_busy", title=title)
    _eviction_section(model, name, busy)
    _latent_section(model, name, busy)
    if name != "gpt":
        _budgets_section(model, name, title, busy)


def presenter_view() -> str | None:
    """In presenter mode, the one view the address names: "evict", "latent" or None (the page as it is)."""
    if not presenter.presenting():
        return None
    if any(k in st.query_params for k in EVICT_KEYS):
        return "evict"
    return "latent" if "sc_rank" in st.query_params else None


def render_view(model, name: str, title: str, view: str) -> None:
    """``view`` ("evict" or "latent") alone, as presenter mode shows it."""
    busy = t("compress.llm_busy", title=title)
    (_eviction_section if view == "evict" else _latent_section)(model, name, busy)


def _heading(text: str, intro: str):
    """A section's heading and introduction; → where its settings go (after the introduction). In
    presenter mode's one view the heading is for screen readers only (the page's title names the
    screen), and the folded introduction and settings share one row."""
    if presenter_view() is None:
        st.header(text)
        presenter.intro(intro, "present.intro_section")     # a section below the page's own introduction
        return st.container()
    nav.hidden_heading(text)
    row = st.columns(2, gap="small")
    with row[0]:
        presenter.intro(intro)
    return row[1]


def _auto(name: str) -> bool:
    """Whether a view runs without a press: the tiny GPT's, in presenter mode's one view."""
    return name == "gpt" and presenter_view() is not None


def _synced(key: str) -> dict:
    return dict(key=key, on_change=urlstate.sync, args=(key, DEFAULTS[key]))



def text_ids(model, name: str) -> tuple[int, ...]:
    """The held-out text the eviction view steps through: the tiny GPT's held-out corpus tail, or the
    real model's held-out text (its first ``sc_ltokens`` tokens)."""
    if name == "gpt":
        index = model.tokenizer.index
        return tuple(index[t] for t in held_out_stream(30_000, 0)[1:1 + GPT_TEXT_TOKENS])
    return tuple(held_out_text(model, int(st.session_state.get("sc_ltokens", DEFAULT_TOKENS))).ids)


@st.cache_resource(max_entries=16, ttl=3600, show_spinner=False)
def _trace(name: str, variant: Variant, ids: tuple[int, ...], _model) -> tuple[TraceStep, ...]:
    """One policy stepped through the text beside the full cache (frozen records, shared; ``name``
    keys the model, which is not hashed)."""
    model = _model
    return tuple(trace_variant(model, variant, list(ids), min(DEFAULT_PREFILL, len(ids) - 1)))


@st.cache_resource(max_entries=64, ttl=3600, show_spinner=False)
def _latent_kl(name: str, ids: tuple[int, ...], rank: int | str, _model) -> float | torch.Tensor:
    """Mean KL(full ‖ latent of ``rank``) over the text's decode steps (teacher-forced); ``rank``
    "full-cache": the full cache's logits themselves (computed once, shared by every rank)."""
    model = _model
    prefill = min(DEFAULT_PREFILL, len(ids) - 1)
    head, rest = list(ids[:prefill]), list(ids[prefill:])
    variant = Variant.of("full") if rank == "full-cache" else Variant.of("latent", rank=rank)
    _, got = run_cache(model, head, len(rest) + 1, variant_cache(model, variant), forced=rest)
    if rank == "full-cache":
        return got
    return float(kl_divergence(_latent_kl(name, ids, "full-cache", model), got).mean())


def _latent_drift(name: str, ids: tuple[int, ...], ranks: tuple[int, ...], model) -> tuple[float, ...]:
    """Mean KL at each rank (each rank measured once per server: a new rank adds one run)."""
    return tuple(_latent_kl(name, ids, r, model) for r in ranks)


@st.cache_resource(show_spinner=False)
def _budget_runs() -> RunStore:
    """The real models' comparisons at equal bytes, by model and text length (finished, frozen records)."""
    return RunStore(4)


def steps_csv(steps: Sequence[TraceStep], variant: Variant) -> bytes:
    """One row per step, layer and K/V head: KL, top-1 agreement, bytes, kept and evicted positions
    (machine-readable: dot decimals, positions joined by spaces)."""
    rows = [{"variant": variant.label(), "position": s.position, "layer": li + 1, "kv_head": h + 1,
             "kl": s.kl, "top1_agreement": s.agree, "bytes": s.nbytes, "full_bytes": s.full_nbytes,
             "kept": " ".join(map(str, kept)), "evicted": " ".join(str(p) for p, _ in s.gone[li][h]) if s.gone else ""}
            for s in steps for li, layer in enumerate(s.kept) for h, kept in enumerate(layer)]
    buf = io.StringIO()
    pd.DataFrame(rows).to_csv(buf, index=False)
    return buf.getvalue().encode()


def _eviction_section(model, name: str, busy: str) -> None:
    """H2O, SnapKV and PyramidKV stepped through the held-out text: kept and evicted rows per head
    of one layer at one position, the KL at every step, where the top-1 token first differs."""
    tr = translator(current_lang())
    box = _heading(t("evict.title"), t("evict.intro"))
    urlstate.choice_param("sc_policy", POLICIES, DEFAULTS["sc_policy"])
    urlstate.int_param("sc_budget", DEFAULTS["sc_budget"], *BUDGET_RANGE)
    urlstate.int_param("sc_elayer", DEFAULTS["sc_elayer"], 1, model.n_layers)
    ids = text_ids(model, name)
    urlstate.int_param("sc_estep", DEFAULTS["sc_estep"], 0, len(ids))
    with box, presenter.settings():
        c = st.columns([1.4, 1, 1])
        policy = c[0].segmented_control(t("evict.policy"), POLICIES, required=True,
                                        format_func=lambda k: t("evict.kind_" + k), help=t("evict.policy_help"),
                                        **_synced("sc_policy"))
        budget = c[1].number_input(t("evict.budget"), *BUDGET_RANGE, step=1, **_synced("sc_budget"),
                                   help=t("evict.budget_help", low=BUDGET_RANGE[0], high=BUDGET_RANGE[1]))
        layer = c[2].selectbox(t("evict.layer"), list(range(1, model.n_layers + 1)), **_synced("sc_elayer"))
    variant = Variant.of(policy, budget=int(budget))
    key = (name, variant, ids)
    if presenter_view() == "evict":        # the view stays named in the address when set to its defaults
        st.query_params["sc_policy"] = policy
    if not _trace_cached(*key) and not _auto(name):
        if not st.button(t("evict.run"), icon=":material/play_arrow:", key="sc_evict_run"):
            st.info(t("evict.none"), icon=":material/insights:")
            return
    try:
        with my_turn("sc_evict", busy) as mine:
            if not mine:
                return
            steps = _trace(*key, model)
            st.session_state.setdefault("sc_evict_done", set()).add(key)
    except (LimitError, ValueError) as e:
        st.error(t("compress.llm_bad", reason=str(e)), icon=":material/error:")
        return
    labels = frames_compress.evict_labels(tr)
    positions = [s.position for s in steps]
    chosen = int(st.session_state.get("sc_estep") or positions[-1])
    chosen = min(max(chosen, positions[0]), positions[-1])
    # presenter mode's one view: the step's two heatmaps on the left, its position, notice and the KL
    # at every step on the right (one 1280×720 screen); else all in one column, in the order written here
    one = presenter_view() == "evict"
    if one:
        left, right = st.columns([3, 2], gap="small")
    else:
        left = right = st.container()
    with right:
        at = st.select_slider(t("evict.step"), positions, value=chosen, help=t("evict.step_help"),
                              key="sc_estep_view")
    if at != st.session_state.get("sc_estep"):
        st.session_state["sc_estep"] = at if at != positions[-1] else 0
        urlstate.sync("sc_estep", DEFAULTS["sc_estep"])
    index = positions.index(at)
    step = steps[index]
    tokens = [model.vocab[i] for i in ids]
    li = int(layer) - 1
    budget_here = variant_cache(model, variant).budgets()[li]      # a sliding layer's: capped at its window
    with right:
        step_view.notice(frames_compress.evict_notice(steps, index, li, budget_here, tr))
    size = dict(height=PRESENT_FIG_HEIGHT, position_ticks=POSITION_TICKS) if one else dict(height=280)
    with left:
        chart(eviction_figure(step, li, tokens, labels, **size), t("evict.title"), key="sc_evict_chart")
        if step.attention is not None:
            group = model.n_heads // model.cost_config.n_kv_heads
            chart(remaining_attention_figure(step, li, group, tokens, labels, **size), t("evict.remains_title"),
                  key="sc_remains_chart")
    if step.attention is not None:
        st.caption(t("evict.remains_caption"))
    with right:
        chart(drift_figure(steps, labels, current=at, height=PRESENT_FIG_HEIGHT if one else 240, compact=one),
              t("evict.fig_drift_title"), key="sc_drift_chart")
        first = next((s for s in steps if not s.agree), None)
        st.markdown(t("evict.first_diff", position=fmt.integer(first.position)) if first else t("evict.no_diff"))
    kl = sum(s.kl for s in steps) / len(steps)
    top = sum(s.agree for s in steps) / len(steps)
    st.caption(t("evict.summary", kl=fmt.num(kl, ".3g"), top=fmt.percent(top, 1), bytes=steps[-1].nbytes,
                 full=steps[-1].full_nbytes))
    st.download_button(t("evict.csv"), steps_csv(steps, variant), file_name=f"eviction_{name}_{policy}_{budget}.csv",
                       mime="text/csv", icon=":material/download:", on_click="ignore", key="sc_evict_csv")


def _trace_cached(name: str, variant: Variant, ids: tuple[int, ...]) -> bool:
    """Whether this visitor already stepped this policy through this text (a run waits for a press,
    so a visit draws nothing it did not ask for)."""
    return (name, variant, ids) in st.session_state.setdefault("sc_evict_done", set())


def _latent_section(model, name: str, busy: str) -> None:
    """Elements per token and layer against the rank, with the measured drift at a few ranks."""
    box = _heading(t("evict.latent_title"), t("evict.latent_intro"))
    top = full_rank(model)
    cfg = model.cost_config
    urlstate.int_param("sc_rank", DEFAULTS["sc_rank"], 0, top)
    with box, presenter.settings():
        rank = int(st.number_input(t("evict.rank"), 0, top, step=1, help=t("evict.rank_help", high=top)
                                   + " " + t("evict.rank_zero"), **_synced("sc_rank")))
    ranks = tuple(sorted({max(1, top // d) for d in (16, 8, 4, 2)} | {top} | ({rank} if rank else set())))
    ids = text_ids(model, name)
    if presenter_view() == "latent":       # the view stays named in the address at its default rank
        st.query_params["sc_rank"] = str(rank)
    if not st.session_state.get("sc_latent_done") and not _auto(name):
        if not st.button(t("evict.latent_run"), icon=":material/play_arrow:", key="sc_latent_run"):
            st.info(t("evict.none"), icon=":material/insights:")
            return
        st.session_state["sc_latent_done"] = True
    with my_turn("sc_evict", busy) as mine:
        if not mine:
            return
        kls = _latent_drift(name, ids, ranks, model)
    tr = translator(current_lang())
    full = 2 * cfg.n_kv_heads * cfg.head_dim
    step_view.notice(frames_compress.latent_notice(ranks, full, kls, rank, tr))
    # presenter mode's one view: tall enough for the vertical axis title (German's is long)
    height = PRESENT_LATENT_HEIGHT if presenter_view() == "latent" else 300
    chart(latent_figure(ranks, full, kls, frames_compress.evict_labels(tr), height=height, current=rank or None),
          t("evict.latent_title"), key="sc_latent_chart")
    st.caption(t("evict.latent_caption", positions=len(ids) - min(DEFAULT_PREFILL, len(ids) - 1) + 1))


def _budgets_section(model, name: str, title: str, busy: str) -> None:
    """A real model: every policy at 25 % and 10 % of the bytes, in the page's trade-off figure, table
    and CSV, and the verdict the numbers give."""
    st.header(t("evict.budgets_title"))
    st.markdown(t("evict.budgets_intro", answer=ANSWER_TOKENS))
    tokens = int(st.session_state.get("sc_ltokens", DEFAULT_TOKENS))
    store = _budget_runs()
    go = st.button(t("evict.budgets_run"), icon=":material/play_arrow:", key="sc_budgets_run")
    if go and store.get((name, tokens)) is None:
        with my_turn("sc_llm", busy) as mine:
            if mine:
                try:
                    store.put((name, tokens), compare_at_budgets(model, tokens))
                except (LimitError, ValueError) as e:
                    st.error(t("compress.llm_bad", reason=str(e)), icon=":material/error:")
    cmp: BudgetComparison | None = store.get((name, tokens))
    if cmp is None:
        st.info(t("evict.budgets_none"), icon=":material/insights:")
        return
    # the caption says what was measured (the introduction is above)
    tradeoff.show(cmp.evaluation, "sc_budgets_chart", tradeoff.text_caption(cmp.evaluation, title),
                  f"smaller_caches_{name}_equal_bytes_{tokens}.csv", download_key="sc_budgets_csv")
    tr = translator(current_lang())
    names = {v.label(): frames_compress.variant_name(v, tr) for vs in cmp.variants for v in vs}
    for v in verdict(cmp):
        pct = fmt.percent(v["fraction"], 0)
        if v["winner"] is None:
            st.markdown(t("evict.verdict_none_fit", pct=pct))
            continue
        st.markdown(t("evict.verdict_win", pct=pct, winner=names.get(v["winner"], v["winner"]),
                      kl=fmt.num(v["kl_mean"], ".3g"), top=fmt.percent(v["top1_agreement"], 1),
                      answer=t("evict.answer_kept" if v["answer_changed"] is False else "evict.answer_changed"))
                    + " " + (t("evict.verdict_none_safe") if v["none_safe"] else
                             t("evict.verdict_safe", names=[names.get(n, n) for n in v["safe"]])))
