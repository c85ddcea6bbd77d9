"""Chapter 6, *Pruning lab*: the chapter's lab, code exercises and a prediction checked against the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The references are :mod:`course_lib.compression.prune`'s own functions and the bytes that
:mod:`course_lib.compression.sparse_checkpoints` writes to disk.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch import nn

from course_lib.compression import prune, sparse_checkpoints
from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction

# --- 2:4: keep the 2 largest magnitudes of every 4 consecutive inputs -----------------------


def _ranks_in_groups(scores: torch.Tensor) -> torch.Tensor:
    """Each score's rank in its group of 4 consecutive inputs (0: largest), equal scores by position."""
    groups = scores.reshape(scores.shape[0], -1, 4)
    order = torch.sort(groups, dim=2, descending=True, stable=True).indices
    ranks = torch.arange(4).expand_as(order).contiguous()
    return torch.empty_like(order).scatter_(2, order, ranks).reshape(scores.shape)


def _two_four_mask(weight: torch.Tensor) -> torch.Tensor:
    """The reference: ``prune.n_m_mask`` of |W| with its ties settled, the earlier input first.

    ``n_m_mask`` picks with ``torch.topk``, which leaves the choice among equal scores to its
    implementation; scores without ties (minus each weight's rank in its group) fix the rule.
    """
    return prune.n_m_mask(-_ranks_in_groups(weight.abs()).to(weight.dtype), 2, 4)


def _two_four_cases() -> list[Case]:
    g = torch.Generator().manual_seed(6)
    return [Case((torch.randn(8, 16, generator=g),), "random"),
            Case((torch.tensor([[-5.0, 1.0, -4.0, 2.0, 0.3, -0.1, 0.2, -0.4]]),), "negative weights"),
            Case((torch.tensor([[1.0, -1.0, 1.0, -1.0, 0.5, 2.0, 2.0, -2.0],
                                [3.0, 1.0, 1.0, 0.5, 0.0, 0.0, 0.0, 0.0]]),),
                 "ties: the earlier input stays"),
            Case((torch.randn(12, 8, generator=g).double(),), "tall, float64")]


def _signed_two_four(weight: torch.Tensor) -> torch.Tensor:
    return prune.n_m_mask(-_ranks_in_groups(weight).to(weight.dtype), 2, 4)


def _two_four_down_columns(weight: torch.Tensor) -> torch.Tensor:
    return _two_four_mask(weight.t().contiguous()).t()


def _half_of_each_row(weight: torch.Tensor) -> torch.Tensor:
    return prune.row_mask(weight.abs(), 0.5)


two_four_mask = Exercise(
    "two_four_mask",
    "The 2:4 mask of a weight [out, in]: in every group of 4 consecutive inputs of a row, keep the 2 "
    "largest |w| (True = kept), equal magnitudes by position, the earlier first.",
    _two_four_mask, _two_four_cases,
    misconceptions=(
        Misconception("signed values", "keep the 2 largest values, not the 2 largest magnitudes: a "
                      "large negative weight matters as much as a large positive one", _signed_two_four),
        Misconception("groups down a column", "group 4 consecutive outputs (rows) instead of 4 "
                      "consecutive inputs along a row, the layout the sparse tensor cores read",
                      _two_four_down_columns),
        Misconception("half of each row", "keep the largest half of each row: 50 % sparse, but not 2 of "
                      "every 4, so the hardware cannot use it", _half_of_each_row),
    ),
)

# --- Wanda: |W_ij| * ||X_j||_2, pruned within each output row -------------------------------


def _wanda_mask(weight: torch.Tensor, x: torch.Tensor, sparsity: float) -> torch.Tensor:
    """The reference: ``prune.wanda_masks`` of a one-layer model, with the norms ``prune.input_norms`` records."""
    layer = nn.Linear(weight.shape[1], weight.shape[0], bias=False, dtype=weight.dtype)
    layer.weight = nn.Parameter(weight.detach().clone(), requires_grad=False)
    norms = {"0.weight": x.pow(2).sum(0).sqrt()}  # ||X_j||_2 over the tokens, as input_norms sums it
    return prune.wanda_masks(nn.Sequential(layer), sparsity, norms)["0.weight"]


