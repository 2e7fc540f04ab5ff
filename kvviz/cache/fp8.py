"""FP8 K/V (E4M3 with a scale), as vLLM stores a cache with ``kv_cache_dtype="fp8"``: one byte per
element, half of bf16's.

``Fp8Cache(n_layers, scale="tensor"|"token")``. A stored row is ``code = fp8(x / scale)``
(``torch.float8_e4m3fn``: 4 exponent bits, 3 mantissa bits, largest finite 448; torch's cast rounds
to nearest and saturates at ±448) and reads back as ``code · scale`` in the K/V dtype.

- ``"tensor"``: one float32 scale per layer for K and one for V, ``amax / 448`` of the first update
  (the prefill) and frozen afterwards, so later rows are appended as they come (a later value past
  the prefill's largest saturates). This is transformers 5.23's ``Fp8QuantizedLayer`` rule
  (``QuantizedCache`` with the fp8 backend; vLLM likewise keeps one scale per layer, calibrated or 1.0).
- ``"token"``: one float32 scale per row and K/V head, ``amax`` over the head's channels / 448: never
  saturates, 4 bytes more per row and head.

What a pass reads: cached rows dequantized, its own new rows as computed (as kvviz's integer
``QuantizedCache``: a prefill is exact, the loss starts at the first decode). transformers' layer
differs there: from the second update on it returns the new rows dequantized too (its first update
returns them as computed). The codes, the scales and the cached rows' dequantized values are the
same under the per-tensor rule (tests/test_cache_compress.py compares them).
"""
from __future__ import annotations

import torch

from kvviz.cache.base import KV, Cache, CacheLayer, storage_bytes
from kvviz.limits import LimitError

FP8 = torch.float8_e4m3fn
FP8_MAX = float(torch.finfo(FP8).max)          # 448
SCALES = ("tensor", "token")


def fp8_scale(x: torch.Tensor, per: str) -> torch.Tensor:
    """float32 scale: amax / 448 of all of ``x`` (``"tensor"``, a 0-d tensor) or of each row's
    channels (``"token"``, ``[..., n, 1]``); never zero (an all-zero tensor gets the smallest normal)."""
    amax = x.abs().amax().float() if per == "tensor" else x.abs().amax(-1, keepdim=True).float()
    return (amax / FP8_MAX).clamp(min=torch.finfo(torch.float32).tiny)


def to_fp8(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """E4M3 codes of x / scale (rounded to nearest, saturating at ±448)."""
    return (x.float() / scale).to(FP8)


def from_fp8(codes: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return (codes.float() * scale).to(dtype)


class Fp8Layer(CacheLayer):
    """One layer's K and V as E4M3 codes with their scales."""

    def __init__(self, scale: str = "tensor") -> None:
        self.per = scale
        self.reset()

    def reset(self) -> None:
        self.keys = self.values = None                 # the codes [1, H_kv, S, d] float8_e4m3fn
        self.key_scale = self.value_scale = None       # float32: 0-d ("tensor") or [1, H_kv, S, 1] ("token")
        self.dtype = torch.float32

    def _scales(self, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.per == "tensor":
            if self.key_scale is None:
                self.key_scale, self.value_scale = fp8_scale(key, "tensor"), fp8_scale(value, "tensor")
            return self.key_scale, self.value_scale
        return fp8_scale(key, "token"), fp8_scale(value, "token")

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        self.dtype = key.dtype
        old = self.kv()
        ks, vs = self._scales(key, value)
        k_codes, v_codes = to_fp8(key.detach(), ks), to_fp8(value.detach(), vs)
        if self.keys is None:
            self.keys, self.values = k_codes, v_codes
            if self.per == "token":
                self.key_scale, self.value_scale = ks, vs
            return key, value
        self.keys = torch.cat([self.keys, k_codes], dim=-2)
        self.values = torch.cat([self.values, v_codes], dim=-2)
        if self.per == "token":
            self.key_scale = torch.cat([self.key_scale, ks], dim=-2)
            self.value_scale = torch.cat([self.value_scale, vs], dim=-2)
        return torch.cat([old[0], key], dim=-2), torch.cat([old[1], value], dim=-2)

    def kv(self) -> KV | None:
        """The held rows dequantized (what a later pass reads)."""
        if self.keys is None:
            return None
        return from_fp8(self.keys, self.key_scale, self.dtype), from_fp8(self.values, self.value_scale, self.dtype)

    def get_seq_length(self) -> int:
        return 0 if self.keys is None else self.keys.shape[-2]

    def quantized_positions(self) -> list[int]:
        return list(range(self.get_seq_length()))

    def crop(self, max_length: int) -> None:
        m = max(0, max_length)
        if m >= self.get_seq_length():
            return
        if m == 0:
            self.reset()
            return
        self.keys, self.values = self.keys[..., :m, :].clone(), self.values[..., :m, :].clone()
        if self.per == "token":
            self.key_scale = self.key_scale[..., :m, :].clone()
            self.value_scale = self.value_scale[..., :m, :].clone()

    def nbytes(self) -> int:
        held = [t for t in (self.keys, self.values, self.key_scale, self.value_scale) if t is not None]
        return storage_bytes(held) if held else 0


class Fp8Cache(Cache):
    """FP8 (E4M3) K/V with a per-tensor or per-token scale (see the module doc); ``nbytes()``
    equals kvviz.cost's ``fp8_cache_bytes``."""

    def __init__(self, n_layers: int, scale: str = "tensor") -> None:
        if scale not in SCALES:
            raise LimitError(f"The FP8 scale must be 'tensor' or 'token', got {scale!r}.")
        self.scale = scale
        super().__init__([Fp8Layer(scale) for _ in range(n_layers)])

