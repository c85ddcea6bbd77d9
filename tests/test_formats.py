"""Tests for course_lib.numbers.formats and format_specs: exhaustive and random checks against torch, numpy and an
exact reference."""

from __future__ import annotations

import math
from bisect import bisect_right
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.numbers import format_specs as S
from course_lib.numbers import formats as F

# torch's dtype for each format it has; E4M3 is compared with saturate=True because torch's
# float8_e4m3fn cast clamps overflow (and +-inf) to +-448.
TORCH = {
    S.FP16: torch.float16,
    S.BF16: torch.bfloat16,
    S.E4M3: torch.float8_e4m3fn,
    S.E5M2: torch.float8_e5m2,
    S.E4M3FNUZ: torch.float8_e4m3fnuz,
    S.E5M2FNUZ: torch.float8_e5m2fnuz,
}
TORCH_SATURATES = {S.E4M3}
TORCH_FORMATS = list(TORCH)
IDS = [f.name for f in TORCH_FORMATS]
UINT = {8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}
SIGNED_VIEW = {8: torch.uint8, 16: torch.int16}


def all_patterns(fmt: S.FloatFormat) -> np.ndarray:
    width = next(w for w in UINT if w >= fmt.total_bits)
    return np.arange(1 << fmt.total_bits, dtype=np.uint64).astype(UINT[width])


def torch_decode(patterns: np.ndarray, fmt: S.FloatFormat) -> np.ndarray:
    """torch's value of each bit pattern, as float64."""
    view = patterns.view(np.int16) if fmt.total_bits == 16 else patterns
    return torch.from_numpy(view).view(TORCH[fmt]).to(torch.float64).numpy()


def torch_encode(x32: np.ndarray, fmt: S.FloatFormat) -> np.ndarray:
    """torch's bit patterns for float32 inputs, as an unsigned numpy array."""
    y = torch.from_numpy(x32).to(TORCH[fmt]).view(SIGNED_VIEW[fmt.total_bits])
    return y.numpy().view(UINT[fmt.total_bits])


def same_floats(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal as stored values: same bits (so -0 != +0) except that any NaN equals any NaN."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    return a.shape == b.shape and np.array_equal(nan_a, nan_b) and np.array_equal(
        a[~nan_a].view(np.uint64), b[~nan_b].view(np.uint64)
    )


# ---------------------------------------------------------------------------------------------
# An independent reference: exact rational arithmetic over the list of representable values
# ---------------------------------------------------------------------------------------------


def ref_value(p: int, fmt: S.FloatFormat) -> Fraction:
    """Magnitude of a sign-0 pattern by the textbook formula (finite patterns only)."""
    m = fmt.mantissa_bits
    raw, frac = p >> m, p & ((1 << m) - 1)
    if raw == 0:
        return Fraction(frac, 1 << m) * Fraction(2) ** (1 - fmt.bias)
    return (1 + Fraction(frac, 1 << m)) * Fraction(2) ** (raw - fmt.bias)


@lru_cache(maxsize=None)
def ref_magnitudes(fmt: S.FloatFormat) -> list[Fraction]:
    # patterns 0..max_pattern are the finite magnitudes, in increasing order; one more entry is
    # the value the next pattern would have with an unbounded exponent (the overflow neighbour)
    return [ref_value(p, fmt) for p in range(fmt.max_pattern + 2)]


def ref_encode(x: float, fmt: S.FloatFormat, saturate: bool = False) -> int:
    """Round-to-nearest, ties to the even pattern, by exact comparison with every value."""
    n = fmt.total_bits
    sign = 1 << (n - 1) if math.copysign(1.0, x) < 0 else 0
    if math.isnan(x):
        return 1 << (n - 1) if fmt.nan_encoding == "fnuz" else sign | fmt.nan_pattern
    if math.isinf(x):
        r = fmt.max_pattern + 1
    else:
        mags = ref_magnitudes(fmt)
        v = abs(Fraction(x))
        lo = bisect_right(mags, v) - 1
        if lo == len(mags) - 1:  # at or beyond the overflow neighbour
            r = lo
        elif mags[lo] == v:
            r = lo
        else:
            below, above = v - mags[lo], mags[lo + 1] - v
            r = lo if below < above or (below == above and lo % 2 == 0) else lo + 1
    if r > fmt.max_pattern:
        saturating = saturate or fmt.nan_encoding == "none"
        r = fmt.max_pattern if saturating else fmt.max_pattern + 1
        if fmt.nan_encoding == "fnuz" and not saturating:
            return 1 << (n - 1)
    if fmt.nan_encoding == "fnuz" and r == 0:
        return 0
    return sign | r


CUSTOM_FORMATS = [
    S.float_format(e, m, nan_encoding=enc, bias=bias)
    for e, m, enc, bias in [
        (2, 1, "none", None), (2, 3, "none", None), (3, 2, "none", None), (2, 0, "none", 0),
        (3, 0, "fn", None), (3, 1, "fn", None), (4, 3, "fn", None), (1, 3, "fn", None),
        (3, 2, "ieee", None), (2, 1, "ieee", None), (4, 1, "ieee", 3), (5, 2, "ieee", 20),
        (3, 2, "fnuz", None), (4, 3, "fnuz", 8), (2, 2, "fnuz", 1), (1, 0, "fnuz", None),
        (6, 3, "ieee", None), (4, 4, "fn", 10), (3, 5, "none", -2),
    ]
]
CUSTOM_IDS = [f"{f.name}_b{f.bias}" for f in CUSTOM_FORMATS]


