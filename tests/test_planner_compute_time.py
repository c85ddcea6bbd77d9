"""The planner's matrix products timed from their shapes (planner.compute_time).

* A product pays ``flops / (peak * mfu) + bytes / bandwidth``: one whose inner dimension
  is a head size runs far below the compute roof, a large one close to it.
* The products of a layer by hand, on a GPT whose parameters are exactly ``12 L h^2 + V
  h``: the MLP comes out 4h wide, tensor parallelism splits the right dimension.
* Fused attention never moves the ``s x s`` square; unfused attention does, and the
  planner's per-GPU throughput rises with the width because of it and the rest.
"""

from __future__ import annotations

import pytest

from course_lib.hardware import roofline
from course_lib.planner import compute_time, model
from course_lib.planner.model import plan


def _attained(op: roofline.Operation, roof: roofline.Roof) -> float:
    return op.flops / compute_time.product_seconds(op, roof)


def test_a_small_inner_dimension_runs_below_the_compute_roof_a_large_one_at_it():
    a100 = roofline.roof_of("A100 SXM 80GB")
    roof = roofline.Roof("A100 at 60 %", 0.6 * a100.peak, a100.bandwidth)
    # Megatron-LM's attention scores of 2021: head size 96, 2,048 positions, 24 heads.
    scores = roofline.matmul_operation(2048, 96, 2048, "fp16", batch=24)
    assert scores.bound(a100) == "memory"
    assert _attained(scores, roof) < 0.55 * roof.peak
    # A large square product: within 5 % of the compute roof.
    big = roofline.matmul_operation(8192, 8192, 8192, "bf16")
    assert _attained(big, roof) > 0.95 * roof.peak
    # By the formula: the FLOPs at the roof plus the bytes at the bandwidth.
    seconds = compute_time.product_seconds(scores, roof)
    assert seconds == pytest.approx(scores.flops / roof.peak
                                    + scores.bytes / roof.bandwidth, rel=1e-12)
    # Never faster than the roofline's own bound, the larger of the two.
    assert seconds >= scores.seconds(roof)


GPT = dict(model="custom", params=2 * 12 * 1024**2 + 1000 * 1024, layers=2,
           hidden=1024, heads=8, vocab=1000, seq_len=512, gpu="a100-80",
           gpus_per_node=2, global_batch=1, micro_batches=1, mfu=0.5)


def test_the_products_of_a_layer_by_hand():
    s = plan(**GPT, tp=2).setup
    m = 512  # one sequence per micro-batch
    shapes = [(op.flops, op.bytes) for op in compute_time.dense_products(s)]
    want = [roofline.matmul_operation(m, 1024, 3 * 512, "bf16", batch=2),  # QKV, t = 2
            roofline.matmul_operation(m, 512, 1024, "bf16", batch=2),  # output
            roofline.matmul_operation(m, 1024, 2048, "bf16", batch=2),  # MLP up, 4h / 2
            roofline.matmul_operation(m, 2048, 1024, "bf16", batch=2),  # MLP down
            roofline.matmul_operation(m, 1024, 500, "bf16")]  # logits, V / 2
    assert shapes == [(op.flops, op.bytes) for op in want]
    # On the two GPUs together, 2 N FLOPs per token (the embedding is the head).
    assert sum(op.flops for op in want) * 2 == pytest.approx(2 * s.params * m)
    dense, attention = compute_time.slowdowns(s)
    roof = compute_time.roof(s)
    assert roof.peak == 0.5 * 312e12 and roof.bandwidth == 2039e9
    assert dense == pytest.approx(sum(op.bytes for op in want) / roof.bandwidth
                                  / (sum(op.flops for op in want) / roof.peak),
                                  rel=1e-12)
    # Fused (the default): one kernel over the causal half; Q, K, V, output moved.
    fused = compute_time.attention_products(s)
    assert len(fused) == 1
    assert fused[0].flops == 4 * 4 * 512 * 512 * 128 / 2
    assert fused[0].bytes == 2 * 128 * (2 * 4 * 512 + 2 * 4 * 512)
    # Unfused: the scores and A V of each of the GPU's 4 heads, the square written.
    s = plan(**GPT, tp=2, flash_attention=False).setup
    unfused = compute_time.attention_products(s)
    assert [(op.flops, op.bytes) for op in unfused] == [
        (op.flops, op.bytes) for op in (
            roofline.matmul_operation(512, 128, 512, "bf16", batch=4),
            roofline.matmul_operation(512, 512, 128, "bf16", batch=4))]
    assert compute_time.slowdowns(s)[1] > attention
    assert sum(op.bytes for op in unfused) > 2 * fused[0].bytes


def test_per_gpu_throughput_rises_with_the_width_at_one_efficiency():
    """Chapter 10's roofline, product by product: the same efficiency, wider layers,
    more of the peak; the step's compute is the products' FLOPs and bytes."""
    achieved = []
    for h in (1024, 2048, 4096, 8192):
        r = plan(model="custom", params=12 * 24 * h * h, layers=24, hidden=h,
                 heads=h // 128, vocab=51200, seq_len=2048, gpus_per_node=1,
                 global_batch=1, flash_attention=False)
        achieved.append(r.achieved_mfu)
        dense, attention = compute_time.slowdowns(r.setup)
        assert dense > 0 and attention > dense
    assert achieved == sorted(achieved) and achieved[-1] > 1.1 * achieved[0]
    # The products' traffic is in the memory-bound part.
    t = plan(model="custom", params=12 * 24 * 1024**2, layers=24, hidden=1024,
             heads=8, vocab=51200, seq_len=2048, gpus_per_node=1, global_batch=1).time
    assert t.memory_bound < t.compute
    assert model.HBM_PASSES == 2
