"""Tests for course_lib.compression.quant: tensor quantization, checked against independent references.

What this file proves:

* the integer codes are torch's own: per-tensor and per-channel absmax INT8 equal
  ``torch.quantize_per_tensor`` / ``torch.quantize_per_channel`` (qint8), exact and near ties
  included (x * (1/scale) in float32, rounded half to even); 8-bit zero-point equals them (quint8)
  off ties and torch's fake quantizers everywhere (those two torch paths disagree at ties: see
  test_uint8_per_tensor_zero_point_exact_ties); 2..7-bit absmax / zero-point at tensor, channel
  and group granularity equal ``torch.fake_quantize_per_channel_affine`` bit for bit;
* NF4's levels are the QLoRA table, each value goes to its nearest level, block maxima are exact;
* the storage accounting (bits per value, ``storage_bytes``) matches hand counts, the paper's
  4.127 bits for NF4 + DQ, and the bytes of the tensors a ``QTensor`` really holds;
* bit packing is the little-endian bit stream it claims to be (built here from bit strings);
* properties: error <= scale / 2 (fp32 scales; fp16 / bf16 scales can add a clamped top value's
  shortfall), 0.0 exact, re-quantizing is idempotent (exactly, except zero-point with rounded
  scales), more bits / finer scales never hurt; the straight-through gradient is the identity;
  bad input is a clear error.
"""

from __future__ import annotations

import math
import random
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.compression import quant as Q

#: torch warns that its quantized tensors (quint8 / qint8) are deprecated; they are the reference here.


FP32 = {"scale_dtype": "fp32"}


pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.usefixtures("one_torch_thread")]


