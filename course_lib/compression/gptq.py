"""GPTQ: post-training quantization that corrects each rounding error with the weights not yet rounded.

Chapter 7 ("GPTQ lab") teaches it. The method is Frantar, Ashkboos, Hoefler and Alistarh, "GPTQ:
Accurate Post-Training Quantization for Generative Pre-trained Transformers" (ICLR 2023, arXiv
2210.17323); this module follows the paper, and rounds and stores as chapter 5 does
(:mod:`course_lib.compression.quant`). Its symmetric grid is the reference implementation's
(IST-DASLab/gptq ``quant.py``, and the GPTQ checkpoints of the ecosystem): 2^b levels, scale
2·max|w| / (2^b − 1), zero point fixed at 2^(b−1) (:func:`gptq_grid`), one level more than
chapter 5's absmax grid ±(2^(b−1) − 1).

For one linear layer with weight ``W`` [out, in] and calibration inputs ``X`` [in, n], GPTQ looks
for a quantized ``Q`` that keeps ``||W X - Q X||²`` small. Every row of ``W`` shares the Hessian
of that objective, ``H = 2 X Xᵀ`` (:class:`HessianAccumulator`, which keeps it averaged over the
``n`` rows). Columns are quantized one after the other; each column's rounding error, divided by
a diagonal entry of the inverse Hessian, is spread onto the columns still to come, which absorb
it. The paper's Algorithm 1, line by line, is :func:`gptq_quantize_layer` (its first line) and the
column loop it calls, :func:`gptq_quantize_columns` (the rest; ``U`` below is what the paper keeps
in ``H⁻¹`` after its first line):

* ``H⁻¹ ← Cholesky(H⁻¹)ᵀ``: dampen ``H`` (add ``percdamp`` × mean diag H) and keep the upper
  Cholesky factor ``U`` of its inverse. Row ``j`` of ``U``, from the diagonal on, is the row of the
  inverse Hessian that OBQ's update needs once columns ``0..j-1`` are fixed, divided by the square
  root of its diagonal entry (which cancels): one factorization replaces ``in`` downdates.
* ``Q[:, j] ← quant(W[:, j])``: round a column to the grid.
* ``E[:, j-i] ← (W[:, j] - Q[:, j]) / U[j, j]``: its scaled error.
* ``W[:, j:i+B] ← W[:, j:i+B] - E[:, j-i] · U[j, j:i+B]``: the rest of the block absorbs it.
* ``W[:, i+B:] ← W[:, i+B:] - E · U[i:i+B, i+B:]``: the *lazy batch* update, once per block of
  ``B`` columns (one matrix product instead of ``B`` memory-bound rank-one updates; same result).

Beyond Algorithm 1: *groups* (evaluated in the paper): every ``g`` consecutive columns of a row get
their own scale and zero point, from the current (corrected) weights when the group's first column
is reached (also inside a block whose lazy update is pending), or up front with ``static_groups``;
the reference implementation's *act-order* (columns by decreasing ``diag(H)``) and handling of
dead inputs (an input that is always zero: ``H[i, i] = 1``, ``W[:, i] = 0``).

:func:`gptq_quantize_model` runs the paper's sequential scheme over a GPT-2's blocks and returns
chapter 5's :class:`~course_lib.compression.quant_layers.QuantLinear` layers, so ``save_quantized``,
``load_quantized`` and ``model_bytes`` work on the result as on a round-to-nearest model.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from course_lib.base import dtypes, env
from course_lib.base.checks import token_ids
from course_lib.compression import quant
from course_lib.compression.quant import QTensor, QuantConfig
from course_lib.compression.quant_layers import QuantizedWeight, QuantLinear, quantize_model, weight_matrix
from course_lib.text import models

__all__ = [
    "GPTQConfig",
    "GPTQResult",
    "HessianAccumulator",
    "gptq_grid",
    "gptq_quantize_columns",
    "gptq_quantize_layer",
    "gptq_quantize_model",
    "layer_error",
    "rtn_quantize_layer",
]


# --- Configuration --------------------------------------------------------------------

@dataclass(frozen=True)
class GPTQConfig:
    """GPTQ's settings: chapter 5's grid (bits, groups, symmetric or not) plus block size, dampening, order.

    ``sym=False`` is chapter 5's *zero-point* grid; ``sym=True`` the reference implementation's
    symmetric grid (:func:`gptq_grid`: 2^b levels, zero point 2^(b−1)), stored as chapter 5's absmax;
    ``group_size=None`` (or -1) means one scale per output channel. The defaults give chapter 5's
    ``"int4-g128"`` grid. ``block_size`` is the lazy-batch width B, ``percdamp`` the dampening
    as a fraction of the mean diagonal of H, ``act_order`` quantizes columns by decreasing
    ``diag(H)``, ``static_groups`` fixes every group's scale from the original weights up front.

    Chapter 7, *GPTQ lab*.
    """

    bits: int = 4
    group_size: int | None = 128
    sym: bool = False
    act_order: bool = False
    static_groups: bool = False
    block_size: int = 128
    percdamp: float = 0.01
    scale_dtype: str = "fp16"

    def __post_init__(self) -> None:
        if self.group_size == -1:
            object.__setattr__(self, "group_size", None)
        for name in ("sym", "act_order", "static_groups"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be True or False, got {getattr(self, name)!r}")
        size = self.block_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"block_size must be a whole number >= 1, got {size!r}; 128 is the paper's "
                             "choice (it changes the speed, not the result)")
        damp = self.percdamp
        if isinstance(damp, bool) or not isinstance(damp, (int, float)) or not math.isfinite(damp) or damp < 0:
            raise ValueError(f"percdamp must be a finite fraction >= 0, got {damp!r}; 0.01 (1 % of the "
                             "mean diagonal of H) is the usual choice, raise it if H is not invertible")
        try:  # chapter 5's checks of bits, group size and scale dtype
            object.__setattr__(self, "scale_dtype", self.quant_config.scale_dtype)
        except ValueError as err:
            raise ValueError(f"GPTQConfig: {err}") from None

    @property
    def quant_config(self) -> QuantConfig:
        """Chapter 5's storage format of the result (absmax when ``sym``: the same decoding, code - 2^(b-1))."""
        return QuantConfig(self.bits, "absmax" if self.sym else "zeropoint",
                           "channel" if self.group_size is None else "group", self.group_size,
                           scale_dtype=self.scale_dtype)

    @property
    def label(self) -> str:
        """A short name for tables: 'GPTQ INT4 zero-point g128 act-order'."""
        order = " act-order" if self.act_order else ""
        static = " static" if self.static_groups and self.group_size else ""
        grid = self.quant_config.label.replace("absmax", "symmetric")
        return f"GPTQ {grid}{static}{order}"

    def _check_width(self, columns: int) -> None:
        """A ValueError naming a fix if the groups do not tile a row of ``columns`` inputs."""
        if self.group_size is not None and columns % self.group_size:
            divisors = [d for d in (256, 128, 64, 32, 16, 8) if columns % d == 0]
            raise ValueError(f"group_size={self.group_size} does not divide the {columns} input columns; "
                             f"choose one that does ({', '.join(map(str, divisors)) or 'none of the usual'}) "
                             "or group_size=None (per channel)")


