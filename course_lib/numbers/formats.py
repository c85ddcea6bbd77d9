"""Exact binary floating-point and integer codecs: how a real number becomes bits, and back.

Chapter 3 (*Number formats*) teaches it; chapter 4 (*Quantizing π*) applies it.

A :class:`FloatFormat` describes any small binary float: one sign bit, ``exponent_bits`` of
biased exponent and ``mantissa_bits`` of stored fraction, plus a convention for the special
values (``nan_encoding``):

* ``"ieee"`` -- IEEE 754 style: the all-ones exponent is reserved, mantissa 0 is +-inf and any
  other mantissa is NaN (FP64, FP32, FP16, BF16, OCP E5M2);
* ``"fn"`` -- "finite + NaN" (OCP E4M3FN): no infinities; the only NaNs are ``S.1111.111``,
  so the all-ones exponent still holds normal numbers (E4M3 reaches 448 instead of 240);
* ``"fnuz"`` -- "finite, NaN, unsigned zero" (AMD/Graphcore FP8): no infinities, no -0; the
  single NaN is the pattern of -0, ``1.0000.000``;
* ``"none"`` -- every pattern is a finite number (the OCP MX FP6 and FP4 element formats).

Encoding rounds to nearest, ties to even: a value exactly halfway between two neighbours goes to
the one whose bit pattern is even (last mantissa bit 0 -- IEEE's rule; for ``mantissa_bits=0``
the last exponent bit decides). Rounding is done once, directly from the input's bits: float32
inputs are rounded from their 32 bits, everything else from its float64 bits, so there is no
double rounding. (torch rounds float64 to FP16/BF16/FP8 through
float32 and so double-rounds: ``1 + 2**-11 + 2**-40`` becomes 1.0 in torch, 1.0009765625 here.)

Overflow -- a value whose rounded magnitude is above the format's max:

* ``saturate=False`` (default): IEEE formats give +-inf, ``fn`` and ``fnuz`` formats give NaN
  (the OCP rule for E4M3 in non-saturating mode; inf inputs become NaN too);
* ``saturate=True``: clamp to +-max; infinities are clamped too, NaN stays NaN (CUDA's
  ``__NV_SATFINITE``). Note: torch's ``x.to(torch.float8_e4m3fn)`` *saturates* (even +-inf
  becomes +-448), so it matches ``encode(x, E4M3, saturate=True)``; torch's E5M2 cast overflows
  to inf and its ``fnuz`` casts to NaN, matching the default;
* ``"none"`` formats have nothing to overflow to and always saturate; they cannot encode NaN.

Every NaN encodes to one canonical NaN, keeping its sign: ``S.11..1.10..0`` (the quiet NaN:
FP16 0x7E00, BF16 0x7FC0, FP32 0x7FC00000, E5M2 0x7E) for ``"ieee"``, ``S.11..1.11..1`` for
``"fn"`` (E4M3 0x7F/0xFF) and ``1.00..0`` for ``"fnuz"`` (0x80, sign lost). Decoding keeps the
NaN's sign. Negative zero stays negative except in ``fnuz`` formats, which have no -0.

:class:`IntFormat` describes two's-complement (``signed``) or unsigned integers of 2..32 bits;
encoding rounds to nearest, ties to even (``2.5 -> 2``, ``3.5 -> 4``, ``2.7 -> 3`` where
``int(2.7)`` truncates to 2) and then clamps (saturates) into range; NaN cannot be encoded.

Bit patterns are non-negative integers (``uint8/16/32/64`` arrays); values come back as float64
(exact for every supported format). Everything accepts Python scalars, numpy arrays and torch
tensors and answers in kind.

How encoding works, as whole-array numpy steps on chunks of the input: its bit pattern, read as
an unsigned integer, grows with the value, so for results in the target's normal range rounding
*the pattern itself* is enough: add half a target ulp (minus one, plus the kept last bit, for ties
to even), subtract the bias difference, shift right; a mantissa carry bumps the exponent, as it
should. Below the min normal the format is fixed point, with step ``min_subnormal``: adding
``2**(emin - m + source mantissa bits)`` to ``|x|`` puts it in a binade whose ulp is that step, so
the float addition itself rounds ``|x|`` to a multiple of the step (ties to even, exactly once),
and the sum's bits minus the constant's count the steps: the subnormal pattern. (That needs the
CPU's gradual underflow; ``encode`` turns flush-to-zero off for its own work if
``torch.set_flush_denormal(True)`` turned it on.) Overflow is clamped to inf, NaN or max, and NaN
becomes the canonical NaN. Chunks whose results are all normal skip those extra steps, and a few
results outside the normal range are redone after the last chunk. Decoding of formats up to 16
bits is a table look-up; the table is built with ``ldexp`` (exact).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any, Union

import numpy as np
import torch

from course_lib.base import dtypes

__all__ = [
    "FloatFormat", "IntFormat", "BitFields", "NAN_ENCODINGS",
    "FP64", "FP32", "FP16", "BF16", "E4M3", "E5M2", "E4M3FNUZ", "E5M2FNUZ",
    "FP6_E3M2", "FP6_E2M3", "FP4_E2M1", "INT32", "INT16", "INT8", "INT4", "UINT8", "UINT4",
    "float_format", "get_format", "format_names", "encode", "decode", "round_to_format",
    "fields", "bit_string", "next_up", "next_down", "ulp", "exact_decimal", "finite_values",
]  # fmt: skip

#: The special-value conventions a :class:`FloatFormat` can use (see the module docstring).
NAN_ENCODINGS = ("ieee", "fn", "fnuz", "none")

_MAX_EXPONENT_BITS = 11  # float64's: every supported value must be exact in float64
_MAX_MANTISSA_BITS = 52


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


# --------------------------------------------------------------------------------------------
# Format descriptions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FloatFormat:
    """A binary floating-point format: sign bit, biased exponent, stored mantissa, special values.

    ``bias`` defaults to ``2**(exponent_bits - 1) - 1``. Supported: 1..11 exponent bits and
    0..52 mantissa bits with a range inside float64's (so every value is exact in float64).

    Chapter 3, *Number formats*.
    """

    name: str
    exponent_bits: int
    mantissa_bits: int
    bias: int = None  # type: ignore[assignment]  # resolved in __post_init__
    nan_encoding: str = "ieee"

    def __post_init__(self) -> None:
        e, m = self.exponent_bits, self.mantissa_bits
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"format name must be a non-empty string, got {self.name!r}")
        if not _is_int(e) or not 1 <= e <= _MAX_EXPONENT_BITS:
            raise ValueError(f"exponent_bits must be an integer from 1 to {_MAX_EXPONENT_BITS}, got {e!r}")
        if not _is_int(m) or not 0 <= m <= _MAX_MANTISSA_BITS:
            raise ValueError(f"mantissa_bits must be an integer from 0 to {_MAX_MANTISSA_BITS}, got {m!r}")
        if self.nan_encoding not in NAN_ENCODINGS:
            raise ValueError(
                f"nan_encoding must be one of {', '.join(map(repr, NAN_ENCODINGS))}, "
                f"got {self.nan_encoding!r}"
            )
        if self.bias is None:
            object.__setattr__(self, "bias", 2 ** (e - 1) - 1)
        elif not _is_int(self.bias):
            raise ValueError(f"bias must be an integer or None, got {self.bias!r}")
        object.__setattr__(self, "exponent_bits", int(e))
        object.__setattr__(self, "mantissa_bits", int(m))
        object.__setattr__(self, "bias", int(self.bias))
        if self.nan_encoding == "ieee" and m < 1:
            raise ValueError(
                f"format {self.name}: an 'ieee' format needs mantissa_bits >= 1 to tell NaN from inf"
            )
        if self.max_pattern < (1 << m):
            raise ValueError(
                f"format {self.name}: e={e}, m={m} with nan_encoding={self.nan_encoding!r} has no normal "
                "numbers; use more exponent bits or another nan_encoding"
            )
        if self.emin < -1022 or self.emax > 1023:
            raise ValueError(
                f"format {self.name}: exponent range 2**{self.emin}..2**{self.emax} (bias {self.bias}) "
                "is outside float64's 2**-1022..2**1023"
            )

    # -- layout ----------------------------------------------------------------------------
    @property
    def total_bits(self) -> int:
        """Bits in one stored value: 1 sign + exponent + mantissa."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def has_inf(self) -> bool:
        """Whether the format has +-infinity (only the ``"ieee"`` encoding does)."""
        return self.nan_encoding == "ieee"

    @property
    def has_nan(self) -> bool:
        """Whether the format can store NaN (every encoding but ``"none"``)."""
        return self.nan_encoding != "none"

    @property
    def max_pattern(self) -> int:
        """Bit pattern (sign 0) of the largest finite value."""
        e, m = self.exponent_bits, self.mantissa_bits
        if self.nan_encoding == "ieee":
            return (((1 << e) - 1) << m) - 1
        if self.nan_encoding == "fn":
            return (1 << (e + m)) - 2
        return (1 << (e + m)) - 1

    @property
    def inf_pattern(self) -> int | None:
        """Bit pattern of +inf, or None when the format has no infinities."""
        return ((1 << self.exponent_bits) - 1) << self.mantissa_bits if self.has_inf else None

    @property
    def nan_pattern(self) -> int | None:
        """The canonical NaN pattern that :func:`encode` writes for +NaN (None without NaN)."""
        e, m = self.exponent_bits, self.mantissa_bits
        if self.nan_encoding == "ieee":
            return (((1 << e) - 1) << m) | (1 << (m - 1))
        if self.nan_encoding == "fn":
            return (1 << (e + m)) - 1
        if self.nan_encoding == "fnuz":
            return 1 << (e + m)
        return None

    # -- range -----------------------------------------------------------------------------
    @property
    def emin(self) -> int:
        """Unbiased exponent of the smallest normal number, ``1 - bias``."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """Unbiased exponent of the largest finite number."""
        return (self.max_pattern >> self.mantissa_bits) - self.bias

    @property
    def max(self) -> float:
        """Largest finite value."""
        m = self.mantissa_bits
        frac = self.max_pattern & ((1 << m) - 1)
        return math.ldexp((1 << m) + frac, self.emax - m)

    @property
    def min_normal(self) -> float:
        """Smallest positive normal value, ``2**emin``."""
        return math.ldexp(1.0, self.emin)

    @property
    def min_subnormal(self) -> float:
        """Smallest positive value, ``2**(emin - mantissa_bits)`` (the min normal when m = 0)."""
        return math.ldexp(1.0, self.emin - self.mantissa_bits)

    @property
    def epsilon(self) -> float:
        """Machine epsilon: the gap between 1 and the next larger value, ``2**-mantissa_bits``."""
        return math.ldexp(1.0, -self.mantissa_bits)

    def __repr__(self) -> str:
        return (
            f"FloatFormat({self.name!r}, e={self.exponent_bits}, m={self.mantissa_bits}, "
            f"bias={self.bias}, nan_encoding={self.nan_encoding!r})"
        )


@dataclass(frozen=True)
class IntFormat:
    """A ``bits``-wide integer format: two's complement when ``signed``, else unsigned (2..32 bits).

    Chapter 3, *Number formats*.
    """

    bits: int
    signed: bool = True

    def __post_init__(self) -> None:
        if not _is_int(self.bits) or not 2 <= self.bits <= 32:
            raise ValueError(f"integer bit width must be an integer from 2 to 32, got {self.bits!r}")
        if not isinstance(self.signed, (bool, np.bool_)):
            raise ValueError(f"signed must be True or False, got {self.signed!r}")
        object.__setattr__(self, "bits", int(self.bits))
        object.__setattr__(self, "signed", bool(self.signed))

    @property
    def name(self) -> str:
        """``"int8"``, ``"uint4"``, ..."""
        return f"{'' if self.signed else 'u'}int{self.bits}"

    @property
    def total_bits(self) -> int:
        """Bits in one stored value."""
        return self.bits

    @property
    def min(self) -> int:
        """Smallest representable integer."""
        return -(1 << (self.bits - 1)) if self.signed else 0

    @property
    def max(self) -> int:
        """Largest representable integer."""
        return (1 << (self.bits - 1)) - 1 if self.signed else (1 << self.bits) - 1

    def __repr__(self) -> str:
        return f"IntFormat(bits={self.bits}, signed={self.signed})"


Format = Union[FloatFormat, IntFormat]

FP64 = FloatFormat("fp64", 11, 52)
FP32 = FloatFormat("fp32", 8, 23)
FP16 = FloatFormat("fp16", 5, 10)
BF16 = FloatFormat("bf16", 8, 7)
#: OCP FP8 E4M3 ("E4M3FN"): bias 7, no inf, NaN = S.1111.111, max 448.
E4M3 = FloatFormat("e4m3", 4, 3, nan_encoding="fn")
#: OCP FP8 E5M2: IEEE-like, bias 15, +-inf and NaNs, max 57344.
E5M2 = FloatFormat("e5m2", 5, 2)
#: AMD/Graphcore FP8 variants (torch.float8_e4m3fnuz / float8_e5m2fnuz): bias 8 / 16.
E4M3FNUZ = FloatFormat("e4m3fnuz", 4, 3, bias=8, nan_encoding="fnuz")
E5M2FNUZ = FloatFormat("e5m2fnuz", 5, 2, bias=16, nan_encoding="fnuz")
#: OCP Microscaling (MX) element formats: no inf, no NaN.
FP6_E3M2 = FloatFormat("fp6_e3m2", 3, 2, nan_encoding="none")
FP6_E2M3 = FloatFormat("fp6_e2m3", 2, 3, nan_encoding="none")
FP4_E2M1 = FloatFormat("fp4_e2m1", 2, 1, nan_encoding="none")

INT32 = IntFormat(32)
INT16 = IntFormat(16)
INT8 = IntFormat(8)
INT4 = IntFormat(4)
UINT8 = IntFormat(8, signed=False)
UINT4 = IntFormat(4, signed=False)

_NAMED: dict[str, Format] = {
    f.name: f
    for f in (FP64, FP32, FP16, BF16, E4M3, E5M2, E4M3FNUZ, E5M2FNUZ, FP6_E3M2, FP6_E2M3, FP4_E2M1,
              INT32, INT16, INT8, INT4, UINT8, UINT4)
}
_CUSTOM_FLOAT = re.compile(r"e(\d+)m(\d+)(fn|fnuz)?")
_CUSTOM_INT = re.compile(r"(u?)int(\d+)")


def float_format(
    exponent_bits: int,
    mantissa_bits: int,
    *,
    bias: int | None = None,
    nan_encoding: str = "ieee",
    name: str | None = None,
) -> FloatFormat:
    """Make a custom ExMy float format (IEEE-style by default), e.g. ``float_format(3, 2)``.

    Chapter 3, *Number formats*.
    """
    if name is None:
        suffix = "" if nan_encoding == "ieee" else nan_encoding if nan_encoding != "none" else "_finite"
        name = f"e{exponent_bits}m{mantissa_bits}{suffix}"
    return FloatFormat(name, exponent_bits, mantissa_bits, bias=bias, nan_encoding=nan_encoding)


def format_names() -> list[str]:
    """The predefined format names that :func:`get_format` knows (aliases not included).

    Chapter 3, *Number formats*.
    """
    return list(_NAMED)


def get_format(name: str | Format) -> Format:
    """Look a format up by name, case-insensitively: 'fp16', 'bf16', 'e4m3', 'int8', 'e3m2', ...

    Predefined names come first (so 'e4m3' is OCP E4M3FN and 'e2m1' is MX FP4); other 'eXmY'
    names make an IEEE-style format (suffix 'fn' or 'fnuz' for those conventions), and
    'intN' / 'uintN' make integer formats. A format object is returned unchanged.

    Chapter 3, *Number formats*.
    """
    if isinstance(name, (FloatFormat, IntFormat)):
        return name
    if not isinstance(name, str):
        raise ValueError(f"a format must be a FloatFormat, an IntFormat or a name like 'fp16', got {name!r}")
    key = name.strip().lower().replace("-", "_")
    key = dtypes.ALIASES.get(key, key)
    if key in _NAMED:
        return _NAMED[key]
    match = _CUSTOM_FLOAT.fullmatch(key)
    if match:
        encoding = match.group(3) or "ieee"
        return float_format(int(match.group(1)), int(match.group(2)), nan_encoding=encoding)
    match = _CUSTOM_INT.fullmatch(key)
    if match:
        return IntFormat(int(match.group(2)), signed=not match.group(1))
    raise ValueError(
        f"unknown format {name!r}; valid names are {', '.join(_NAMED)} "
        "(case-insensitive), 'eXmY' for a custom IEEE-style float such as 'e3m2' "
        "(append 'fn' or 'fnuz' for those NaN conventions), or 'intN'/'uintN' with N from 2 to 32"
    )


def _float_format(fmt: str | Format, what: str) -> FloatFormat:
    fmt = get_format(fmt)
    if not isinstance(fmt, FloatFormat):
        raise ValueError(f"{what} needs a floating-point format; {fmt.name} is an integer format")
    return fmt


# --------------------------------------------------------------------------------------------
# Containers: scalars, numpy arrays, torch tensors
# --------------------------------------------------------------------------------------------


def _uint_dtype(bits: int) -> np.dtype:
    for width, dtype in ((8, np.uint8), (16, np.uint16), (32, np.uint32), (64, np.uint64)):
        if bits <= width:
            return np.dtype(dtype)
    raise AssertionError(bits)


def _unpack(x: Any, what: str) -> tuple[str, tuple[int, ...], np.ndarray]:
    """Split ``x`` into (kind, shape, flat contiguous numpy array); kind is scalar/numpy/torch."""
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        if t.dtype in (torch.float16, torch.bfloat16):
            t = t.to(torch.float32)  # exact
        elif t.dtype == torch.bool:
            t = t.to(torch.uint8)
        try:
            arr = t.contiguous().numpy()
        except TypeError as err:
            raise ValueError(f"{what}: unsupported torch dtype {x.dtype}") from err
        return "torch", tuple(x.shape), arr.reshape(-1)
    if isinstance(x, np.ndarray):
        return "numpy", x.shape, np.ascontiguousarray(x).reshape(-1)
    if isinstance(x, (list, tuple)):
        arr = np.asarray(x)
        return "numpy", arr.shape, np.ascontiguousarray(arr).reshape(-1)
    if isinstance(x, (int, float, np.integer, np.floating, np.bool_)):
        return "scalar", (), np.asarray([x])
    raise ValueError(
        f"{what} must be a number, a list, a numpy array or a torch tensor, got {type(x).__name__}"
    )


def _pack(kind: str, shape: tuple[int, ...], arr: np.ndarray) -> Any:
    """Inverse of :func:`_unpack`: give ``arr`` the caller's container and shape."""
    if kind == "scalar":
        return arr[0].item()
    arr = arr.reshape(shape)
    return torch.from_numpy(arr) if kind == "torch" else arr


