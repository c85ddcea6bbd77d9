"""Chapter 7, *GPTQ lab*: the chapter's lab, code exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The references are :mod:`course_lib.compression.gptq`'s own Hessian, column loop and stored layer.
"""

from __future__ import annotations

import torch

from course_lib.compression import gptq, quant
from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction

# --- The dampened Hessian: H = 2 X^T X / n, plus percdamp x mean diag(H) on the diagonal -------


def _damped_hessian(x: torch.Tensor, percdamp: float) -> torch.Tensor:
    """The reference: ``gptq.HessianAccumulator``'s H, dampened as ``gptq.gptq_quantize_layer`` dampens it."""
    acc = gptq.HessianAccumulator(x.shape[1], x.dtype)
    acc.add(x)
    H = acc.hessian()
    H.diagonal().add_(percdamp * H.diagonal().mean())
    return H


def _hessian_cases() -> list[Case]:
    g = torch.Generator().manual_seed(7)
    dead = torch.randn(24, 5, generator=g, dtype=torch.float64)
    dead[:, 3] = 0
    return [Case((torch.randn(32, 6, generator=g, dtype=torch.float64), 0.01), "random"),
            Case((dead, 0.1), "a dead input (always zero): only the dampening on its diagonal"),
            Case((torch.randn(1, 4, generator=g, dtype=torch.float64), 0.01), "one token: H of rank 1"),
            Case((torch.randn(16, 3, generator=g, dtype=torch.float64), 0.0), "percdamp 0: no dampening")]


def _dampen(H: torch.Tensor, percdamp: float) -> torch.Tensor:
    return H + percdamp * H.diagonal().mean() * torch.eye(len(H), dtype=H.dtype)


def _no_factor_two(x: torch.Tensor, percdamp: float) -> torch.Tensor:
    return _dampen(x.T @ x / len(x), percdamp)


def _no_dampening(x: torch.Tensor, percdamp: float) -> torch.Tensor:
    return 2 * x.T @ x / len(x)


def _sum_over_tokens(x: torch.Tensor, percdamp: float) -> torch.Tensor:
    return _dampen(2 * x.T @ x, percdamp)


def _absolute_dampening(x: torch.Tensor, percdamp: float) -> torch.Tensor:
    return 2 * x.T @ x / len(x) + percdamp * torch.eye(x.shape[1], dtype=x.dtype)


def _tokens_as_features(x: torch.Tensor, percdamp: float) -> torch.Tensor:
    return _dampen(2 * x @ x.T / len(x), percdamp)


damped_hessian = Exercise(
    "damped_hessian",
    "GPTQ's dampened Hessian of a layer's inputs x [n, in]: H = 2 X^T X / n, plus percdamp times the "
    "mean of its diagonal on the diagonal.",
    _damped_hessian, _hessian_cases,
    misconceptions=(
        Misconception("no factor 2", "drop the 2 of H = 2 X Xᵀ, the second derivative of the square in "
                      "||W X - Q X||² (GPTQ's result would not change: it is invariant to H's scale, and "
                      "the dampening scales with H; but the Hessian the text defines has the 2)",
                      _no_factor_two),
        Misconception("no dampening", "forget the dampening, which keeps H invertible when an input is dead "
                      "or the tokens are few", _no_dampening),
        Misconception("sum over tokens", "sum 2 x xᵀ over the tokens instead of averaging it (GPTQ's "
                      "result does not change, but the library's H is the mean)", _sum_over_tokens),
        Misconception("absolute dampening", "add percdamp itself to the diagonal instead of percdamp times the "
                      "mean of diag(H), which makes the dampening depend on the scale of the inputs",
                      _absolute_dampening),
        Misconception("tokens as features", "multiply x @ x.T: with tokens as rows that gives [n, n], one entry "
                      "per pair of tokens, instead of xᵀ x [in, in], one per pair of inputs", _tokens_as_features),
    ),
)

# --- GPTQ's column loop: round a column, feed its scaled error to the columns still to come ------


def _gptq_codes(w: torch.Tensor, U: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor,
                bits: int) -> torch.Tensor:
    """The reference: ``gptq.gptq_quantize_columns`` with one grid per row (``scale``, ``zero`` [out])."""
    config = gptq.GPTQConfig(bits, group_size=None)
    codes, _ = gptq.gptq_quantize_columns(w.clone(), U, scale[:, None], zero[:, None], [0] * w.shape[1], config)
    return codes