def spread_tensor(seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    """A normal tensor times a magnitude drawn from 1e-3..1e3 (log-uniform), seeded."""
    g = torch.Generator().manual_seed(seed)
    magnitude = 10.0 ** (6 * torch.rand((), generator=g).item() - 3)
    return torch.randn(shape, generator=g) * magnitude


def random_shape(rng: random.Random) -> tuple[int, int]:
    return rng.randint(1, 12), rng.randint(1, 300)


def zero_points(q: Q.QTensor) -> torch.Tensor:
    """The unpacked zero points of a zero-point QTensor, shaped (rows, groups)."""
    rows, groups, _ = Q.geometry(q.shape, q.config)
    return Q.unpack_bits(q.zero, q.config.bits, rows * groups).reshape(rows, groups)


def signed_codes(q: Q.QTensor) -> torch.Tensor:
    """Absmax codes as signed integers (the stored unsigned code minus 2**(bits-1)), in x's shape."""
    return (q.codes().to(torch.int32) - (1 << (q.config.bits - 1))).reshape(q.shape)


def per_value(t: torch.Tensor, q: Q.QTensor) -> torch.Tensor:
    """A (rows, groups) tensor of per-group numbers broadcast to one per value, in q's shape."""
    rows, groups, size = Q.geometry(q.shape, q.config)
    return t.reshape(rows, groups, 1).expand(rows, groups, size).reshape(q.shape)


# ---------------------------------------------------------------------------------------------
# 1. Cross-checks against torch's quantizers
# ---------------------------------------------------------------------------------------------

INT8_TENSOR = Q.QuantConfig(8, "absmax", "tensor", **FP32)
INT8_CHANNEL = Q.QuantConfig(8, "absmax", "channel", **FP32)
UINT8_TENSOR = Q.QuantConfig(8, "zeropoint", "tensor", **FP32)
UINT8_CHANNEL = Q.QuantConfig(8, "zeropoint", "channel", **FP32)


def test_int8_per_tensor_absmax_equals_torch_quantize_per_tensor():
    rng = random.Random(0)
    for seed in range(60):
        x = spread_tensor(seed, random_shape(rng))
        q = Q.quantize(x, INT8_TENSOR)
        scale = q.scales().reshape(())
        assert scale == (x.abs().max() / 127).float()  # absmax / 127, kept in float32
        expected = torch.quantize_per_tensor(x, float(scale), 0, torch.qint8).int_repr()
        assert torch.equal(signed_codes(q), expected.to(torch.int32)), seed


def test_int8_per_tensor_absmax_exact_ties_round_half_to_even():
    # A power-of-two scale makes (k + 0.5) * scale an exact tie after multiplying by 1 / scale.
    s = 2.0**-4
    k = torch.arange(-127, 127, dtype=torch.float32)
    x = torch.cat([(k + 0.5) * s, torch.tensor([127 * s])])
    q = Q.quantize(x, INT8_TENSOR)
    assert float(q.scales()) == s
    half_even = torch.tensor([round(v + 0.5) for v in range(-127, 127)] + [127], dtype=torch.int32)
    assert torch.equal(signed_codes(q), half_even)  # Python's round() is half to even
    assert signed_codes(q)[125:129].tolist() == [-2, 0, 0, 2]  # -1.5, -0.5, 0.5, 1.5
    expected = torch.quantize_per_tensor(x, s, 0, torch.qint8).int_repr().to(torch.int32)
    assert torch.equal(signed_codes(q), expected)


def test_int8_per_tensor_near_ties_with_any_scale_follow_the_reciprocal():
    """(k + 0.5) * scale in float32 sits a hair off the tie; torch multiplies by 1/scale, so must we.

    x / scale rounds some of these the other way, which this test would catch.
    """
    g = torch.Generator().manual_seed(1)
    for trial in range(20):
        top = float(torch.rand((), generator=g)) * 10 ** (trial % 7 - 3) + 1e-3
        scale = torch.tensor(top, dtype=torch.float32) / 127
        k = torch.randint(-127, 127, (2000,), generator=g).float()
        x = torch.cat([(k + 0.5) * scale, torch.tensor([top], dtype=torch.float32)])
        q = Q.quantize(x, INT8_TENSOR)
        assert q.scales().reshape(()) == scale
        expected = torch.quantize_per_tensor(x, float(scale), 0, torch.qint8).int_repr()
        assert torch.equal(signed_codes(q), expected.to(torch.int32)), trial


def test_uint8_per_tensor_zero_point_equals_torch_quint8():
    rng = random.Random(1)
    for seed in range(60):
        x = spread_tensor(seed, random_shape(rng))
        if seed % 3 == 1:
            x = x.abs()  # all positive: the range is stretched down to 0, zero point 0
        elif seed % 3 == 2:
            x = -x.abs()  # all negative: zero point 255
        q = Q.quantize(x, UINT8_TENSOR)
        scale = float(q.scales())
        lo, hi = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
        assert scale == pytest.approx((hi - lo) / 255, rel=1e-6)
        zero = int(zero_points(q))
        assert zero == min(max(round(-lo / scale), 0), 255)
        expected = torch.quantize_per_tensor(x, scale, zero, torch.quint8).int_repr()
        assert torch.equal(q.codes().reshape(q.shape), expected), seed


@pytest.mark.parametrize("zero", [100, 25])
def test_uint8_per_tensor_zero_point_exact_ties(zero):
    """Ties round half to even BEFORE the zero point is added: z + round(k + 0.5), as torch's fake quantizers.

    torch.quantize_per_tensor / quantize_per_channel (quint8, fbgemm on x86) instead round z + k + 0.5
    as one number: the same integer for an even zero point, one off at every tie for an odd one.
    """
    s = 2.0**-3
    top = 255 - zero
    k = torch.arange(-zero, top, dtype=torch.float32)
    x = torch.cat([torch.tensor([-zero * s, top * s]), (k + 0.5) * s])  # range -zs..(255-z)s: scale s, zero z
    q = Q.quantize(x, UINT8_TENSOR)
    assert float(q.scales()) == s and int(zero_points(q)) == zero
    expected = [0, 255] + [zero + round(v + 0.5) for v in range(-zero, top)]
    assert q.codes().reshape(-1).tolist() == expected
    fake = torch.fake_quantize_per_tensor_affine(x, s, zero, 0, 255)
    assert torch.equal(q.dequantize(), fake)
    torch_codes = torch.quantize_per_tensor(x, s, zero, torch.quint8).int_repr()
    assert torch_codes.tolist() == [0, 255] + [round(zero + v + 0.5) for v in range(-zero, top)]
    if zero % 2 == 0:
        assert torch.equal(q.codes().reshape(-1), torch_codes)
    else:
        assert int((q.codes().reshape(-1) != torch_codes).sum()) == len(k)  # one off at every tie


def test_uint8_zero_point_near_ties_with_any_scale_follow_the_reciprocal():
    """(k + 0.5) * scale sits a hair off the tie: x * (1/scale) rounds as torch's fake quantizers do."""
    g = torch.Generator().manual_seed(12)
    for trial in range(20):
        magnitude = 10 ** (trial % 7 - 3)
        ends = torch.tensor([-float(torch.rand((), generator=g)) - 0.01, float(torch.rand((), generator=g)) + 0.01])
        base = ends * magnitude
        q0 = Q.quantize(base, UINT8_TENSOR)
        scale, zero = q0.scales().reshape(()), int(zero_points(q0))
        k = torch.randint(-zero, 254 - zero, (2000,), generator=g).float()
        x = torch.cat([base, (k + 0.5) * scale])  # inside [lo, hi]: same scale and zero point
        q = Q.quantize(x, UINT8_TENSOR)
        assert q.scales().reshape(()) == scale and int(zero_points(q)) == zero
        fake = torch.fake_quantize_per_tensor_affine(x, float(scale), zero, 0, 255)
        assert torch.equal(q.dequantize(), fake), trial
        xc = x.reshape(1, -1).repeat(3, 1) * torch.tensor([[1.0], [0.5], [0.25]])  # powers of two: same ties
        qc = Q.quantize(xc, UINT8_CHANNEL)
        fake_c = torch.fake_quantize_per_channel_affine(
            xc, qc.scales().reshape(-1), zero_points(qc).reshape(-1).int(), 0, 0, 255)
        assert torch.equal(qc.dequantize(), fake_c), trial


def per_channel_torch(x: torch.Tensor, q: Q.QTensor, dtype: torch.dtype) -> torch.Tensor:
    scales = q.scales().reshape(-1).double()
    zeros = zero_points(q).reshape(-1).long() if q.zero is not None else torch.zeros(len(scales), dtype=torch.long)
    return torch.quantize_per_channel(x, scales, zeros, 0, dtype).int_repr()


def test_int8_per_channel_absmax_equals_torch_quantize_per_channel():
    g = torch.Generator().manual_seed(2)
    for seed in range(30):
        rows, cols = int(torch.randint(1, 20, (), generator=g)), int(torch.randint(1, 200, (), generator=g))
        # rows of very different magnitudes, 1e-3 .. 1e3
        x = torch.randn(rows, cols, generator=g) * 10 ** (6 * torch.rand(rows, 1, generator=g) - 3)
        q = Q.quantize(x, INT8_CHANNEL)
        assert torch.equal(q.scales().reshape(-1), x.abs().amax(1) / 127)
        expected = per_channel_torch(x, q, torch.qint8).to(torch.int32)
        assert torch.equal(signed_codes(q), expected), seed


def test_uint8_per_channel_zero_point_equals_torch_quantize_per_channel():
    g = torch.Generator().manual_seed(3)
    for seed in range(30):
        rows, cols = int(torch.randint(1, 20, (), generator=g)), int(torch.randint(1, 200, (), generator=g))
        x = torch.randn(rows, cols, generator=g) * 10 ** (6 * torch.rand(rows, 1, generator=g) - 3)
        x = x + x.abs().amax(1, keepdim=True) * torch.randn(rows, 1, generator=g)  # shifted rows
        q = Q.quantize(x, UINT8_CHANNEL)
        expected = per_channel_torch(x, q, torch.quint8)
        assert torch.equal(q.codes().reshape(q.shape), expected), seed


def test_per_channel_exact_ties_absmax_and_zero_point():
    rows = 10
    s = torch.tensor([2.0**-e for e in range(-3, rows - 3)])
    k = torch.arange(-127, 127, dtype=torch.float32)
    x = torch.cat([(k + 0.5) * s[:, None], 127 * s[:, None]], 1)
    q = Q.quantize(x, INT8_CHANNEL)
    assert torch.equal(q.scales().reshape(-1), s)
    half_even = torch.tensor([round(v + 0.5) for v in range(-127, 127)] + [127], dtype=torch.int32)
    assert torch.equal(signed_codes(q), half_even.expand(rows, -1))
    assert torch.equal(signed_codes(q), per_channel_torch(x, q, torch.qint8).to(torch.int32))

    kz = torch.arange(-100, 155, dtype=torch.float32)
    xz = torch.cat([-100 * s[:, None], 155 * s[:, None], (kz + 0.5) * s[:, None]], 1)
    qz = Q.quantize(xz, UINT8_CHANNEL)
    assert torch.equal(qz.scales().reshape(-1), s) and zero_points(qz).reshape(-1).tolist() == [100] * rows
    expected = torch.tensor([0, 255] + [round(v + 0.5) + 100 for v in range(-100, 155)], dtype=torch.uint8)
    assert torch.equal(qz.codes().reshape(xz.shape), expected.expand(rows, -1))
    assert torch.equal(qz.codes().reshape(xz.shape), per_channel_torch(xz, qz, torch.quint8))

    # an odd zero point (25): ours is 25 + round(k + 0.5), as torch.fake_quantize_per_channel_affine;
    # torch.quantize_per_channel rounds 25 + k + 0.5 as one number, one off at every tie
    ko = torch.arange(-25, 230, dtype=torch.float32)
    xo = torch.cat([-25 * s[:, None], 230 * s[:, None], (ko + 0.5) * s[:, None]], 1)
    qo = Q.quantize(xo, UINT8_CHANNEL)
    assert zero_points(qo).reshape(-1).tolist() == [25] * rows
    expected = torch.tensor([0, 255] + [25 + round(v + 0.5) for v in range(-25, 230)], dtype=torch.uint8)
    assert torch.equal(qo.codes().reshape(xo.shape), expected.expand(rows, -1))
    fake = torch.fake_quantize_per_channel_affine(xo, s, torch.full((rows,), 25, dtype=torch.int32), 0, 0, 255)
    assert torch.equal(qo.dequantize(), fake)
    differ = qo.codes().reshape(xo.shape) != per_channel_torch(xo, qo, torch.quint8)
    assert int(differ.sum()) == rows * len(ko) and not bool(differ[:, :2].any())


def test_per_channel_near_ties_with_any_scale_equal_torch():
    g = torch.Generator().manual_seed(4)
    rows, cols = 16, 300
    top = torch.rand(rows, generator=g) * 10 ** (6 * torch.rand(rows, generator=g) - 3) + 1e-3
    scale = top / 127
    k = torch.randint(-127, 127, (rows, cols), generator=g).float()
    x = torch.cat([(k + 0.5) * scale[:, None], top[:, None]], 1)
    q = Q.quantize(x, INT8_CHANNEL)
    assert torch.equal(q.scales().reshape(-1), scale)
    assert torch.equal(signed_codes(q), per_channel_torch(x, q, torch.qint8).to(torch.int32))


@pytest.mark.parametrize("scheme", ["absmax", "zeropoint"])
@pytest.mark.parametrize("bits", [2, 3, 4, 5, 6, 7])
@pytest.mark.parametrize("granularity,group_size", [("tensor", None), ("channel", None), ("group", 16),
                                                    ("group", 32)])
def test_low_bits_equal_torch_fake_quantize_per_channel_affine(scheme, bits, granularity, group_size):
    config = Q.QuantConfig(bits, scheme, granularity, group_size, **FP32)
    if scheme == "absmax":
        qmin, qmax = -((1 << (bits - 1)) - 1), (1 << (bits - 1)) - 1
    else:
        qmin, qmax = 0, (1 << bits) - 1
    g = torch.Generator().manual_seed(bits * 100 + (group_size or 0))
    for trial in range(4):
        x = torch.randn(12, 96, generator=g) * 10 ** (6 * torch.rand(12, 1, generator=g) - 3)
        if trial % 2:
            x = x + 2 * x.abs().amax(1, keepdim=True)  # mostly or all positive rows
        q = Q.quantize(x, config)
        rows, groups, size = Q.geometry(x.shape, config)
        scale = q.scales().reshape(-1)
        assert scale.dtype == torch.float32  # what torch's fake quantizer wants
        if scheme == "absmax":
            chunks = x.reshape(rows * groups, size)
            assert torch.equal(scale, chunks.abs().amax(1) / qmax)
            zero = torch.zeros(rows * groups, dtype=torch.int32)
        else:
            zero = zero_points(q).reshape(-1).to(torch.int32)
        expected = torch.fake_quantize_per_channel_affine(
            x.reshape(rows * groups, size), scale, zero, 0, qmin, qmax).reshape(x.shape)
        assert torch.equal(Q.quantize_dequantize(x, config), expected)
        assert torch.equal(q.dequantize(), expected)


# ---------------------------------------------------------------------------------------------
# 2. NF4
# ---------------------------------------------------------------------------------------------

def test_nf4_codebook_is_the_published_table():
    book = Q.nf4_codebook()
    assert book.dtype == torch.float32
    assert torch.equal(book, torch.tensor(Q.NF4_PUBLISHED, dtype=torch.float32))
    assert book.numel() == 16 and torch.equal(book, torch.sort(book).values)
    assert int((book == 0).sum()) == 1 and float(book.min()) == -1.0 and float(book.max()) == 1.0
    assert int((book > 0).sum()) == 8 and int((book < 0).sum()) == 7


def test_nf4_picks_the_nearest_level():
    g = torch.Generator().manual_seed(5)
    levels = torch.tensor(Q.NF4_PUBLISHED, dtype=torch.float64)
    for trial in range(5):
        x = torch.randn(32, 128, generator=g) * 10 ** (trial - 2)
        if trial == 4:
            x = torch.rand(32, 128, generator=g) * 2 - 1  # uniform, not normal
        q = Q.quantize(x, "nf4")
        blocks = x.reshape(-1, 64).double()
        normed = blocks / blocks.abs().amax(1, keepdim=True)
        dist = (normed[..., None] - levels).abs()
        best = dist.argmin(-1)
        codes = q.codes().reshape(-1, 64).long()
        chosen = dist.gather(-1, codes[..., None]).squeeze(-1)
        assert bool((chosen <= dist.min(-1).values + 1e-6).all())
        two = dist.topk(2, largest=False).values
        clear = (two[..., 1] - two[..., 0]) > 1e-5  # not a near tie between two levels
        assert torch.equal(codes[clear], best[clear])
        assert float(clear.float().mean()) > 0.99


def test_nf4_block_absmax_decodes_exactly():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(16, 256, generator=g) * 10 ** (4 * torch.rand(16, 1, generator=g) - 2)
    x[3, :64] = -x[3, :64].abs()  # a block whose extreme value is negative
    q = Q.quantize(x, "nf4")
    blocks, deq = x.reshape(-1, 64), q.dequantize().reshape(-1, 64)
    at = blocks.abs().argmax(1, keepdim=True)
    assert torch.equal(deq.gather(1, at), blocks.gather(1, at))
    assert torch.equal(q.scales().reshape(-1), blocks.abs().amax(1))


def test_nf4_zero_block_and_dq_scales_are_close():
    x = torch.randn(8, 128, generator=torch.Generator().manual_seed(7))
    x[2, :64] = 0.0
    deq = Q.quantize_dequantize(x, "nf4-dq")
    assert torch.equal(deq[2, :64], torch.zeros(64))
    plain, dq = Q.quantize(x, "nf4").scales(), Q.quantize(x, "nf4-dq").scales()
    assert not torch.equal(plain, dq)  # DQ really rounds the block scales
    assert torch.allclose(plain, dq, rtol=0, atol=float(plain.max()) / 127)


def test_nf4_double_quantization_by_hand():
    """Block scales minus their mean, absmax INT8 in blocks of 256 (the last one partial here)."""
    g = torch.Generator().manual_seed(13)
    x = torch.randn(40, 1024, generator=g) * (1 + torch.rand(40, 1, generator=g))  # 640 block scales
    q = Q.quantize(x, "nf4-dq")
    absmax = x.reshape(-1, 64).abs().amax(1)
    mean = absmax.mean()
    centred = absmax - mean
    s2 = torch.stack([centred[i:i + 256].abs().max() / 127 for i in range(0, 640, 256)])
    codes = torch.cat([torch.round(centred[i:i + 256] * (1.0 / s2[i // 256])).clamp(-127, 127)
                       for i in range(0, 640, 256)])
    assert q.scale.dtype == torch.int8 and torch.equal(q.scale.reshape(-1).float(), codes)
    assert torch.equal(q.dq_scale, s2) and torch.equal(q.dq_mean.reshape(()), mean)
    rebuilt = codes * s2.repeat_interleave(256)[:640] + mean
    assert torch.equal(q.scales().reshape(-1), rebuilt)
    assert bool(((rebuilt - absmax).abs() <= s2.repeat_interleave(256)[:640] / 2 * (1 + 1e-5)).all())


# ---------------------------------------------------------------------------------------------
# 3. Bits per value and storage bytes
# ---------------------------------------------------------------------------------------------

def test_nf4_without_double_quant_is_4_5_bits():
    x = torch.randn(64, 256)
    assert Q.bits_per_value((64, 256), "nf4") == 4.5
    assert Q.quantize(x, "nf4").bits_per_value == 4.5
    assert Q.storage_bytes((64, 256), "nf4") == {"codes": 8192, "scales": 1024}


@pytest.mark.parametrize("k", [1, 2, 3])
def test_nf4_double_quant_bits_match_the_paper(k):
    shape = (64 * k, 256)
    numel = math.prod(shape)
    expected = 4 + 8 / 64 + 32 / (64 * 256) + 32 / numel  # codes, int8 scales, fp32 per 256 scales, the mean
    assert Q.bits_per_value(shape, "nf4-dq") == pytest.approx(expected, rel=1e-12)
    assert Q.quantize(torch.randn(shape), "nf4-dq").bits_per_value == pytest.approx(expected, rel=1e-12)
    assert round(Q.bits_per_value((4096, 4096), "nf4-dq"), 3) == 4.127  # QLoRA's figure


def test_int4_g128_and_int8_channel_bits():
    assert Q.bits_per_value((64, 256), "int4-g128") == 4 + (16 + 4) / 128
    assert Q.storage_bytes((64, 256), "int4-g128") == {"codes": 8192, "scales": 256, "zero points": 64}
    assert Q.bits_per_value((64, 256), "int8-channel") == 8 + 16 / 256
    assert Q.bits_per_value((64, 256), Q.QuantConfig(8, "absmax", "channel", scale_dtype="fp32")) == 8 + 32 / 256
    assert Q.bits_per_value((64, 256), "int8-tensor") == 8 + 32 / (64 * 256)
    assert Q.bits_per_value((64, 256), "int3-g128") == 3 + (16 + 3) / 128
    q = Q.quantize(torch.randn(64, 256), "int4-g128")
    assert q.packed.dtype == torch.uint8 and q.packed.numel() == 64 * 256 // 2
    assert q.scale.dtype == torch.float16 and q.zero.numel() == 64


def nbytes_of(q: Q.QTensor) -> int:
    return sum(t.numel() * t.element_size() for t in (q.packed, q.scale, q.zero, q.dq_scale, q.dq_mean)
               if t is not None)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(Q.PRESETS)), st.integers(1, 9), st.integers(1, 5), st.integers(0, 2**16))
def test_hypothesis_storage_bytes_equal_qtensor_bytes_for_presets(name, rows, k, seed):
    shape = (rows, 128 * k)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    q = Q.quantize(x, name)
    assert sum(Q.storage_bytes(shape, name).values()) == q.nbytes == nbytes_of(q)
    assert Q.bits_per_value(shape, name) == q.bits_per_value


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 8), st.sampled_from(["absmax", "zeropoint"]), st.sampled_from(["tensor", "channel"]),
       st.sampled_from(["fp32", "fp16", "bf16"]), st.lists(st.integers(1, 23), min_size=1, max_size=3),
       st.integers(0, 2**16))