def _float_input(arr: np.ndarray, what: str) -> np.ndarray:
    """Turn ``arr`` into float32 or float64 without rounding (the two codec source types)."""
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    if arr.dtype in (np.float32, np.float64):
        return arr
    if arr.dtype == np.float16:
        with np.errstate(invalid="ignore"):  # signalling NaNs just become quiet ones
            return arr.astype(np.float32)  # exact
    if arr.dtype == np.bool_ or arr.dtype.kind in "iu":
        if arr.dtype.itemsize >= 8 and arr.size and bool(np.any((arr > 2**53) | (arr < -(2**53)))):
            raise ValueError(
                f"{what}: integers above 2**53 in magnitude are not exact in float64; "
                "convert them to floats yourself"
            )
        return arr.astype(np.float64)
    if arr.dtype == object:  # e.g. Python ints too large for int64
        try:
            ints = [int(v) for v in arr]
        except (TypeError, ValueError, OverflowError) as err:
            raise ValueError(f"{what}: unsupported values of dtype object") from err
        if any(abs(v) > 2**53 for v in ints):
            raise ValueError(f"{what}: integers above 2**53 in magnitude are not exact in float64")
        return np.asarray(ints, dtype=np.float64)
    raise ValueError(
        f"{what}: unsupported dtype {arr.dtype}; use float16/bfloat16/float32/float64 or integers"
    )


