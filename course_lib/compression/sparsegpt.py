"""SparseGPT: one-shot pruning with GPTQ's machinery, the pruned weights' error fed to the rest.

Chapter 7 ("GPTQ lab") teaches it as a few-line change of GPTQ's column loop
(:func:`course_lib.compression.gptq.gptq_quantize_columns`). The method is Frantar and Alistarh,
"SparseGPT: Massive Language Models Can Be Accurately Pruned in One-Shot" (ICML 2023, arXiv
2301.00774). Like GPTQ it keeps the layer-wise error ``||W X - Ŵ X||²`` small with the shared
Hessian ``H = 2 X Xᵀ`` and the upper Cholesky factor ``U`` of its dampened inverse, one column at
a time, lazy batches of ``B`` columns. Two lines differ:

* instead of rounding column ``j`` to a grid, its pruned weights are set to zero, and the error
  that leaves, divided by ``U[j, j]``, is spread onto the columns still to come, exactly as GPTQ
  spreads a rounding error;
* which weights are pruned is chosen as the loop goes (*adaptive mask selection*): at the start of
  every block of ``B`` columns, the weights of the block with the smallest OBS saliency
  ``w² / [H⁻¹]_jj`` (``[H⁻¹]_jj`` = ``U[j, j]²`` once the columns before ``j`` are fixed) are
  pruned until the block has the target sparsity, counted over all its rows and columns, as the
  reference implementation does; for an N:M pattern (2:4), every group of ``M`` consecutive
  columns keeps the ``N`` weights of largest saliency in each row, chosen when the group is reached.

:func:`sparsegpt_prune_model` prunes every block weight matrix of a GPT-2 (chapter 6's prunable
weights), each calibrated on the inputs the *dense* model gives it (the paper runs the blocks in
sequence, as :func:`~course_lib.compression.gptq.gptq_quantize_model` does; for a model of four
blocks the difference is small, and Wanda is calibrated the same way).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers.pytorch_utils import Conv1D

from course_lib.base.checks import token_ids
from course_lib.compression import prune
from course_lib.compression.gptq import HessianAccumulator
from course_lib.compression.quant_layers import weight_matrix

__all__ = ["SparseGPTResult", "sparsegpt_prune_columns", "sparsegpt_prune_layer", "sparsegpt_prune_model"]


@dataclass
class SparseGPTResult:
    """SparseGPT's answer for one layer: the pruned, updated ``weight`` [out, in] and its keep-``mask`` (bool).

    Chapter 7, *GPTQ lab*.
    """

    weight: torch.Tensor
    mask: torch.Tensor

    @property
    def sparsity(self) -> float:
        """The fraction of weights pruned."""
        return 1.0 - float(self.mask.float().mean())


def _check_pattern(sparsity: float, n_m: tuple[int, int] | None, block_size: int) -> None:
    prune.check_sparsity(sparsity)
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise ValueError(f"block_size must be a whole number >= 1, got {block_size!r}; 128 is the paper's choice")
    if n_m is not None:
        n, m = n_m
        if not (isinstance(n, int) and isinstance(m, int) and 0 < n < m) or block_size % m:
            raise ValueError(f"n_m must be whole numbers 0 < n < m with m dividing block_size={block_size}, "
                             f"got {n_m!r}; the hardware pattern is (2, 4)")


def _block_mask(scores: torch.Tensor, sparsity: float) -> torch.Tensor:
    """Keep-mask of one block's ``scores`` [out, width]: the ``round(sparsity · n)`` smallest go."""
    keep = torch.ones(scores.numel(), dtype=torch.bool, device=scores.device)
    k = round(sparsity * scores.numel())
    if k:
        keep[torch.topk(scores.flatten(), k, largest=False).indices] = False
    return keep.view_as(scores)


@torch.no_grad()
def sparsegpt_prune_columns(W: torch.Tensor, U: torch.Tensor, sparsity: float = 0.5,
                            n_m: tuple[int, int] | None = None, block_size: int = 128) -> torch.Tensor:
    """SparseGPT's column loop: choose the mask block by block, zero, feed the error back, lazy batches.

    ``W`` [out, in] is pruned and updated in place; ``U`` is the upper Cholesky factor of the
    dampened H⁻¹ (as in :func:`~course_lib.compression.gptq.gptq_quantize_columns`). Returns the
    keep-mask [out, in] (bool). With ``n_m`` the ``sparsity`` is ignored (it is 1 − n/m).

    Chapter 7, *GPTQ lab*.
    """
    _check_pattern(sparsity, n_m, block_size)
    rows, cols = W.shape
    keep = torch.ones(rows, cols, dtype=torch.bool, device=W.device)
    d = torch.diagonal(U)
    for i1 in range(0, cols, block_size):
        i2 = min(i1 + block_size, cols)
        W1 = W[:, i1:i2].clone()
        Q1 = torch.zeros_like(W1)
        E = torch.zeros_like(W1)  # the block's scaled errors
        if n_m is None:  # the block's mask, from its weights as they are now: OBS saliency w² / [H⁻¹]_jj
            keep[:, i1:i2] = _block_mask(W1.pow(2) / d[i1:i2].pow(2), sparsity)
        for j in range(i1, i2):
            k = j - i1
            if n_m is not None and j % n_m[1] == 0:  # a new group of m columns: keep n per row
                m = n_m[1]
                keep[:, j:j + m] = prune.n_m_mask(W1[:, k:k + m].pow(2) / d[j:j + m].pow(2), *n_m)
            Q1[:, k] = W1[:, k] * keep[:, j]  # instead of rounding: the pruned weights become zero
            E[:, k] = (W1[:, k] - Q1[:, k]) / U[j, j]
            W1[:, k:].addr_(E[:, k], U[j, j:i2], alpha=-1)  # the rest of the block absorbs it
        W[:, i1:i2] = Q1
        W[:, i2:].addmm_(E, U[i1:i2, i2:], alpha=-1)  # the lazy batch update
    return keep


