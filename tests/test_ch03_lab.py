"""Chapter 3's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references against torch's float8_e4m3fn, and edges worked by hand."""

import math

import pytest
import torch

from course_lib.chapters import ch03_lab


def _fields(x):
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    return sign, abs(x)


def encode_half_away(x):
    if math.isnan(x):
        return 0x7F
    sign, a = _fields(x)
    a = min(a, 448.0)
    if a == 0:
        return sign
    e = max(math.floor(math.log2(a)), -6)
    q = int(a / 2.0 ** (e - 3) + 0.5)  # + 0.5 and cut: ties go up, away from zero
    return sign | ((e + 6) * 8 + q)


def encode_truncated(x):
    if math.isnan(x):
        return 0x7F
    sign, a = _fields(x)
    a = min(a, 448.0)
    if a == 0:
        return sign
    e = max(math.floor(math.log2(a)), -6)
    return sign | ((e + 6) * 8 + int(a / 2.0 ** (e - 3)))  # int() cuts the dropped bits


def encode_flushing(x):
    if math.isnan(x):
        return 0x7F
    sign, a = _fields(x)
    a = min(a, 448.0)
    if a < 2.0**-6:  # below the smallest normal: nothing
        return sign
    e = math.floor(math.log2(a))
    return sign | ((e + 6) * 8 + round(a / 2.0 ** (e - 3)))


def encode_ieee_like(x):
    if math.isnan(x):
        return 0x7F
    sign, a = _fields(x)
    a = min(a, 240.0)  # the largest value if exponent 1111 were inf and NaN
    if a == 0:
        return sign
    e = max(math.floor(math.log2(a)), -6)
    return sign | ((e + 6) * 8 + round(a / 2.0 ** (e - 3)))


def _decode_parts(bits):
    return (-1.0 if bits >> 7 else 1.0), (bits >> 3) & 15, bits & 7


def decode_bias_8(bits):
    s, e, m = _decode_parts(bits)
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return s * m / 8 * 2.0 ** (1 - 8)
    return s * (1 + m / 8) * 2.0 ** (e - 8)


def decode_no_subnormals(bits):
    s, e, m = _decode_parts(bits)
    if e == 15 and m == 7:
        return math.nan
    return s * (1 + m / 8) * 2.0 ** (e - 7)  # the implicit 1 even when e == 0


def decode_subnormal_exponent_minus_7(bits):
    s, e, m = _decode_parts(bits)
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return s * m / 8 * 2.0 ** (0 - 7)  # field 0 read as exponent 0 - bias
    return s * (1 + m / 8) * 2.0 ** (e - 7)


def decode_ieee_like(bits):
    s, e, m = _decode_parts(bits)
    if e == 15:
        return s * math.inf if m == 0 else math.nan
    if e == 0:
        return s * m / 8 * 2.0**-6
    return s * (1 + m / 8) * 2.0 ** (e - 7)


WRONG = {
    "encode_e4m3": {"round half away": encode_half_away, "truncation": encode_truncated,
                    "flush to zero": encode_flushing, "IEEE-like E4M3 (max 240)": encode_ieee_like},
    "decode_e4m3": {"wrong bias": decode_bias_8, "no subnormals": decode_no_subnormals,
                    "IEEE-like E4M3": decode_ieee_like,
                    "subnormal exponent -7": decode_subnormal_exponent_minus_7},
}


def torch_bits(values):
    return torch.tensor(values, dtype=torch.float32).to(torch.float8_e4m3fn).view(torch.uint8).tolist()


def test_the_encode_reference_is_torchs_cast_on_every_hidden_case():
    values = [c.args[0] for c in ch03_lab.encode_e4m3.cases()]
    assert all(torch.tensor(v, dtype=torch.float32).item() == v or math.isnan(v) for v in values)
    assert [ch03_lab.encode_e4m3.reference(v) for v in values] == torch_bits(values)


def test_the_encode_reference_is_torchs_cast_on_many_float32_values():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20_000, generator=g) * 2.0 ** torch.randint(-12, 12, (20_000,), generator=g)
    values = x.tolist()
    assert [ch03_lab.encode_e4m3.reference(v) for v in values] == torch_bits(values)


def test_the_decode_reference_is_torchs_on_every_pattern():
    theirs = torch.arange(256, dtype=torch.uint8).view(torch.float8_e4m3fn).double().tolist()
    for bits, value in enumerate(theirs):
        assert ch03_lab._same_value(value, ch03_lab.decode_e4m3.reference(bits)), hex(bits)


@pytest.mark.parametrize("x, bits", [(1.0, 0x38), (1.0625, 0x38), (1.1875, 0x3A), (2.0**-9, 0x01),
                                     (2.0**-10, 0x00), (3 * 2.0**-10, 0x02), (-0.0, 0x80),
                                     (448.0, 0x7E), (464.0, 0x7E), (math.inf, 0x7E), (math.nan, 0x7F)])
def test_edges_worked_by_hand(x, bits):
    assert ch03_lab.encode_e4m3.reference(x) == bits


def test_minus_zero_is_not_plus_zero_and_nan_is_nan():
    assert not ch03_lab._same_value(-0.0, 0.0) and ch03_lab._same_value(-0.0, -0.0)
    assert ch03_lab._same_value(math.nan, float("nan")) and not ch03_lab._same_value(1.0, "1.0")


def test_the_files_hold_the_bytes_and_a_small_header():
    sizes = ch03_lab.weight_file_sizes.measure()
    numel = 3072 * 768
    for name, width in {"fp32": 4, "bf16": 2, "e4m3": 1}.items():
        assert 0 < sizes[name] * 1e6 - numel * width < 1000, name