def _bits_input(arr: np.ndarray, bits: int, name: str) -> np.ndarray:
    """Check that ``arr`` holds valid ``bits``-wide patterns and return it as an unsigned array."""
    if arr.dtype.kind not in "iu":
        raise ValueError(
            f"bit patterns must be integers, got dtype {arr.dtype} (use encode() to turn values into bits)"
        )
    limit = (1 << bits) - 1
    if arr.size and not (arr.dtype.kind == "u" and arr.dtype.itemsize * 8 <= bits):
        lo, hi = int(arr.min()), int(arr.max())
        if lo < 0 or hi > limit:
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"bit pattern {bad} is out of range for {name} ({bits} bits): valid patterns are "
                f"0..{limit} (0x{limit:X}); reinterpret signed views as unsigned, e.g. bits & 0x{limit:X}"
            )
    return arr.astype(_uint_dtype(bits), copy=False)


# --------------------------------------------------------------------------------------------
# Float encoding: round to nearest even straight from the source bits
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Source:
    """The binary format the input values are read in: float32 or float64 bits."""

    width: int
    mantissa_bits: int
    bias: int
    dtype: Any  # the unsigned integer type of the bits
    signed: Any  # the signed integer type of the same width
    floating: Any  # the float type itself


_SRC32 = _Source(32, 23, 127, np.uint32, np.int32, np.float32)
_SRC64 = _Source(64, 52, 1023, np.uint64, np.int64, np.float64)
_CHUNK = 1 << 17  # elements per step: few numpy calls, and the temporaries stay in cache
_FEW = 32  # a chunk with at most 1/_FEW of its results outside the normal range defers them
_TINY = np.array([5e-324])  # the smallest float64 subnormal