@torch.no_grad()
def sparsegpt_prune_layer(weight: torch.Tensor, inputs: torch.Tensor | None = None, *,
                          hessian: torch.Tensor | None = None, sparsity: float = 0.5,
                          n_m: tuple[int, int] | None = None, block_size: int = 128,
                          percdamp: float = 0.01) -> SparseGPTResult:
    """Prune one weight [out, in] with SparseGPT, given its calibration ``inputs`` [n, in] or ``hessian``.

    H is built and dampened as GPTQ does (float32; float64 if the weight is float64), dead inputs
    (always zero) get ``H[i, i] = 1`` and a zero weight, then :func:`sparsegpt_prune_columns` runs.

    Chapter 7, *GPTQ lab*.
    """
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or not weight.is_floating_point():
        raise ValueError("weight must be a floating-point matrix [out, in]; for transformers' Conv1D pass "
                         "weight.t()")
    if not bool(torch.isfinite(weight).all()):
        raise ValueError("weight holds NaN or inf values; prune a finite weight")
    _check_pattern(sparsity, n_m, block_size)
    if n_m is not None and weight.shape[1] % n_m[1]:
        raise ValueError(f"{n_m[0]}:{n_m[1]} needs the {weight.shape[1]} input columns to be a multiple of {n_m[1]}")
    if (inputs is None) == (hessian is None):
        raise ValueError("pass the layer's calibration inputs [n, in] or a precomputed hessian [in, in], "
                         "exactly one of the two")
    work = torch.float64 if weight.dtype == torch.float64 else torch.float32
    cols = weight.shape[1]
    if inputs is not None:
        acc = HessianAccumulator(cols, work)
        acc.add(inputs)
        hessian = acc.hessian()
    if not isinstance(hessian, torch.Tensor) or tuple(hessian.shape) != (cols, cols):
        raise ValueError(f"hessian must be [{cols}, {cols}]; build it with gptq.HessianAccumulator")
    W = weight.detach().to(work).clone()
    H = hessian.detach().to(device=W.device, dtype=work).clone()
    dead = torch.diagonal(H) == 0
    H.diagonal()[dead] = 1.0
    W[:, dead] = 0.0
    H.diagonal().add_(percdamp * torch.diagonal(H).mean())
    try:
        U = torch.linalg.cholesky(torch.cholesky_inverse(torch.linalg.cholesky(H)), upper=True)
    except RuntimeError:
        raise ValueError(f"the Hessian is not positive definite even with percdamp={percdamp}; raise "
                         "percdamp (e.g. 0.1) or calibrate on more tokens") from None
    mask = sparsegpt_prune_columns(W, U, sparsity, n_m, block_size)
    return SparseGPTResult(W, mask)


@torch.no_grad()
def sparsegpt_prune_model(model: nn.Module, calibration_batches: Iterable[Any], sparsity: float = 0.5,
                          n_m: tuple[int, int] | None = None, block_size: int = 128,
                          percdamp: float = 0.01) -> nn.Module:
    """A copy of ``model`` whose block weight matrices are pruned by SparseGPT (zeros kept in dense tensors).

    Every prunable layer (:func:`course_lib.compression.prune.prunable_modules`) gets its Hessian
    from the inputs the dense model gives it on ``calibration_batches`` (token ids [batch, seq], or
    mappings with ``input_ids``); then each is pruned by :func:`sparsegpt_prune_layer`.

    Chapter 7, *GPTQ lab*.
    """
    _check_pattern(sparsity, n_m, block_size)
    model = copy.deepcopy(model).eval()
    modules = prune.prunable_modules(model)
    hessians = {name: HessianAccumulator(weight_matrix(m).shape[1]) for name, m in modules.items()}
    handles = [m.register_forward_pre_hook(lambda mod, args, acc=hessians[name]: acc.add(args[0]))
               for name, m in modules.items()]
    device = next(model.parameters()).device
    try:
        for index, batch in enumerate(calibration_batches):
            ids = batch.get("input_ids") if isinstance(batch, Mapping) else batch
            if not isinstance(ids, torch.Tensor):
                raise ValueError("each calibration batch must be a tensor of token ids [batch, seq] or a "
                                 "mapping with 'input_ids'")
            model(input_ids=token_ids(ids, model, f"calibration batch {index + 1}: token ids").to(device))
    finally:
        for h in handles:
            h.remove()
    for name, m in modules.items():
        if hessians[name].rows == 0:
            raise ValueError("no calibration data: pass at least one batch of token ids")
        result = sparsegpt_prune_layer(weight_matrix(m), hessian=hessians[name].hessian(), sparsity=sparsity,
                                       n_m=n_m, block_size=block_size, percdamp=percdamp)
        pruned = result.weight.t() if isinstance(m, Conv1D) else result.weight  # the weight's own layout
        m.weight.copy_(pruned.to(m.weight.dtype))
    return model
