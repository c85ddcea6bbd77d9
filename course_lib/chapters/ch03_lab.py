"""Chapter 3, *Number formats*: the chapter's lab, code exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The references are the course's exact codec (:mod:`course_lib.numbers.formats`), which
``tests/test_ch03_lab.py`` checks against torch's ``float8_e4m3fn`` on every case.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from course_lib.exercises.checker import Case, Exercise, Misconception, number
from course_lib.exercises.predictions import Prediction, saved_bytes
from course_lib.numbers import formats

# --------------------------------------------------------------------------------------------
# Exercise: a value to its E4M3 bits
# --------------------------------------------------------------------------------------------


def _encode_e4m3(x: float) -> int:
    """The reference: the codec's E4M3 pattern, saturating as torch's cast to float8_e4m3fn does."""
    return int(formats.encode(x, "e4m3", saturate=True))


def _float32s(values: torch.Tensor) -> list[float]:
    return [float(v) for v in values.float().tolist()]  # float32 values: torch casts them exactly


def _encode_cases() -> list[Case]:
    g = torch.Generator().manual_seed(2)
    sign = torch.where(torch.rand(6, generator=g) < 0.5, -1.0, 1.0)
    randoms = sign * 2.0 ** (torch.rand(6, generator=g) * 13.8 - 6)  # 2**-6 .. 2**7.8: normal numbers
    cases = [Case((x,), "random") for x in _float32s(randoms)]
    cases += [Case((x,), "ties at half a step") for x in (1.0625, 1.1875, -17.0)]
    cases += [Case((x,), "the count rounds to 16: it carries into the exponent")
              for x in (1.96875, -7.875, 1.9375, 2.0**-6 - 2.0**-11)]
    cases += [Case((x,), "in [2**-7, 2**-6): subnormal, spacing 2**-9")
              for x in (2.0**-7, 2.0**-7 + 3 * 2.0**-11)]
    cases += [Case((x,), "subnormals") for x in (2.0**-8, *_float32s(torch.tensor([0.005])))]
    cases += [Case((x,), "subnormal ties") for x in (3 * 2.0**-10, 2.0**-10)]
    cases += [Case((0.0,), "zero"), Case((-0.0,), "-0"), Case((math.nan,), "NaN")]
    cases += [Case((x,), "above 240") for x in (300.0, -416.0)]
    cases += [Case((x,), "beyond 448: saturate") for x in (464.0, 1000.0, math.inf, -1e6)]
    return cases


def _encode_with(x: float, rule: str = "even", limit: float = 448.0, flush: bool = False) -> int:
    """E4M3 encoding with one thing done wrong: the rounding ``rule``, the largest value, or flushing."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = min(abs(x), limit)
    if flush and a < 2.0**-6:
        return sign
    e = max(math.frexp(a)[1] - 1, -6) if a > 0 else -6
    steps = a / 2.0 ** (e - 3)
    whole = {"even": round, "away": lambda s: math.floor(s + 0.5), "truncate": math.floor}[rule](steps)
    return sign | (((e + 6) << 3) + int(whole))


encode_e4m3 = Exercise(
    "encode_e4m3",
    "Encode a float as E4M3 (OCP E4M3FN) bits, nearest even, with subnormals; saturate beyond 448.",
    _encode_e4m3, _encode_cases,
    misconceptions=(
        Misconception("round half away", "round ties away from zero instead of to the even pattern",
                      lambda x: _encode_with(x, "away")),
        Misconception("truncation", "drop the bits that do not fit (round toward zero) instead of rounding",
                      lambda x: _encode_with(x, "truncate")),
        Misconception("flush to zero", "forget the subnormals: every value below the smallest normal, "
                      "2**-6, becomes 0", lambda x: _encode_with(x, flush=True)),
        Misconception("IEEE-like E4M3 (max 240)", "reserve the top exponent for inf and NaN as IEEE "
                      "formats do; E4M3FN uses it for numbers, up to 448 (only S.1111.111 is NaN)",
                      lambda x: _encode_with(x, limit=240.0)),
    ),
)

# --------------------------------------------------------------------------------------------
# Exercise: E4M3 bits to their value
# --------------------------------------------------------------------------------------------


def _decode_e4m3(bits: int) -> float:
    """The reference: the codec's exact value of an E4M3 pattern (NaN for S.1111.111, -0.0 kept)."""
    return float(formats.decode(bits, "e4m3"))