def test_hypothesis_storage_bytes_equal_qtensor_bytes_for_odd_shapes(bits, scheme, gran, sd, shape, seed):
    config = Q.QuantConfig(bits, scheme, gran, scale_dtype=sd)
    shape = tuple(shape)
    q = Q.quantize(torch.randn(shape, generator=torch.Generator().manual_seed(seed)), config)
    assert sum(Q.storage_bytes(shape, config).values()) == q.nbytes == nbytes_of(q)
    rows = shape[0] if len(shape) >= 2 else 1
    n_scales = 1 if gran == "tensor" else rows
    expected = -(-math.prod(shape) * bits // 8) + n_scales * (4 if sd == "fp32" else 2)
    if scheme == "zeropoint":
        expected += -(-n_scales * bits // 8)
    assert q.nbytes == expected


# ---------------------------------------------------------------------------------------------
# 4. Bit packing
# ---------------------------------------------------------------------------------------------

def bitstream_bytes(codes: list[int], bits: int) -> list[int]:
    """The reference layout: each code's bits least significant first, back to back, bit 0 of byte 0 first."""
    stream = "".join(format(c, f"0{bits}b")[::-1] for c in codes)
    stream += "0" * (-len(stream) % 8)
    return [int(stream[i:i + 8][::-1], 2) for i in range(0, len(stream), 8)]


@pytest.mark.parametrize("bits", range(1, 9))
def test_pack_matches_bit_stream_and_round_trips(bits):
    rng = random.Random(bits)
    for n in range(101):
        codes = [rng.randrange(1 << bits) for _ in range(n)]
        t = torch.tensor(codes, dtype=torch.uint8 if n % 2 else torch.int64)
        packed = Q.pack_bits(t, bits)
        assert packed.dtype == torch.uint8
        assert packed.numel() == math.ceil(n * bits / 8)
        assert packed.tolist() == bitstream_bytes(codes, bits), (bits, n)
        back = Q.unpack_bits(packed, bits, n)
        assert back.dtype == torch.uint8 and back.tolist() == codes


def test_pack_layout_examples():
    assert Q.pack_bits(torch.tensor([1, 2]), 4).tolist() == [0x21]  # first code in the low nibble
    assert Q.pack_bits(torch.tensor([0xF, 0]), 4).tolist() == [0x0F]
    assert Q.pack_bits(torch.tensor([1, 2, 3]), 4).tolist() == [0x21, 0x03]
    assert Q.pack_bits(torch.tensor([1, 0, 0, 3]), 2).tolist() == [0b11000001]
    assert Q.pack_bits(torch.tensor([1, 0, 1, 1, 0, 0, 0, 0, 1]), 1).tolist() == [0b00001101, 0b1]
    three = Q.pack_bits(torch.tensor([1, 2, 3, 4, 5, 6, 7, 0]), 3)
    assert three.numel() == 3
    # bits, least significant first: 100 010 110 001 101 011 111 000
    stream = "100" "010" "110" "001" "101" "011" "111" "000"
    assert three.tolist() == [int(stream[i:i + 8][::-1], 2) for i in (0, 8, 16)] == [0xD1, 0x58, 0x1F]


def test_pack_rejects_codes_out_of_range_and_bad_sizes():
    for bits in range(1, 9):
        with pytest.raises(ValueError, match=f"codes must lie in \\[0, {(1 << bits) - 1}\\]"):
            Q.pack_bits(torch.tensor([0, 1 << bits]), bits)
        with pytest.raises(ValueError, match="codes must lie"):
            Q.pack_bits(torch.tensor([-1, 0]), bits)
    for bits in (0, 9):
        with pytest.raises(ValueError, match="bits must be from 1 to 8"):
            Q.pack_bits(torch.tensor([0]), bits)
    with pytest.raises(ValueError, match="cannot hold exactly 5 codes of 3 bits"):
        Q.unpack_bits(torch.zeros(3, dtype=torch.uint8), 3, 5)


# ---------------------------------------------------------------------------------------------
# 5. Properties
# ---------------------------------------------------------------------------------------------

@st.composite
def int_configs(draw, scale_dtype: str | None = "fp32") -> tuple[Q.QuantConfig, tuple[int, int]]:
    """An absmax or zero-point config and a 2-D shape it fits."""
    bits = draw(st.integers(2, 8))
    scheme = draw(st.sampled_from(["absmax", "zeropoint"]))
    gran = draw(st.sampled_from(["tensor", "channel", "group"]))
    rows = draw(st.integers(1, 8))
    sd = scale_dtype or draw(st.sampled_from(["fp32", "fp16", "bf16"]))
    if gran == "group":
        gs = draw(st.sampled_from([2, 3, 8, 16, 32]))
        return Q.QuantConfig(bits, scheme, gran, gs, scale_dtype=sd), (rows, gs * draw(st.integers(1, 6)))
    return Q.QuantConfig(bits, scheme, gran, scale_dtype=sd), (rows, draw(st.integers(1, 70)))


def hyp_tensor(shape, seed: int, log_mag: float, shift: float, zeros: float) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(shape, generator=g) + shift) * 10.0**log_mag
    x[torch.rand(shape, generator=g) < zeros] = 0.0
    return x


tensor_args = (st.integers(0, 2**20), st.floats(-3, 3), st.sampled_from([0.0, 0.5, -3.0, 3.0]),
               st.sampled_from([0.0, 0.2]))


def exact_scales(x: torch.Tensor, config: Q.QuantConfig) -> torch.Tensor:
    """Each group's scale before rounding to scale_dtype, in float64: absmax / qmax or range / (2**b - 1)."""
    rows, groups, size = Q.geometry(tuple(x.shape), config)
    g = x.double().reshape(rows, groups, size)
    if config.scheme == "absmax":
        return g.abs().amax(-1) / ((1 << (config.bits - 1)) - 1)
    return (g.amax(-1).clamp(min=0) - g.amin(-1).clamp(max=0)) / ((1 << config.bits) - 1)


@settings(max_examples=150, deadline=None)
@given(int_configs(), *tensor_args)
def test_hypothesis_error_is_at_most_half_a_step_with_fp32_scales(cfg_shape, seed, log_mag, shift, zeros):
    config, shape = cfg_shape
    x = hyp_tensor(shape, seed, log_mag, shift, zeros)
    q = Q.quantize(x, config)
    step = per_value(q.scales(), q)
    err = (q.dequantize() - x).abs()
    tol = 1e-6 * float(x.abs().max()) + 1e-5 * step
    assert bool((err <= step / 2 + tol).all()), float((err / step).max())


@settings(max_examples=150, deadline=None)
@given(int_configs(scale_dtype=None), *tensor_args)
def test_hypothesis_error_bound_with_rounded_scales(cfg_shape, seed, log_mag, shift, zeros):
    """Scales stored in fp16 / bf16 are rounded up, never down, so the grid still reaches max(x).

    Were a stored scale smaller than range / levels, the top value would be clamped and lose
    levels x (exact / stored - 1) steps more than the half step rounding costs.
    """
    config, shape = cfg_shape
    x = hyp_tensor(shape, seed, log_mag, shift, zeros)
    q = Q.quantize(x, config)
    stored = q.scales().double()
    assert bool((stored >= exact_scales(x, config) * (1 - 2**-22)).all())  # float32 arithmetic
    err = (q.dequantize().double() - x.double()).abs()
    tol = 1e-6 * float(x.abs().max()) + 1e-5 * per_value(stored, q)
    assert bool((err <= per_value(stored, q) / 2 + tol).all())


@settings(max_examples=120, deadline=None)
@given(st.one_of(int_configs(scale_dtype=None), st.sampled_from([Q.PRESETS["nf4"], Q.PRESETS["nf4-dq"]]).map(
    lambda c: (c, (4, 128)))), *tensor_args)
def test_hypothesis_zero_is_exact(cfg_shape, seed, log_mag, shift, _zeros):
    config, shape = cfg_shape
    x = hyp_tensor(shape, seed, log_mag, shift, 0.3)
    x.view(-1)[0] = 0.0
    deq = Q.quantize(x, config).dequantize()
    assert bool((deq[x == 0] == 0).all())
    assert torch.equal(Q.quantize_dequantize(x, config), deq)


@settings(max_examples=150, deadline=None)
@given(st.one_of(int_configs(), st.sampled_from(list(Q.PRESETS.values())).map(lambda c: (c, (4, 256)))),
       *tensor_args)
def test_hypothesis_requantizing_is_idempotent(cfg_shape, seed, log_mag, shift, zeros):
    """Exactly, for fp32 scales, absmax and NF4 (not for zero-point with fp16 / bf16 scales: see below)."""
    config, shape = cfg_shape
    x = hyp_tensor(shape, seed, log_mag, shift, zeros)
    q1 = Q.quantize(x, config)
    y = q1.dequantize()
    q2 = Q.quantize(y, config)
    if config.scheme == "zeropoint" and config.scale_dtype != "fp32":
        # a rounded scale can leave the top code unused; re-quantizing then rescales: values move < 1 step
        step = per_value(q1.scales(), q1)
        assert bool(((q2.dequantize() - y).abs() <= step * 1.001).all())
        return
    assert torch.equal(q2.codes(), q1.codes())
    if q1.zero is not None:
        assert torch.equal(q2.zero, q1.zero)
    if config.double_quant:  # the block scales are quantized afresh around a new mean: within one DQ step
        assert torch.allclose(q2.dequantize(), y, rtol=0, atol=float(q1.scales().max()) / 127)
    else:
        assert torch.allclose(q2.dequantize(), y, rtol=1e-5, atol=0)


@settings(max_examples=60, deadline=None)
@given(int_configs(scale_dtype=None), *tensor_args)
def test_hypothesis_requantizing_with_rounded_up_scales_stays_within_half_a_step(cfg_shape, seed, log_mag, shift, zeros):
    """A scale rounded up to fp16 / bf16 may leave the top code unused, so re-quantizing the decoded
    values can pick a smaller scale and other codes; the values still move by at most half a new step."""
    config, shape = cfg_shape
    x = hyp_tensor(shape, seed, log_mag, shift, zeros)
    q1 = Q.quantize(x, config)
    first = q1.dequantize()
    q2 = Q.quantize(first, config)
    moved = (q2.dequantize().double() - first.double()).abs()
    tol = 1e-6 * float(first.abs().max()) + 1e-12
    assert bool((moved <= per_value(q2.scales().double(), q2) / 2 + tol).all())
    if config.scale_dtype == "fp32" and config.scheme == "absmax":
        assert torch.equal(q2.codes(), q1.codes())


@pytest.mark.parametrize("scheme", ["absmax", "zeropoint"])
@pytest.mark.parametrize("granularity,group_size", [("tensor", None), ("channel", None), ("group", 32)])
def test_error_decreases_with_bits(scheme, granularity, group_size):
    x = torch.randn(64, 256, generator=torch.Generator().manual_seed(8))
    rmse = [Q.error_stats(x, Q.QuantConfig(b, scheme, granularity, group_size))["rmse"] for b in range(2, 9)]
    assert all(a > b for a, b in zip(rmse, rmse[1:])), rmse
    # each extra bit roughly halves the error once the grid is fine
    assert 0.4 < rmse[-1] / rmse[-2] < 0.6


@pytest.mark.parametrize("scheme,bits", [("absmax", 8), ("absmax", 4), ("zeropoint", 4), ("zeropoint", 3)])
def test_finer_scales_give_smaller_error(scheme, bits):
    g = torch.Generator().manual_seed(9)
    rows = 16
    # rows from 1e-3 to 1e3, and within each row groups of 32 that differ by up to 100x
    x = torch.randn(rows, 256, generator=g) * torch.logspace(-3, 3, rows)[:, None]
    x = x * 10 ** (2 * torch.rand(rows, 8, 1, generator=g)).expand(rows, 8, 32).reshape(rows, 256)
    err = {gran: Q.error_stats(x, Q.QuantConfig(bits, scheme, gran, 32 if gran == "group" else None, **FP32))
           for gran in ("tensor", "channel", "group")}
    assert err["group"]["rmse"] < err["channel"]["rmse"] < err["tensor"]["rmse"]
    assert err["group"]["snr_db"] > err["channel"]["snr_db"] > err["tensor"]["snr_db"]
    # row by row (relative to each row's size), finer never loses
    per_row = {gran: (Q.quantize_dequantize(x, Q.QuantConfig(bits, scheme, gran, 32 if gran == "group" else None,
                                                             **FP32)) - x).pow(2).mean(1)
               for gran in ("tensor", "channel", "group")}
    assert bool((per_row["group"] <= per_row["channel"] * (1 + 1e-6)).all())
    assert bool((per_row["channel"] <= per_row["tensor"] * (1 + 1e-6)).all())


@pytest.mark.parametrize("name", sorted(Q.PRESETS))
def test_quantize_dequantize_equals_packed_round_trip(name):
    x = torch.randn(8, 256, generator=torch.Generator().manual_seed(10))
    q = Q.quantize(x, name)
    assert torch.equal(Q.quantize_dequantize(x, name), q.dequantize())
    assert torch.equal(Q.dequantize(q), q.dequantize())
    assert Q.dequantize(q, torch.float16).dtype == torch.float16
    half = Q.quantize_dequantize(x.half(), name)
    assert half.dtype == torch.float16 and half.shape == x.shape
    assert torch.allclose(q.dequantize(), x, atol=float(x.abs().max()) * (0.2 if q.config.bits <= 4 else 0.01))


def test_geometry_rows_and_groups():
    cfg = Q.QuantConfig(4, "zeropoint", "group", 8)
    assert Q.geometry((4, 3, 8), cfg) == (4, 3, 8)
    assert Q.geometry((48,), cfg) == (1, 6, 8)
    assert Q.geometry((4, 3, 8), Q.QuantConfig(8, "absmax", "channel")) == (4, 1, 24)
    assert Q.geometry((4, 3, 8), Q.QuantConfig(8, "absmax", "tensor")) == (1, 1, 96)
    x = torch.randn(4, 3, 8)
    assert torch.equal(Q.quantize_dequantize(x, cfg),
                       Q.quantize_dequantize(x.reshape(4, 24), cfg).reshape(4, 3, 8))


def test_labels_and_preset_lookup():
    assert Q.get_config(" INT4-G128 ") is Q.PRESETS["int4-g128"]
    cfg = Q.QuantConfig(3, "zeropoint", "group", 64)
    assert Q.get_config(cfg) is cfg
    assert Q.PRESETS["int4-g128"].label == "INT4 zero-point g128"
    assert Q.PRESETS["int8-channel"].label == "INT8 absmax per channel"
    assert Q.PRESETS["nf4-dq"].label == "NF4 + DQ" and Q.PRESETS["nf4"].label == "NF4"
    assert Q.QuantConfig(scheme=" AbsMax ", granularity="TENSOR").scheme == "absmax"


# ---------------------------------------------------------------------------------------------
# 6. Bad input
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [1, 9, 0, 4.0, True, "4", None])
def test_bad_bits(bits):
    with pytest.raises(ValueError, match=f"bits must be a whole number from 2 to 8, got {bits!r}"):
        Q.QuantConfig(bits=bits)