def test_reference_agrees_with_torch_on_e4m3_midpoints():
    # guards the reference itself: on every E4M3 tie it must pick what torch picks
    pos = F.finite_values(S.E4M3)
    pos = pos[pos >= 0]
    mids = (pos[:-1] + pos[1:]) / 2
    got = np.array([ref_encode(float(x), S.E4M3, saturate=True) for x in mids], dtype=np.uint8)
    assert np.array_equal(got, torch_encode(mids.astype(np.float32), S.E4M3))


# ---------------------------------------------------------------------------------------------
# Exhaustive checks against torch: every bit pattern
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=IDS)
def test_every_pattern_decodes_like_torch(fmt):
    p = all_patterns(fmt)
    ours = F.decode(p, fmt)
    assert ours.dtype == np.float64 and ours.shape == p.shape
    assert same_floats(ours, torch_decode(p, fmt))
    assert same_floats(F.decode(p, fmt, dtype="float32"), ours)


NAN_PATTERNS = {S.FP16: 2 * 1023, S.BF16: 2 * 127, S.E4M3: 2, S.E5M2: 6, S.E4M3FNUZ: 1, S.E5M2FNUZ: 1}


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=IDS)
def test_every_pattern_reencodes_to_itself(fmt):
    p = all_patterns(fmt)
    values = F.decode(p, fmt)
    nan = np.isnan(values)
    assert nan.sum() == NAN_PATTERNS[fmt]
    for x in (values, values.astype(np.float32)):  # float64 and float32 code paths
        back = F.encode(x, fmt)
        assert back.dtype == p.dtype
        if fmt.nan_encoding == "fnuz":
            # no -0 to keep: -0 is the NaN pattern, and it is the only NaN
            assert np.array_equal(back[~nan], p[~nan]) and np.all(back[nan] == 0x80)
            continue
        assert np.array_equal(back[~nan], p[~nan])
        # NaNs canonicalise to the quiet NaN of their sign
        sign = p[nan] >> (fmt.total_bits - 1)
        assert np.array_equal(back[nan], (sign << (fmt.total_bits - 1)) | fmt.nan_pattern)


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=IDS)
def test_canonical_nan_is_what_torch_calls_nan(fmt):
    nan_bits = F.encode(np.array([np.nan, -np.nan]), fmt)
    assert np.isnan(torch_decode(nan_bits, fmt)).all()
    assert np.isnan(F.decode(nan_bits, fmt)).all()


# ---------------------------------------------------------------------------------------------
# A million random FP32 values, every tie, against torch's casts
# ---------------------------------------------------------------------------------------------


def _near(values: list[float], rng: np.random.Generator, count: int, spread: int) -> np.ndarray:
    """FP32 values within ``spread`` ulps of the given anchors, both signs."""
    values = [v for v in values if v < 2.0**128]  # BF16's overflow neighbours are beyond FP32
    anchors = np.array(values, dtype=np.float32).view(np.uint32).astype(np.int64)
    base = rng.choice(anchors, count)
    bits = np.clip(base + rng.integers(-spread, spread + 1, count), 0, 0x7F800000).astype(np.uint32)
    return bits.view(np.float32) * rng.choice(np.array([-1, 1], np.float32), count)


@pytest.fixture(scope="module")
def random_fp32() -> np.ndarray:
    rng = np.random.default_rng(20240611)
    q = 1 << 18
    anchors = []
    for fmt in TORCH_FORMATS:
        top_gap = math.ldexp(1.0, fmt.emax - fmt.mantissa_bits)
        anchors += [fmt.max, fmt.max + top_gap / 2, fmt.max + top_gap, fmt.min_normal,
                    fmt.min_subnormal, fmt.min_subnormal / 2, fmt.min_subnormal * 1.5]
    parts = [
        rng.integers(0, 2**32, q, dtype=np.uint32).view(np.float32),  # any pattern: NaN, inf, huge, FP32 subnormals
        (np.ldexp(rng.uniform(1, 2, q), rng.integers(-30, 18, q)) * rng.choice([-1, 1], q)).astype(np.float32),
        (rng.standard_normal(q) * rng.choice([1e-3, 1, 100], q)).astype(np.float32),
        _near(anchors, rng, q, 70_000),  # around max, overflow ties, min normal, subnormals
    ]
    x = np.concatenate(parts + [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], np.float32)])
    assert x.size >= 1_000_000
    return x


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=IDS)
def test_million_random_fp32_encode_like_torch(fmt, random_fp32):
    x = random_fp32
    ours = F.encode(x, fmt, saturate=fmt in TORCH_SATURATES)
    theirs = torch_encode(x, fmt)
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], theirs[~nan])
    assert np.isnan(F.decode(ours[nan], fmt)).all() and np.isnan(torch_decode(theirs[nan], fmt)).all()
    # the float64 path must give the same bits as the float32 path
    with np.errstate(invalid="ignore"):  # float32 signalling NaNs
        x64 = x.astype(np.float64)
    assert np.array_equal(F.encode(x64, fmt, saturate=fmt in TORCH_SATURATES), ours)


def test_e4m3_default_overflows_to_nan_where_torch_saturates(random_fp32):
    x = random_fp32
    default = F.encode(x, S.E4M3)
    saturated = F.encode(x, S.E4M3, saturate=True)
    with np.errstate(invalid="ignore"):
        over = np.abs(x.astype(np.float64)) > 464  # 464 is the tie between 448 and 480: rounds to 448
    assert 1000 < over.sum() < x.size
    assert np.array_equal(default[~over], saturated[~over])
    assert np.all((default[over] & 0x7F) == 0x7F)  # NaN, with the input's sign
    assert np.all(np.isin(saturated[over & ~np.isnan(x)], [0x7E, 0xFE]))
    assert F.encode(464.0, S.E4M3) == 0x7E and F.encode(np.nextafter(464.0, 500.0), S.E4M3) == 0x7F


