"""Every page of the app, declared once: navigation, warm-up, the lecture script and the export read it.

A page is a thin script in ``pages/`` (Streamlit's classic multipage mode: its file name makes its
address, ``pages/4_Tiny_GPT.py`` -> ``/Tiny_GPT``), a body in ``kvviz/ui/pages/``, its strings in
``kvviz/ui/locales/<lang>/<key>.json`` and one ``PageSpec`` below. The checklist for a new page is
docs/adding-a-page.md. This module imports nothing of kvviz or Streamlit: the server's middleware
(serve_files) and the command line read it too.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Screen:
    """One screen of the lecture script (docs/lecture.md), exported as one static page too."""
    params: dict[str, object]       # its address parameters (``?step=2``), in the order the link writes them
    key: str                        # ``lecture.<key>`` says it, ``lecture.<key>_why`` why it is worth showing


@dataclass(frozen=True)
class PageSpec:
    """A page: where it lives, how the sidebar shows it, what the server prepares for it."""
    key: str                        # its strings' section: <key>.title, nav.<key>, home.blurb_<key>
    script: str                     # Streamlit's script, relative to the repository
    icon: str                       # the sidebar's icon
    body: str | None = None         # the module of its body: imported and warmed by the server's warm-up
    charts: bool = True             # draws plotly charts: the page starts loading plotly.js first
    # where it shows the stepper: "" at its own address (presenter mode then keeps the first paint blank
    # until the step is drawn, serve_files.HOLD_SCRIPT), a query for a view with one ("tab=Batching"), None
    stepper: str | None = None
    lecture: tuple[Screen, ...] = field(default=())     # its screens in the lecture script, in order
    minutes: int = 0                # its section's share of a 90-minute lecture (the lecture script shows it)
    # the papers and documentation its mechanism comes from: keys of kvviz/references.py, listed at its foot
    sources: tuple[str, ...] = field(default=())

    @property
    def title_key(self) -> str:
        return f"{self.key}.title"

    @property
    def label_key(self) -> str:
        return f"nav.{self.key}"

    @property
    def blurb_key(self) -> str:
        return f"home.blurb_{self.key}"

    @property
    def opens_on_stepper(self) -> bool:
        return self.stepper == ""

    @property
    def stepper_view(self) -> str | None:
        """The address of its stepper's view below the app's base, without the slash
        (``Cost_and_scale?tab=Batching``); None for a page without a stepper."""
        if self.stepper is None:
            return None
        return self.url[1:] + (f"?{self.stepper}" if self.stepper else "")

    @property
    def url(self) -> str:
        """Its address below the app's base: ``/Tiny_GPT`` (``/`` for the home page)."""
        return url_path(self.script)


def url_path(script: str) -> str:
    """``pages/1_ABC_miniature.py`` -> ``/ABC_miniature`` (Streamlit's classic multipage URLs)."""
    if script == "app.py":
        return "/"
    return "/" + PurePosixPath(script).stem.split("_", 1)[1]


def _screens(*screens: tuple[dict[str, object], str]) -> tuple[Screen, ...]:
    return tuple(Screen(params, key) for params, key in screens)


