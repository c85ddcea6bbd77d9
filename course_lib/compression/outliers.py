"""Outlier features in activations, and two ways around them: LLM.int8() and SmoothQuant.

Chapter 5 ("Quantization") measures them on the course model.

Large language models grow a few hidden features whose activations are 10-100 times larger than
the rest (Dettmers et al. 2022, arXiv 2208.07339). One INT8 scale for the whole activation matrix
is then set by those few values and rounds everything else to zero. This module simulates 8-bit
matrix products ``Y = X W^T`` (``X``: tokens x features, ``W``: out x in, as ``nn.Linear``)
with fake quantization so the errors can be measured exactly:

* :func:`int8_matmul`: X per tensor or per token (a row), W per tensor or per output channel;
* :func:`llm_int8_matmul`: LLM.int8()'s mixed-precision decomposition: feature columns with any
  ``|x| >= threshold`` (6.0 in the paper) are multiplied in 16 bits, the rest in INT8 vector-wise;
* :func:`smooth`: SmoothQuant (Xiao et al. 2022, arXiv 2211.10438): divide feature ``j`` of X by
  ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)`` and multiply column ``j`` of W by it; the product
  is unchanged and the difficulty moves from activations to weights;
* :func:`with_outlier_feature` and :func:`with_token_outliers` give a tame layer an outlier feature:
  the same factor on every token (which SmoothQuant's per-feature scale undoes exactly), or a
  factor that differs per token, as in real LLMs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from course_lib.base.checks import token_ids
from course_lib.compression import quant
from course_lib.compression.quant import QuantConfig

_PER = {"tensor": "tensor", "token": "channel", "channel": "channel"}


def _fake(x: torch.Tensor, granularity: str, bits: int) -> torch.Tensor:
    """Absmax fake quantization of a 2-D matrix per tensor or per row, float32 scales."""
    return quant.quantize_dequantize(x, QuantConfig(bits, "absmax", _PER[granularity], scale_dtype="fp32"))


def check_pair(x: torch.Tensor, w: torch.Tensor) -> None:
    """Refuse activations X (tokens, features) and a weight W (out, features) that do not fit.

    Chapter 5, *Quantization*.
    """
    quant.check_tensor(x, "activations X")
    quant.check_tensor(w, "weight W")
    if x.dim() != 2 or w.dim() != 2 or x.shape[1] != w.shape[1]:
        raise ValueError(f"expected X (tokens, in features) and W (out features, in features) with the "
                         f"same number of input features, got X {tuple(x.shape)} and W {tuple(w.shape)}")


def int8_matmul(x: torch.Tensor, w: torch.Tensor, act: str = "token", weight: str = "channel",
                bits: int = 8) -> torch.Tensor:
    """``X W^T`` with X and W rounded to ``bits``-bit absmax grids first (``act``: tensor|token, ``weight``: tensor|channel).

    Chapter 5, *Quantization*.
    """
    check_pair(x, w)
    if act not in ("tensor", "token") or weight not in ("tensor", "channel"):
        raise ValueError(f"act must be 'tensor' or 'token' and weight 'tensor' or 'channel', got {act!r}, {weight!r}")
    return _fake(x, act, bits) @ _fake(w, weight, bits).t()


def outlier_features(x: torch.Tensor, threshold: float = 6.0) -> torch.Tensor:
    """Indices of the feature columns of X with any ``|x| >= threshold`` (LLM.int8()'s criterion).

    Chapter 5, *Quantization*.
    """
    return torch.nonzero((x.abs() >= threshold).any(0)).flatten()


def llm_int8_matmul(x: torch.Tensor, w: torch.Tensor, threshold: float = 6.0) -> tuple[torch.Tensor, torch.Tensor]:
    """LLM.int8(): outlier features in 16-bit (bfloat16 here), the rest INT8 per token x per channel.

    Returns the product and the indices of the features that were kept in 16 bits.

    Chapter 5, *Quantization*.
    """
    check_pair(x, w)
    cols = outlier_features(x, threshold)
    keep = torch.ones(x.shape[1], dtype=torch.bool, device=x.device)
    keep[cols] = False
    y = (int8_matmul(x[:, keep], w[:, keep]) if bool(keep.any())
         else torch.zeros(x.shape[0], w.shape[0], device=x.device))
    if cols.numel():
        y = y + (x[:, cols].bfloat16() @ w[:, cols].bfloat16().t()).float()
    return y, cols


def smooth(x: torch.Tensor, w: torch.Tensor, alpha: float = 0.5) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """SmoothQuant's migration: (X / s, W * s, s) with ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)``.

    Chapter 5, *Quantization*.
    """
    check_pair(x, w)
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be between 0 and 1 (0.5 in the paper), got {alpha!r}")
    ax = x.abs().amax(0).clamp(min=1e-5)
    aw = w.abs().amax(0).clamp(min=1e-5)
    s = ax.pow(alpha) / aw.pow(1 - alpha)
    return x / s, w * s, s


def relative_error(y: torch.Tensor, reference: torch.Tensor) -> float:
    """||y - reference|| / ||reference|| (Frobenius norms).

    Chapter 5, *Quantization*.
    """
    return float((y - reference).norm() / reference.norm())


def with_outlier_feature(x: torch.Tensor, w: torch.Tensor, feature: int, factor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Scale feature ``feature`` of X up by ``factor`` and column ``feature`` of W down by it.

    ``X W^T`` is unchanged (up to float rounding): this is how an outlier feature looks in a large
    model, where a layer norm's gain inflates one feature and the next layer's weights shrink it.

    Chapter 5, *Quantization*.
    """
    check_pair(x, w)
    x, w = x.clone(), w.clone()
    x[:, feature] *= factor
    w[:, feature] /= factor
    return x, w


@torch.no_grad()
def layer_inputs(model: nn.Module, layer: str, ids: torch.Tensor) -> torch.Tensor:
    """The input activations of the named sub-layer while the model reads ``ids``: (tokens, features).

    ``ids`` is [batch, seq] or one sequence [seq]; ids beyond the model's vocabulary or sequences
    longer than its context are refused with the limit named.

    Chapter 5, *Quantization*.
    """
    ids = token_ids(ids, model)
    try:
        module = model.get_submodule(layer)
    except AttributeError:
        layers = [n for n, m in model.named_modules() if not isinstance(m, nn.Embedding)
                  and getattr(getattr(m, "weight", None), "ndim", 0) == 2][:3]
        raise ValueError(f"the model has no layer {layer!r}; name one of its matrix layers "
                         f"(model.named_modules()), e.g. {', '.join(map(repr, layers))}"
                         ) from None
    seen: list[torch.Tensor] = []
    handle = module.register_forward_hook(lambda m, args, out: seen.append(args[0].detach()))
    try:
        model(input_ids=ids)
    finally:
        handle.remove()
    x = seen[0]
    return x.reshape(-1, x.shape[-1]).float()


@dataclass(frozen=True)
class OutlierRow:
    """One way of computing the 8-bit product: its name, relative error, and X entries rounded to 0.

    Chapter 5, *Quantization*.
    """

    method: str
    error: float
    zeroed: float


def compare_methods(x: torch.Tensor, w: torch.Tensor, threshold: float = 6.0, alpha: float = 0.5) -> list[OutlierRow]:
    """The relative error of ``X W^T`` under each 8-bit recipe, against the float32 product.

    Chapter 5, *Quantization*.
    """
    check_pair(x, w)
    ref = x @ w.t()

    def zeroed(xq: torch.Tensor) -> float:
        return float(((xq == 0) & (x != 0)).float().mean())

    xs, ws, _ = smooth(x, w, alpha)
    y_llm, cols = llm_int8_matmul(x, w, threshold)
    return [
        OutlierRow("W8A8, both per tensor", relative_error(int8_matmul(x, w, "tensor", "tensor"), ref),
                   zeroed(_fake(x, "tensor", 8))),
        OutlierRow("W8 per channel, A8 per tensor", relative_error(int8_matmul(x, w, "tensor", "channel"), ref),
                   zeroed(_fake(x, "tensor", 8))),
        OutlierRow("W8 per channel, A8 per token", relative_error(int8_matmul(x, w, "token", "channel"), ref),
                   zeroed(_fake(x, "token", 8))),
        OutlierRow(f"LLM.int8(): {cols.numel()} feature(s) >= {threshold:g} in 16 bits",
                   relative_error(y_llm, ref), float("nan")),
        OutlierRow(f"SmoothQuant (alpha {alpha:g}), both per tensor",
                   relative_error(int8_matmul(xs, ws, "tensor", "tensor"), ref),
                   zeroed(_fake(xs, "tensor", 8))),
    ]


def with_token_outliers(x: torch.Tensor, w: torch.Tensor, feature: int, low: float = 10.0, high: float = 60.0,
                        seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An outlier feature whose size differs per token: feature ``feature`` of X times a factor per token.

    Each token's factor is drawn log-uniformly from [low, high] (seeded); column ``feature`` of W is
    divided by the mean factor, so the layer's output keeps its scale. Unlike
    :func:`with_outlier_feature`, no single per-feature scale undoes it, as in real LLMs, where an
    outlier feature is large on every token but by a different amount. Returns (X, W, factors); the
    product ``X W^T`` changes, so compare 8-bit recipes against the new float product.

    Chapter 5, *Quantization*.
    """
    check_pair(x, w)
    if not 0 <= feature < x.shape[1]:
        raise ValueError(f"feature must be a column of X, 0 .. {x.shape[1] - 1}, got {feature!r}")
    if not 0 < low <= high:
        raise ValueError(f"need 0 < low <= high for the per-token factors, got low={low!r}, high={high!r}")
    generator = torch.Generator().manual_seed(seed)
    u = torch.rand(x.shape[0], generator=generator, dtype=torch.float64)
    factors = torch.exp(math.log(low) + u * (math.log(high) - math.log(low))).to(x.dtype).to(x.device)
    x, w = x.clone(), w.clone()
    x[:, feature] *= factors
    w[:, feature] /= factors.mean()
    return x, w, factors