# --- The Hessian of the layer-wise objective ------------------------------------------

class HessianAccumulator:
    """Running ``H = 2 X Xᵀ / n`` over a layer's calibration inputs, fed in batches of shape [..., in].

    H is kept as an average over the ``n`` rows seen so far (as the paper's reference code does), so
    it stays of the size of one row's ``2 x xᵀ`` however much data is fed; GPTQ's result does not
    depend on that scale (the dampening is relative to mean diag H). Float32 by default: H only
    needs to be accurate to the dampening, 1 % of its diagonal.

    Chapter 7, *GPTQ lab*.
    """

    def __init__(self, in_features: int, dtype: torch.dtype = torch.float32) -> None:
        if isinstance(in_features, bool) or not isinstance(in_features, int) or in_features < 1:
            raise ValueError(f"in_features must be a whole number >= 1, got {in_features!r}")
        self.in_features = in_features
        self.dtype = dtype
        self.rows = 0
        self.sum: torch.Tensor | None = None

    def add(self, inputs: torch.Tensor) -> None:
        """Fold in a batch of inputs [..., in] (every leading position counts as one row)."""
        if not isinstance(inputs, torch.Tensor) or inputs.dim() < 1 or inputs.shape[-1] != self.in_features:
            shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
            raise ValueError(f"inputs must be a tensor [..., {self.in_features}] (the layer's input "
                             f"features last), got {shape}")
        x = inputs.detach().reshape(-1, self.in_features).to(self.dtype)
        m = x.shape[0]
        if m == 0:
            return
        if self.sum is None:  # on the device of the first batch
            self.sum = torch.zeros(self.in_features, self.in_features, dtype=self.dtype, device=x.device)
        x = x.to(self.sum.device)
        total = self.rows + m
        self.sum.mul_(self.rows / total).addmm_(x.t(), x, alpha=2.0 / total)
        self.rows = total

    def hessian(self) -> torch.Tensor:
        """H [in, in] of everything added so far (a ValueError if nothing was, or if it is not finite)."""
        if self.sum is None:
            raise ValueError("no calibration data: the Hessian needs at least one input row; feed the "
                             "layer's inputs with add() (e.g. a few batches of real text)")
        if not bool(torch.isfinite(self.sum).all()):
            raise ValueError("the calibration inputs hold NaN or inf values, so H does too; check the model "
                             "and data that produced them")
        return self.sum.clone()