def _ties(fmt: S.FloatFormat) -> np.ndarray:
    """Every value exactly halfway between two neighbours (and the overflow tie), as float32."""
    pos = F.finite_values(fmt)
    pos = pos[pos >= 0]
    top = pos[-1] + math.ldexp(1.0, fmt.emax - fmt.mantissa_bits)
    mids = (np.append(pos, top)[1:] + pos) / 2
    mids32 = mids.astype(np.float32)
    assert np.array_equal(mids32.astype(np.float64), mids)  # really exact ties
    return np.concatenate([mids32, -mids32])


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=IDS)
def test_every_tie_rounds_like_torch(fmt):
    ties = _ties(fmt)
    assert ties.size == 2 * (fmt.max_pattern + 1)  # one per gap, including subnormals and 0..min
    sat = fmt in TORCH_SATURATES
    ours = F.encode(ties, fmt, saturate=sat)
    assert np.array_equal(ours, torch_encode(ties, fmt))
    finite = (ours & ((1 << (fmt.total_bits - 1)) - 1)) <= fmt.max_pattern
    assert np.all(ours[finite & (np.abs(ties) < fmt.max)] % 2 == 0)  # ties go to the even pattern
    for direction in (-np.inf, np.inf):  # one float32 step off the tie decides it
        off = np.nextafter(ties, np.float32(direction)).astype(np.float32)
        assert np.array_equal(F.encode(off, fmt, saturate=sat), torch_encode(off, fmt))


# ---------------------------------------------------------------------------------------------
# float64 inputs: single rounding, FP32 and FP16 against numpy
# ---------------------------------------------------------------------------------------------


def test_float64_inputs_round_once_where_torch_rounds_twice():
    x = 1 + 2**-11 + 2**-40  # just above the FP16 tie between 1 and 1 + 2**-10
    assert F.encode(x, S.FP16) == 0x3C01 == np.array([x]).astype(np.float16).view(np.uint16)[0]
    assert torch.tensor([x], dtype=torch.float64).to(torch.float16).item() == 1.0  # via float32
    assert F.round_to_format(1 + 2**-8 + 2**-40, S.BF16) == 1 + 2**-7
    assert F.round_to_format(1 + 2**-4 + 2**-40, S.E4M3) == 1.125
    assert F.round_to_format(1 + 2**-4, S.E4M3) == 1.0  # the exact tie goes to even


def test_float64_near_ties_match_numpy_fp16():
    rng = np.random.default_rng(7)
    ties = _ties(S.FP16).astype(np.float64)
    eps = np.ldexp(rng.uniform(0.5, 1, ties.size), rng.integers(-60, -26, ties.size))
    x = np.concatenate([ties * (1 + eps), ties * (1 - eps), ties, rng.standard_normal(100_000) * 1e4])
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(F.encode(x, S.FP16), expected)


def test_fp32_format_matches_numpy_float32():
    rng = np.random.default_rng(3)
    x = np.concatenate([
        np.ldexp(rng.uniform(-2, 2, 300_000), rng.integers(-160, 130, 300_000)),  # incl. subnormal, overflow
        rng.integers(0, 2**64, 100_000, dtype=np.uint64).view(np.float64),
        np.array([1 + 2**-24, 1 + 3 * 2**-24, 2**-150, 3 * 2**-150, 2**-151, 3.4028235677973366e38]),
    ])
    x = x[~np.isnan(x)]
    with np.errstate(over="ignore"):
        expected = x.astype(np.float32).view(np.uint32)
    assert np.array_equal(F.encode(x, S.FP32), expected)
    patterns = rng.integers(0, 2**32, 1_000_000, dtype=np.uint32)
    with np.errstate(invalid="ignore"):
        expected_values = patterns.view(np.float32).astype(np.float64)
    assert same_floats(F.decode(patterns, S.FP32), expected_values)
    assert F.encode(math.pi, S.FP32) == int(np.array([math.pi], np.float32).view(np.uint32)[0])


def test_fp64_format_is_the_identity_on_float64_bits():
    rng = np.random.default_rng(4)
    bits = rng.integers(0, 2**64, 200_000, dtype=np.uint64)
    x = bits.view(np.float64)
    ok = ~np.isnan(x)
    assert np.array_equal(F.encode(x, S.FP64)[ok], bits[ok])
    assert same_floats(F.decode(bits, S.FP64), x)
    # float32 inputs to formats wider than FP32 go through float64 (exactly)
    x32 = rng.integers(0, 2**32, 100_000, dtype=np.uint32).view(np.float32)
    x32 = x32[~np.isnan(x32)]
    assert np.array_equal(F.encode(x32, S.FP64), x32.astype(np.float64).view(np.uint64))
    wide = S.float_format(9, 4)  # range beyond FP32's: FP32 inputs never overflow it
    sample = x32[:3000]
    assert F.encode(sample, wide).tolist() == [ref_encode(float(v), wide) for v in sample]


