"""Chapter 5, *Quantization*: the chapter's lab, code exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)`` and
the prediction's cell ``lab.<name>(prediction)``. The references are :mod:`course_lib.compression.quant`'s
own quantizer and bit packing.
"""

from __future__ import annotations


import torch

from course_lib.compression import quant
from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction, saved_bytes


def _same_values(expected: tuple[torch.Tensor, ...], got: object) -> bool:
    """The same tensors by shape and value, whatever their dtype (codes may come back as floats)."""
    if not isinstance(got, (tuple, list)) or len(got) != len(expected):
        return False
    for e, g in zip(expected, got):
        if not isinstance(g, torch.Tensor) or g.shape != e.shape or g.is_complex() or g.dtype == torch.bool:
            return False
        if not torch.allclose(g.detach().double(), e.double(), rtol=1e-6, atol=0.0):
            return False
    return True


# --- group-wise absmax INT4, packed two codes per byte ----------------------------------------


def _int4_groups(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: the library's absmax INT4 per group (FP32 scales), its packed bytes and scales."""
    q = quant.quantize(w, quant.QuantConfig(4, "absmax", "group", group_size, scale_dtype="fp32"))
    return q.packed, q.scale


def _int4_cases() -> list[Case]:
    g = torch.Generator().manual_seed(5)
    zero_group = torch.randn(2, 8, generator=g)
    zero_group[1, 4:] = 0.0
    return [Case((torch.randn(4, 64, generator=g), 32), "random"),
            Case((torch.randn(3, 24, generator=g) * 5, 8), "3 rows, groups of 8"),
            Case((zero_group, 4), "an all-zero group"),
            Case((torch.tensor([[7.0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5]]), 8), "ties at .5"),
            Case((torch.tensor([[0.3, -1.2, 0.9]]), 3), "an odd number of codes")]


def _grouped(w: torch.Tensor, group_size: int) -> torch.Tensor:
    return w.reshape(w.shape[0], -1, group_size)


def _pack_low_first(codes: torch.Tensor) -> torch.Tensor:
    flat = codes.reshape(-1).to(torch.uint8)
    flat = torch.cat([flat, flat.new_zeros(flat.numel() % 2)]).reshape(-1, 2)
    return flat[:, 0] | (flat[:, 1] << 4)


def _int4_levels_16(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = _grouped(w, group_size)
    scale = g.abs().amax(-1) / 8
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.clamp(torch.round(g / scale[..., None]), -8, 7) + 8
    return _pack_low_first(codes), scale


def _int4_per_tensor(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = _grouped(w, group_size)
    scale = (w.abs().max() / 7).expand(g.shape[:2]).clone()
    codes = torch.clamp(torch.round(g / scale[..., None]), -7, 7) + 8
    return _pack_low_first(codes), scale


def _int4_high_first(w: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    packed, scale = _int4_groups(w, group_size)
    return (packed >> 4) | ((packed & 0x0F) << 4), scale


int4_groups = Exercise(
    "int4_groups",
    "Quantize a (rows, cols) matrix to 4-bit absmax codes per group of group_size values, store "
    "code + 8, pack two codes per byte (first in the low nibble): return (packed uint8, FP32 scales "
    "of shape (rows, groups)).",
    _int4_groups, _int4_cases,
    misconceptions=(
        Misconception("2^b levels instead of 2^b - 1", "divide absmax by 8 = 2**(b-1) instead of 7 = "
                      "2**(b-1) - 1, as if the symmetric grid had 16 levels", _int4_levels_16),
        Misconception("a per-tensor scale", "take one absmax for the whole matrix where one per group "
                      "was asked", _int4_per_tensor),
        Misconception("nibbles in the wrong order", "put the first code of each pair in the high four "
                      "bits instead of the low four", _int4_high_first),
    ),
    compare=_same_values,
)

# --- zero-point (asymmetric) quantization per channel -----------------------------------------


def _zeropoint_channel(w: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The reference: the library's zero-point codes per channel (FP32 scales), unpacked by row."""
    c = quant.quantize_codes(w, quant.QuantConfig(bits, "zeropoint", "channel", scale_dtype="fp32"))
    rows = w.shape[0]
    return c.codes.reshape(w.shape), c.scale.reshape(rows), c.zero.reshape(rows)


def _zeropoint_cases() -> list[Case]:
    g = torch.Generator().manual_seed(5)
    return [Case((torch.randn(4, 16, generator=g), 8), "random, 8 bits"),
            Case((torch.randn(3, 10, generator=g) * 3, 4), "random, 4 bits"),
            Case((torch.tensor([[0.5, 3.0, 1.25, 2.0], [-0.3, 0.45, 0.1, -0.1]]), 4),
                 "a row of positive values only"),
            Case((torch.tensor([[-0.4, -3.0, -1.0, -2.2], [0.3, -0.4, 0.1, -0.1]]), 8),
                 "a row of negative values only"),
            Case((torch.tensor([[0.0, 0.0, 0.0], [1.0, -2.0, 0.5]]), 4), "an all-zero row"),
            Case((torch.tensor([[-1.5, 6.0, 0.25, 0.75, -0.25]]), 4),
                 "ties at .5 with an odd zero point")]


def _zeropoint_by_hand(w: torch.Tensor, bits: int, levels: int, lo: torch.Tensor, hi: torch.Tensor,
                       zero_first: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    top = (1 << bits) - 1
    scale = (hi - lo) / levels
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.clamp(-torch.round(lo / scale), 0, top)
    x = w / scale[:, None]
    codes = torch.round(x + zero[:, None]) if zero_first else torch.round(x) + zero[:, None]
    return torch.clamp(codes, 0, top).to(torch.uint8), scale, zero.to(torch.uint8)


def _zp_levels(w: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lo, hi = w.amin(1).clamp(max=0), w.amax(1).clamp(min=0)
    return _zeropoint_by_hand(w, bits, 1 << bits, lo, hi)


def _zp_per_tensor(w: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lo, hi = w.min().clamp(max=0).expand(w.shape[0]), w.max().clamp(min=0).expand(w.shape[0])
    return _zeropoint_by_hand(w, bits, (1 << bits) - 1, lo, hi)


def _zp_range_without_zero(w: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _zeropoint_by_hand(w, bits, (1 << bits) - 1, w.amin(1), w.amax(1))


def _zp_zero_first(w: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    lo, hi = w.amin(1).clamp(max=0), w.amax(1).clamp(min=0)
    return _zeropoint_by_hand(w, bits, (1 << bits) - 1, lo, hi, zero_first=True)


zeropoint_channel = Exercise(
    "zeropoint_channel",
    "Quantize a (rows, cols) matrix with zero-point (asymmetric) codes, one scale and zero point per "
    "row: return (codes, scales, zero points).",
    _zeropoint_channel, _zeropoint_cases,
    misconceptions=(
        Misconception("2^b levels instead of 2^b - 1", "divide the range by 2**b (16 at 4 bits) instead "
                      "of the 2**b - 1 steps (15) between 2**b levels", _zp_levels),
        Misconception("a per-tensor scale", "take one range for the whole matrix where one per row "
                      "(channel) was asked", _zp_per_tensor),
        Misconception("a range without 0", "take the range as [min, max] without stretching it to "
                      "include 0, so 0.0 is no longer exact", _zp_range_without_zero),
        Misconception("zero point added before rounding", "round x / scale + zero as one number (torch."
                      "quantize_per_channel's order) instead of round(x / scale) + zero", _zp_zero_first),
    ),
    compare=_same_values,
)

# --- predict, then measure: an NF4 + DQ matrix on disk ----------------------------------------

#: A 2048 x 2048 weight matrix in NF4 with double quantization (QLoRA's storage).
_SHAPE = (2048, 2048)


def _nf4_file() -> dict[str, float]:
    """Quantize a seeded 2048 x 2048 matrix to NF4 + DQ, save its tensors with safetensors; MB by part."""
    w = torch.randn(*_SHAPE, generator=torch.Generator().manual_seed(5))
    stored = quant.quantize(w, "nf4-dq").tensors()  # codes, int8 scale codes, DQ's FP32 constants
    nbytes = saved_bytes(stored)
    parts = {"codes": nbytes["packed"], "scales": nbytes["scale"],
             "double quantization": nbytes["dq_scale"] + nbytes["dq_mean"], "header": nbytes["header"]}
    return {name: b / 1e6 for name, b in parts.items()}


_BITS = {name: quant.bits_per_value(_SHAPE, name) for name in ("nf4", "nf4-dq")}

nf4_on_disk = Prediction(
    "nf4_on_disk",
    "A 2048 x 2048 weight matrix in NF4 with double quantization (4-bit codes, 8-bit codes of the "
    "scales of blocks of 64, one FP32 scale per 256 of those and one mean), saved with safetensors: "
    "how many MB (10**6 bytes) is the file?",
    _nf4_file, unit="MB", rel_tol=0.01,
    misconceptions=(
        (8.0, "count bits instead of bytes (4.127 bits per weight is about half a byte)"),
        (1e6 / 2**20, "divide by 2**20 (MiB) where MB, 10**6 bytes, was asked"),
        (4 / _BITS["nf4-dq"], "count the 4-bit codes and forget the scales of the blocks"),
        (_BITS["nf4"] / _BITS["nf4-dq"], "store one FP32 scale per block of 64, forgetting that double "
         "quantization stores the scales as 8-bit codes"),
    ),
)
