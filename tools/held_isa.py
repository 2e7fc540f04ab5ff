"""Which environment variables change the CPU kernels this torch runs: the evidence behind the held-ISA
engine run of .ci/run (docs/testing.md, "Exact or close").

    python tools/held_isa.py            # one line per setting: which results changed bits against the default
    python tools/held_isa.py --one      # this process's results only (the settings come from the environment)

Each setting runs in its own process (the libraries read their variables once, at their first call)
on the same inputs, drawn by numpy (``torch.randn`` is itself a vectorised kernel). A result is a
sha1 of its bytes; "2-row = 40-row" says whether the last two rows of a 40-row float32 product
equal the product of those two rows alone, bit for bit.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

SETTINGS = [
    {},
    {"ATEN_CPU_CAPABILITY": "avx2"},
    {"ATEN_CPU_CAPABILITY": "default"},
    {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    {"MKL_ENABLE_INSTRUCTIONS": "SSE4_2"},
    {"MKL_CBWR": "COMPATIBLE"},
    {"ONEDNN_MAX_CPU_ISA": "AVX2"},
    {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
]
VARIABLES = sorted({k for s in SETTINGS for k in s})


def results() -> dict:
    """float32 results of the kernels kvviz's models run, and oneDNN's bfloat16 matmul."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    r = np.random.default_rng(0)

    def t(*shape):
        return torch.from_numpy(r.standard_normal(shape).astype(np.float32))

    def h(x):
        return hashlib.sha1(x.float().contiguous().numpy().tobytes()).hexdigest()[:8]

    x, w = t(40, 64), t(1000, 64)
    q, k = t(1, 4, 40, 16), t(1, 4, 40, 16)
    full = F.linear(x, w)                                                    # MKL sgemm
    return {
        "capability": torch.backends.cpu.get_cpu_capability(),
        "linear (MKL)": h(full),
        "2-row = 40-row": bool(torch.equal(F.linear(x[-2:], w), full[-2:])),
        "softmax(q·kᵀ)": h(torch.softmax(q @ k.transpose(-1, -2), -1)),
        "sdpa": h(F.scaled_dot_product_attention(q, k, k, is_causal=True)),
        "layer_norm": h(F.layer_norm(t(40, 257), (257,))),
        "bf16 linear (oneDNN)": h(F.linear(x.bfloat16(), w.bfloat16())),
    }


def main() -> None:
    if "--one" in sys.argv:
        print(json.dumps(results()))
        return
    base = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    rows = []
    for s in SETTINGS:
        out = subprocess.run([sys.executable, __file__, "--one"], env={**base, **s}, capture_output=True, text=True,
                             check=True)
        rows.append((s, json.loads(out.stdout)))
    default = rows[0][1]
    for s, got in rows:
        name = " ".join(f"{k}={v}" for k, v in s.items()) or "(default)"
        changed = [k for k in got if k not in ("capability", "2-row = 40-row") and got[k] != default[k]]
        print(f"{name:78} capability {got['capability']:8} 2-row = 40-row {got['2-row = 40-row']!s:5} "
              f"changed: {', '.join(changed) or 'nothing'}")


if __name__ == "__main__":
    main()
