"""Tests for course_lib.compression.awq: activation-aware weight quantization of one layer.

What this file proves:

* ``activation_scales`` is mean|x|^alpha per input channel, normalised so that max * min = 1
  (checked against a formula written here); alpha = 0 gives every scale 1; a bad alpha or shape
  is a ValueError;
* ``scaled_quantize`` is Q(W diag(s)) / s with the library's quantizer, and with s = 1 it is plain
  round-to-nearest;
* ``output_error`` is the Frobenius ratio of the output difference;
* ``awq_search`` tries alpha = i / n_grid, records the error of each (the first is RTN), returns
  the best alpha's scales and weight, and on a layer whose inputs have a few large channels it
  beats RTN clearly, on the calibration data and on held-out inputs of the same kind.
"""

from __future__ import annotations

import pytest
import torch

from course_lib.compression import awq, quant

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def salient(seed: int, tokens: int = 256, features: int = 128) -> torch.Tensor:
    """Inputs whose channels 3, 40 and 77 are about 20x larger than the rest, as AWQ's salient channels."""
    x = torch.randn(tokens, features, generator=torch.Generator().manual_seed(seed))
    x[:, [3, 40, 77]] *= 20
    return x


@pytest.fixture(scope="module")
def layer() -> tuple[torch.Tensor, torch.Tensor]:
    w = 0.05 * torch.randn(64, 128, generator=torch.Generator().manual_seed(1))
    return salient(0), w


def test_activation_scales_follow_the_formula(layer):
    x, _ = layer
    for alpha in (0.0, 0.25, 0.5, 0.95):
        s = x.abs().mean(0) ** alpha
        s = s / (s.max() * s.min()).sqrt()
        got = awq.activation_scales(x, alpha)
        torch.testing.assert_close(got, s)
        assert float(got.max() * got.min()) == pytest.approx(1.0, rel=1e-5)
    assert torch.equal(awq.activation_scales(x, 0.0), torch.ones(128))
    big = awq.activation_scales(x, 0.5)
    assert set(big.topk(3).indices.tolist()) == {3, 40, 77}  # the large channels get the large scales


@pytest.mark.parametrize("alpha", [-0.1, 1.5])
def test_activation_scales_bad_alpha(layer, alpha):
    with pytest.raises(ValueError, match="alpha must be between 0 and 1"):
        awq.activation_scales(layer[0], alpha)


def test_scaled_quantize_is_quantize_of_the_scaled_weight(layer):
    x, w = layer
    s = awq.activation_scales(x, 0.5)
    expected = quant.quantize_dequantize(w * s, "int4-g32") / s
    torch.testing.assert_close(awq.scaled_quantize(w, s, "int4-g32"), expected, rtol=0, atol=0)
    assert torch.equal(awq.scaled_quantize(w, torch.ones(128), "int4-g32"), quant.quantize_dequantize(w, "int4-g32"))
    with pytest.raises(ValueError, match="one scale per input feature"):
        awq.scaled_quantize(w, torch.ones(64))


def test_output_error_is_the_frobenius_ratio(layer):
    x, w = layer
    w_hat = w + 0.01
    ref = x @ w.t()
    assert awq.output_error(x, w, w_hat) == pytest.approx(float((ref - x @ w_hat.t()).norm() / ref.norm()), rel=1e-5)
    assert awq.output_error(x, w, w) == 0.0
    with pytest.raises(ValueError, match="same number of input features"):
        awq.output_error(x[:, :10], w, w)
    with pytest.raises(ValueError, match="W_hat must have W's shape"):
        awq.output_error(x, w, w[:10])


def test_awq_search_records_every_alpha_and_keeps_the_best(layer):
    x, w = layer
    result = awq.awq_search(x, w, "int4-g32", n_grid=10)
    assert result.alphas == tuple(i / 10 for i in range(10))
    for alpha, err in zip(result.alphas, result.errors):
        w_hat = awq.scaled_quantize(w, awq.activation_scales(x, alpha), "int4-g32")
        assert err == pytest.approx(awq.output_error(x, w, w_hat), rel=1e-6)
    assert result.rtn_error == pytest.approx(awq.output_error(x, w, quant.quantize_dequantize(w, "int4-g32")), rel=1e-6)
    assert result.error == min(result.errors) == result.errors[result.alphas.index(result.alpha)]
    torch.testing.assert_close(result.scales, awq.activation_scales(x, result.alpha))
    torch.testing.assert_close(result.weight, awq.scaled_quantize(w, result.scales, "int4-g32"))


def test_awq_beats_rtn_when_a_few_channels_are_salient(layer):
    x, w = layer
    result = awq.awq_search(x, w, "int4-g32")
    assert result.alpha > 0
    assert result.error < 0.8 * result.rtn_error
    held = salient(7)  # new tokens, the same salient channels
    rtn_held = awq.output_error(held, w, quant.quantize_dequantize(w, "int4-g32"))
    assert awq.output_error(held, w, result.weight) < 0.8 * rtn_held


def test_awq_search_bad_input(layer):
    x, w = layer
    with pytest.raises(ValueError, match="n_grid"):
        awq.awq_search(x, w, n_grid=0)
    with pytest.raises(ValueError, match="same number of input features"):
        awq.awq_search(x, w.t())
    with pytest.raises(ValueError, match="quantization preset"):
        awq.awq_search(x, w, "int5-g7")
