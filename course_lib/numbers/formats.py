"""Exact binary floating-point and integer codecs: how a real number becomes bits, and back.

Chapter 3 (*Number formats*) teaches it; chapter 4 (*Quantizing π*) applies it.

The formats themselves (:class:`~course_lib.numbers.format_specs.FloatFormat`, FP16, BF16,
E4M3, INT8, ... and :func:`~course_lib.numbers.format_specs.get_format`) are described in
:mod:`course_lib.numbers.format_specs`; every function here takes a format or its name.

Encoding rounds to nearest, ties to even: a value exactly halfway between two neighbours goes to
the one whose bit pattern is even (last mantissa bit 0 -- IEEE's rule; for ``mantissa_bits=0``
the last exponent bit decides). Rounding is done once, from the input's exact value (every
float32 and float16 value is a float64 value), so there is no double rounding. (torch rounds
float64 to FP16/BF16/FP8 through float32 and so double-rounds: ``1 + 2**-11 + 2**-40`` becomes
1.0 in torch, 1.0009765625 here.)

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

Integer formats round to nearest, ties to even (``2.5 -> 2``, ``3.5 -> 4``, ``2.7 -> 3`` where
``int(2.7)`` truncates to 2) and then clamps (saturates) into range; NaN cannot be encoded.

Bit patterns are non-negative integers (``uint8/16/32/64`` arrays); values come back as float64
(exact for every supported format). Everything accepts Python scalars, numpy arrays and torch
tensors and answers in kind.

How encoding works (:func:`encode`, step by step on whole arrays): find each value's binade
``2**e`` (``e`` no lower than ``emin``: below the min normal the spacing stays that of the lowest
binade, which is what subnormals are); count the value in steps of the binade's spacing
``2**(e - m)``; the whole steps give the pattern below it, ``(e - emin) * 2**m + steps``; round
up past half a step, or at exactly half where that makes the pattern even. A carry into the next
binade needs no special case: the pattern just counts on. Overflow then becomes inf, NaN or max,
and the sign bit goes on top. Decoding runs the formula backwards with ``ldexp`` (exact).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterator

import numpy as np
import torch

from course_lib.numbers.format_specs import FloatFormat, Format, IntFormat, get_format

__all__ = [
    "BitFields", "encode", "decode", "round_to_format", "fields", "bit_string", "next_up",
    "next_down", "ulp", "exact_decimal", "finite_values",
]  # fmt: skip


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
# Float encoding: the nearest value, ties to the even pattern, rounded once
# --------------------------------------------------------------------------------------------


def _flushing_subnormals() -> bool:
    """Whether the CPU flushes subnormals to zero right now (``torch.set_flush_denormal(True)``)."""
    return bool((np.array([5e-324]) * 1.0)[0] == 0.0)


@contextmanager
def _gradual_underflow() -> Iterator[None]:
    """Let subnormal inputs keep their value for the codec's arithmetic, then restore the mode."""
    flushing = _flushing_subnormals()
    if flushing:
        torch.set_flush_denormal(False)
    try:
        yield
    finally:
        if flushing:
            torch.set_flush_denormal(True)


def _encode_floats(x: np.ndarray, fmt: FloatFormat, saturate: bool) -> np.ndarray:
    """Round each value to the nearest ``fmt`` value, ties to the even pattern; return the patterns.

    Every step is exact in float64 (scaling by a power of two, ``floor``, a difference), so the
    only rounding is the decision in step 3: the value is rounded once.
    """
    e_min, m = fmt.emin, fmt.mantissa_bits
    with _gradual_underflow(), np.errstate(invalid="ignore"):
        x = x.astype(np.float64)  # exact: every float32 (and float16) value is a float64 value
        negative, finite = np.signbit(x), np.isfinite(x)
        a = np.where(finite, np.abs(x), 0.0)  # the magnitude; inf and NaN are set in step 4
        # 1. the binade: |x| = 1.f * 2**e; below min_normal (and at 0) the spacing stays emin's
        exponent = np.frexp(a)[1] - 1  # frexp writes |x| as 0.1f * 2**(e + 1)
        e = np.where(a > 0, np.maximum(exponent, e_min), e_min)
        # 2. |x| counted in steps of its binade's spacing, 2**(e - m); a whole number of
        #    steps is a stored value, with the pattern (e - emin) * 2**m + steps
        steps = np.ldexp(a, m - e)
        below = np.floor(steps)
        pattern = ((e - e_min).astype(np.int64) << m) + below.astype(np.int64)
        # 3. round up past half a step, and at exactly half when that makes the pattern even
        rest = steps - below
        pattern += (rest > 0.5) | ((rest == 0.5) & (pattern % 2 == 1))
    # 4. overflow (and infinities) become inf, NaN or max; NaN becomes the canonical NaN
    saturating = saturate or fmt.nan_encoding == "none"
    pattern[(pattern > fmt.max_pattern) | np.isinf(x)] = fmt.max_pattern + (0 if saturating else 1)
    nan = np.isnan(x)
    if nan.any():
        if fmt.nan_pattern is None:
            raise ValueError(f"format {fmt.name} has no NaN: cannot encode NaN")
        pattern[nan] = fmt.nan_pattern
    # 5. the sign bit on top (fnuz formats have no -0: a zero drops its sign)
    sign = negative.astype(np.uint64) << np.uint64(fmt.total_bits - 1)
    if fmt.nan_encoding == "fnuz":
        sign[pattern == 0] = 0
    return (pattern.astype(np.uint64) | sign).astype(_uint_dtype(fmt.total_bits))


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


def _decode_floats(p: np.ndarray, fmt: FloatFormat) -> np.ndarray:
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


def _check_dtype(fmt: FloatFormat, dtype: Any) -> str:
    name = np.dtype(dtype).name if dtype in ("float32", "float64", np.float32, np.float64) else None
    if name is None:
        raise ValueError(f"dtype must be 'float64' or 'float32', got {dtype!r}")
    exact32 = fmt.mantissa_bits <= 23 and fmt.emin >= -126 and fmt.emax <= 127
    if name == "float32" and not exact32:
        raise ValueError(f"{fmt.name} values are not all exact in float32; use dtype='float64'")
    return name


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
    return _pack(kind, shape, _decode_floats(p, fmt).astype(_check_dtype(fmt, dtype)))


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
    if isinstance(bits, (bool, np.bool_)) or not isinstance(bits, (int, np.integer)):
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
    v = _decode_floats(p, fmt)
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
    vals = _decode_floats(res, fmt)
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
    values = _decode_floats(np.arange(1 << fmt.total_bits, dtype=np.uint64), fmt)  # every pattern
    return np.unique(values[np.isfinite(values)]) + 0.0  # one zero kept; + 0.0 makes it +0.0