@pytest.mark.parametrize("kwargs,message", [
    ({"scheme": "int"}, "unknown quantization scheme 'int'; valid values: absmax, zeropoint, nf4"),
    ({"granularity": "row"}, "unknown granularity 'row'; valid values: tensor, channel, group"),
    ({"scale_dtype": "fp8"}, "unknown scale dtype 'fp8'; valid values: fp32, fp16, bf16"),
    ({"granularity": "group"}, "granularity='group' needs group_size, a whole number >= 2"),
    ({"granularity": "group", "group_size": 1}, "needs group_size.*got 1"),
    ({"granularity": "group", "group_size": 64.0}, "needs group_size.*got 64.0"),
    ({"granularity": "channel", "group_size": 64}, "group_size=64 only applies to granularity='group', not 'channel'"),
    ({"granularity": "tensor", "group_size": 64}, "only applies to granularity='group', not 'tensor'"),
    ({"bits": 8, "scheme": "nf4", "granularity": "group", "group_size": 64}, "NF4 has 16 levels, so bits must be 4, got 8"),
    ({"bits": 4, "scheme": "nf4", "granularity": "channel"}, "NF4 scales blocks of values: use granularity='group'"),
    ({"bits": 4, "scheme": "zeropoint", "double_quant": True}, "double_quant applies to NF4's block scales only"),
])
def test_bad_config(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Q.QuantConfig(**kwargs)


def test_unknown_preset_lists_valid_names():
    with pytest.raises(ValueError, match="unknown quantization preset 'int4-g100'; valid values: int8-tensor, "
                                         "int8-channel, int4-channel, int4-g128, .*nf4-dq, int3-g128"):
        Q.get_config("int4-g100")
    with pytest.raises(ValueError, match="unknown quantization preset"):
        Q.quantize(torch.ones(2, 2), "int5")
    with pytest.raises(ValueError, match="unknown quantization preset"):
        Q.storage_bytes((2, 2), "fp16")


def test_group_size_not_dividing_rows_names_sizes_and_divisors():
    cfg = Q.QuantConfig(4, "zeropoint", "group", 64)
    with pytest.raises(ValueError, match=r"group_size=64 does not divide the row length 96 of a tensor of shape "
                                         r"\(4, 96\); choose one that divides it \(32, 16, 8\)"):
        Q.quantize(torch.randn(4, 96), cfg)
    with pytest.raises(ValueError, match=r"row length 100 .* \(none of the usual\)"):
        Q.storage_bytes((3, 100), "int4-g128")
    with pytest.raises(ValueError, match="does not divide the row length 100"):
        Q.quantize_dequantize(torch.randn(3, 100), "nf4")


@pytest.mark.parametrize("x,message", [
    (torch.tensor([1.0, float("nan"), float("nan"), float("inf")]),
     r"tensor has 2 NaN and 1 infinite value\(s\).*torch\.nan_to_num"),
    (torch.tensor([[1.0, -float("inf")]]), r"tensor has 0 NaN and 1 infinite value\(s\).*torch\.nan_to_num"),
    (torch.empty(0, 4), r"tensor is empty \(shape \(0, 4\)\)"),
    (torch.arange(6).reshape(2, 3), "tensor has dtype torch.int64; quantization starts from floating-point"),
    (torch.ones(3, dtype=torch.bool), "dtype torch.bool"),
    ([1.0, 2.0], "tensor must be a torch.Tensor, got list"),
    (torch.ones(2, 2).numpy(), "must be a torch.Tensor, got ndarray"),
])
def test_bad_tensors(x, message):
    for fn in (Q.quantize, Q.quantize_dequantize, Q.error_stats):
        with pytest.raises(ValueError, match=message):
            fn(x, "int8-channel")
    with pytest.raises(ValueError, match=message.replace("tensor", "weight", 1)):
        Q.check_tensor(x, "weight")


def test_scale_that_does_not_fit_fp16_is_a_clear_error():
    with pytest.raises(ValueError, match="does not fit in fp16; use scale_dtype='fp32'"):
        Q.quantize(torch.tensor([[1e7, 1.0]]), "int8-channel")
    with pytest.raises(ValueError, match="does not fit in fp16"):
        Q.quantize(torch.tensor([[1e-12, -1e-12]]), "int8-channel")
    q = Q.quantize(torch.tensor([[1e7, 1.0]]), "int8-tensor")  # fp32 scales are fine
    assert float(q.dequantize()[0, 0]) == pytest.approx(1e7, rel=1e-6)
    assert torch.equal(Q.quantize_dequantize(torch.zeros(2, 3), "int8-channel"), torch.zeros(2, 3))


# ---------------------------------------------------------------------------------------------
# 7. Fake quantization: the straight-through estimator
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["int8-channel", "int4-g32", "int3-g128", "nf4-dq"])
def test_fake_quantize_forward_and_straight_through_backward(name):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(8, 128, generator=g, requires_grad=True)
    y = Q.fake_quantize(x, name)
    assert torch.equal(y, Q.quantize_dequantize(x.detach(), name))
    assert not torch.equal(y, x)
    upstream = torch.randn(8, 128, generator=g)
    y.backward(upstream)
    assert torch.equal(x.grad, upstream)  # the identity, not round()'s zero gradient
    # through a loss: d/dx sum(w * fq(x)) = w
    x2 = x.detach().clone().requires_grad_()
    (Q.fake_quantize(x2, Q.get_config(name)) * 3.0).sum().backward()
    assert torch.equal(x2.grad, torch.full_like(x2, 3.0))