def _same_value(expected: float, got: Any) -> bool:
    """Equal values, NaN where NaN, and the same sign of zero (-0.0 is not 0.0 here); a number
    may come as a 0-d tensor."""
    got = number(got)
    if got is None:
        return False
    got = float(got)
    if math.isnan(expected):
        return math.isnan(got)
    return got == expected and math.copysign(1.0, got) == math.copysign(1.0, expected)


def _decode_cases() -> list[Case]:
    g = torch.Generator().manual_seed(3)
    normal = torch.randint(0x08, 0x78, (6,), generator=g) | (torch.rand(6, generator=g) < 0.5) * 0x80
    cases = [Case((int(p),), "random") for p in normal]
    cases += [Case((p,), "subnormals") for p in (0x01, 0x07, 0x83)]
    cases += [Case((0x08,), "smallest normal"), Case((0x00,), "zero"), Case((0x80,), "-0")]
    cases += [Case((p,), "top exponent: numbers") for p in (0x78, 0x7E, 0xFE)]
    cases += [Case((p,), "NaN") for p in (0x7F, 0xFF)]
    return cases


def _decode_with(bits: int, bias: int = 7, subnormals: bool = True, ieee: bool = False,
                 tiny: int = 1) -> float:
    """E4M3 decoding with one thing done wrong: the bias, the subnormals (their exponent
    ``tiny`` - bias), or IEEE's top exponent."""
    sign = -1.0 if bits & 0x80 else 1.0
    exponent, mantissa = (bits >> 3) & 0xF, bits & 0x7
    if ieee and exponent == 0xF:
        return sign * math.inf if mantissa == 0 else math.nan
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0 and subnormals:
        return sign * mantissa / 8 * 2.0 ** (tiny - bias)
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - bias)


decode_e4m3 = Exercise(
    "decode_e4m3",
    "Decode an E4M3 (OCP E4M3FN) bit pattern to its value: sign, exponent, mantissa, bias 7, subnormals.",
    _decode_e4m3, _decode_cases,
    misconceptions=(
        Misconception("wrong bias", "take the bias as 2**(4 - 1) = 8 instead of 2**(4 - 1) - 1 = 7",
                      lambda bits: _decode_with(bits, bias=8)),
        Misconception("no subnormals", "use the normal formula (1 + M/8) x 2**(0 - 7) for exponent field "
                      "0; there the implicit bit is 0 and the exponent 1 - 7: (M/8) x 2**-6",
                      lambda bits: _decode_with(bits, subnormals=False)),
        Misconception("subnormal exponent -7", "give the subnormals the exponent 0 - 7 = -7, as "
                      "if field 0 were an ordinary exponent; they share the smallest normal's "
                      "exponent, 1 - 7 = -6: (M/8) x 2**-6",
                      lambda bits: _decode_with(bits, tiny=0)),
        Misconception("IEEE-like E4M3", "read the top exponent 1111 as inf and NaN as IEEE formats do; "
                      "in E4M3FN it holds numbers up to 448, and only S.1111.111 is NaN",
                      lambda bits: _decode_with(bits, ieee=True)),
    ),
    compare=_same_value,
)

# --------------------------------------------------------------------------------------------
# Prediction: one weight matrix on disk in three formats
# --------------------------------------------------------------------------------------------

#: GPT-2 small's first MLP weight: 768 inputs to 3,072 hidden units.
_WEIGHT_SHAPE = (3072, 768)
_FILE_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn}


def _weight_file_sizes() -> dict[str, float]:
    """Save the weight in each format with safetensors, one file each; the files' sizes in MB (10**6 bytes)."""
    weight = torch.randn(_WEIGHT_SHAPE, generator=torch.Generator().manual_seed(0)) * 0.02
    return {name: sum(saved_bytes({"weight": weight.to(dtype)}).values()) / 1e6
            for name, dtype in _FILE_DTYPES.items()}


weight_file_sizes = Prediction(
    "weight_file_sizes",
    "The size on disk, in MB, of a 3072 x 768 weight saved with safetensors in FP32, BF16 and E4M3.",
    _weight_file_sizes, unit="MB", rel_tol=0.02, components=True,  # each format's file is asked
    misconceptions=(
        (8.0, "count bits instead of bytes (a format's width in bits is 8 times its bytes)"),
        (1e6 / 2**20, "divide by 2**20 (MiB) where MB, 10**6 bytes, were asked"),
        (12 / 7, "keep every format in 4 bytes per value, as a tensor rounded to a format but stored "
                 "as float32 (fake quantization) is"),
    ),
)
