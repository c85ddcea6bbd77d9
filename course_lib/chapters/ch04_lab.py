"""Chapter 4, *Quantizing π*: the chapter's lab, code exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)`` and
the prediction's cell ``lab.<name>(prediction)``.
"""

from __future__ import annotations


import numpy as np
import torch

from course_lib.compression import quant
from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction, saved_bytes
from course_lib.numbers import formats

# --- absmax INT8 ------------------------------------------------------------------------------


def _absmax_int8(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: one absmax scale (absmax / 127), codes rounded half to even by the course's INT8 codec."""
    absmax = block.abs().max()
    scale = absmax / 127 if absmax > 0 else torch.ones((), dtype=block.dtype)
    codes = torch.from_numpy(formats.encode((block / scale).numpy(), "int8").astype("int8"))
    return codes, scale


def _absmax_cases() -> list[Case]:
    g = torch.Generator().manual_seed(4)
    return [Case((torch.randn(8, generator=g, dtype=torch.float64) * 2,), "random"),
            Case((torch.tensor([3.14159, -5.0, 0.0, 2.5], dtype=torch.float64),), "π in a block"),
            Case((torch.tensor([127.0, 0.5, -0.5, 1.5, 2.5], dtype=torch.float64),), "ties at .5"),
            Case((torch.zeros(4, dtype=torch.float64),), "all zeros")]


def _half_away(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    codes, scale = _absmax_int8(block)
    q = block / scale
    return (torch.sign(q) * torch.floor(q.abs() + 0.5)).to(torch.int8), scale


def _truncated(block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    codes, scale = _absmax_int8(block)
    return (block / scale).to(torch.int8), scale


absmax_int8 = Exercise(
    "absmax_int8",
    "Quantize a block to INT8 with one absmax scale: return (codes as int8, scale).",
    _absmax_int8, _absmax_cases,
    misconceptions=(
        Misconception("round half away", "round ties away from zero instead of to even", _half_away),
        Misconception("truncation", "cast with .to(torch.int8), which cuts toward zero instead of rounding",
                      _truncated),
    ),
)

# --- BF16 bits of FP32 values -----------------------------------------------------------------


def _bf16_bits(values: torch.Tensor) -> torch.Tensor:
    """The reference: the course's exact codec, round to nearest even, as 16-bit patterns 0..65535."""
    return torch.from_numpy(formats.encode(values.numpy(), "bf16").astype(np.int64)).reshape(values.shape)


def _is_nan_bits(bits: torch.Tensor) -> torch.Tensor:
    """Which 16-bit BF16 patterns are NaN: all eight exponent bits set and a non-zero fraction."""
    return ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0) & (bits >= 0) & (bits <= 0xFFFF)


def _same_bits(expected: torch.Tensor, got: object) -> bool:
    """Equal patterns in any integer dtype; where the reference has a NaN, any NaN pattern counts."""
    if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
        return False
    if got.is_floating_point() or got.is_complex() or got.dtype == torch.bool:
        return False
    e, g = expected.long(), got.long()
    nan = _is_nan_bits(e)
    return bool(torch.where(nan, _is_nan_bits(g), g == e).all())


def _from_bits(patterns: list[int]) -> torch.Tensor:
    """FP32 values with exactly these 32-bit patterns."""
    return torch.from_numpy(np.array(patterns, dtype=np.uint32).view(np.float32).copy())


def _bf16_cases() -> list[Case]:
    g = torch.Generator().manual_seed(4)
    return [Case((torch.randn(64, generator=g) * 10,), "random"),
            Case((torch.randn(3, 5, generator=g),), "a 3 x 5 matrix"),
            Case((_from_bits([0x3F808000, 0x3F818000, 0xBF808000, 0xBF818000, 0x3F808001]),),
                 "ties: the low 16 bits exactly 0x8000"),
            Case((torch.tensor([3.4028235e38, -3.4028235e38, 3.3895314e38]),),
                 "the largest FP32 values"),
            Case((torch.tensor([0.0, -0.0, 1e-40, -1e-45]),), "zeros and subnormals"),
            Case((torch.cat([torch.tensor([float("nan"), float("inf"), -float("inf")]),
                             _from_bits([0x7F800001, 0xFFFFFFFF, 0x3F808000])]),),
                 "NaN (one with its payload in the low bits), infinities and a tie")]


def _fp32_bits(values: torch.Tensor) -> torch.Tensor:
    return values.view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _truncated_bits(values: torch.Tensor) -> torch.Tensor:
    return _fp32_bits(values) >> 16


def _half_away_bits(values: torch.Tensor) -> torch.Tensor:
    return (_fp32_bits(values) + 0x8000) >> 16


def _nan_as_number(values: torch.Tensor) -> torch.Tensor:
    bits = _fp32_bits(values)
    return (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16


bf16_bits = Exercise(
    "bf16_bits",
    "Round FP32 values to BF16, to nearest with ties to even, on their bits: return the 16-bit "
    "patterns as integers 0..65535, a NaN as a NaN.",
    _bf16_bits, _bf16_cases,
    misconceptions=(
        Misconception("truncation", "keep FP32's top 16 bits (bits >> 16), cutting instead of rounding",
                      _truncated_bits),
        Misconception("round half away", "add 0x8000 before the shift, which sends ties away from zero "
                      "instead of to the even neighbour", _half_away_bits),
        Misconception("NaN rounded like a number", "round NaN's bits like a number's: a NaN whose "
                      "payload sits in the low 16 bits carries into infinity (or past it)",
                      _nan_as_number),
    ),
    compare=_same_bits,
)

# --- predict, then measure: a million INT4 values on disk -------------------------------------

#: One million values, INT4 absmax codes with one FP32 scale per block of 64.
_N, _BLOCK = 1_000_000, 64
_INT4_BLOCKS = quant.QuantConfig(4, "absmax", "group", _BLOCK, scale_dtype="fp32")


def _int4_file() -> dict[str, float]:
    """Quantize a million seeded values, save codes and scales with safetensors; the file's MB by part."""
    values = torch.randn(_N, generator=torch.Generator().manual_seed(4))
    q = quant.quantize(values, _INT4_BLOCKS)
    return {name: b / 1e6 for name, b in saved_bytes({"codes": q.packed, "scales": q.scale}).items()}


_INT4_TOTAL = _N * 4 / 8 + _N / _BLOCK * 4  # bytes of codes and scales

int4_on_disk = Prediction(
    "int4_on_disk",
    "A million values stored as INT4 codes (two per byte) with one FP32 scale per block of 64, "
    "saved with safetensors: how many MB (10**6 bytes) is the file?",
    _int4_file, unit="MB", rel_tol=0.02,
    misconceptions=(
        (8.0, "count bits instead of bytes (4.5 bits per value is 0.5625 bytes)"),
        (1e6 / 2**20, "divide by 2**20 (MiB) where MB, 10**6 bytes, was asked"),
        (_N * 4 / 8 / _INT4_TOTAL, "count the 4-bit codes and forget the FP32 scales, one per block "
         "of 64 values"),
        ((_N + _N / _BLOCK * 4) / _INT4_TOTAL, "give each 4-bit code a whole byte instead of packing "
         "two codes per byte"),
    ),
)