# ---------------------------------------------------------------------------------------------
# 8. error_stats
# ---------------------------------------------------------------------------------------------

def test_error_stats_on_grid_is_zero_error():
    x = torch.tensor([-127.0, -3.0, 0.0, 5.0, 127.0]) * 0.25
    stats = Q.error_stats(x, "int8-tensor")
    assert stats == {"rmse": 0.0, "max_error": 0.0, "snr_db": math.inf}
    # 4-bit absmax per row: row 0 is on its grid (scale 1/8), row 1's 0.5 is not (scale 1/7 of its max)
    grid = torch.tensor([[-7.0, 0.0, 3.0, 7.0], [1.0, -1.0, 0.0, 0.5]]) * 2.0**-3
    assert Q.error_stats(grid[:1], Q.QuantConfig(4, "absmax", "channel"))["rmse"] == 0.0
    assert Q.error_stats(grid, Q.QuantConfig(4, "absmax", "channel"))["rmse"] > 0


def test_error_stats_hand_computed():
    # 2-bit absmax: levels -1, 0, 1 times scale 1.0; 0.4 -> 0 and -0.6 -> -1
    x = torch.tensor([1.0, 0.4, -0.6])
    stats = Q.error_stats(x, Q.QuantConfig(2, "absmax", "tensor", **FP32))
    rmse = math.sqrt((0.4**2 + 0.4**2) / 3)
    assert stats["rmse"] == pytest.approx(rmse, rel=1e-6)
    assert stats["max_error"] == pytest.approx(0.4, rel=1e-6)
    signal = math.sqrt((1 + 0.16 + 0.36) / 3)
    assert stats["snr_db"] == pytest.approx(20 * math.log10(signal / rmse), rel=1e-5)