def _columns_case(out: int, cols: int, bits: int, seed: int, U: torch.Tensor | None = None) -> tuple:
    """A weight, the Cholesky factor U of a dampened H⁻¹ from correlated inputs, and chapter 5's grid."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(out, cols, generator=g, dtype=torch.float64)
    if U is None:
        mix = torch.eye(cols, dtype=torch.float64) + 0.6 * torch.randn(cols, cols, generator=g, dtype=torch.float64)
        x = 0.3 * torch.randn(64, cols, generator=g, dtype=torch.float64) @ mix  # correlated inputs
        U = torch.linalg.cholesky(torch.linalg.inv(_damped_hessian(x, 0.01)), upper=True)
    grid = quant.quantize(w, gptq.GPTQConfig(bits, group_size=None).quant_config).unpack()
    return w, U, grid.scale[:, 0], grid.zero[:, 0].float(), bits


def _columns_cases() -> list[Case]:
    eye = torch.eye(6, dtype=torch.float64)
    tie = torch.tensor([[0.125, -0.375, 0.625, 1.125, -0.625, 0.375]], dtype=torch.float64)  # k.5 steps
    half = (tie, eye, torch.tensor([0.25]), torch.tensor([8.0]), 4)
    return [Case(_columns_case(8, 16, 4, 70), "random"),
            Case(_columns_case(6, 12, 3, 71), "3 bits: codes 0 to 2^3 - 1 = 7"),
            Case(_columns_case(5, 6, 4, 72, U=0.5 * eye), "U = I / 2 (H a multiple of I): nothing to feed back"),
            Case(half, "ties at .5: round half to even"),
            Case(_columns_case(4, 1, 4, 73), "one column: nothing left to update")]


def _columns(w: torch.Tensor, U: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, bits: int,
             divide: str = "U", feedback: bool = True, rounding=torch.round) -> torch.Tensor:
    """The written-out loop with one thing changed: the divisor, the feedback, or the rounding."""
    W, top = w.clone(), 2**bits - 1
    codes = torch.zeros(W.shape, dtype=torch.uint8)
    for j in range(W.shape[1]):
        code = torch.clamp(rounding(W[:, j].float() * (1 / scale)) + zero, 0, top)
        codes[:, j] = code.to(torch.uint8)
        error = W[:, j] - ((code - zero) * scale).double()
        error = {"U": error / U[j, j], "U squared": error / U[j, j] ** 2, "none": error}[divide]
        if feedback:
            W[:, j:] -= torch.outer(error, U[j, j:])
    return codes


def _half_away(t: torch.Tensor) -> torch.Tensor:
    return torch.sign(t) * torch.floor(t.abs() + 0.5)


gptq_columns = Exercise(
    "gptq_columns",
    "GPTQ's codes (uint8 [out, in]) of w [out, in], column by column: round a column on the grid "
    "(scale, zero per row), feed its error / U[j, j] times U[j, j:] to the columns still to come.",
    _gptq_codes, _columns_cases,
    misconceptions=(
        Misconception("no error feedback", "round every column as it was, without feeding the errors "
                      "forward: that is round-to-nearest, not GPTQ",
                      lambda *a: _columns(*a, feedback=False)),
        Misconception("wrong diagonal", "divide the error by U[j, j]² = [H⁻¹]_jj while taking the row of U: "
                      "the Cholesky row already holds one 1/√[H⁻¹]_jj, so divide by U[j, j]",
                      lambda *a: _columns(*a, divide="U squared")),
        Misconception("no division", "feed back the raw error w - q without dividing it by U[j, j]",
                      lambda *a: _columns(*a, divide="none")),
        Misconception("round half away", "round ties away from zero instead of to even (torch.round)",
                      lambda *a: _columns(*a, rounding=_half_away)),
    ),
    unchanged=(0,),  # "Work on a copy of w"
)

# --- Predict, then measure: the bytes of a GPTQ-quantized layer ----------------------------------

#: The layer of the prediction: section 1's shape [out, in], GPTQ 4-bit zero-point, groups of 32.
LAYER_SHAPE, LAYER_CONFIG = (128, 512), gptq.GPTQConfig(4, group_size=32)


def _gptq_layer_bytes() -> dict[str, float]:
    """The bytes chapter 5's storage holds for a GPTQ-quantized layer, by component."""
    g = torch.Generator().manual_seed(77)
    w = torch.randn(*LAYER_SHAPE, generator=g)
    x = torch.randn(256, LAYER_SHAPE[1], generator=g)
    stored = gptq.gptq_quantize_layer(w, x, LAYER_CONFIG).to_qtensor().tensors()
    names = {"packed": "codes", "scale": "scales", "zero": "zero points"}
    return {names[k]: t.numel() * t.element_size() for k, t in stored.items()}


_CODES = LAYER_SHAPE[0] * LAYER_SHAPE[1]
_GROUPS = _CODES // LAYER_CONFIG.group_size
_RIGHT = _CODES / 2 + 2 * _GROUPS + _GROUPS / 2  # 4-bit codes, FP16 scales, 4-bit zero points

gptq_layer_bytes = Prediction(
    "gptq_layer_bytes",
    f"Bytes that a {LAYER_SHAPE[0]} x {LAYER_SHAPE[1]} weight holds after GPTQ at 4 bits, zero-point, groups "
    "of 32 (chapter 5's storage: packed codes, FP16 scales, packed zero points).",
    _gptq_layer_bytes, unit="bytes", rel_tol=0.05,
    misconceptions=(
        (8.0, "count bits instead of bytes"),
        (_CODES / 2 / _RIGHT, "count the 4-bit codes only and forget each group's scale and zero point"),
        ((_CODES + 2 * _GROUPS + _GROUPS / 2) / _RIGHT, "count a byte per 4-bit code: two codes share a byte"),
        ((_CODES / 2 + 4 * _GROUPS + _GROUPS / 2) / _RIGHT, "count the scales in FP32 (4 bytes): they are "
                                                             "stored in FP16"),
    ),
)