# ---------------------------------------------------------------------------------------------
# Custom formats against the exact reference
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", CUSTOM_FORMATS, ids=CUSTOM_IDS)
def test_custom_formats_match_reference_on_every_tie_and_value(fmt):
    mags = np.array([float(v) for v in ref_magnitudes(fmt)])
    mids = (mags[:-1] + mags[1:]) / 2
    x = np.concatenate([mags, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf), [np.inf]])
    x = np.concatenate([x, -x])
    for sat in (False, True):
        expected = np.array([ref_encode(v, fmt, sat) for v in x], dtype=np.uint64)
        assert np.array_equal(F.encode(x, fmt, saturate=sat).astype(np.uint64), expected)
    values = F.decode(all_patterns(fmt), fmt)
    finite = np.isfinite(values)
    assert np.array_equal(np.unique(np.abs(values[finite])), mags[:-1])


custom_formats = st.builds(
    lambda e, m, enc, shift: S.float_format(e, m, nan_encoding=enc, bias=2 ** (e - 1) - 1 + shift),
    st.integers(2, 6), st.integers(1, 4), st.sampled_from(S.NAN_ENCODINGS), st.integers(-3, 3),
)


@st.composite
def values_for(draw, fmt: S.FloatFormat) -> float:
    """Mostly values on the format's own grid and half-grid (ties), sometimes any float."""
    if draw(st.booleans()):
        return draw(st.floats(allow_nan=fmt.has_nan, allow_infinity=True))
    k = draw(st.integers(fmt.emin - fmt.mantissa_bits - 3, fmt.emax + 2))
    i = draw(st.integers(0, 1 << (fmt.mantissa_bits + 3)))
    return draw(st.sampled_from([1.0, -1.0])) * math.ldexp(i, k - 2)


@settings(max_examples=300, deadline=None)
@given(st.data(), custom_formats, st.booleans())
def test_hypothesis_custom_formats_match_reference(data, fmt, saturate):
    xs = data.draw(st.lists(values_for(fmt), min_size=1, max_size=20))
    expected = [ref_encode(x, fmt, saturate) for x in xs]
    assert F.encode(np.array(xs), fmt, saturate=saturate).tolist() == expected
    assert [F.encode(x, fmt, saturate=saturate) for x in xs[:3]] == expected[:3]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=False, width=64), min_size=1, max_size=50))
def test_hypothesis_fp16_matches_numpy_from_float64(xs):
    x = np.array(xs)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16).view(np.uint16)
    assert np.array_equal(F.encode(x, S.FP16), expected)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([S.FP16, S.BF16, S.E4M3, S.E5M2, S.FP4_E2M1]),
       st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
def test_hypothesis_rounding_is_monotone_idempotent_and_within_half_ulp(fmt, a, b):
    lo, hi = min(a, b), max(a, b)
    qa, qb = F.round_to_format(lo, fmt, saturate=True), F.round_to_format(hi, fmt, saturate=True)
    assert qa <= qb
    assert F.round_to_format(qa, fmt) == qa
    if abs(lo) <= fmt.max:
        assert abs(Fraction(qa) - Fraction(lo)) <= Fraction(F.ulp(lo, fmt)) / 2


@settings(max_examples=200, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_hypothesis_exact_decimal_is_exact(x):
    assert Fraction(Decimal(F.exact_decimal(x))) == Fraction(x)
    q = F.round_to_format(x, S.FP16, saturate=True)
    assert Fraction(Decimal(F.exact_decimal(x, S.FP16, saturate=True))) == Fraction(q)


# ---------------------------------------------------------------------------------------------
# Hard inputs: every tie and the float32 values next to it, subnormals, specials; far-off biases;
# flush-to-zero mode
# ---------------------------------------------------------------------------------------------


def _hard_inputs(fmt: S.FloatFormat) -> np.ndarray:
    """Every tie of ``fmt``, the float32 values next to each, FP32 subnormals and the special values."""
    ties = _ties(fmt)
    near = [np.nextafter(ties, np.float32(d)).astype(np.float32) for d in (-np.inf, np.inf)]
    special = [0.0, -0.0, 1e-45, -1e-45, 1e-40, 2.0**-126, 3e38, -3e38, np.inf, -np.inf, np.nan, -np.nan]
    x = np.concatenate([ties, *near, np.float32(special)])
    return x if fmt.has_nan else x[~np.isnan(x)]


def _expected(x: np.ndarray, fmt: S.FloatFormat, saturate: bool) -> np.ndarray:
    """torch's bits where torch follows the same rules, the exact reference everywhere else."""
    dtype = UINT[next(w for w in UINT if w >= fmt.total_bits)]
    if fmt not in TORCH:
        return np.array([ref_encode(float(v), fmt, saturate) for v in x], dtype=dtype)
    out = torch_encode(x, fmt)
    with np.errstate(invalid="ignore"):
        beyond = ~(np.abs(x) <= fmt.max)  # overflow, inf and NaN: where the conventions differ
    out[beyond] = [ref_encode(float(v), fmt, saturate) for v in x[beyond]]
    return out


HARD_FORMATS = TORCH_FORMATS + [CUSTOM_FORMATS[i] for i in (0, 5, 12, 18)]
HARD_IDS = IDS + [CUSTOM_IDS[i] for i in (0, 5, 12, 18)]


@pytest.mark.parametrize("saturate", [False, True], ids=["overflow", "saturate"])
@pytest.mark.parametrize("fmt", HARD_FORMATS, ids=HARD_IDS)
def test_hard_inputs_give_the_exact_bits_in_arrays_and_as_scalars(fmt, saturate):
    x = _hard_inputs(fmt)
    expected = _expected(x, fmt, saturate)
    assert np.array_equal(F.encode(x, fmt, saturate=saturate), expected)
    for i in np.random.default_rng(5).choice(x.size, min(x.size, 200), replace=False):
        assert F.encode(float(x[i]), fmt, saturate=saturate) == expected[i]


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=IDS)
def test_fp32_sweep_and_every_pattern_near_the_boundaries_encode_like_torch(fmt):
    # every 4093rd float32 pattern (a prime stride: all exponents, mantissas and both signs), and
    # every float32 pattern within 2**13 of the format's boundaries: half the min subnormal, the
    # min subnormal, the min normal and half of it, the max, the overflow tie and the next value
    sweep = np.arange(0, 2**32, 4093, dtype=np.uint64).astype(np.uint32)
    gap = math.ldexp(1.0, fmt.emax - fmt.mantissa_bits)
    edges = [fmt.min_subnormal / 2, fmt.min_subnormal, fmt.min_normal / 2, fmt.min_normal,
             fmt.max, fmt.max + gap / 2, fmt.max + gap]
    anchors = np.float32([e for e in edges if e < 2.0**128]).view(np.uint32).astype(np.int64)
    window = (anchors[:, None] + np.arange(-(2**13), 2**13)).ravel().astype(np.uint32)
    x = np.concatenate([sweep, window, window | np.uint32(2**31)]).view(np.float32)
    ours = F.encode(x, fmt, saturate=fmt in TORCH_SATURATES)
    theirs = torch_encode(x, fmt)
    nan = np.isnan(x)
    assert np.array_equal(ours[~nan], theirs[~nan])
    assert np.isnan(F.decode(ours[nan], fmt)).all()