# in teaching order: the sidebar, the home page's list, the warm-up and the lecture script follow it
PAGES: tuple[PageSpec, ...] = (
    PageSpec("home", "app.py", ":material/home:", charts=False),
    PageSpec("abc", "pages/1_ABC_miniature.py", ":material/looks_one:", "kvviz.ui.pages.abc", stepper="",
             minutes=10, sources=("shazeer2019", "hf_generation", "hf_cache"),
             lecture=_screens(
                 ({"step": 0}, "abc_prefill"),
                 ({"step": 1}, "abc_chosen"),
                 ({"step": 2}, "abc_decode"),
                 ({"step": 8}, "abc_counters"),
                 ({"abc_rule": "sample", "abc_tau": 1.5, "abc_seed": 3, "step": 1}, "abc_sampling"))),
    PageSpec("weather", "pages/2_Weather_heads.py", ":material/looks_two:", "kvviz.ui.pages.weather", stepper="",
             minutes=11, sources=("vaswani2017", "shazeer2019", "hf_cache"),
             lecture=_screens(
                 ({"step": 0}, "weather_prefill"),
                 ({"step": 1}, "weather_logits"),
                 ({"step": 2}, "weather_stale"),
                 ({"step": 2, "repair": "true"}, "weather_repair"))),
    PageSpec("sampling", "pages/3_Sampling.py", ":material/casino:", "kvviz.ui.pages.sampling",
             minutes=10, sources=("holtzman2020", "hf_generation"),
             lecture=_screens(
                 ({"sampling_top_p": 0.8}, "sampling_quiz"),
                 ({"sampling_tau": 0.3}, "sampling_sharp"),
                 ({"sampling_tau": 2.0, "sampling_top_k": 2}, "sampling_flat"),
                 ({"sampling_tail_k": 50}, "sampling_tail"))),
    PageSpec("gpt", "pages/4_Tiny_GPT.py", ":material/smart_toy:", "kvviz.ui.pages.gpt", stepper="",
             minutes=12, sources=("radford2019", "nanogpt", "shazeer2019", "hf_cache"),
             lecture=_screens(
                 ({"step": 0}, "gpt_prefill"),
                 ({"step": 2}, "gpt_decode"),
                 ({"gpt_rule": "sample", "gpt_tau": 0.8, "gpt_seed": 7, "step": 1}, "gpt_sampled"),
                 ({"step": 3}, "gpt_loop"),
                 ({"gpt_passes": 2}, "gpt_whole_run"))),
    PageSpec("cost", "pages/5_Cost_and_scale.py", ":material/speed:", "kvviz.ui.pages.cost", stepper="tab=Batching",
             minutes=11, sources=("shazeer2019", "orca2022", "distserve2024", "splitwise2024"),
             lecture=_screens(
                 ({"tab": "Memory"}, "cost_memory"),
                 ({"tab": "Memory", "mem_preset": "llama3-8b", "mem_tokens": 8192, "mem_batch": 8}, "cost_memory_gqa"),
                 ({"tab": "Compute (FLOPs)"}, "cost_compute"),
                 ({"tab": "Batching", "step": 2}, "cost_batching"),
                 ({"tab": "Batching", "bt_model": "gpt", "step": 2}, "cost_batching_gpt"),
                 ({"tab": "Measured here"}, "cost_measured"),
                 ({"tab": "Disaggregated serving"}, "cost_serving"))),
    PageSpec("paged", "pages/6_Paged_cache.py", ":material/view_module:", "kvviz.ui.pages.paged", stepper="",
             minutes=10, sources=("kwon2023", "orca2022"),
             lecture=_screens(
                 ({"step": 1}, "paged_shared"),
                 ({"step": 2}, "paged_boundary"),
                 ({"pg_blocks": 8, "step": 6}, "paged_preempt"),
                 ({"pg_policy": "static", "step": 4}, "paged_static"),
                 ({"pg_budget": 6, "step": 2}, "paged_chunked"),
                 ({"pg_view": "stall"}, "paged_stall"),
                 ({"pg_view": "prefix", "step": 3}, "paged_prefix"),
                 ({"pg_view": "disagg"}, "paged_disagg"))),
    PageSpec("compress", "pages/7_Smaller_caches.py", ":material/compress:", "kvviz.ui.pages.compress", stepper="",
             minutes=10, sources=("xiao2024", "liu2024", "ainslie2023", "shazeer2019"),
             lecture=_screens(
                 ({"sc_kind": "window", "sc_window": 8, "sc_sinks": 4, "step": 17}, "compress_window"),
                 ({"sc_kind": "window", "sc_window": 16, "sc_sinks": 4, "step": 31}, "compress_exact"),
                 ({"sc_kind": "quant", "sc_bits": 4, "sc_axis": "token", "step": 12}, "compress_quant"),
                 ({"sc_kind": "gqa", "sc_kv_heads": 1, "step": 3}, "compress_gqa"),
                 ({"sc_model": "smollm2", "sc_klayer": 11}, "compress_llm_keys"),
                 ({"sc_policy": "h2o", "sc_budget": 16, "sc_elayer": 3}, "compress_evict"),
                 ({"sc_model": "gemma3", "sc_policy": "snapkv", "sc_budget": 24}, "compress_gemma"))),
    # the default run: "It is rainy in London , so we", 12 tokens, γ = 4, greedy
    PageSpec("speculative", "pages/8_Speculative_decoding.py", ":material/fast_forward:", "kvviz.ui.pages.speculative",
             stepper="",
             minutes=8, sources=("leviathan2023", "chen2023", "saxena2023"),
             lecture=_screens(
                 ({"step": 4}, "speculative_verify"),
                 ({"step": 7}, "speculative_rollback"),
                 ({"step": 17}, "speculative_bonus"),
                 ({"sd_rule": "sample", "sd_seed": 1, "step": 6}, "speculative_residual"),
                 ({"sd_draft": "prompt-lookup"}, "speculative_lookup"))),
    # the default run: "What is the capital of France?" in the chat template, greedy
    PageSpec("llm", "pages/9_Real_LLM.py", ":material/forum:", "kvviz.ui.pages.llm", stepper="",
             minutes=8, sources=("allal2025", "ainslie2023", "hf_generation", "hf_cache"),
             lecture=_screens(
                 ({"step": 0}, "llm_prefill"),
                 ({"llm_layer": 4, "llm_head": 2, "step": 2}, "llm_gqa"),
                 ({"llm_dtype": "bfloat16", "step": 3}, "llm_bf16"),
                 # Gemma 3 270M where the server loads it: the hybrid cache's section below the stepper
                 ({"llm_model": "gemma3", "step": 2}, "llm_hybrid"),
                 # its long text (728 tokens, the run the server makes at start): the detail at the start
                 # that only the global layers still reach when the end asks for it
                 ({"llm_model": "gemma3", "llm_text": "long", "step": 1}, "llm_long"),
                 ({"loop_new": 12}, "llm_one_word"),
                 ({"loop_prompt": "i love you because"}, "llm_greedy_loop"),
                 ({"loop_layer": 4, "loop_head": 2, "loop_passes": 6}, "llm_whole_run"))),
    PageSpec("lecture", "pages/10_Lecture_script.py", ":material/school:", "kvviz.ui.pages.lecture", charts=False),
    PageSpec("glossary", "pages/11_Glossary.py", ":material/menu_book:", "kvviz.ui.pages.glossary", charts=False),
)
# the home page's path through the pages (look.home_<part>): the lesson's core first, then further, then
# the pages for the lecture; every page but home once
PATH: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("abc", "weather", "sampling", "gpt", "cost")),
    ("further", ("paged", "compress", "speculative", "llm")),
    ("reference", ("lecture", "glossary")),
)
PAGE: dict[str, PageSpec] = {p.key: p for p in PAGES}
BY_TITLE: dict[str, PageSpec] = {p.title_key: p for p in PAGES}