# ---------------------------------------------------------------------------------------------
# The edges: widths, shapes and types are checked where they come in
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("bits", [0, 9, 16])
def test_unpack_checks_its_width_as_pack_does(bits):
    """Nine bytes hold eight 9-bit codes, but uint8 codes cannot: unpack_bits once returned them cut to 8 bits."""
    packed = torch.full((-(-8 * bits // 8) or 1,), 0xFF, dtype=torch.uint8)
    for call in (lambda: Q.unpack_bits(packed, bits, 8), lambda: Q.pack_bits(torch.zeros(8, dtype=torch.long), bits)):
        with pytest.raises(ValueError, match=f"bits must be from 1 to 8, got {bits}"):
            call()


@pytest.mark.parametrize("bits", [4.0, "4", True, None])
def test_a_width_that_is_no_int_is_refused_naming_the_type(bits):
    message = rf"bits must be a whole number \(int\), got {re.escape(repr(bits))} of type {type(bits).__name__}"
    with pytest.raises(TypeError, match=message):
        Q.pack_bits(torch.tensor([1, 2]), bits)
    with pytest.raises(TypeError, match=message):
        Q.unpack_bits(torch.tensor([0x21], dtype=torch.uint8), bits, 2)


def test_unpack_refuses_a_negative_count():
    with pytest.raises(ValueError, match=r"n \(the number of codes\) must be >= 0, got -1"):
        Q.unpack_bits(torch.zeros(0, dtype=torch.uint8), 4, -1)


@pytest.mark.parametrize("shape, error, message", [
    ((-1, 128), ValueError, r"shape \(-1, 128\) has the size -1; every size must be >= 0"),
    ((-4, -128), ValueError, "has the size -4"),
    ((1.5, 128), TypeError, "has the size 1.5; every size must be a whole number"),
    (("4", 128), TypeError, "has the size '4'"),
    (4096, TypeError, "shape must be a tuple of sizes such as"),
])  # fmt: skip
def test_storage_bytes_refuses_a_bad_shape(shape, error, message):
    for call in (Q.storage_bytes, Q.bits_per_value):
        with pytest.raises(error, match=message):
            call(shape, "int4-g128")


@pytest.mark.parametrize("shape", [(0, 128), (4, 0), (0,)])
def test_an_empty_shape_has_bytes_but_no_bits_per_value(shape):
    config = "int4-channel" if len(shape) == 2 else "int8-tensor"
    assert Q.storage_bytes(shape, config)["codes"] == 0
    message = rf"a tensor of shape {re.escape(str(shape))} holds no values, so it has no bits per value"
    with pytest.raises(ValueError, match=message):
        Q.bits_per_value(shape, config)
    empty = Q.QTensor(torch.zeros(0, dtype=torch.uint8), torch.zeros(0), None, None, None, shape, Q.get_config(config))
    with pytest.raises(ValueError, match=message):
        _ = empty.bits_per_value


@pytest.mark.parametrize("codes", [torch.tensor([0.7, 1.2]), [1, 2, 3]])
def test_pack_bits_refuses_codes_that_are_not_a_tensor_of_whole_numbers(codes):
    with pytest.raises(ValueError, match="codes must be a tensor of whole numbers"):
        Q.pack_bits(codes, 4)