def _fits_float32(fmt: FloatFormat) -> bool:
    """Whether float32 bits can be rounded straight to ``fmt`` (target coarser, range inside)."""
    return fmt.mantissa_bits <= 23 and fmt.emin >= -126 and fmt.emax <= 127


@dataclass(frozen=True)
class _Plan:
    """The constants that round one source type (float32 or float64 bits) to one format."""

    src: _Source
    fmt: FloatFormat
    shift: int  # source mantissa bits rounded off: ms - m
    flip: bool  # odd rebias: the result's last bit is the opposite of the last kept source bit
    add: int  # added before the shift: half an ulp minus 1, minus the source bits of min_normal
    limit: int  # the largest sum whose result is in the normal range, min_normal..max
    lo: int  # the pattern of min_normal, 1 << m: the shifted sum counts the ulps above it
    over: int  # the pattern of an overflow: max when saturating, else the next one (inf or NaN)
    min_normal_bits: int  # the source bits of min_normal, 2**emin
    inf_bits: int  # the source bits of +inf; NaN bits are above
    magic: float  # 2**(emin - m + ms) * prescale: adding it rounds onto the subnormal grid
    magic_bits: int  # the source bits of ``magic``
    prescale: float  # 1, or the power of two that keeps ``magic`` finite for very large emin


