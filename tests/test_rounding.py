"""Tests for course_lib.numbers.rounding: stochastic rounding to BF16, Kahan-compensated BF16 updates."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.numbers import formats, rounding

_finite_fp32 = st.floats(allow_nan=False, allow_infinity=False, width=32)


def _bracket(x: float) -> tuple[float, float]:
    """The BF16 numbers just below and just above x, from the course's exact codec."""
    nearest = float(formats.round_to_format(x, "bf16"))
    if nearest == x:
        return x, x
    if nearest < x:
        return nearest, float(formats.next_up(nearest, "bf16"))
    return float(formats.next_down(nearest, "bf16")), nearest


@settings(max_examples=150, deadline=None)
@given(_finite_fp32, st.integers(0, 2**31 - 1))
def test_stochastic_rounding_returns_one_of_the_two_neighbours(x, seed):
    got = rounding.stochastic_round_bf16(torch.tensor([x]), torch.Generator().manual_seed(seed)).float().item()
    low, high = _bracket(x)
    assert got in (low, high) or (math.isinf(got) and high > 3.38e38)  # beyond BF16's max rounds to inf


@settings(max_examples=150, deadline=None)
@given(_finite_fp32, st.integers(0, 2**31 - 1))
def test_round_to_nearest_is_never_farther_than_stochastic_rounding(x, seed):
    sr = rounding.stochastic_round_bf16(torch.tensor([x]), torch.Generator().manual_seed(seed)).double().item()
    nearest = torch.tensor([x]).to(torch.bfloat16).double().item()
    assert abs(nearest - x) <= abs(sr - x)


@settings(max_examples=150, deadline=None)
@given(_finite_fp32)
def test_neighbours_bracket_the_value(x):
    low, high = rounding.bf16_neighbours(torch.tensor([x]))
    lo, hi = sorted([low.double().item(), high.double().item()])
    assert (lo, hi) == _bracket(x) or hi > 3.38e38


@pytest.mark.parametrize("x", [1 + 2**-9, 1 + 3 * 2**-9, -2.5 - 2**-8, 1e-20 * (1 + 2**-10)])
def test_stochastic_rounding_is_unbiased(x):
    values = torch.full((200_000,), x)
    got = rounding.stochastic_round_bf16(values, torch.Generator().manual_seed(1)).double()
    low, high = _bracket(np.float32(x).item())
    p_up = (np.float32(x).item() - low) / (high - low)
    # the mean is the value within 5 standard errors of a Bernoulli(p_up) times the gap
    tol = 5 * (high - low) * math.sqrt(p_up * (1 - p_up) / len(values))
    assert abs(got.mean().item() - np.float32(x).item()) < tol
    assert abs((got == high).double().mean().item() - p_up) < 0.01


def test_stochastic_rounding_keeps_exact_values_inf_and_nan():
    x = torch.tensor([1.0, -2.0, 0.0, math.inf, -math.inf, math.nan, 2.0**-133])
    got = rounding.stochastic_round_bf16(x, torch.Generator().manual_seed(0)).float()
    assert got[:5].tolist() == [1.0, -2.0, 0.0, math.inf, -math.inf]
    assert math.isnan(got[5].item())
    assert got[6].item() == 2.0**-133  # a BF16 subnormal, exact


def test_stochastic_rounding_rejects_integers():
    with pytest.raises(ValueError, match="floating-point torch tensor"):
        rounding.stochastic_round_bf16(torch.tensor([1, 2]))


def test_kahan_keeps_what_rounding_loses():
    w = torch.tensor([1.0], dtype=torch.bfloat16)
    c = torch.zeros(1, dtype=torch.bfloat16)
    for _ in range(1000):
        w, c = rounding.kahan_add(w, c, torch.tensor([1e-3]))
    assert abs(w.float().item() - 2.0) < 2**-7  # within one BF16 gap of the exact sum 2
    assert w.dtype == c.dtype == torch.bfloat16


def test_kahan_needs_bf16_buffers():
    with pytest.raises(ValueError, match="compensation must be a bfloat16 tensor"):
        rounding.kahan_add(torch.ones(1, dtype=torch.bfloat16), torch.zeros(1), torch.ones(1))


def test_accumulation_stalls_with_round_to_nearest_only():
    assert rounding.accumulate_bf16(1.0, 1e-3, 1000, "nearest") == 1.0  # 1e-3 < half of 2**-7
    assert abs(rounding.accumulate_bf16(1.0, 1e-3, 1000, "fp32") - 2.0) < 1e-3
    assert abs(rounding.accumulate_bf16(1.0, 1e-3, 1000, "kahan") - 2.0) < 2**-7
    assert abs(rounding.accumulate_bf16(1.0, 1e-3, 1000, "stochastic") - 2.0) < 0.3


def test_bf16_regression_nearest_stalls_and_the_cures_reach_fp32():
    runs = {rule: rounding.bf16_regression(rule, steps=600) for rule in rounding.UPDATE_RULES}
    reference = runs["fp32"].final_loss
    assert abs(reference / runs["fp32"].optimum_loss - 1) < 0.01
    assert runs["nearest"].final_loss > 3 * reference
    for rule in ("stochastic", "kahan"):
        assert abs(runs[rule].final_loss / reference - 1) < 0.02, rule


def test_unknown_rule_is_a_clear_error():
    with pytest.raises(ValueError, match="update rule"):
        rounding.bf16_regression("truncate")