# --- One layer ------------------------------------------------------------------------

@dataclass
class GPTQResult:
    """GPTQ's answer for one layer, in the original column order.

    ``weight`` is the dequantized weight [out, in] (float32, decoded as chapter 5 decodes),
    ``codes`` the integer codes [out, in] (uint8, chapter 5's storage convention), ``scale`` and
    ``zero`` one value per row and group [out, groups] (``zero`` is None on the symmetric grid),
    ``g_idx`` the group of every input column, and ``perm`` the order in which columns were
    quantized (None without act-order). Column ``j`` decodes as
    ``(codes[:, j] - zero[:, g_idx[j]]) * scale[:, g_idx[j]]``.

    Chapter 7, *GPTQ lab*.
    """

    weight: torch.Tensor
    codes: torch.Tensor
    scale: torch.Tensor
    zero: torch.Tensor | None
    g_idx: torch.Tensor
    perm: torch.Tensor | None
    config: GPTQConfig

    def _plain_groups(self) -> bool:
        """True when every group is ``group_size`` consecutive columns (chapter 5's storage layout)."""
        cols = self.codes.shape[1]
        size = self.config.group_size or cols
        plain = torch.arange(cols, device=self.g_idx.device) // size
        return bool(torch.equal(self.g_idx, plain))

    def to_qtensor(self) -> QTensor:
        """The result as chapter 5's packed :class:`~course_lib.compression.quant.QTensor` (plain group layout only)."""
        if not self._plain_groups():
            raise ValueError("with act_order, groups were formed in quantization order, so a group's columns "
                             "are scattered over the row and chapter 5's layout (groups of consecutive "
                             "columns) cannot store them; quantize with static_groups=True")
        grid = self.config.quant_config
        zero = quant.pack_bits(self.zero, grid.bits) if self.zero is not None else None
        scale = self.scale.to(dtypes.torch_dtype(grid.scale_dtype))  # already rounded to that dtype: exact
        return QTensor(quant.pack_bits(self.codes, grid.bits), scale, zero, None, None,
                       tuple(self.codes.shape), grid)


