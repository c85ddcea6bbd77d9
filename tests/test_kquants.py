"""Tests for course_lib.compression.kquants: GGUF-style k-quant bit counts and a Q4_K-like quantizer.

What this file proves:

* ``kquant_bits_per_weight`` gives llama.cpp's published figures: Q4_K 4.5, Q5_K 5.5, Q6_K 6.5625
  and Q2_K 2.625 bits per weight (from the block layouts of ggml's ``block_q*_K`` structs), and
  refuses blocks that do not tile a super-block;
* ``q4k_quantize`` stores 4-bit codes (0..15) in (super-blocks, 8, 32), 6-bit scale and min codes
  (0..63) and FP16 ``d`` / ``dmin``; its values are ``d * sc * q - dmin * mc``, recomputed here
  from the stored parts; every value lands within (a hair more than) half a block step of the original; an all-zero block comes back as zeros;
* on normal weights it beats INT4 zero-point in groups of 128 and lands close to groups of 32
  (4.625 bits) at 4.5 bits; a tensor whose size is not a multiple of 256 is refused.
"""

from __future__ import annotations

import pytest
import torch

from course_lib.compression import kquants, quant

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("args, bits", [
    ((4, 32, 256, 6, 6), 4.5),       # Q4_K: 8 blocks of 32, 6-bit scales and mins, FP16 d and dmin
    ((5, 32, 256, 6, 6), 5.5),       # Q5_K
    ((6, 16, 256, 8, None), 6.5625),  # Q6_K: 16 blocks of 16, 8-bit scales, one FP16 d
    ((2, 16, 256, 4, 4), 2.625),     # Q2_K: 16 blocks of 16, 4-bit scales and mins
])
def test_bits_per_weight_of_llama_cpp_types(args, bits):
    assert kquants.kquant_bits_per_weight(*args) == bits


def test_bits_per_weight_bad_input():
    with pytest.raises(ValueError, match="whole blocks"):
        kquants.kquant_bits_per_weight(4, 48, 256)
    with pytest.raises(ValueError, match="bits must be a whole number"):
        kquants.kquant_bits_per_weight(0)
    with pytest.raises(ValueError, match="min_bits"):
        kquants.kquant_bits_per_weight(4, min_bits=0)


@pytest.fixture(scope="module")
def w() -> torch.Tensor:
    return 0.02 * torch.randn(64, 512, generator=torch.Generator().manual_seed(0))


def test_q4k_layout_and_value_formula(w):
    q = kquants.q4k_quantize(w)
    supers = w.numel() // 256
    assert q.codes.shape == (supers, 8, 32) and q.codes.dtype == torch.uint8 and int(q.codes.max()) <= 15
    assert q.scale_codes.shape == q.min_codes.shape == (supers, 8)
    assert int(q.scale_codes.max()) <= 63 and int(q.min_codes.max()) <= 63
    assert q.d.dtype == q.dmin.dtype == torch.float16 and q.d.shape == (supers,)
    assert q.bits_per_value == 4.5
    scale = q.d.float()[:, None, None] * q.scale_codes.float()[..., None]
    low = q.dmin.float()[:, None, None] * q.min_codes.float()[..., None]
    by_hand = (scale * q.codes.float() - low).reshape(w.shape)
    torch.testing.assert_close(q.dequantize(), by_hand, rtol=0, atol=0)


def test_q4k_error_is_within_half_a_block_step(w):
    q = kquants.q4k_quantize(w)
    step = (q.d.float()[:, None] * q.scale_codes.float())[..., None].expand(-1, -1, 32).reshape(w.shape)
    err = (q.dequantize() - w).abs()
    assert bool((err <= 0.51 * step + 1e-7).all())  # FP16 d: a hair past half a step at most


def test_q4k_zero_block_and_ties():
    w = torch.zeros(2, 256)
    w[1] = torch.linspace(-1, 1, 256)
    q = kquants.q4k_quantize(w)
    assert torch.equal(q.dequantize()[0], torch.zeros(256))
    assert float((q.dequantize()[1] - w[1]).abs().max()) < 0.1


def test_q4k_against_per_group_int4(w):
    rmse = lambda back: float((back - w).pow(2).mean().sqrt())  # noqa: E731
    k = rmse(kquants.q4k_quantize(w).dequantize())
    g128 = rmse(quant.quantize_dequantize(w, "int4-g128"))
    g32 = rmse(quant.quantize_dequantize(w, "int4-g32"))
    assert k < 0.9 * g128
    assert k < 1.05 * g32


def test_q4k_refuses_a_partial_super_block():
    with pytest.raises(ValueError, match="multiple of 256"):
        kquants.q4k_quantize(torch.randn(3, 100))
