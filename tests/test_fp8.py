"""Tests for course_lib.numbers.fp8: per-tensor FP8 scaling (just in time, delayed) and MX block scaling."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.numbers import format_specs, formats, fp8


def test_fp8_cast_saturates_and_matches_torch():
    x = torch.tensor([1.0, 500.0, -1e6, 0.1])
    assert fp8.fp8_cast(x, 1.0, "e4m3").tolist() == [1.0, 448.0, -448.0, x[3:].to(torch.float8_e4m3fn).float().item()]
    assert fp8.fp8_cast(x, 1.0, "e5m2")[2].item() == -57344.0  # clamped, not inf as torch's cast would give
    assert fp8.fp8_cast(x, 2.0, "e4m3")[0].item() == 1.0  # scaled and unscaled again


def test_current_scale_maps_the_amax_to_the_formats_max():
    x = torch.tensor([0.5, -3.0, 2.0])
    assert fp8.current_scale(x, "e4m3") == 448 / 3
    assert fp8.current_scale(torch.zeros(3), "e5m2") == 1.0
    s = fp8.scaled_cast(x, fp8.current_scale(x, "e4m3"), "e4m3")
    assert s.saturated == 0 and s.underflowed == 0 and s.amax == 3.0


def test_scaled_cast_counts_saturation_and_underflow():
    s = fp8.scaled_cast(torch.tensor([1000.0, 460.0, 1e-4, 0.0, 1.0]), 1.0, "e4m3")
    assert s.saturated == 1  # 460 rounds to 448 like any value; 1000 is beyond max + half a gap (464)
    assert s.underflowed == 1  # 1e-4 < half of E4M3's smallest subnormal, 2**-9; 0 is not counted
    assert 0 < s.relative_error < 1


def test_delayed_scaling_uses_the_history_before_each_step():
    xs = [torch.tensor([1.0]), torch.tensor([4.0]), torch.tensor([2.0]), torch.tensor([2.0])]
    scales = [r.scale for r in fp8.delayed_scaling(xs, "e4m3", history=2, initial_scale=1.0)]
    assert scales == [1.0, 448 / 1, 448 / 4, 448 / 4]  # step 3's window is {4, 2}; 1 dropped out
    scales = [r.scale for r in fp8.delayed_scaling(xs, "e4m3", history=1)]
    assert scales == [1.0, 448.0, 112.0, 224.0]  # history 1: the previous step's amax


def test_delayed_scaling_saturates_on_growth_and_just_in_time_does_not():
    xs = fp8.drifting_tensors(steps=30, size=2048, growth=1.3, seed=1)
    delayed = fp8.delayed_scaling(xs, "e4m3", history=8)
    jit = fp8.just_in_time_scaling(xs, "e4m3")
    assert sum(r.saturated for r in delayed[1:16]) > 0
    assert sum(r.saturated for r in jit) == 0
    assert np.mean([r.relative_error for r in delayed]) > np.mean([r.relative_error for r in jit])


@pytest.mark.parametrize("name", ["e4m3", "fp4_e2m1"])
def test_bad_format_is_a_clear_error(name):
    with pytest.raises(ValueError, match="FP8 format is one of e4m3, e5m2"):
        fp8.current_scale(torch.ones(2), "fp6_e3m2")
    with pytest.raises(ValueError, match="MX element format is one of"):
        fp8.mx_quantize(torch.ones(2), "fp16")
    with pytest.raises(ValueError, match="floating-point torch tensor"):
        fp8.mx_quantize(torch.ones(2, dtype=torch.int32), name)


def _mx_reference(x: np.ndarray, name: str, block: int) -> np.ndarray:
    """MX quantization element by element, from the specification's description (float64, numpy)."""
    fmt = format_specs.get_format(name)
    emax = math.floor(math.log2(fmt.max))
    out = np.zeros_like(x)
    for start in range(0, len(x), block):
        b = x[start:start + block]
        amax = np.abs(b).max()
        k = -127 if amax == 0 else min(max(math.floor(math.log2(amax)) - emax, -127), 127)
        out[start:start + block] = [formats.round_to_format(v / 2.0**k, fmt, saturate=True) * 2.0**k for v in b]
    return out


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, width=32), min_size=1, max_size=70),
       st.sampled_from(fp8.MX_ELEMENT_FORMATS), st.sampled_from([8, 32]))
def test_mx_quantize_matches_the_elementwise_reference(values, name, block):
    x = torch.tensor(values, dtype=torch.float32)
    got = fp8.mx_quantize(x, name, block).double().numpy()
    expected = _mx_reference(x.double().numpy(), name, block).astype(np.float32)
    assert np.array_equal(got, expected)


def test_mx_scales_are_powers_of_two_and_the_block_max_fits():
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0)) * 100
    q = fp8.mx_quantize(x, "e4m3")
    assert q.shape == x.shape
    blocks_x, blocks_q = x.reshape(-1, 32), q.reshape(-1, 32)
    for bx, bq in zip(blocks_x, blocks_q):
        k = math.floor(math.log2(bx.abs().max().item())) - 8
        assert ((bq / 2.0**k).abs() <= 448).all()  # the block's largest element is below E4M3's max
        assert torch.equal(bq / 2.0**k, (bx / 2.0**k).to(torch.float8_e4m3fn).float())


def _outlier_errors(multiplier: float, name: str) -> tuple[float, float, float]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(64, 256, generator=g)
    x[:, 3] *= multiplier  # one outlier feature: a per-tensor scale shrinks every other value
    normal = torch.ones_like(x, dtype=torch.bool)
    normal[:, 3] = False
    err = lambda q: (torch.linalg.norm((q - x)[normal]) / torch.linalg.norm(x[normal])).item()  # noqa: E731
    per_tensor_fp8 = err(fp8.fp8_cast(x, fp8.current_scale(x, "e4m3"), "e4m3"))
    return per_tensor_fp8, err(fp8.mx_quantize(x, name, block=x.numel())), err(fp8.mx_quantize(x, name))


def test_mx_beats_per_tensor_scaling_when_outliers_exceed_the_formats_range():
    pt_fp8, one_block, mx = _outlier_errors(1e4, "e4m3")
    assert mx < 0.9 * pt_fp8 and mx < 0.9 * one_block  # 1e4 pushes the rest into E4M3's subnormals
    pt_fp8, one_block, mx = _outlier_errors(100, "e4m3")
    assert abs(mx - pt_fp8) < 0.01 and abs(mx - one_block) < 0.01  # 100x fits E4M3's range: no gain
    for name in ("fp4_e2m1", "fp6_e2m3"):
        _, one_block, mx = _outlier_errors(100, name)
        assert one_block > 0.9 and mx < one_block / 2, name  # per tensor, FP4 stores the rest as 0


def test_mx_bits_per_element():
    assert fp8.mx_bits_per_element("e4m3") == 8.25
    assert fp8.mx_bits_per_element("fp4_e2m1") == 4.25
    assert fp8.mx_bits_per_element("fp6_e3m2", block=16) == 6.5