def _check_config(config: Any) -> None:
    if not isinstance(config, GPTQConfig):
        raise ValueError(f"config must be a GPTQConfig, got {type(config).__name__}; chapter 5's grid "
                         "QuantConfig(bits, scheme, granularity, group_size) is GPTQConfig(bits, "
                         "group_size, sym=...) (sym=True: GPTQ's symmetric grid, see gptq_grid)")


def _check_weight(weight: Any) -> torch.Tensor:
    weight = quant.check_tensor(weight, "weight")
    if weight.dim() != 2:
        raise ValueError(f"weight must be a matrix [out, in], got shape {tuple(weight.shape)}; for "
                         "transformers' Conv1D (weight [in, out]) pass weight.t()")
    return weight.detach()


def _hessian_of(columns: int, inputs: torch.Tensor | None, hessian: torch.Tensor | None,
                dtype: torch.dtype) -> torch.Tensor:
    if (inputs is None) == (hessian is None):
        raise ValueError("pass the layer's calibration inputs [n, in] or a precomputed hessian [in, in], "
                         "exactly one of the two")
    if inputs is not None:
        if not isinstance(inputs, torch.Tensor) or inputs.dim() < 1 or inputs.shape[-1] != columns:
            shape = tuple(inputs.shape) if isinstance(inputs, torch.Tensor) else type(inputs).__name__
            raise ValueError(f"inputs must be [n, {columns}] (one row per token, the weight's {columns} input "
                             f"columns last), got {shape}")
        acc = HessianAccumulator(columns, dtype)
        acc.add(inputs)
        return acc.hessian()
    if not isinstance(hessian, torch.Tensor) or tuple(hessian.shape) != (columns, columns):
        shape = tuple(hessian.shape) if isinstance(hessian, torch.Tensor) else type(hessian).__name__
        raise ValueError(f"hessian must be [{columns}, {columns}] for a weight with {columns} input "
                         f"columns, got {shape}; build it with HessianAccumulator")
    if not bool(torch.isfinite(hessian).all()):
        raise ValueError("hessian holds NaN or inf values; rebuild it from finite inputs")
    return hessian.detach()