@lru_cache(maxsize=None)
def _plan(src: _Source, fmt: FloatFormat, saturate: bool) -> _Plan:
    """Work out the rounding constants for ``src`` bits to ``fmt``, once per pair."""
    m, ms, w = fmt.mantissa_bits, src.mantissa_bits, src.width
    shift = ms - m
    rebias = (src.bias - fmt.bias) << m  # source (bits >> shift) minus this is the target pattern
    flip = shift > 0 and rebias % 2 == 1
    min_normal_bits = (src.bias + fmt.emin) << ms
    half_minus_one = (1 << (shift - 1)) - 1 if shift else 0
    add = (half_minus_one + flip - min_normal_bits) % (1 << w)  # + flip: see _round_normal
    lo = 1 << m
    saturating = saturate or fmt.nan_encoding == "none"
    grid = fmt.emin - m + ms  # the binade whose ulp is the subnormal step, 2**(emin - m)
    scale = max(0, grid - src.bias)  # > 0 only for a bias far below zero
    return _Plan(
        src=src,
        fmt=fmt,
        shift=shift,
        flip=flip,
        add=add,
        limit=((fmt.max_pattern - lo + 1) << shift) - 1,
        lo=lo,
        over=fmt.max_pattern if saturating else fmt.max_pattern + 1,
        min_normal_bits=min_normal_bits,
        inf_bits=((1 << (w - 1 - ms)) - 1) << ms,
        magic=math.ldexp(1.0, grid - scale),
        magic_bits=(grid - scale + src.bias) << ms,
        prescale=math.ldexp(1.0, -scale),
    )


class _Workspace:
    """Scratch arrays for encoding up to ``size`` elements at a time, reused from chunk to chunk."""

    def __init__(self, size: int, p: _Plan, out_dtype: np.dtype) -> None:
        """Allocate the arrays, and the constant arrays that minimum and maximum compare with."""
        dt = p.src.dtype
        self.mag, self.sums, self.sub = np.empty(size, dt), np.empty(size, dt), np.empty(size, dt)
        self.sign = np.empty(size, out_dtype)
        self.mask, self.negative = np.empty(size, bool), np.empty(size, bool)
        # numpy vectorises minimum/maximum of two arrays, not of an array and a scalar (3x slower)
        self.min_normal_bits = np.full(size, p.min_normal_bits, dt)
        self.over = np.full(size, p.over - p.lo, p.src.signed)


def _flushing_subnormals() -> bool:
    """Whether the CPU flushes subnormals to zero right now (``torch.set_flush_denormal(True)``)."""
    return bool((_TINY * 1.0)[0] == 0.0)


def _round_normal(mag: np.ndarray, p: _Plan, out: np.ndarray) -> None:
    """Round magnitude bits to the target mantissa (ties to even), as a count of ulps above min_normal.

    The bit pattern of a float grows with its value, so within the normal range rounding the
    pattern rounds the value: ``out = mag + half - 1 + last - min_normal_bits`` (mod 2**width),
    where ``last`` is the last bit kept; ``out >> shift`` is then the result's pattern minus
    ``lo`` (a mantissa carry bumps the exponent, as it should). The result is normal exactly when
    ``out <= p.limit``: a magnitude below min_normal wraps around to a huge unsigned number.
    """
    if not p.shift:  # nothing to round off
        np.add(mag, p.src.dtype(p.add), out=out)
        return
    np.right_shift(mag, p.src.dtype(p.shift), out=out)  # step 1: the last kept bit...
    np.bitwise_and(out, p.src.dtype(1), out=out)  # ...alone
    if p.flip:  # step 2: + last; an odd rebias flips the parity: + (1 - last), the 1 is in add
        np.subtract(mag, out, out=out)
    else:
        np.add(mag, out, out=out)
    np.add(out, p.src.dtype(p.add), out=out)  # step 3: + half - 1, - min_normal (borrow below it)


def _drop_rounded_bits(sums: np.ndarray, p: _Plan, o: np.ndarray) -> None:
    """Step 4: shift the rounded-off bits out and keep the pattern's bits (the ulps above min_normal)."""
    np.right_shift(sums, p.src.dtype(p.shift), out=sums)
    np.copyto(o, sums, casting="unsafe")