def test_formats_with_a_far_off_bias_round_exactly():
    # a binade spacing far below float64's (or float32's) smallest normal, and an emin far above 0
    for fmt, dtype in [
        (S.float_format(2, 1, bias=-1000, nan_encoding="none"), np.float64),
        (S.float_format(2, 1, bias=-1000, nan_encoding="fnuz"), np.float64),
        (S.float_format(3, 0, bias=-110, nan_encoding="none"), np.float32),
    ]:
        mags = np.array([float(v) for v in ref_magnitudes(fmt)])
        mids = (mags[:-1] + mags[1:]) / 2
        x = np.concatenate([mags, mids, np.nextafter(mids, 0), np.nextafter(mids, np.inf), [np.inf, mags[1] / 4]])
        x = np.concatenate([x, -x]).astype(dtype)
        for sat in (False, True):
            expected = [ref_encode(float(v), fmt, sat) for v in x]
            assert F.encode(x, fmt, saturate=sat).tolist() == expected


def test_encoding_is_exact_in_flush_to_zero_mode():
    # flush-to-zero mode would read FP32 subnormals as 0 in the codec's float arithmetic, so
    # encode() turns it off for its own work and back on afterwards
    x = (np.arange(1, 2**16, dtype=np.uint32) * 97).view(np.float32)  # FP32 subnormals
    x = np.concatenate([x, -x, np.float32([1.0, 2.0**-130, 2.0**-133, 3 * 2.0**-134])])
    expected = F.encode(x, S.BF16)
    assert np.count_nonzero(expected & 0x7FFF) > 60_000  # they are BF16 subnormals, not zeros
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU has no flush-to-zero mode")
    try:
        assert np.array_equal(F.encode(x, S.BF16), expected)
        assert F._flushing_subnormals()  # the caller's mode is back
    finally:
        torch.set_flush_denormal(False)
    assert not F._flushing_subnormals()


