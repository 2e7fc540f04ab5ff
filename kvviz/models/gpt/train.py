"""Train the tiny GPT on the generated weather corpus and write kvviz/data/tiny_gpt.pt + .json.

Run as ``python -m kvviz.train_gpt`` (a shim for this module):

    python -m kvviz.train_gpt            # the shipped checkpoint (seed 0), a few minutes on 2 CPU cores
    python -m kvviz.train_gpt --draft --threads 1   # the draft model for speculative decoding:
                                         # 1 layer, width 64, same corpus and tokenizer → draft_gpt.pt
    python -m kvviz.train_gpt --steps 50 --out /tmp/t.pt   # a quick smoke run

Everything is seeded (corpus, initial weights, batch order), so a rerun on the same machine and
torch version reproduces the checkpoint; the JSON beside it records the settings and final losses.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import time
from dataclasses import asdict
from pathlib import Path

import torch
import torch.nn.functional as F

from kvviz.models.gpt.config import GPTConfig, draft_config
from kvviz.models.gpt.corpus import corpus_tokens, vocabulary
from kvviz.models.gpt.model import random_gpt
from kvviz.models.gpt.tokenizer import WordTokenizer
from kvviz.models.gpt.weights import CHECKPOINT, DRAFT_CHECKPOINT, plain_state_dict, weights_sha256

# The draft trains for fewer steps than the tiny GPT on purpose: after the full 1,200 steps a 1-layer,
# width-64 model nearly matches the target on this simple corpus (held-out loss 0.679 vs 0.675; a
# proposal would be accepted with probability Σ min(p, q) = 0.98 at τ = 1), so speculative decoding
# would have nothing to reject. After 500 steps (loss ≈ 0.93) that probability is ≈ 0.81 and the
# draft has not yet learned what "we" do in which weather: a useful draft that visibly disagrees.
DRAFT_STEPS = 500


HELD_OUT_DIVISOR = 20        # the last 1/20 (5 %) of the corpus stream is held out


def split_train_val(ids):
    """The corpus stream (a tensor or a list) → (training part, held-out tail: the last 5 %).
    Training windows are drawn from the first part only, so no training batch reads the tail
    (kvviz.compress takes its evaluation prompts from it)."""
    n_val = len(ids) // HELD_OUT_DIVISOR
    return ids[:-n_val], ids[-n_val:]


def batches(data: torch.Tensor, block: int, batch: int, generator: torch.Generator):
    """Endless random windows of the token stream: inputs [B, block] and next-token targets [B, block]."""
    while True:
        start = torch.randint(0, len(data) - block - 1, (batch,), generator=generator)
        x = torch.stack([data[s:s + block] for s in start.tolist()])
        y = torch.stack([data[s + 1:s + block + 1] for s in start.tolist()])
        yield x, y


def lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up, then cosine decay to a tenth of the peak."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))


@torch.no_grad()
def evaluate(model, data: torch.Tensor, block: int, n_batches: int = 4, batch: int = 8) -> float:
    g = torch.Generator().manual_seed(1234)
    it = batches(data, block, batch, g)
    losses = []
    for _ in range(n_batches):
        x, y = next(it)
        logits = model(x)
        losses.append(float(F.cross_entropy(logits.flatten(0, 1), y.flatten())))
    return sum(losses) / len(losses)


def train(steps: int = 1200, batch: int = 8, lr: float = 3e-3, seed: int = 0, sentences: int = 30_000,
          threads: int = 2, log_every: int = 25, draft: bool = False) -> tuple[torch.nn.Module, dict]:
    """Train the tiny GPT (or, with ``draft``, the draft model's smaller shape, ``draft_config``) on the
    same generated corpus with the same schedule; returns the model (eval mode) and its record."""
    torch.set_num_threads(threads)
    vocab = vocabulary()
    tok = WordTokenizer(vocab)
    ids = torch.tensor([tok.index[t] for t in corpus_tokens(sentences, seed)], dtype=torch.long)
    train_ids, val_ids = split_train_val(ids)
    cfg = draft_config(len(vocab)) if draft else GPTConfig(vocab_size=len(vocab))
    model = random_gpt(cfg, seed).train()
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=lr, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(seed)
    it = batches(train_ids, cfg.block_size, batch, g)
    t0 = time.perf_counter()
    loss = float("nan")
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, lr, warmup=max(1, steps // 20))
        x, y = next(it)
        logits = model(x)                                              # [B, block, V]
        loss_t = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        opt.zero_grad(set_to_none=True)
        loss_t.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        loss = loss_t.item()
        if step % log_every == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss:.4f}  {time.perf_counter() - t0:6.1f} s", flush=True)
    model.eval()
    info = {
        "config": asdict(cfg), "vocab": vocab, "tokenizer": "word level (kvviz.models.gpt.tokenizer.WordTokenizer)",
        "training": {"seed": seed, "steps": steps, "batch": batch, "block": cfg.block_size, "peak_lr": lr,
                     "corpus_sentences": sentences, "corpus_tokens": len(ids), "threads": threads,
                     "final_train_loss": round(loss, 4), "val_loss": round(evaluate(model, val_ids, cfg.block_size), 4),
                     "seconds": round(time.perf_counter() - t0, 1), "torch": torch.__version__,
                     "command": "python -m kvviz.train_gpt" + (" --draft" if draft else "")},
    }
    return model, info


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=None, help=f"default 1200, or {DRAFT_STEPS} with --draft")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sentences", type=int, default=30_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--draft", action="store_true",
                    help=f"train the draft model (1 layer, width 64) into {DRAFT_CHECKPOINT.name}")
    ap.add_argument("--out", default=None, help=f"checkpoint path (default {CHECKPOINT.name}, "
                                                f"or {DRAFT_CHECKPOINT.name} with --draft)")
    a = ap.parse_args(argv)
    steps = a.steps if a.steps is not None else (DRAFT_STEPS if a.draft else 1200)
    model, info = train(steps, a.batch, a.lr, a.seed, a.sentences, a.threads, draft=a.draft)
    out = Path(a.out or (DRAFT_CHECKPOINT if a.draft else CHECKPOINT))
    out.parent.mkdir(parents=True, exist_ok=True)
    sd = plain_state_dict(model)
    torch.save(sd, out)
    info["weights_sha256"] = weights_sha256(sd)     # same seed, machine and threads ⇒ same value
    info["sha256"] = hashlib.sha256(out.read_bytes()).hexdigest()   # this file (torch.save adds a random id)
    out.with_suffix(".json").write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB), val loss {info['training']['val_loss']}")


if __name__ == "__main__":
    main()