def _finish_rare(ws: _Workspace, p: _Plan, k: int, o: np.ndarray) -> None:
    """Step 4 for any results (subnormal, zero, normal, overflow, inf, NaN): write pattern minus lo to o."""
    src, fmt = p.src, p.fmt
    mag, steps, sub = ws.mag[:k], ws.sums[:k].view(src.signed), ws.sub[:k]
    # normal reading: ulps above min_normal (arithmetic shift: negative below min_normal)
    np.right_shift(steps, src.signed(p.shift), out=steps)
    # subnormal reading: below min_normal the format is fixed point with step 2**(emin - m). Adding
    # magic = 2**(emin - m + ms) puts |x| in magic's binade, whose ulp is that step, so the float
    # addition itself rounds |x| to the nearest step, ties to even; the sum's bits minus magic's
    # count the steps. |x| is first clamped to min_normal (so inf and NaN give lo, too).
    np.minimum(mag, ws.min_normal_bits[:k], out=sub)
    value = sub.view(src.floating)
    if p.prescale != 1.0:
        np.multiply(value, src.floating(p.prescale), out=value)
    np.add(value, src.floating(p.magic), out=value)
    np.subtract(sub, src.dtype(p.magic_bits + p.lo), out=sub)  # steps minus lo: -lo..0
    # below min_normal the normal reading is never above the subnormal one, and above it the
    # subnormal reading is 0: the larger reading is right. Then overflow (inf, NaN) -> over.
    np.maximum(steps, sub.view(src.signed), out=steps)
    np.minimum(steps, ws.over[:k], out=steps)
    if fmt.nan_pattern != p.over and np.max(mag) > p.inf_bits:
        nan = np.greater(mag, src.dtype(p.inf_bits), out=ws.mask[:k])
        if fmt.nan_pattern is None:
            raise ValueError(f"format {fmt.name} has no NaN: cannot encode NaN")
        np.copyto(steps, src.signed(fmt.nan_pattern - p.lo), where=nan)
    np.copyto(o, steps, casting="unsafe")  # negative values wrap; adding lo unwraps them


def _few_outside(sums: np.ndarray, p: _Plan, ws: _Workspace) -> np.ndarray | None:
    """The positions of the results outside the normal range if they are few (1/_FEW at most), else None."""
    limit = p.src.dtype(p.limit)
    sample = sums[::_FEW]  # a cheap first look, at one element in _FEW
    if np.count_nonzero(sample > limit) * 8 > sample.size:  # clearly many (over 1/8): don't count them
        return None
    positions = np.nonzero(np.greater(sums, limit, out=ws.mask[: sums.size]))[0]
    return positions if positions.size * _FEW <= sums.size else None


def _encode_chunk(b: np.ndarray, p: _Plan, ws: _Workspace, o: np.ndarray, defer: bool) -> np.ndarray | None:
    """Encode one chunk of source bits into ``o``; return the positions left for later, if any."""
    k, src, fmt = b.size, p.src, p.fmt
    mag, sums, sign = ws.mag[:k], ws.sums[:k], ws.sign[:k]
    np.bitwise_and(b, src.dtype((1 << (src.width - 1)) - 1), out=mag)  # |x|
    _round_normal(mag, p, sums)
    later, rare = None, False
    if np.max(sums) <= p.limit:  # the usual case: every result is a normal number
        _drop_rounded_bits(sums, p, o)
    elif defer and (later := _few_outside(sums, p, ws)) is not None:  # fix those after the last chunk
        _drop_rounded_bits(sums, p, o)
    else:
        _finish_rare(ws, p, k, o)
        rare = True
    np.add(o, o.dtype.type(p.lo), out=o)  # step 5: the ulps above min_normal + min_normal's pattern
    # step 6: the sign bit, on top
    negative = np.signbit(b.view(src.floating), out=ws.negative[:k])
    np.copyto(sign, negative, casting="unsafe")
    np.multiply(sign, sign.dtype.type(1 << (fmt.total_bits - 1)), out=sign)
    if rare and fmt.nan_encoding == "fnuz":  # no -0: zero drops its sign
        np.copyto(sign, 0, where=o == 0)
    np.bitwise_or(o, sign, out=o)
    return later


def _encode_floats(x: np.ndarray, fmt: FloatFormat, saturate: bool) -> np.ndarray:
    """Encode a flat float32/float64 array chunk by chunk; a few exceptional results are fixed at the end."""
    flushing = _flushing_subnormals()
    if flushing:  # subnormal inputs would read as 0 in the float steps below: turn that off
        torch.set_flush_denormal(False)
    try:
        if x.dtype == np.float32 and not _fits_float32(fmt):
            with np.errstate(invalid="ignore"):
                x = x.astype(np.float64)  # exact
        src = _SRC32 if x.dtype == np.float32 else _SRC64
        p = _plan(src, fmt, saturate)
        bits = x.view(src.dtype)
        out = np.empty(bits.shape, _uint_dtype(fmt.total_bits))
        ws = _Workspace(min(_CHUNK, bits.size), p, out.dtype)
        deferred = []
        for start in range(0, bits.size, _CHUNK):
            b = bits[start : start + _CHUNK]
            later = _encode_chunk(b, p, ws, out[start : start + b.size], defer=True)
            if later is not None:
                deferred.append(later + start)
        if deferred:  # the few results outside the normal range, from all chunks at once
            idx = np.concatenate(deferred)
            fixed = np.empty(idx.size, out.dtype)
            _encode_chunk(bits[idx], p, _Workspace(idx.size, p, out.dtype), fixed, defer=False)
            out[idx] = fixed
        return out
    finally:
        if flushing:
            torch.set_flush_denormal(True)


def _encode_ints(x: np.ndarray, fmt: IntFormat) -> np.ndarray:
    """Round to nearest even, clamp into range, and write two's-complement patterns."""
    v = x.astype(np.float64)
    if np.isnan(v).any():
        raise ValueError(f"NaN has no {fmt.name} representation")
    q = np.clip(np.rint(v), fmt.min, fmt.max).astype(np.int64)
    return (q & ((1 << fmt.bits) - 1)).astype(_uint_dtype(fmt.bits))


