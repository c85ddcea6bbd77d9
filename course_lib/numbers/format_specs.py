"""What a number format is: its bits, its range and its special values; the formats by name.

Chapter 3 (*Number formats*) teaches it; :mod:`course_lib.numbers.formats` encodes and decodes
values in any of these formats, exactly.

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

Its properties are computed from the bits alone: ``max``, ``min_normal``, ``min_subnormal``,
``epsilon``, ``emin``/``emax`` and the patterns of the largest value, of inf and of the
canonical NaN. :class:`IntFormat` describes two's-complement (``signed``) or unsigned integers
of 2..32 bits. The named formats (:data:`FP16`, :data:`BF16`, :data:`E4M3`, :data:`INT8`, ...)
are found by name with :func:`get_format`, which also makes custom ``eXmY`` and ``intN`` formats.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from course_lib.base import dtypes

__all__ = [
    "FloatFormat", "IntFormat", "Format", "NAN_ENCODINGS",
    "FP64", "FP32", "FP16", "BF16", "E4M3", "E5M2", "E4M3FNUZ", "E5M2FNUZ",
    "FP6_E3M2", "FP6_E2M3", "FP4_E2M1", "INT32", "INT16", "INT8", "INT4", "UINT8", "UINT4",
    "float_format", "get_format", "format_names",
]  # fmt: skip

#: The special-value conventions a :class:`FloatFormat` can use (see the module docstring).
NAN_ENCODINGS = ("ieee", "fn", "fnuz", "none")

_MAX_EXPONENT_BITS = 11  # float64's: every supported value must be exact in float64
_MAX_MANTISSA_BITS = 52


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


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
