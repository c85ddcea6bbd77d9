"""Context parallelism of chapter 12 (course_lib.parallel.context_parallel): the online-softmax
merge (and that averaging instead is caught), one block's attention and its hand-written backward
against PyTorch, the chunk layout and the causal work per rank, the bytes formula, bad degrees
refused before any rank starts, and, marked slow, both schedules on 2 gloo ranks equal to one
process in outputs and gradients, with the bytes and the work they were predicted to cost."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import refusal
from course_lib.parallel import context_parallel as cp
from course_lib.parallel import launch

pytestmark = pytest.mark.usefixtures("one_torch_thread")
TIGHT = 1e-12  # float64


def qkv(seed: int, heads: int = 4, kv_heads: int = 2, n_q: int = 6, n_k: int = 10,
        d: int = 8, batch: int = 2) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, heads, n_q, d, generator=g, dtype=torch.float64),
            torch.randn(batch, kv_heads, n_k, d, generator=g, dtype=torch.float64),
            torch.randn(batch, kv_heads, n_k, d, generator=g, dtype=torch.float64))


def test_one_block_is_pytorchs_attention_with_gqa_and_a_causal_mask():
    q, k, v = qkv(0, n_q=10, n_k=10)
    for causal in (False, True):
        pos = torch.arange(10) if causal else None
        out, lse = cp.attention_block(q, k, v, pos, pos)
        theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        assert (out - theirs).abs().max() < TIGHT
    scores = q @ k.repeat_interleave(2, 1).transpose(-2, -1) / math.sqrt(8)
    assert (lse - torch.logsumexp(scores.masked_fill(
        torch.ones(10, 10, dtype=torch.bool).triu(1), -math.inf), -1)).abs().max() < TIGHT


@settings(max_examples=25, deadline=None)
@given(split=st.integers(1, 9), seed=st.integers(0, 10**6), causal=st.booleans())
def test_merging_two_blocks_by_log_sum_exp_is_attention_over_both(split, seed, causal):
    q, k, v = qkv(seed)
    q_pos = torch.arange(4, 10) if causal else None  # queries 4..9 see keys 0..their own
    k_pos = torch.arange(10) if causal else None
    whole, whole_lse = cp.attention_block(q, k, v, q_pos, k_pos)
    a = cp.attention_block(q, k[:, :, :split], v[:, :, :split], q_pos,
                           k_pos[:split] if causal else None)
    b = cp.attention_block(q, k[:, :, split:], v[:, :, split:], q_pos,
                           k_pos[split:] if causal else None)
    out, lse = cp.merge(*a, *b)
    assert (out - whole).abs().max() < TIGHT and (lse - whole_lse).abs().max() < TIGHT
    assert (cp.merge(*b, *a)[0] - whole).abs().max() < TIGHT  # in either order


def test_averaging_the_partial_results_instead_is_caught():
    q, k, v = qkv(1)
    whole, _ = cp.attention_block(q, k, v)
    (out_a, _), (out_b, _) = (cp.attention_block(q, k[:, :, :3], v[:, :, :3]),
                              cp.attention_block(q, k[:, :, 3:], v[:, :, 3:]))
    assert ((out_a + out_b) / 2 - whole).abs().max() > 1e-2


def test_a_row_that_sees_no_key_gets_zero_and_minus_infinity():
    q, k, v = qkv(2, n_q=2, n_k=3)
    out, lse = cp.attention_block(q, k, v, torch.tensor([0, 1]), torch.tensor([5, 6, 7]))
    assert torch.equal(out, torch.zeros_like(out)) and torch.isinf(lse).all()
    seen = cp.attention_block(q, k, v)
    merged, _ = cp.merge(out, lse, *seen)
    assert (merged - seen[0]).abs().max() < TIGHT


@pytest.mark.parametrize("causal", [False, True])
def test_the_blocks_backward_summed_is_autograd_of_the_whole(causal):
    q, k, v = qkv(3, n_q=10, n_k=10)
    dout = torch.randn(q.shape, generator=torch.Generator().manual_seed(4), dtype=q.dtype)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    pos = torch.arange(10) if causal else None
    (cp.attention_block(*leaves, pos, pos)[0] * dout).sum().backward()
    out, lse = cp.attention_block(q, k, v, pos, pos)
    grads = [torch.zeros_like(t) for t in (q, k, v)]
    for keys in (slice(0, 4), slice(4, 10)):  # two key blocks, the final out and lse
        dq, dk, dv = cp.attention_block_backward(q, k[:, :, keys], v[:, :, keys], out, lse,
                                                 dout, pos, pos[keys] if causal else None)
        grads[0] += dq
        grads[1][:, :, keys] += dk
        grads[2][:, :, keys] += dv
    for mine, leaf in zip(grads, leaves):
        assert (mine - leaf.grad).abs().max() < TIGHT


@pytest.mark.parametrize("balanced", [False, True])
@pytest.mark.parametrize("degree", [1, 2, 3, 4, 8])
def test_the_ranks_hold_every_position_once_balanced_ones_mirrored(degree, balanced):
    seq = 2 * degree * 3
    held = [cp.rank_positions(r, degree, seq, balanced) for r in range(degree)]
    assert torch.equal(torch.cat(held).sort().values, torch.arange(seq))
    if balanced:  # chunk r and 2cp-1-r: positions p and s-1-p on the same rank
        for positions in held:
            assert set((seq - 1 - positions).tolist()) == set(positions.tolist())


@pytest.mark.parametrize("degree", [1, 2, 4, 8, 16])
def test_causal_work_is_unbalanced_in_order_and_equal_when_mirrored(degree):
    seq = 64 * degree
    plain = cp.causal_work(seq, degree, causal=True, balanced=False)
    mirrored = cp.causal_work(seq, degree, causal=True, balanced=True)
    size = seq // degree
    assert plain == [(r + 1) * size * size for r in range(degree)]
    assert cp.load_imbalance(plain) == pytest.approx(2 * degree / (degree + 1))
    assert len(set(mirrored)) == 1 and cp.load_imbalance(mirrored) == 1
    assert mirrored[0] == (2 * degree + 1) * (seq // (2 * degree)) ** 2
    full = cp.causal_work(seq, degree, causal=False)
    assert sum(full) == seq * seq and sum(mirrored) < sum(plain) < sum(full) or degree == 1


def test_the_bytes_formula_for_llama3_405b_at_128k():
    # (cp - 1) * 2 * (s / cp) * n_kv * d_head * e: CP 16, 8 K/V heads of 128, BF16
    assert cp.kv_bytes_per_rank(131072, 16, 8, 128, 2) == 15 * 2 * 8192 * 8 * 128 * 2
    assert cp.kv_bytes_per_rank(131072, 1, 8, 128, 2) == 0
    assert cp.kv_bytes_per_rank(64, 4, 2, 8, 8, batch=3) == 3 * 3 * 2 * 16 * 2 * 8 * 8


@pytest.mark.parametrize("seq, degree, balanced, words", [
    (30, 4, True, "multiple of 8"), (30, 4, False, "multiple of 4"), (4, 4, True, "balanced=False"),
    (32, 0, True, "whole number >= 1")])
def test_bad_degrees_are_refused_before_any_rank_starts(seq, degree, balanced, words,
                                                        monkeypatch):
    with pytest.raises(ValueError, match=words):
        cp.check_cp_degree(seq, degree, balanced)
    monkeypatch.setattr(launch, "launch", lambda *a, **k: pytest.fail("a rank was started"))
    if degree >= 1:
        with pytest.raises(ValueError, match=words):
            cp.launch_cp_check(degree, [{"seq_len": seq, "balanced": balanced}])
    with pytest.raises(ValueError, match="multiple of kv_heads"):
        cp.launch_cp_check(2, [{"heads": 6, "kv_heads": 4}])


def test_the_torchrun_script_refuses_a_sequence_that_does_not_split(ranks, capsys):
    ranks(4)
    err = refusal(cp.main, ["--seq-len", "36"], capsys)
    assert "--seq-len 36 on 4 ranks" in err and "multiple of 8" in err
    assert "--kv-heads 3" in refusal(cp.main, ["--heads", "8", "--kv-heads", "3"], capsys)


@pytest.mark.slow
def test_both_schedules_on_two_ranks_equal_one_process_with_the_predicted_cost():
    runs = [{"seq_len": 32, "balanced": False}, {"seq_len": 32, "balanced": True},
            {"seq_len": 16, "causal": False, "balanced": False, "batch": 2}]
    per_rank = cp.launch_cp_check(2, runs, timeout=120)
    for rank, results in enumerate(per_rank):
        for run, r in zip(runs, results):
            assert (r.rank, r.cp) == (rank, 2)
            for schedule in ("all-gather", "ring"):
                assert set(r.gaps[schedule]) == {"output", "grad q", "grad k", "grad v"}
                assert max(r.gaps[schedule].values()) < TIGHT, (run, r.gaps)
                assert r.traffic[schedule].forward_bytes == r.bytes_formula
                assert r.traffic[schedule].score_elements == r.work_formula
            shard = r.bytes_formula // (r.cp - 1)  # one K/V block; the ring's backward:
            assert r.traffic["ring"].backward_bytes == (2 * r.cp - 1) * shard  # kv, dkv home
            assert r.activation_bytes * r.cp == r.single_activation_bytes
    plain = [results[0].work_formula for results in per_rank]
    mirrored = [results[1].work_formula for results in per_rank]
    assert cp.load_imbalance(plain) == pytest.approx(4 / 3)
    assert cp.load_imbalance(mirrored) == 1