def encode(values: Any, fmt: str | Format, *, saturate: bool = False) -> Any:
    """Round values to the nearest ``fmt`` value (ties to even) and return its bit patterns.

    Returns a Python int for a scalar, else a uint8/16/32/64 numpy array or torch tensor of the
    input's shape. ``saturate`` chooses the overflow rule for float formats (see module
    docstring); integer formats always clamp.

    Chapter 3, *Number formats*.
    """
    fmt = get_format(fmt)
    if not isinstance(saturate, (bool, np.bool_)):
        raise ValueError(f"saturate must be True or False, got {saturate!r}")
    kind, shape, arr = _unpack(values, "values")
    x = _float_input(arr, "values")
    if isinstance(fmt, IntFormat):
        return _pack(kind, shape, _encode_ints(x, fmt))
    return _pack(kind, shape, _encode_floats(x, fmt, bool(saturate)))


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def _decode_slow(p: np.ndarray, fmt: FloatFormat) -> np.ndarray:
    """Decode unsigned patterns to float64: (-1)**s * significand * 2**(exponent - m), exactly."""
    e, m, n = fmt.exponent_bits, fmt.mantissa_bits, fmt.total_bits
    p = p.astype(np.uint64)
    negative = (p >> np.uint64(n - 1)) == 1
    mag = (p & np.uint64((1 << (n - 1)) - 1)).astype(np.int64)
    raw = mag >> m
    frac = mag & ((1 << m) - 1)
    sig = np.where(raw > 0, frac | (1 << m), frac).astype(np.float64)  # < 2**53: exact
    with np.errstate(over="ignore"):  # the inf/NaN exponent may overflow; replaced below
        val = np.ldexp(sig, (np.maximum(raw, 1) - fmt.bias - m).astype(np.int32))
    if fmt.nan_encoding == "ieee":
        top = raw == (1 << e) - 1
        val = np.where(top, np.where(frac == 0, np.inf, np.nan), val)
    elif fmt.nan_encoding == "fn":
        val = np.where(mag == (1 << (n - 1)) - 1, np.nan, val)
    val = np.where(negative, -val, val)  # -0.0 and -nan keep their sign bit
    if fmt.nan_encoding == "fnuz":
        val = np.where(p == np.uint64(1 << (n - 1)), np.nan, val)
    return val


@lru_cache(maxsize=None)
def _table(fmt: FloatFormat, dtype: str) -> np.ndarray:
    """Every value of a <=16-bit format, indexed by bit pattern (the fast decoder)."""
    return _decode_slow(np.arange(1 << fmt.total_bits, dtype=np.uint64), fmt).astype(dtype)


def _check_dtype(fmt: FloatFormat, dtype: Any) -> str:
    name = np.dtype(dtype).name if dtype in ("float32", "float64", np.float32, np.float64) else None
    if name is None:
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    if name == "float32" and not _fits_float32(fmt):
        raise ValueError(f"{fmt.name} values are not all exact in float32; use dtype='float64'")
    return name


def _decode_floats(p: np.ndarray, fmt: FloatFormat, dtype: str) -> np.ndarray:
    if fmt.total_bits > 16:
        return _decode_slow(p, fmt).astype(dtype, copy=False)
    table = _table(fmt, dtype)
    out = np.empty(p.shape, dtype)
    idx = np.empty(min(_CHUNK, p.size), np.intp)
    for start in range(0, p.size, _CHUNK):
        chunk = p[start : start + _CHUNK]
        ik = idx[: chunk.size]
        np.copyto(ik, chunk, casting="unsafe")
        np.take(table, ik, out=out[start : start + chunk.size], mode="clip")
    return out


def decode(bits: Any, fmt: str | Format, *, dtype: str = "float64") -> Any:
    """Turn bit patterns back into the exact values they store.

    Float formats give float64 (or ``dtype='float32'`` where all values fit exactly), keeping
    the sign of zeros and NaNs; integer formats give int64 values. Scalars give Python numbers.

    Chapter 3, *Number formats*.
    """
    fmt = get_format(fmt)
    kind, shape, arr = _unpack(bits, "bits")
    p = _bits_input(arr, fmt.total_bits, fmt.name)
    if isinstance(fmt, IntFormat):
        v = p.astype(np.int64)
        if fmt.signed:
            v = np.where(v >= 1 << (fmt.bits - 1), v - (1 << fmt.bits), v)
        return _pack(kind, shape, v)
    return _pack(kind, shape, _decode_floats(p, fmt, _check_dtype(fmt, dtype)))


def round_to_format(values: Any, fmt: str | Format, *, saturate: bool = False) -> Any:
    """Round values to ``fmt`` and return the rounded values (``decode(encode(values))``).

    Chapter 3, *Number formats*.
    """
    return decode(encode(values, fmt, saturate=saturate), fmt)


# --------------------------------------------------------------------------------------------
# Anatomy of one pattern
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BitFields:
    """The fields of one float bit pattern and what they mean.

    Chapter 3, *Number formats*.
    """

    sign: int
    raw_exponent: int
    exponent: int  # unbiased: raw - bias for normals, 1 - bias (emin) for subnormals and zero
    mantissa: int  # the stored fraction bits as an integer
    implicit_bit: int  # the leading significand bit that is not stored: 1 normal, 0 subnormal
    is_subnormal: bool
    is_nan: bool
    is_inf: bool
    is_zero: bool
    value: float


def _check_pattern(bits: Any, fmt: Format) -> int:
    if not _is_int(bits):
        raise ValueError(f"a bit pattern must be an integer, got {bits!r}")
    limit = (1 << fmt.total_bits) - 1
    if not 0 <= int(bits) <= limit:
        raise ValueError(f"bit pattern {bits} is out of range for {fmt.name}: valid patterns are 0..{limit}")
    return int(bits)


def fields(bits: int, fmt: str | FloatFormat) -> BitFields:
    """Split one bit pattern into sign, exponent and mantissa fields and classify it.

    Chapter 3, *Number formats*.
    """
    fmt = _float_format(fmt, "fields()")
    p = _check_pattern(bits, fmt)
    m, n = fmt.mantissa_bits, fmt.total_bits
    sign, raw, frac = p >> (n - 1), (p >> m) & ((1 << fmt.exponent_bits) - 1), p & ((1 << m) - 1)
    value = decode(p, fmt)
    is_nan, is_inf = math.isnan(value), math.isinf(value)
    return BitFields(
        sign=sign,
        raw_exponent=raw,
        exponent=raw - fmt.bias if raw else fmt.emin,
        mantissa=frac,
        implicit_bit=1 if raw else 0,
        is_subnormal=raw == 0 and frac != 0,
        is_nan=is_nan,
        is_inf=is_inf,
        is_zero=value == 0,
        value=value,
    )


