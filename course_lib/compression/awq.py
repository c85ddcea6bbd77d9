"""Activation-aware weight quantization (AWQ): protect the weights that meet large activations.

Chapter 5 ("Quantization") runs it on one layer of the course model.

AWQ (Lin et al. 2024, arXiv 2306.00978) starts from an observation: a few input channels of a
linear layer meet much larger activations than the rest, so rounding errors in their weights move
the output most. Multiplying weight column ``j`` by ``s_j > 1`` before rounding (and dividing
input feature ``j`` by ``s_j``, which the previous operator absorbs) makes those weights' rounding
error relatively smaller, at the cost of the others. The scale of each input channel is

    s_j = mean|x_j| ** alpha,  normalised so that max(s) * min(s) = 1,

and ``alpha`` is found by a grid search (alpha = 0, 1/20, ..., 19/20, as the reference
implementations do) that minimises the error of the layer's output on calibration activations:
``|| X W^T - X (Q(W diag(s)) diag(s)^-1)^T ||``. Alpha = 0 gives s = 1, plain round-to-nearest
(RTN), so on the calibration data the search can only match or beat RTN; held-out activations
are the real test.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from course_lib.compression import outliers, quant
from course_lib.compression.quant import QuantConfig

#: The grid of AWQ's search: alpha = i / AWQ_GRID for i = 0 .. AWQ_GRID - 1 (20 in the reference code).
AWQ_GRID = 20


def activation_scales(x: torch.Tensor, alpha: float) -> torch.Tensor:
    """AWQ's per-input-channel scales ``s = mean|x|^alpha``, normalised so that max(s) * min(s) = 1.

    Chapter 5, *Quantization*.
    """
    quant.check_tensor(x, "activations X")
    if x.dim() != 2:
        raise ValueError(f"expected activations X as (tokens, features), got shape {tuple(x.shape)}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (AWQ searches 0, 0.05, ..., 0.95), got {alpha!r}")
    s = x.detach().float().abs().mean(0).pow(alpha).clamp(min=1e-4)
    return s / (s.max() * s.min()).sqrt()


def scaled_quantize(w: torch.Tensor, scales: torch.Tensor, config: QuantConfig | str = "int4-g128") -> torch.Tensor:
    """The weight AWQ computes with: ``Q(W diag(s)) diag(s)^-1``, decoded to float32.

    Chapter 5, *Quantization*.
    """
    quant.check_tensor(w, "weight W")
    if scales.shape != (w.shape[-1],):
        raise ValueError(f"expected one scale per input feature ({w.shape[-1]}), got shape {tuple(scales.shape)}")
    scaled = w.detach().float() * scales
    return quant.quantize_dequantize(scaled, config).float() / scales


def output_error(x: torch.Tensor, w: torch.Tensor, w_hat: torch.Tensor) -> float:
    """The relative error of a layer's output, ||X W^T - X W_hat^T|| / ||X W^T|| (Frobenius norms).

    Chapter 5, *Quantization*.
    """
    outliers.check_pair(x, w)
    if w_hat.shape != w.shape:
        raise ValueError(f"W_hat must have W's shape {tuple(w.shape)}, got {tuple(w_hat.shape)}")
    ref = x.float() @ w.float().t()
    return float((ref - x.float() @ w_hat.float().t()).norm() / ref.norm())


@dataclass(frozen=True)
class AWQResult:
    """AWQ's choice for one layer: the best alpha, its scales and weight, and the error of every alpha.

    ``errors[i]`` is the calibration output error at alpha = ``alphas[i]``; ``alphas[0] = 0`` is RTN.

    Chapter 5, *Quantization*.
    """

    alpha: float
    scales: torch.Tensor
    weight: torch.Tensor
    alphas: tuple[float, ...]
    errors: tuple[float, ...]

    @property
    def error(self) -> float:
        """The calibration output error of the chosen alpha."""
        return min(self.errors)

    @property
    def rtn_error(self) -> float:
        """The calibration output error of plain round-to-nearest (alpha = 0, every scale 1)."""
        return self.errors[0]


def awq_search(x: torch.Tensor, w: torch.Tensor, config: QuantConfig | str = "int4-g128",
               n_grid: int = AWQ_GRID) -> AWQResult:
    """AWQ's grid search for one layer: the alpha in 0, 1/n_grid, ... whose scales minimise the output error.

    ``x``: calibration inputs of the layer (tokens, in features); ``w``: its weight (out, in).

    Chapter 5, *Quantization*.
    """
    outliers.check_pair(x, w)
    if isinstance(n_grid, bool) or not isinstance(n_grid, int) or n_grid < 1:
        raise ValueError(f"n_grid must be a whole number >= 1 (20 in AWQ), got {n_grid!r}")
    config = quant.get_config(config)
    alphas = tuple(i / n_grid for i in range(n_grid))
    errors, best = [], None
    for alpha in alphas:
        scales = activation_scales(x, alpha)
        w_hat = scaled_quantize(w, scales, config)
        errors.append(output_error(x, w, w_hat))
        if best is None or errors[-1] < best[0]:
            best = (errors[-1], alpha, scales, w_hat)
    assert best is not None
    return AWQResult(best[1], best[2], best[3], alphas, tuple(errors))