@pytest.mark.parametrize("size", [10, 100_000, 400_000])
def test_nan_in_a_large_array_follows_the_format(size):
    x = np.linspace(-3, 3, size)
    x[size // 3] = np.nan
    with pytest.raises(ValueError, match="format fp4_e2m1 has no NaN: cannot encode NaN"):
        F.encode(x, S.FP4_E2M1)
    bits = F.encode(x, S.FP16)
    assert bits[size // 3] == 0x7E00 and np.array_equal(np.delete(bits, size // 3),
                                                        np.delete(x, size // 3).astype(np.float16).view(np.uint16))


# ---------------------------------------------------------------------------------------------
# Named facts
# ---------------------------------------------------------------------------------------------


def test_named_maxima():
    assert S.FP16.max == 65504.0
    assert S.BF16.max == (2 - 2**-7) * 2.0**127 and f"{S.BF16.max:.4e}" == "3.3895e+38"
    assert S.FP32.max == float(np.finfo(np.float32).max) and f"{S.FP32.max:.4e}" == "3.4028e+38"
    assert S.E4M3.max == 448.0 and S.E5M2.max == 57344.0
    assert S.E4M3FNUZ.max == 240.0 and S.E5M2FNUZ.max == 57344.0
    assert S.FP4_E2M1.max == 6.0 and S.FP6_E2M3.max == 7.5 and S.FP6_E3M2.max == 28.0
    assert S.FP64.max == np.finfo(np.float64).max


@pytest.mark.parametrize("fmt", TORCH_FORMATS, ids=IDS)
def test_constants_match_torch(fmt):
    info = torch.finfo(TORCH[fmt])
    assert (fmt.max, fmt.min_normal) == (info.max, info.smallest_normal)
    # epsilon and min subnormal from torch's own values of the patterns after 1.0 and after 0
    # (torch.finfo(float8_e5m2fnuz).eps says 0.125, but the value after 1.0 is 1.25)
    one = int(torch_encode(np.float32([1.0]), fmt)[0])
    after = torch_decode(np.array([one + 1, 1], dtype=UINT[fmt.total_bits]), fmt)
    assert (fmt.epsilon, fmt.min_subnormal) == (after[0] - 1.0, after[1])
    assert fmt is S.E5M2FNUZ or fmt.epsilon == info.eps


def test_named_epsilons_and_smallest_values():
    assert S.FP32.epsilon == 2**-23 == np.finfo(np.float32).eps
    assert S.FP16.epsilon == 2**-10 == np.finfo(np.float16).eps
    assert (S.BF16.epsilon, S.E4M3.epsilon, S.E5M2.epsilon, S.FP64.epsilon) == (2**-7, 0.125, 0.25, 2**-52)
    assert S.FP16.min_subnormal == 2**-24 == np.finfo(np.float16).smallest_subnormal
    assert S.FP32.min_subnormal == 2**-149 == np.finfo(np.float32).smallest_subnormal
    assert (S.BF16.min_subnormal, S.E4M3.min_subnormal, S.E5M2.min_subnormal) == (2**-133, 2**-9, 2**-16)
    assert S.FP16.min_normal == 2**-14 and S.E4M3.min_normal == 2**-6 and S.FP32.min_normal == 2**-126


def test_named_values_and_decimals():
    assert F.round_to_format(math.pi, S.FP16) == 3.140625 and F.encode(math.pi, S.FP16) == 0x4248
    assert F.round_to_format(math.pi, S.BF16) == 3.140625 and F.round_to_format(math.pi, S.E4M3) == 3.25
    assert F.exact_decimal(math.pi, S.FP32) == "3.1415927410125732421875"
    assert F.exact_decimal(0.1) == "0.1000000000000000055511151231257827021181583404541015625"
    assert F.exact_decimal(0.1, "fp16") == "0.0999755859375"
    assert F.exact_decimal(1e6, S.FP16) == "inf" and F.exact_decimal(-1e6, S.E4M3) == "nan"
    assert F.exact_decimal(-1e6, S.E4M3, saturate=True) == "-448"
    assert F.exact_decimal(S.FP32.min_subnormal).startswith("0.00000000000000000000000000000000000000000000140129846")
    assert F.exact_decimal(-0.0) == "-0" and F.exact_decimal(2.5, S.INT8) == "2"
    assert F.finite_values(S.FP4_E2M1).tolist() == [-6, -4, -3, -2, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 4, 6]
    assert F.finite_values(S.E4M3).size == 253 and F.finite_values(S.FP16).size == 2 * 31743 + 1
    assert np.signbit(F.finite_values(S.FP16)).sum() == 31743  # the one zero is +0


def test_special_values_encode_per_convention():
    inf, nan = math.inf, math.nan
    assert [F.encode(v, S.FP16) for v in (inf, -inf, nan, -nan, -0.0, 65520.0, 65519.0)] == [
        0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x8000, 0x7C00, 0x7BFF]
    assert [F.encode(v, S.E4M3) for v in (inf, -inf, nan, 1e9)] == [0x7F, 0xFF, 0x7F, 0x7F]
    assert [F.encode(v, S.E4M3, saturate=True) for v in (inf, -inf, nan, 1e9)] == [0x7E, 0xFE, 0x7F, 0x7E]
    assert [F.encode(v, S.E5M2, saturate=True) for v in (inf, 1e9, nan)] == [0x7B, 0x7B, 0x7E]
    assert [F.encode(v, S.E4M3FNUZ) for v in (-0.0, -1e-9, nan, -nan, 1e9)] == [0, 0, 0x80, 0x80, 0x80]
    assert [F.encode(v, S.FP4_E2M1) for v in (inf, -1e9, 5.0, 0.25, 0.26)] == [0x7, 0xF, 0x6, 0x0, 0x1]
    assert F.encode(2**-25, S.FP16) == 0 and F.encode(3 * 2**-26, S.FP16) == 1  # tie to 0, above it
    assert math.copysign(1, F.decode(0x8000, S.FP16)) == -1
    assert math.isnan(F.decode(0x80, S.E4M3FNUZ)) and F.decode(0x7E, S.E4M3) == 448.0


# ---------------------------------------------------------------------------------------------
# Fields and bit strings
# ---------------------------------------------------------------------------------------------


def test_fields_of_fp16_patterns():
    one = F.fields(0x3C00, S.FP16)
    assert (one.sign, one.raw_exponent, one.exponent, one.mantissa, one.implicit_bit) == (0, 15, 0, 0, 1)
    assert not (one.is_subnormal or one.is_nan or one.is_inf or one.is_zero) and one.value == 1.0
    tiny = F.fields(0x0001, S.FP16)
    assert (tiny.raw_exponent, tiny.exponent, tiny.mantissa, tiny.implicit_bit) == (0, -14, 1, 0)
    assert tiny.is_subnormal and tiny.value == 2**-24
    neg_zero = F.fields(0x8000, S.FP16)
    assert neg_zero.sign == 1 and neg_zero.is_zero and not neg_zero.is_subnormal
    assert F.fields(0x7C00, S.FP16).is_inf and F.fields(0xFE00, S.FP16).is_nan
    pi = F.fields(F.encode(math.pi, S.FP16), S.FP16)
    assert (pi.exponent, pi.mantissa, pi.value) == (1, 0b1001001000, 3.140625)


def test_fields_of_fp8_patterns():
    top = F.fields(0x7E, S.E4M3)
    assert (top.raw_exponent, top.exponent, top.mantissa, top.value, top.is_nan) == (15, 8, 6, 448.0, False)
    assert F.fields(0x7F, S.E4M3).is_nan and not F.fields(0x78, S.E4M3).is_nan
    assert F.fields(0x7C, S.E5M2).is_inf and F.fields(0x7D, S.E5M2).is_nan
    nan = F.fields(0x80, S.E4M3FNUZ)
    assert nan.is_nan and not nan.is_zero and nan.sign == 1


def test_bit_strings():
    assert F.bit_string(F.encode(1.0, S.FP16), S.FP16) == "0 01111 0000000000"
    assert F.bit_string(F.encode(-448.0, S.E4M3), "e4m3", sep="|") == "1|1111|110"
    assert F.bit_string(F.encode(-1.0, S.INT8), S.INT8) == "11111111"
    assert F.bit_string(0b101, S.float_format(2, 0, nan_encoding="none")) == "1 01"


# ---------------------------------------------------------------------------------------------
# Neighbours and ULPs against numpy.nextafter
# ---------------------------------------------------------------------------------------------


def _finite_fp16_and_random_fp32():
    h = np.arange(65536, dtype=np.uint16).view(np.float16)
    rng = np.random.default_rng(11)
    s = np.concatenate([
        rng.integers(0, 2**32, 300_000, dtype=np.uint32).view(np.float32),
        np.float32([0, -0.0, np.finfo(np.float32).smallest_subnormal, np.finfo(np.float32).max]),
    ])
    return [(S.FP16, h[np.isfinite(h)]), (S.FP32, s[np.isfinite(s)])]


@pytest.mark.parametrize("fmt,x", _finite_fp16_and_random_fp32(), ids=["fp16", "fp32"])
def test_next_up_down_and_ulp_match_nextafter(fmt, x):
    dtype = x.dtype.type
    with np.errstate(over="ignore"):
        up, down = np.nextafter(x, dtype(np.inf)), np.nextafter(x, dtype(-np.inf))
    assert same_floats(F.next_up(x, fmt), up.astype(np.float64))
    assert same_floats(F.next_down(x, fmt), down.astype(np.float64))
    a = np.abs(x)
    inner = a < dtype(fmt.max)
    gap = np.nextafter(a[inner], dtype(np.inf)).astype(np.float64) - a[inner].astype(np.float64)
    assert np.array_equal(F.ulp(x[inner], fmt), gap)


def test_next_up_of_values_between_neighbours():
    rng = np.random.default_rng(12)
    x = np.concatenate([rng.standard_normal(100_000) * np.exp2(rng.integers(-26, 17, 100_000)), [1e9, -1e9]])
    with np.errstate(over="ignore"):
        r = x.astype(np.float16)
        expected_up = np.where(r > x, r, np.nextafter(r, np.float16(np.inf))).astype(np.float64)
    assert same_floats(F.next_up(x, S.FP16), expected_up)


def test_neighbour_edge_cases():
    assert F.next_up(S.FP16.max, S.FP16) == math.inf and F.next_up(math.inf, S.FP16) == math.inf
    assert F.next_down(-math.inf, S.FP16) == -math.inf and F.next_up(-math.inf, S.FP16) == -S.FP16.max
    assert math.isnan(F.next_up(448.0, S.E4M3)) and F.next_down(448.0, S.E4M3) == 416.0
    assert math.isnan(F.next_up(math.nan, S.BF16)) and F.next_up(0.0, S.E4M3) == 2**-9
    assert F.next_up(1.0, S.BF16) - 1.0 == S.BF16.epsilon == F.ulp(1.0, S.BF16)
    assert F.ulp(0.0, S.E5M2) == S.E5M2.min_subnormal and F.ulp(448.0, S.E4M3) == 32.0
    assert math.isnan(F.ulp(math.inf, S.FP16))
    t = F.next_up(torch.tensor([1.0, 2.0]), S.FP16)
    assert isinstance(t, torch.Tensor) and t.tolist() == [1 + 2**-10, 2 + 2**-9]


# ---------------------------------------------------------------------------------------------
# Integer formats
# ---------------------------------------------------------------------------------------------


def test_int8_rounds_to_nearest_even_and_saturates():
    assert F.encode(math.pi, S.INT8) == 3 == int(math.pi)  # truncation agrees here...
    assert F.encode(2.7, S.INT8) == 3 and int(2.7) == 2  # ...but not here: we round
    x = np.array([2.5, 3.5, -2.5, -2.7, 0.5, -0.5, 126.5, 300.0, -300.0, np.inf, -np.inf, -1.0])
    bits = F.encode(x, S.INT8)
    assert bits.dtype == np.uint8
    assert F.decode(bits, S.INT8).tolist() == [2, 4, -2, -3, 0, 0, 126, 127, -128, 127, -128, -1]
    assert bits[-1] == 0xFF  # two's complement
    assert F.decode(F.encode([-5.0, 300.0, 254.5, 127.5], S.UINT8), S.UINT8).tolist() == [0, 255, 254, 128]
    assert F.decode(F.encode([-9.0, 7.6, -8.5], S.INT4), S.INT4).tolist() == [-8, 7, -8]
    assert (S.INT4.min, S.INT4.max, S.UINT4.max, S.INT32.min) == (-8, 7, 15, -(2**31))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([S.INT8, S.INT4, S.UINT8, S.IntFormat(2), S.INT32, S.IntFormat(12, False)]),
       st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_hypothesis_integers_match_python_round(fmt, xs):
    expected = [min(max(round(x), fmt.min), fmt.max) for x in xs]  # round() ties to even
    assert F.decode(F.encode(np.array(xs), fmt), fmt).tolist() == expected


# ---------------------------------------------------------------------------------------------
# Containers and look-up
# ---------------------------------------------------------------------------------------------


def test_containers_round_trip_in_kind():
    t = torch.tensor([[1.0, -2.0], [0.5, 65504.0]])
    bits = F.encode(t, S.FP16)
    assert isinstance(bits, torch.Tensor) and bits.dtype == torch.uint16 and bits.shape == (2, 2)
    assert torch.equal(bits.view(torch.int16), t.to(torch.float16).view(torch.int16))
    back = F.decode(bits, S.FP16)
    assert isinstance(back, torch.Tensor) and back.dtype == torch.float64 and torch.equal(back, t.double())
    assert F.encode(torch.tensor([1.0], dtype=torch.bfloat16), S.BF16).tolist() == [0x3F80]
    assert F.encode([1.0, 2.0], "fp16").tolist() == [0x3C00, 0x4000]
    assert F.encode(np.float16(1.5), S.FP32) == 0x3FC00000 and F.encode(3, S.FP16) == 0x4200
    assert F.decode(np.array([0x3C00], np.int32), S.FP16).tolist() == [1.0]
    assert isinstance(F.decode(0x3C00, S.FP16), float) and F.decode(0x3C00, S.FP16, dtype="float32") == 1.0
    assert F.encode(np.empty((0, 3)), S.E4M3).shape == (0, 3)


def test_get_format_names():
    assert S.get_format("FP16") is S.FP16 and S.get_format(" bfloat16 ") is S.BF16
    assert S.get_format("E4M3FN") is S.E4M3 and S.get_format("e5m2") is S.E5M2
    assert S.get_format("int8") is S.INT8 and S.get_format("UINT8") is S.UINT8 and S.get_format("int4") is S.INT4
    e3m2 = S.get_format("E3M2")
    assert (e3m2.exponent_bits, e3m2.mantissa_bits, e3m2.nan_encoding, e3m2.max) == (3, 2, "ieee", 14.0)
    assert S.get_format("e3m2fn").max == 24.0 and S.get_format("e2m1") is S.FP4_E2M1
    assert S.get_format("int12") == S.IntFormat(12) and S.get_format(S.E5M2) is S.E5M2
    assert set(S.format_names()) >= {"fp32", "fp16", "bf16", "e4m3", "e5m2", "int8", "int4", "uint8"}


# ---------------------------------------------------------------------------------------------
# Bad input
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,message", [
    (lambda: S.get_format("fp12"), r"unknown format 'fp12'; valid names are fp64, fp32, fp16, bf16, e4m3"),
    (lambda: S.get_format(16), r"a format must be a FloatFormat, an IntFormat or a name like 'fp16', got 16"),
    (lambda: S.float_format(0, 3), r"exponent_bits must be an integer from 1 to 11, got 0"),
    (lambda: S.float_format(12, 3), r"exponent_bits must be an integer from 1 to 11, got 12"),
    (lambda: S.float_format(4, -1), r"mantissa_bits must be an integer from 0 to 52, got -1"),
    (lambda: S.float_format(4, 3, nan_encoding="ocp"), r"nan_encoding must be one of 'ieee', 'fn', 'fnuz', 'none', got 'ocp'"),
    (lambda: S.float_format(4, 0), r"an 'ieee' format needs mantissa_bits >= 1"),
    (lambda: S.float_format(1, 2), r"has no normal numbers"),
    (lambda: S.float_format(5, 2, bias=-1100), r"outside float64's"),
    (lambda: S.get_format("int1"), r"integer bit width must be an integer from 2 to 32, got 1"),
    (lambda: S.IntFormat(33), r"integer bit width must be an integer from 2 to 32, got 33"),
    (lambda: F.decode(70000, S.FP16), r"bit pattern 70000 is out of range for fp16 \(16 bits\): valid patterns are 0\.\.65535"),
    (lambda: F.decode(np.array([-1]), S.E4M3), r"bit pattern -1 is out of range for e4m3 \(8 bits\)"),
    (lambda: F.decode(np.array([1.5]), S.FP16), r"bit patterns must be integers, got dtype float64"),
    (lambda: F.decode(1, S.FP64, dtype="float32"), r"fp64 values are not all exact in float32"),
    (lambda: F.decode(1, S.FP16, dtype="float16"), r"dtype must be 'float64' or 'float32'"),
    (lambda: F.fields(300, S.E4M3), r"bit pattern 300 is out of range for e4m3: valid patterns are 0\.\.255"),
    (lambda: F.fields(3, S.INT8), r"fields\(\) needs a floating-point format; int8 is an integer format"),
    (lambda: F.encode(math.nan, S.FP4_E2M1), r"format fp4_e2m1 has no NaN: cannot encode NaN"),
    (lambda: F.encode(math.nan, S.INT8), r"NaN has no int8 representation"),
    (lambda: F.encode(1.0, S.FP16, saturate="yes"), r"saturate must be True or False"),
    (lambda: F.encode(np.array([2**60 + 1]), S.FP32), r"integers above 2\*\*53 in magnitude are not exact"),
    (lambda: F.encode("1.0", S.FP16), r"values must be a number, a list, a numpy array or a torch tensor, got str"),
    (lambda: F.encode(np.array([1 + 2j]), S.FP16), r"unsupported dtype complex128"),
    (lambda: F.finite_values(S.FP32), r"at most 16 bits; fp32 has 32"),
])
def test_bad_input_raises_clear_value_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()