def bit_string(bits: int, fmt: str | Format, sep: str = " ") -> str:
    """Write a pattern as binary digits, fields split by ``sep``: FP16(1.0) -> '0 01111 0000000000'.

    Chapter 3, *Number formats*.
    """
    fmt = get_format(fmt)
    p = _check_pattern(bits, fmt)
    digits = format(p, f"0{fmt.total_bits}b")
    if isinstance(fmt, IntFormat):
        return digits
    e = fmt.exponent_bits
    parts = [digits[0], digits[1 : 1 + e]] + ([digits[1 + e :]] if fmt.mantissa_bits else [])
    return sep.join(parts)


# --------------------------------------------------------------------------------------------
# Neighbours, spacing and exact decimals
# --------------------------------------------------------------------------------------------


def _step(values: Any, fmt: str | FloatFormat, up: bool) -> Any:
    """Nearest representable value strictly above (``up``) or below each input."""
    fmt = _float_format(fmt, "next_up()/next_down()")
    kind, shape, arr = _unpack(values, "values")
    with np.errstate(invalid="ignore"):
        x = _float_input(arr, "values").astype(np.float64)
    out = np.full(x.shape, np.nan)
    ok = ~np.isnan(x)
    a = x[ok]
    p = _encode_floats(a, fmt, saturate=True).astype(np.uint64)  # nearest finite neighbour
    v = _decode_slow(p, fmt)
    n = fmt.total_bits
    sign_bit = np.uint64(1 << (n - 1))
    mag = (p & (sign_bit - np.uint64(1))).astype(np.int64)
    order = np.where((p & sign_bit) != 0, -mag, mag)  # patterns in value order, +-0 both 0
    order = np.where(v <= a, order + 1, order) if up else np.where(v >= a, order - 1, order)
    top = fmt.inf_pattern if fmt.has_inf else fmt.max_pattern
    beyond = np.abs(order) > top  # past max in a format without inf: no such value
    order = np.clip(order, -top, top)
    res = np.abs(order).astype(np.uint64)
    res = np.where(order < 0, res | sign_bit, res)
    if fmt.nan_encoding != "fnuz":  # stepping onto zero keeps the side we came from
        res = np.where((order == 0) & (a < 0), sign_bit, res)
    vals = _decode_slow(res, fmt)
    out[ok] = np.where(beyond, np.nan, vals)
    return _pack(kind, shape, out)


def next_up(values: Any, fmt: str | FloatFormat) -> Any:
    """Smallest ``fmt`` value strictly greater than each input (like ``numpy.nextafter(x, inf)``).

    ``next_up(max)`` is inf in IEEE formats and NaN in formats without inf; NaN gives NaN.

    Chapter 3, *Number formats*.
    """
    return _step(values, fmt, up=True)


def next_down(values: Any, fmt: str | FloatFormat) -> Any:
    """Largest ``fmt`` value strictly less than each input (like ``numpy.nextafter(x, -inf)``).

    Chapter 3, *Number formats*.
    """
    return _step(values, fmt, up=False)


def ulp(values: Any, fmt: str | FloatFormat) -> Any:
    """Unit in the last place: the gap between consecutive ``fmt`` values in |x|'s binade.

    It is ``2**(max(floor(log2|x|), emin) - mantissa_bits)``, so ``ulp(1) = epsilon`` and
    ``ulp(0) = min_subnormal``; magnitudes beyond the top binade get its spacing; inf and NaN
    give NaN.

    Chapter 3, *Number formats*.
    """
    fmt = _float_format(fmt, "ulp()")
    kind, shape, arr = _unpack(values, "values")
    with np.errstate(invalid="ignore"):
        x = _float_input(arr, "values").astype(np.float64)
    _, exp = np.frexp(np.abs(x))  # |x| = f * 2**exp with f in [0.5, 1): floor(log2|x|) = exp - 1
    binade = np.clip(np.where(x == 0, fmt.emin, exp - 1), fmt.emin, fmt.emax)
    out = np.ldexp(1.0, (binade - fmt.mantissa_bits).astype(np.int32))
    out = np.where(np.isfinite(x), out, np.nan)
    return _pack(kind, shape, out)


def exact_decimal(value: float, fmt: str | Format | None = None, *, saturate: bool = False) -> str:
    """Write the exact decimal expansion of a stored value: FP32(pi) -> '3.1415927410125732421875'.

    With ``fmt`` the value is first rounded to that format; without, the float64 itself is
    expanded. Every binary float is a finite decimal, so no digit is rounded.

    Chapter 4, *Quantizing π*.
    """
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        raise ValueError(f"exact_decimal() needs one real number, got {value!r}")
    if fmt is not None:
        value = round_to_format(value, fmt, saturate=saturate)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    v = float(value)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return format(Decimal(v), "f")  # Decimal(float) is the exact binary value


def finite_values(fmt: str | FloatFormat) -> np.ndarray:
    """All distinct finite values of a format of at most 16 bits, sorted ascending (one zero).

    Chapter 3, *Number formats*.
    """
    fmt = _float_format(fmt, "finite_values()")
    if fmt.total_bits > 16:
        raise ValueError(f"finite_values() lists formats of at most 16 bits; {fmt.name} has {fmt.total_bits}")
    table = _table(fmt, "float64")
    return np.unique(table[np.isfinite(table)]) + 0.0  # one zero kept; + 0.0 makes it +0.0