def _round_column(w: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor | None,
                  bits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes (uint8) and decoded values (float32) of one column: chapter 5's rounding rule."""
    code = quant.encode_codes(w.float(), scale, zero, bits)
    return code, quant.decode_codes(code, scale, zero, bits)


def gptq_grid(weights: torch.Tensor, config: GPTQConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Scales (float32) and zero points (uint8) of ``weights`` [out, cols], each [out, groups], on GPTQ's grid.

    ``sym=False``: chapter 5's zero-point grid. ``sym=True``: the reference implementation's
    symmetric grid, 2^b levels with scale 2·max|w| / (2^b − 1) (stored in ``scale_dtype``,
    rounded up as chapter 5 rounds) and the zero point fixed at 2^(b−1).

    Chapter 7, *GPTQ lab*.
    """
    grid = config.quant_config
    if not config.sym:
        c = quant.quantize_codes(weights.float().contiguous(), grid)
        return c.scale, c.zero
    rows, groups, size = quant.geometry(tuple(weights.shape), grid)
    m = weights.float().reshape(rows, groups, size).abs().amax(-1)  # [out, groups]
    # chapter 5's zero-point scale of the range [-max|w|, max|w|]: 2 max|w| / (2^b - 1)
    span = QuantConfig(config.bits, "zeropoint", "channel", scale_dtype=grid.scale_dtype)
    scale = quant.quantize_codes(torch.stack([-m, m], -1).reshape(-1, 2), span).scale.reshape(rows, groups)
    return scale, torch.full_like(scale, 1 << (config.bits - 1), dtype=torch.uint8)


def _current(W: torch.Tensor, W1: torch.Tensor, E: torch.Tensor, U: torch.Tensor,
             i1: int, i2: int, j: int, end: int) -> torch.Tensor:
    """Columns ``j:end`` as they stand when column ``j`` is reached, inside a block ``i1:i2``.

    Inside the block they are in ``W1`` (updated column by column); beyond it, the block's lazy
    update is still pending, so it is applied here for the columns ``i1:j`` already done.
    """
    inside = W1[:, j - i1: min(end, i2) - i1]
    if end <= i2:
        return inside
    beyond = W[:, i2:end] - E[:, : j - i1] @ U[i1:j, i2:end]
    return torch.cat([inside, beyond], dim=1)


def _set_group_grid(scale: torch.Tensor, zero: torch.Tensor | None, g: int, weights: torch.Tensor,
                    config: GPTQConfig) -> None:
    """Group ``g``'s scale and zero point, from its ``weights`` [out, size] as they stand now.

    ``zero`` None: chapter 5's absmax grid (2^b − 1 levels); otherwise :func:`gptq_grid`'s.
    """
    channel = GPTQConfig(config.bits, None, config.sym, scale_dtype=config.scale_dtype)
    if zero is None:
        s = quant.quantize_codes(weights.float().contiguous(), channel.quant_config).scale
    else:
        s, z = gptq_grid(weights, channel)
        zero[:, g] = z[:, 0]
    scale[:, g] = s[:, 0]


@torch.no_grad()
def gptq_quantize_columns(W: torch.Tensor, U: torch.Tensor, scale: torch.Tensor,
                          zero: torch.Tensor | None, groups: list[int],
                          config: GPTQConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """GPTQ's column loop (Algorithm 1): round, feed the error back, lazy batch updates.

    ``W`` [out, in] holds the weights in quantization order (updated in place); ``U`` is
    the upper Cholesky factor of the dampened H⁻¹; ``scale`` and ``zero`` [out, groups]
    hold each group's grid (``zero`` None: chapter 5's absmax codes, 2^b − 1 levels),
    ``groups[j]`` the group of column ``j``. Without static
    groups, a group's grid is set when its first column is reached, from the weights as
    the columns before it have left them. Returns the codes (uint8) and the decoded
    weights (float32), both [out, in].

    Chapter 7, *GPTQ lab*.
    """
    rows, cols = W.shape
    size, B = config.group_size or cols, config.block_size
    static = config.group_size is None or config.static_groups
    codes = torch.zeros(rows, cols, dtype=torch.uint8, device=W.device)
    Q = torch.zeros(rows, cols, dtype=torch.float32, device=W.device)
    for i1 in range(0, cols, B):  # "for i = 0, B, 2B, ..."
        i2 = min(i1 + B, cols)
        W1 = W[:, i1:i2].clone()
        E = torch.zeros_like(W1)  # the block's scaled errors
        for j in range(i1, i2):  # "for j = i, ..., i + B - 1"
            k, g = j - i1, groups[j]
            if not static and j % size == 0:  # a new group: its grid from W as it is
                current = _current(W, W1, E, U, i1, i2, j, j + size)
                _set_group_grid(scale, zero, g, current, config)
            z = None if zero is None else zero[:, g]
            # "Q[:, j] ← quant(W[:, j])"
            codes[:, j], Q[:, j] = _round_column(W1[:, k], scale[:, g], z, config.bits)
            # "E[:, j-i] ← (W[:, j] - Q[:, j]) / [H⁻¹]_jj"
            E[:, k] = (W1[:, k] - Q[:, j].to(W1)) / U[j, j]
            # "W[:, j:i+B] ← W[:, j:i+B] - E[:, j-i] · H⁻¹[j, j:i+B]"
            W1[:, k:].addr_(E[:, k], U[j, j:i2], alpha=-1)
        # "W[:, i+B:] ← W[:, i+B:] - E · H⁻¹[i:i+B, i+B:]": the lazy batch update
        W[:, i2:].addmm_(E, U[i1:i2, i2:], alpha=-1)
    return codes, Q


@torch.no_grad()
def gptq_quantize_layer(weight: torch.Tensor, inputs: torch.Tensor | None = None,
                        config: GPTQConfig | None = None, *,
                        hessian: torch.Tensor | None = None) -> GPTQResult:
    """Quantize one weight [out, in] with GPTQ, given its calibration ``inputs`` [n, in] or ``hessian``.

    Follows the paper's Algorithm 1 (see the module docstring); everything runs on the weight's
    device, in float32 (float64 if the weight is float64: H too), and rounds as chapter 5 does.

    Chapter 7, *GPTQ lab*.
    """
    config = config or GPTQConfig()
    _check_config(config)
    weight = _check_weight(weight)
    rows, cols = weight.shape
    config._check_width(cols)
    work = torch.float64 if weight.dtype == torch.float64 else torch.float32
    W = weight.to(work).clone()
    H = _hessian_of(cols, inputs, hessian, work).to(device=W.device, dtype=work).clone()
    device = W.device

    # Dead inputs (always zero): nothing to learn from them; make H invertible and drop their weights.
    dead = torch.diagonal(H) == 0
    H.diagonal()[dead] = 1.0
    W[:, dead] = 0.0

    # Groups: g_of[j] is the group of the j-th column *in quantization order*.
    size = config.group_size or cols
    n_groups = cols // size
    static = config.group_size is None or config.static_groups
    if static:  # per channel, or static groups: the grid comes from the original weights, up front
        scale, zero = gptq_grid(W, config)
    else:  # filled in when each group's first column is reached
        scale = torch.ones(rows, n_groups, device=device)
        zero = torch.full((rows, n_groups), (1 << (config.bits - 1)) if config.sym else 0,
                          dtype=torch.uint8, device=device)

    # Act-order: columns with the largest diag(H) (the most input energy) first.
    perm = None
    order = torch.arange(cols, device=device)
    if config.act_order:
        perm = torch.argsort(torch.diagonal(H), descending=True, stable=True)
        W, H, order = W[:, perm], H[perm][:, perm], perm
    g_of = order // size if static else torch.arange(cols, device=device) // size
    groups = g_of.tolist()  # read once, not one device sync per column

    # Dampening, then "H⁻¹ ← Cholesky(H⁻¹)ᵀ": U is the upper Cholesky factor of the inverse.
    H.diagonal().add_(config.percdamp * torch.diagonal(H).mean())
    try:
        L = torch.linalg.cholesky(H)
        U = torch.linalg.cholesky(torch.cholesky_inverse(L), upper=True)
    except RuntimeError:  # torch.linalg.LinAlgError: H + damping is not positive definite
        raise ValueError(f"the Hessian is not positive definite even with percdamp={config.percdamp}; "
                         "raise percdamp (e.g. 0.1) or calibrate on more tokens") from None

    codes, Q = gptq_quantize_columns(W, U, scale, zero, groups, config)

    g_idx = g_of
    if perm is not None:  # back to the original column order
        inverse = torch.argsort(perm)
        codes, Q, g_idx = codes[:, inverse], Q[:, inverse], g_of[inverse]
    zero = None if config.sym else zero  # stored as chapter 5's absmax: the zero point is implied
    return GPTQResult(Q, codes, scale, zero, g_idx, perm, config)


def rtn_quantize_layer(weight: torch.Tensor, config: GPTQConfig | None = None) -> torch.Tensor:
    """The round-to-nearest baseline: every weight rounded to its nearest level of GPTQ's grid (:func:`gptq_grid`).

    Chapter 7, *GPTQ lab*.
    """
    config = config or GPTQConfig()
    weight = _check_weight(weight)
    config._check_width(weight.shape[1])
    if not config.sym:  # chapter 5's zero-point grid
        return quant.quantize_dequantize(weight, config.quant_config)
    scale, zero = gptq_grid(weight, config)
    size = config.group_size or weight.shape[1]
    scale, zero = scale.repeat_interleave(size, 1), zero.repeat_interleave(size, 1)
    codes = quant.encode_codes(weight.float(), scale, zero, config.bits)
    return quant.decode_codes(codes, scale, zero, config.bits)


def layer_error(weight: torch.Tensor, q_weight: torch.Tensor, inputs: torch.Tensor) -> float:
    """The layer-wise objective, relative: ``||W X - Ŵ X||² / ||W X||²`` over ``inputs`` [n, in].

    Chapter 7, *GPTQ lab*.
    """
    weight, q_weight = _check_weight(weight), quant.check_tensor(q_weight, "q_weight")
    if tuple(q_weight.shape) != tuple(weight.shape):
        raise ValueError(f"q_weight has shape {tuple(q_weight.shape)}, the weight {tuple(weight.shape)}; "
                         "compare a weight with its own quantized version")
    if not isinstance(inputs, torch.Tensor) or inputs.shape[-1] != weight.shape[1]:
        raise ValueError(f"inputs must be [n, {weight.shape[1]}] (the weight's input columns last)")
    work = torch.promote_types(weight.dtype, torch.float32)
    x = inputs.detach().reshape(-1, weight.shape[1]).to(device=weight.device, dtype=work)
    w = weight.to(work)
    reference = (x @ w.t()).pow(2).sum()
    if reference == 0:
        raise ValueError("W X is zero on these inputs, so a relative error is undefined")
    return float((x @ (w - q_weight.detach().to(w)).t()).pow(2).sum() / reference)


# --- A whole model, block by block ----------------------------------------------------

class _Caught(Exception):
    """Raised by the hook that records the first block's inputs, to stop the forward pass there."""


def _model_blocks(model: nn.Module) -> nn.ModuleList:
    """The model's transformer blocks (:func:`course_lib.text.models.blocks`), with GPTQ's advice."""
    try:
        return models.blocks(model)
    except ValueError as err:
        raise ValueError(f"{err}; gptq_quantize_model quantizes such a model, and for a single "
                         "layer use gptq_quantize_layer") from None


def _linears(block: nn.Module) -> dict[str, nn.Module]:
    return {name: m for name, m in block.named_modules() if isinstance(m, (nn.Linear, Conv1D))}


def _input_ids(batch: Any, model: nn.Module, index: int) -> torch.Tensor:
    """Calibration batch number ``index`` as token ids [batch, seq] that ``model`` can read, on its device."""
    ids = batch.get("input_ids") if isinstance(batch, Mapping) else batch
    if not isinstance(ids, torch.Tensor) or ids.dtype not in (torch.int64, torch.int32) or ids.numel() == 0:
        raise ValueError("each calibration batch must be a non-empty tensor of token ids [batch, seq] or a "
                         "mapping with 'input_ids' (as a tokenizer returns)")
    try:
        ids = token_ids(ids, model)  # ids beyond the vocabulary or the context: a message, not an IndexError
    except ValueError as err:
        raise ValueError(f"calibration batch {index}: {err}") from None
    return ids.to(next(model.parameters()).device)


@torch.no_grad()
def gptq_quantize_model(model: nn.Module, calibration_batches: Iterable[Any], config: GPTQConfig | None = None,
                        *, embeddings: bool = False, progress: bool = False) -> nn.Module:
    """A copy of ``model`` whose block linear layers are GPTQ-quantized, block after block, on calibration text.

    The paper's sequential scheme: the inputs of the first block are recorded for every batch
    (token ids [batch, seq], or mappings with ``input_ids``; every position counts). For each block
    in turn, hooks accumulate the Hessian of each linear layer while the block runs on those inputs,
    every layer is quantized (:func:`gptq_quantize_layer`) and replaced by a :class:`QuantLinear`,
    and the *quantized* block is run again to give the next block its inputs, so that every block
    is calibrated on the inputs it will really see, errors of the blocks before it included.

    The token embedding and GPT-2's ``lm_head`` (tied to it) stay in float32 unless
    ``embeddings=True``, which gives them chapter 5's round-to-nearest (GPTQ corrects a matrix
    product; an embedding is a lookup). Any other linear layer outside the blocks (an untied output
    layer) gets round-to-nearest too, as :func:`quantize_model` does, so that ``load_quantized``
    rebuilds the same layers. With act-order and groups, ``static_groups`` must be on: chapter 5's
    storage holds groups of consecutive columns only. The original model is not modified;
    ``save_quantized``, ``load_quantized`` and ``model_bytes`` work on the result.

    Chapter 7, *GPTQ lab*.
    """
    config = config or GPTQConfig()
    _check_config(config)
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch model (nn.Module), got {type(model).__name__}")
    if config.act_order and config.group_size is not None and not config.static_groups:
        raise ValueError("act_order with groups forms each group in quantization order, which chapter 5's "
                         "QuantLinear (groups of consecutive columns) cannot store; pass static_groups=True, "
                         "or group_size=None")
    blocks = _model_blocks(model)
    for b, block in enumerate(blocks):
        for name, m in _linears(block).items():
            try:
                config._check_width(weight_matrix(m).shape[1])
            except ValueError as err:
                raise ValueError(f"block {b}, {name}: {err}") from None
    model = copy.deepcopy(model).eval()
    blocks = _model_blocks(model)

    # The first block's inputs (and its other arguments: mask, positions) for every batch.
    recorded: list[tuple[torch.Tensor, tuple[Any, ...], dict[str, Any]]] = []

    def catch(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        hidden = args[0] if args else kwargs.pop("hidden_states")
        recorded.append((hidden, args[1:], kwargs))
        raise _Caught

    handle = blocks[0].register_forward_pre_hook(catch, with_kwargs=True)
    try:
        for index, batch in enumerate(calibration_batches):
            try:
                model(input_ids=_input_ids(batch, model, index), use_cache=False)
            except _Caught:
                pass
    finally:
        handle.remove()
    if not recorded:
        raise ValueError("no calibration data: pass at least one batch of token ids (GPTQ needs the layers' "
                         "inputs to build their Hessians; a few hundred sequences of real text are usual)")

    def run(block: nn.Module) -> list[torch.Tensor]:
        outputs = []
        for hidden, args, kwargs in recorded:
            out = block(hidden, *args, **kwargs)
            outputs.append(out[0] if isinstance(out, tuple) else out)
        return outputs

    for b, block in env.progress_bar(enumerate(blocks), total=len(blocks), desc="GPTQ", progress=progress):
        layers = _linears(block)
        hessians = {name: HessianAccumulator(weight_matrix(m).shape[1]) for name, m in layers.items()}
        handles = [m.register_forward_pre_hook(lambda mod, args, acc=hessians[name]: acc.add(args[0]))
                   for name, m in layers.items()]
        try:
            run(block)  # the block's inputs come from the already quantized blocks before it
        finally:
            for h in handles:
                h.remove()
        for name, m in layers.items():
            try:
                result = gptq_quantize_layer(weight_matrix(m), config=config, hessian=hessians[name].hessian())
            except ValueError as err:
                raise ValueError(f"block {b}, {name}: {err}") from None
            parent, _, child = name.rpartition(".")
            packed = QuantLinear(QuantizedWeight(result.to_qtensor()), m.bias)
            setattr(block.get_submodule(parent) if parent else block, child, packed)
        outputs = run(block)  # the quantized block's outputs feed the next block
        recorded = [(out, args, kwargs) for out, (_, args, kwargs) in zip(outputs, recorded)]

    tied = getattr(model.get_input_embeddings(), "weight", None) if hasattr(model, "get_input_embeddings") else None
    rest = [m for m in model.modules() if isinstance(m, (nn.Linear, Conv1D)) and m.weight is not tied]
    if rest or embeddings:  # round-to-nearest for what is left, exactly as load_quantized rebuilds it
        model = quantize_model(model, config.quant_config, embeddings=embeddings)
    model.quantization = config.quant_config  # type: ignore[attr-defined]
    return model.eval()
