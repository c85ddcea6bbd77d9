"""Chapter 12's lab: wrong answers, written as a learner might, that its checkers must recognise;
the references are the library's own merge and split sizes, the merge equals attention over all
the keys, and the prediction's run sends what the chapter's formulas say."""

import pytest
import torch
import torch.nn.functional as F

from course_lib.chapters import ch12_lab
from course_lib.parallel import context_parallel

# -- merge ----------------------------------------------------------------------------------------


def mean_of_outputs(out_a, lse_a, out_b, lse_b):
    return 0.5 * out_a + 0.5 * out_b, torch.log(torch.exp(lse_a - lse_b) + 1) + lse_b


def product_of_denominators(out_a, lse_a, out_b, lse_b):
    lse = torch.maximum(lse_a, lse_b)
    wa, wb = torch.exp(lse_a - lse), torch.exp(lse_b - lse)
    out = (wa[..., None] * out_a + wb[..., None] * out_b) / (wa + wb)[..., None]
    return out, lse_a + lse_b  # the denominators multiplied


def exp_as_is(out_a, lse_a, out_b, lse_b):
    da, db = lse_a.exp(), lse_b.exp()  # overflows for large scores
    out = (da.unsqueeze(-1) * out_a + db.unsqueeze(-1) * out_b) / (da + db).unsqueeze(-1)
    return out, (da + db).log()


# -- split_sizes ----------------------------------------------------------------------------------


def dealt_round_robin(assignments, experts, ep):
    return [int((assignments.flatten() % ep == r).sum()) for r in range(ep)]


def one_count_per_expert(assignments, experts, ep):
    return [int((assignments == e).sum()) for e in range(experts)]


def bincount_without_minlength(assignments, experts, ep):
    return torch.bincount(assignments.flatten() // (experts // ep)).tolist()


WRONG = {"merge": {"the two outputs averaged": mean_of_outputs,
                   "log-sum-exps added": product_of_denominators,
                   "exp of the log-sum-exps without shifting": exp_as_is},
         "split_sizes": {"experts dealt round-robin": dealt_round_robin,
                         "counted per expert, not per rank": one_count_per_expert,
                         "ranks that get nothing left out": bincount_without_minlength}}


def test_the_merged_halves_are_attention_over_all_the_keys():
    """Every hidden case of the merge is two halves of one attention: merged, they are it."""
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 4, 5, 8, generator=g, dtype=torch.float64)
    k, v = (torch.randn(1, 2, 12, 8, generator=g, dtype=torch.float64) for _ in range(2))
    a = context_parallel.attention_block(q, k[:, :, :6], v[:, :, :6])
    b = context_parallel.attention_block(q, k[:, :, 6:], v[:, :, 6:])
    out, lse = ch12_lab._merge(*a, *b)
    whole = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    assert torch.allclose(out, whole, atol=1e-14)
    scores = q @ k.repeat_interleave(2, dim=1).transpose(-2, -1) / 8**0.5
    assert torch.allclose(lse, torch.logsumexp(scores, -1), atol=1e-13)


def test_the_large_case_overflows_a_plain_exp():
    """The hidden case 'large scores' is what tells the unshifted exp from logaddexp."""
    large = [c for c in ch12_lab._merge_cases() if c.label.startswith("large")][0]
    assert float(large.args[1].max()) > 710  # exp overflows float64 past ~709.8
    out, _ = exp_as_is(*large.args)
    assert torch.isnan(out).any()


def test_the_split_sizes_sum_to_the_rows_and_follow_the_layout():
    rows = torch.tensor([[7, 0], [3, 4], [5, 6]])
    assert ch12_lab._split_sizes(rows, 8, 2) == [2, 4]
    assert ch12_lab._split_sizes(rows, 8, 4) == [1, 1, 2, 2]
    assert sum(ch12_lab._split_sizes(rows, 8, 8)) == rows.numel()


def test_the_prediction_measures_the_formulas():
    """Forward: (cp - 1) 2 (s / cp) n_kv d e; backward: K/V again and their gradients cp steps."""
    cp, s, kv, d, e = 2, 256, 2, 16, 4
    forward = context_parallel.kv_bytes_per_rank(s, cp, kv, d, e)
    measured = ch12_lab.ring_bytes.measure()
    assert measured == {"forward": forward, "backward": 3 * forward}
    assert not ch12_lab.ring_bytes.check(sum(measured.values())).passed  # components asked
    right = ch12_lab.ring_bytes.check(measured)
    assert right.passed


def test_the_chapters_launch_keeps_the_prediction_out_of_its_results():
    per_rank = ch12_lab.launch_cp([{"seq_len": 16, "balanced": False}])
    assert len(per_rank) == 2 and all(len(checks) == 1 for checks in per_rank)
    assert per_rank[0][0].balanced is False and per_rank[0][0].max_gap < 1e-12
    with pytest.raises(ValueError, match="does not cut"):
        ch12_lab.launch_cp([{"seq_len": 15}])
