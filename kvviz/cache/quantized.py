"""KIVI-style quantized K/V: a smaller cache (docs/design.md §5; the tiny GPT's evaluation is
kvviz.compress).

``QuantizedCache(n_layers, bits, group_size, key_axis, residual)``: asymmetric int8 / packed int4 / int2
codes with per-group scales and zero points, the newest rows in full precision. Like the window
cache it keeps absolute positions; ``quantized_positions`` says which rows are stored as codes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from kvviz.cache.base import KV, Cache, CacheLayer, storage_bytes
from kvviz.limits import MAX_QUANT_GROUP_SIZE, MAX_QUANT_RESIDUAL, QUANT_BITS, LimitError, check_int


@dataclass(frozen=True)
class QuantizedRows:
    """Rows ``[batch, heads, n, dim]`` as asymmetric integer codes (KIVI): per group of values a
    scale and a zero point (the group's minimum); x ≈ code · scale + zero, |error| ≤ scale / 2.

    ``axis="token"``: a group is ``group_size`` channels of one row (the last group may be shorter);
    scale/zero ``[B, H, n, ceil(dim / G)]``. ``axis="channel"``: a group is one channel over
    ``group_size`` consecutive rows (n a multiple of G); scale/zero ``[B, H, n / G, dim]``.
    ``codes`` are uint8 ``[B, H, n, ceil(dim · bits / 8)]``: one int8 code, or 8 / bits packed codes
    per byte (int4: channel 2i in the low nibble, 2i + 1 in the high one; int2: channel 4i + j in
    bits 2j, 2j + 1)."""

    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor
    bits: int
    group_size: int
    axis: str
    dim: int

    @property
    def rows(self) -> int:
        return self.codes.shape[-2]

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.codes, self.scale, self.zero

    def step(self) -> torch.Tensor:
        """The quantization step (scale) of every element, ``[B, H, n, dim]``."""
        return self._per_element(self.scale)

    def _per_element(self, t: torch.Tensor) -> torch.Tensor:
        if self.axis == "channel":
            return t.repeat_interleave(self.group_size, dim=-2)
        return t.repeat_interleave(self.group_size, dim=-1)[..., :self.dim]

    def unpacked(self) -> torch.Tensor:
        """The integer codes, ``[B, H, n, dim]`` uint8 in 0..2^bits − 1."""
        if self.bits == 8:
            return self.codes
        mask, per = (1 << self.bits) - 1, 8 // self.bits
        parts = [(self.codes >> (self.bits * j)) & mask for j in range(per)]
        return torch.stack(parts, dim=-1).flatten(-2)[..., :self.dim]

    def dequantize(self) -> torch.Tensor:
        return self.unpacked().to(self.scale.dtype) * self.step() + self._per_element(self.zero)

    def append(self, other: QuantizedRows) -> QuantizedRows:
        """These rows followed by ``other``'s (new tensors; this record stays valid)."""
        return QuantizedRows(*(torch.cat([a, b], dim=-2) for a, b in zip(self.tensors(), other.tensors())),
                             self.bits, self.group_size, self.axis, self.dim)


def quantize(x: torch.Tensor, bits: int, group_size: int, axis: str) -> QuantizedRows:
    """Asymmetric quantization of ``x`` ``[B, H, n, dim]`` in groups (see QuantizedRows):
    scale = (max − min) / (2^bits − 1), code = round((x − min) / scale); a constant group gets
    scale 0 and is restored exactly."""
    if bits not in QUANT_BITS:
        raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {bits!r}.")
    levels = 2 ** bits - 1
    B, H, n, D = x.shape
    G = group_size
    if axis == "token":
        ng = -(-D // G)
        pad = ng * G - D                      # pad with the row's last value: min and max unchanged
        xp = torch.cat([x, x[..., -1:].expand(B, H, n, pad)], dim=-1) if pad else x
        groups = xp.reshape(B, H, n, ng, G)                                 # [B, H, n, ng, G]
        lo, hi = groups.amin(-1), groups.amax(-1)                           # [B, H, n, ng]
        lo_e, scale = lo.unsqueeze(-1), ((hi - lo) / levels).unsqueeze(-1)
    elif axis == "channel":
        if n % G:
            raise ValueError(f"per-channel groups need a multiple of {G} rows, got {n}")
        groups = x.reshape(B, H, n // G, G, D)                              # [B, H, n/G, G, D]
        lo, hi = groups.amin(-2), groups.amax(-2)                           # [B, H, n/G, D]
        lo_e, scale = lo.unsqueeze(-2), ((hi - lo) / levels).unsqueeze(-2)
    else:
        raise LimitError(f"Key axis must be 'channel' or 'token', got {axis!r}.")
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.where(scale > 0, torch.round((groups - lo_e) / safe), torch.zeros_like(groups))
    codes = codes.clamp(0, levels).to(torch.uint8).reshape(B, H, n, -1)[..., :D]   # [B, H, n, D]
    if bits < 8:                              # int4: two codes per byte, int2: four
        per = 8 // bits
        if D % per:
            codes = torch.cat([codes, torch.zeros_like(codes[..., :per - D % per])], dim=-1)
        packed = codes[..., 0::per].clone()
        for j in range(1, per):
            packed |= codes[..., j::per] << (bits * j)
        codes = packed
    return QuantizedRows(codes.contiguous(), scale.squeeze(-1 if axis == "token" else -2).contiguous(),
                         lo.contiguous(), bits, G, axis, D)


class QuantizedLayer(CacheLayer):
    """One layer of a KIVI-style cache: the oldest rows as codes, the newest in full precision.

    ``keys`` / ``values`` hold the full-precision rows (the residual); ``quantized_keys`` /
    ``quantized_values`` the rest (values always per token, keys per ``key_axis``). A row leaves
    full precision once it is older than the last ``residual`` positions; with per-channel keys a
    whole group of ``group_size`` rows leaves together (so residual to residual + G − 1 rows stay
    exact). Every row is quantized once, from its original values, and both K and V of a row move
    together. A pass reads its own new rows unquantized (as an inference engine's attention reads
    the K/V it just computed): a prefill is exact, the loss shows from the first decode step on."""

    def __init__(self, bits: int, group_size: int, key_axis: str, residual: int) -> None:
        self.bits, self.group_size, self.key_axis, self.residual = bits, group_size, key_axis, residual
        self.keys = self.values = None
        self.quantized_keys: QuantizedRows | None = None
        self.quantized_values: QuantizedRows | None = None

    @property
    def n_quantized(self) -> int:
        return 0 if self.quantized_keys is None else self.quantized_keys.rows

    def quantized_target(self, total: int) -> int:
        """How many of ``total`` rows this layer holds as codes."""
        over = max(0, total - self.residual)
        return over if self.key_axis == "token" else over - over % self.group_size

    def update(self, key: torch.Tensor, value: torch.Tensor, *args, **kwargs) -> KV:
        """Return what this pass reads: the rows cached before it as stored (dequantized codes,
        then the full-precision rows) followed by the pass's own new rows exactly as computed (they
        have not been through the cache yet); then store, quantizing the rows that left the
        residual window."""
        before = self.kv()
        if before is None:
            keys, values = key.detach().clone(), value.detach().clone()
            out = keys, values
        else:
            keys = torch.cat([self.keys, key.detach()], dim=-2)
            values = torch.cat([self.values, value.detach()], dim=-2)
            out = (keys, values) if self.quantized_keys is None else \
                (torch.cat([before[0], key.detach()], dim=-2), torch.cat([before[1], value.detach()], dim=-2))
        move = self.quantized_target(self.n_quantized + keys.shape[-2]) - self.n_quantized
        if move > 0:
            qk = quantize(keys[..., :move, :], self.bits, self.group_size, self.key_axis)
            qv = quantize(values[..., :move, :], self.bits, self.group_size, "token")
            self.quantized_keys = qk if self.quantized_keys is None else self.quantized_keys.append(qk)
            self.quantized_values = qv if self.quantized_values is None else self.quantized_values.append(qv)
            keys, values = keys[..., move:, :].clone(), values[..., move:, :].clone()   # free the moved rows
        self.keys, self.values = keys, values
        return out

    def kv(self) -> KV | None:
        """Dequantized rows followed by the full-precision ones (what attention reads)."""
        if self.keys is None:
            return None
        if self.quantized_keys is None:
            return self.keys, self.values
        return (torch.cat([self.quantized_keys.dequantize(), self.keys], dim=-2),
                torch.cat([self.quantized_values.dequantize(), self.values], dim=-2))  # type: ignore[union-attr]

    def get_seq_length(self) -> int:
        return 0 if self.keys is None else self.n_quantized + self.keys.shape[-2]

    def quantized_positions(self) -> list[int]:
        return list(range(self.n_quantized))

    def crop(self, max_length: int) -> None:
        """Drop positions from ``max_length`` on; refused (LimitError) when a row that would then be
        in the full-precision window is already quantized: its original values are gone."""
        m = max(0, max_length)
        if self.keys is None or m >= self.get_seq_length():
            return
        if m == 0:
            self.reset()
            return
        if m < self.n_quantized or self.quantized_target(m) != self.n_quantized:
            raise LimitError(f"The quantized cache holds positions up to {self.n_quantized - 1} as codes; "
                             f"going back to {m} positions would need some of them in full precision again.")
        keep = m - self.n_quantized
        self.keys, self.values = self.keys[..., :keep, :].clone(), self.values[..., :keep, :].clone()

    def reset(self) -> None:
        self.keys = self.values = None
        self.quantized_keys = self.quantized_values = None

    def nbytes(self) -> int:
        """Codes, scales and zero points of both K and V, and the full-precision rows."""
        held = [t for t in (self.keys, self.values) if t is not None]
        for q in (self.quantized_keys, self.quantized_values):
            if q is not None:
                held.extend(q.tensors())
        return storage_bytes(held) if held else 0


class QuantizedCache(Cache):
    """KV quantization after KIVI (Liu et al., ICML 2024): keys per channel (or per token), values
    per token, groups of ``group_size``, int8 or packed int4 / int2 codes with a scale and zero point per
    group, and the last ``residual`` positions (up to residual + G − 1 with per-channel keys) kept in
    full precision. Attention reads the dequantized rows; ``nbytes()`` counts codes, scales, zero
    points and the full-precision rows (kvviz.cost.quantized_cache_bytes gives the same number)."""

    def __init__(self, n_layers: int, bits: int = 8, group_size: int = 32, key_axis: str = "channel",
                 residual: int = 0) -> None:
        if isinstance(bits, bool) or bits not in QUANT_BITS:
            raise LimitError(f"Bits must be one of {', '.join(map(str, QUANT_BITS))}, got {bits!r}.")
        bits = int(bits)
        if key_axis not in ("channel", "token"):
            raise LimitError(f"Key axis must be 'channel' or 'token', got {key_axis!r}.")
        self.bits, self.key_axis = bits, key_axis
        self.group_size = check_int("Group size", group_size, 1, MAX_QUANT_GROUP_SIZE)
        self.residual = check_int("Residual window", residual, 0, MAX_QUANT_RESIDUAL)
        super().__init__([QuantizedLayer(bits, self.group_size, key_axis, self.residual) for _ in range(n_layers)])