def _wanda_cases() -> list[Case]:
    g = torch.Generator().manual_seed(61)
    spread = torch.tensor([0.2, 3.0, 1.0, 0.5, 2.0, 0.1, 1.5, 4.0, 0.7, 1.2])
    x = torch.randn(8, 10, generator=g) * spread
    x[3, 5] = 6.0  # one rare large activation: a large L2 norm, a small mean
    outlier = torch.randn(16, 6, generator=g)
    outlier[:, 2] *= 50
    dead = torch.randn(16, 6, generator=g)
    dead[:, 4] = 0
    return [Case((torch.randn(6, 10, generator=g), x, 0.5), "random"),
            Case((torch.randn(4, 6, generator=g), outlier, 0.5), "an outlier input: its small weights stay"),
            Case((torch.randn(4, 6, generator=g), dead, 0.5), "a dead input (always zero): its weights go first"),
            Case((torch.randn(3, 5, generator=g), torch.randn(8, 5, generator=g), 0.3),
                 "5 inputs at sparsity 0.3: round(1.5) = 2 pruned per row"),
            Case((torch.randn(3, 10, generator=g), torch.randn(8, 10, generator=g), 0.33),
                 "10 inputs at sparsity 0.33: round(3.3) = 3 pruned per row, not the ceiling 4"),
            Case((torch.randn(3, 5, generator=g), torch.randn(8, 5, generator=g), 0.5),
                 "5 inputs at sparsity 0.5: round(2.5) = 2 pruned per row (half to even)"),
            Case((torch.randn(3, 4, generator=g), torch.randn(8, 4, generator=g), 0.0), "sparsity 0")]


def _one_threshold_per_matrix(weight: torch.Tensor, x: torch.Tensor, sparsity: float) -> torch.Tensor:
    return prune.magnitude_mask(weight.abs() * x.norm(dim=0), sparsity)


def _squared_norm(weight: torch.Tensor, x: torch.Tensor, sparsity: float) -> torch.Tensor:
    return prune.row_mask(weight.abs() * x.pow(2).sum(0), sparsity)


def _mean_activation(weight: torch.Tensor, x: torch.Tensor, sparsity: float) -> torch.Tensor:
    return prune.row_mask(weight.abs() * x.abs().mean(0), sparsity)


def _magnitude_only(weight: torch.Tensor, x: torch.Tensor, sparsity: float) -> torch.Tensor:
    return prune.row_mask(weight.abs(), sparsity)


wanda_mask = Exercise(
    "wanda_mask",
    "Wanda's keep-mask of a weight [out, in] given calibration inputs x [tokens, in]: score "
    "|W_ij| * ||X_j||_2, prune the round(sparsity * in) smallest scores of every output row.",
    _wanda_mask, _wanda_cases,
    misconceptions=(
        Misconception("one threshold per matrix", "rank the scores of the whole matrix together, as "
                      "magnitude pruning per layer does, instead of within each output row",
                      _one_threshold_per_matrix),
        Misconception("squared norm", "weight by the sum of squares of X_j, the squared norm, instead of "
                      "its L2 norm (the square root of that sum)", _squared_norm),
        Misconception("mean activation", "weight by the mean |X_j| instead of the L2 norm ||X_j||_2, which "
                      "a few large activations dominate", _mean_activation),
        Misconception("magnitude only", "score by |W_ij| alone and forget the input norm: that is magnitude "
                      "pruning per row, not Wanda", _magnitude_only),
    ),
)

# --- Predict, then measure: a 2:4-pruned matrix in a bitmask checkpoint ----------------------

#: The matrix of the prediction: [out, in], FP32, pruned to 2:4 by magnitude.
CHECKPOINT_SHAPE = (256, 1024)


def _two_four_checkpoint() -> dict[str, float]:
    """The bytes of the bitmask safetensors file of a 2:4-pruned FP32 matrix, by component."""
    w = torch.randn(*CHECKPOINT_SHAPE, generator=torch.Generator().manual_seed(24))
    w24 = w * prune.n_m_mask(w.abs(), 2, 4)
    state = {"weight": w24}
    with tempfile.TemporaryDirectory() as folder:
        on_disk = sparse_checkpoints.save_checkpoint(state, Path(folder) / "w24.safetensors", "bitmask")
    parts = {k: t.numel() * t.element_size() for k, t in sparse_checkpoints.to_bitmask(state).items()}
    mask, values = parts["weight.bitmask"], parts["weight.values"]
    return {"bitmask": mask, "values": values, "shape and header": on_disk - mask - values}


_N = CHECKPOINT_SHAPE[0] * CHECKPOINT_SHAPE[1]


def _factor(wrong_bytes: float) -> float:
    """A wrong prediction's ratio to the right one: a bit a weight and the kept half's values."""
    return wrong_bytes / (_N / 8 + 4 * _N / 2)

two_four_checkpoint = Prediction(
    "two_four_checkpoint",
    f"Bytes on disk of a {CHECKPOINT_SHAPE[0]} x {CHECKPOINT_SHAPE[1]} FP32 matrix pruned to 2:4, "
    "saved by sparse_checkpoints.save_checkpoint(..., 'bitmask').",
    _two_four_checkpoint, unit="bytes", rel_tol=0.03,
    misconceptions=(
        (_factor(4 * _N), "count every weight at 4 bytes: that is the dense file, which keeps the zeros; "
                          "the bitmask file stores only the kept half"),
        (_factor(4 * _N / 2), "count the kept values only and forget the bitmask that says where they go"),
        (_factor(_N + 4 * _N / 2), "count the mask at a byte per weight (the size of a torch.bool) instead "
                                   "of a bit"),
        (8.0, "count bits instead of bytes"),
    ),
)