def script(key: str) -> str:
    """The script of the page ``key`` (``"gpt"`` -> ``pages/4_Tiny_GPT.py``)."""
    return PAGE[key].script


# ---------------------------------------------------------------- the lecture script's places

# address parameters that say how to show a screen, not which screen it is
_NOT_THE_SCREEN = ("lang", "present", "step")


@dataclass(frozen=True)
class Place:
    """One screen of the lecture script: section ``section`` (1-based, teaching order), ``index`` of
    ``of`` in it."""
    section: int
    index: int
    of: int
    page: PageSpec
    screen: Screen

    @property
    def number(self) -> str:
        return f"{self.section}.{self.index}"

    @property
    def step(self) -> int | None:
        """The stepper's event it shows (None: a screen without one)."""
        return int(self.screen.params["step"]) if "step" in self.screen.params else None


def places() -> list[Place]:
    """Every screen of the lecture script in order, numbered as the script's sections are."""
    out = []
    for s, page in enumerate((p for p in PAGES if p.lecture), start=1):
        out += [Place(s, i, len(page.lecture), page, screen) for i, screen in enumerate(page.lecture, start=1)]
    return out


def matching(page_key: str, query: Mapping[str, str]) -> list[tuple[Place, Place | None]]:
    """The screens of ``page_key`` that the address ``query`` shows (its parameters, the language,
    presenter mode and the step aside, are exactly the screen's), each with the script's next screen."""
    here = {k: str(v) for k, v in query.items() if k not in _NOT_THE_SCREEN}
    every = places()
    out = []
    for n, p in enumerate(every):
        if p.page.key == page_key and {k: str(v) for k, v in p.screen.params.items()
                                       if k not in _NOT_THE_SCREEN} == here:
            out.append((p, every[n + 1] if n + 1 < len(every) else None))
    return out
