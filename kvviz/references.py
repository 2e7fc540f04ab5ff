"""The papers and documentation the pages' mechanisms come from, declared once.

A page names the ones it draws on by key (``PageSpec.sources``, kvviz/ui/app/pages.py); the page's
foot lists them (kvviz/ui/components/sources.py) with one line each of what the page takes from it
(``sources.<key>`` in kvviz/ui/locales/<lang>/sources.json); docs/design.md §7 lists the same
references (tests/test_sources.py checks both). Titles stay in their original language.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reference:
    key: str
    authors: str            # as cited: "Shazeer", "Kwon et al."
    year: int
    title: str
    venue: str              # where it appeared ("SOSP 2023", "arXiv:…"), or who published it ("OpenAI")
    url: str
    where: str = ""         # the part the pages use ("§2.4"), if one part
    kind: str = ""          # what it is when not a paper: "docs", "software", "report" (said in the page's language)

    def cite(self) -> str:
        """``Kwon et al. 2023``: how the pages' prose names it."""
        return f"{self.authors} {self.year}"


REFERENCES: tuple[Reference, ...] = (
    Reference("shazeer2019", "Shazeer", 2019, "Fast Transformer Decoding: One Write-Head is All You Need",
              "arXiv:1911.02150", "https://arxiv.org/abs/1911.02150", "§2.4"),
    Reference("vaswani2017", "Vaswani et al.", 2017, "Attention Is All You Need", "NeurIPS 2017",
              "https://arxiv.org/abs/1706.03762", "§3.2"),
    Reference("hf_generation", "Hugging Face", 2025, "Transformers: Generation strategies",
              "", "https://huggingface.co/docs/transformers/generation_strategies", kind="docs"),
    Reference("hf_cache", "Hugging Face", 2025, "Transformers: Cache strategies", "",
              "https://huggingface.co/docs/transformers/kv_cache", kind="docs"),
    Reference("holtzman2020", "Holtzman et al.", 2020, "The Curious Case of Neural Text Degeneration",
              "ICLR 2020", "https://arxiv.org/abs/1904.09751"),
    Reference("radford2019", "Radford et al.", 2019, "Language Models are Unsupervised Multitask Learners",
              "OpenAI",
              "https://cdn.openai.com/better-language-models/language_models_are_unsupervised_multitask_learners.pdf",
              kind="report"),
    Reference("nanogpt", "Karpathy", 2023, "nanoGPT", "GitHub", "https://github.com/karpathy/nanoGPT",
              "model.py", kind="software"),
    Reference("orca2022", "Yu et al.", 2022, "Orca: A Distributed Serving System for Transformer-Based "
              "Generative Models", "OSDI 2022", "https://www.usenix.org/conference/osdi22/presentation/yu"),
    Reference("kwon2023", "Kwon et al.", 2023, "Efficient Memory Management for Large Language Model Serving "
              "with PagedAttention", "SOSP 2023", "https://arxiv.org/abs/2309.06180"),
    Reference("distserve2024", "Zhong et al.", 2024, "DistServe: Disaggregating Prefill and Decoding for "
              "Goodput-optimized Large Language Model Serving", "OSDI 2024", "https://arxiv.org/abs/2401.09670"),
    Reference("splitwise2024", "Patel et al.", 2024, "Splitwise: Efficient Generative LLM Inference Using "
              "Phase Splitting", "ISCA 2024", "https://arxiv.org/abs/2311.18677"),
    Reference("xiao2024", "Xiao et al.", 2024, "Efficient Streaming Language Models with Attention Sinks",
              "ICLR 2024", "https://arxiv.org/abs/2309.17453"),
    Reference("liu2024", "Liu et al.", 2024, "KIVI: A Tuning-Free Asymmetric 2bit Quantization for KV Cache",
              "ICML 2024", "https://arxiv.org/abs/2402.02750"),
    Reference("ainslie2023", "Ainslie et al.", 2023, "GQA: Training Generalized Multi-Query Transformer Models "
              "from Multi-Head Checkpoints", "EMNLP 2023", "https://arxiv.org/abs/2305.13245"),
    Reference("leviathan2023", "Leviathan et al.", 2023, "Fast Inference from Transformers via Speculative "
              "Decoding", "ICML 2023", "https://arxiv.org/abs/2211.17192"),
    Reference("chen2023", "Chen et al.", 2023, "Accelerating Large Language Model Decoding with Speculative "
              "Sampling", "arXiv:2302.01318", "https://arxiv.org/abs/2302.01318"),
    Reference("saxena2023", "Saxena", 2023, "Prompt Lookup Decoding", "GitHub",
              "https://github.com/apoorvumang/prompt-lookup-decoding", kind="software"),
    Reference("allal2025", "Allal et al.", 2025, "SmolLM2: When Smol Goes Big — Data-Centric Training of a "
              "Small Language Model", "arXiv:2502.02737", "https://arxiv.org/abs/2502.02737"),
)
REFERENCE: dict[str, Reference] = {r.key: r for r in REFERENCES}
