"""Chapter 6's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references against the library, torch's pruning and torch's 2:4 layout."""

import math

import torch
import torch.nn.utils.prune as torch_prune
from torch.sparse._semi_structured_conversions import (
    sparse_semi_structured_from_dense_cutlass,
    sparse_semi_structured_to_dense_cutlass,
)

from course_lib.chapters import ch06_lab
from course_lib.compression import prune


def _top2_of_groups(scores):
    groups = scores.reshape(scores.shape[0], -1, 4)
    top = torch.sort(groups, dim=2, descending=True, stable=True).indices[..., :2]
    return torch.zeros_like(groups, dtype=torch.bool).scatter_(2, top, True).reshape(scores.shape)


def signed_two_four(weight):
    return _top2_of_groups(weight)  # the values, not |w|


def two_four_down_columns(weight):
    return _top2_of_groups(weight.abs().t()).t()  # 4 consecutive rows


def half_of_each_row(weight):
    k = weight.shape[1] // 2
    top = torch.topk(weight.abs(), k, dim=1).indices
    return torch.zeros_like(weight, dtype=torch.bool).scatter_(1, top, True)


def _prune_rows(scores, sparsity):
    k = round(sparsity * scores.shape[1])
    keep = torch.ones_like(scores, dtype=torch.bool)
    if k:
        keep.scatter_(1, torch.argsort(scores, dim=1)[:, :k], False)
    return keep


def one_threshold_per_matrix(weight, x, sparsity):
    score = weight.abs() * x.norm(dim=0)
    k = round(sparsity * score.numel())
    keep = torch.ones(score.numel(), dtype=torch.bool)
    keep[torch.argsort(score.flatten())[:k]] = False
    return keep.view_as(score)


def squared_norm(weight, x, sparsity):
    return _prune_rows(weight.abs() * (x**2).sum(dim=0), sparsity)


def mean_activation(weight, x, sparsity):
    return _prune_rows(weight.abs() * x.abs().mean(dim=0), sparsity)


def magnitude_only(weight, x, sparsity):
    return _prune_rows(weight.abs(), sparsity)


WRONG = {
    "two_four_mask": {"signed values": signed_two_four, "groups down a column": two_four_down_columns,
                      "half of each row": half_of_each_row},
    "wanda_mask": {"one threshold per matrix": one_threshold_per_matrix, "squared norm": squared_norm,
                   "mean activation": mean_activation, "magnitude only": magnitude_only},
}


def test_the_two_four_reference_is_the_librarys_mask_where_there_are_no_ties():
    w = torch.randn(16, 32, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ch06_lab.two_four_mask.reference(w), prune.n_m_mask(w.abs(), 2, 4))


def test_ties_in_a_group_keep_the_earlier_inputs_worked_by_hand():
    w = torch.tensor([[1.0, -1.0, 1.0, -1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 2.0, -2.0, 2.0]])
    keep = ch06_lab.two_four_mask.reference(w)
    assert keep.tolist() == [[True, True, False, False, True, True, False, False, False, True, True, False]]


def test_a_two_four_pruned_weight_is_the_layout_torchs_sparse_kernels_accept():
    w = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
    w24 = (w * ch06_lab.two_four_mask.reference(w)).half()
    values, meta = sparse_semi_structured_from_dense_cutlass(w24)
    assert torch.equal(sparse_semi_structured_to_dense_cutlass(values, meta), w24)
    assert values.numel() == w.numel() // 2  # half of the values ...
    assert 8 * meta.numel() * meta.element_size() == w.numel()  # ... and one bit of position a weight


def test_wanda_with_equal_input_norms_on_one_row_is_torchs_l1_unstructured():
    g = torch.Generator().manual_seed(2)
    w = torch.randn(1, 20, generator=g)
    x = torch.ones(9, 20)  # every ||X_j|| = 3: the score is |w| scaled
    layer = torch.nn.Linear(20, 1, bias=False)
    layer.weight = torch.nn.Parameter(w.clone())
    torch_prune.l1_unstructured(layer, "weight", amount=0.5)
    assert torch.equal(ch06_lab.wanda_mask.reference(w, x, 0.5), layer.weight_mask.bool())


def test_wanda_prunes_each_row_by_the_same_count_and_a_dead_input_first():
    g = torch.Generator().manual_seed(3)
    w, x = torch.randn(5, 8, generator=g), torch.randn(12, 8, generator=g)
    x[:, 6] = 0
    keep = ch06_lab.wanda_mask.reference(w, x, 0.25)
    assert (keep.sum(dim=1) == 6).all() and not keep[:, 6].any()
    w5, x5 = torch.randn(2, 5, generator=g), torch.randn(4, 5, generator=g)
    assert (ch06_lab.wanda_mask.reference(w5, x5, 0.3).sum(dim=1) == 3).all()  # round(1.5) = 2 pruned


def test_the_checkpoint_components_are_a_bit_a_weight_and_the_kept_half():
    measured = ch06_lab.two_four_checkpoint.measure()
    n = math.prod(ch06_lab.CHECKPOINT_SHAPE)
    assert measured["bitmask"] == n // 8 and measured["values"] == 4 * n // 2
    assert 0 < measured["shape and header"] < 1000
    assert ch06_lab.two_four_checkpoint.measure() == measured  # the same bytes every time
