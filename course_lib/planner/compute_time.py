"""The time of a layer's matrix products, each from its shape: chapter 10's roofline.

The planner (:mod:`course_lib.planner.model`) charges a step's matrix products, ``6 N
T`` and attention's, not at one share of the peak but product by product. Every product
a GPU runs in a micro-batch, after tensor parallelism splits it, is one of chapter 10's
:func:`~course_lib.hardware.roofline.matmul_operation` (``2 m k n`` FLOPs, ``e (m k + k
n + m n)`` bytes at least): the query-key-value projection (``h`` to the GPU's heads and
key-value heads), the output projection, the MLP's two products (its width from the
parameters a layer holds beyond attention's: SwiGLU's three products are taken as two of
the same parameters), the experts' (each receiving its share of the tokens), the logits
(the vocabulary split ``t`` ways), and attention: unfused, the scores ``Q K^T`` and ``A
V`` per head, whose inner dimension is the head size (96 to 160 in Megatron-LM's Table
1), so that they write and read the ``s x s`` square; fused (flash attention), one
kernel that reads Q, K and V and writes the output, the square never leaving the chip
(its FLOPs the causal half). The backward pass runs each
product twice more (input and weight gradients: the same three matrices, the same
bytes), recomputation once more, so a product's share of time is the same in every pass.

A product takes ``flops / (peak * mfu) + bytes / bandwidth`` (:func:`product_seconds`):
the calibrated efficiency ``mfu`` of the compute roof plus the HBM traffic at the
datasheet's bandwidth, added, not overlapped. The roofline's own bound, the larger of
the two (:meth:`~course_lib.hardware.roofline.Operation.seconds`), is what a kernel that
hid every byte behind its arithmetic would reach; measured against the published runs
when this form was chosen (one efficiency for every GPU then, and a smaller set of runs)
it changed nothing: at the calibrated efficiency every product of the validation set
lies right of that roof's ridge, and Megatron-LM's weak scaling (Table 1: 137 to 163
TFLOP/s per GPU from 1.7B to 1T) stayed flat in the planner (144 to 143). The sum, the
pessimistic bound where the max is the optimistic one, charges a product for its bytes
wherever it stands (at the ridge, half the compute roof), and the planner's per-GPU
throughput then rose with the model's width (131 to 145 on Table 1; 33 of the 49
throughput figures in the band, against 32); combinations between the two (``(a^p +
b^p)^(1/p)`` for p of 1.5, 2, 4) moved monotonically from the sum's numbers to the
max's, so the sum is the form the data supports, and it has no constant to fit
(``benchmarks/planner.py`` prints today's figures).

:func:`slowdowns` returns, for the dense products (``6 N T``) and for attention's, the
HBM seconds per second of arithmetic at the compute roof: time = FLOP time x (1 +
that). Only the shapes' ratio of bytes to FLOPs enters, so the FLOP counts stay the
``6 N`` rule's and :func:`~course_lib.planner.model.attention_flops`'.

Chapter 10, *Hardware for LLM training*.
"""

from __future__ import annotations

import math

from course_lib.hardware import roofline
from course_lib.hardware.roofline import Operation, Roof
from course_lib.numbers import memory
from course_lib.planner.inputs import Setup
from course_lib.planner.presets import PEAK_DTYPE

__all__ = ["attention_products", "dense_products", "product_seconds", "roof",
           "slowdowns"]


def product_seconds(op: Operation, compute: Roof) -> float:
    """Seconds of one product on ``compute`` (the peak times the calibrated efficiency,
    the HBM bandwidth): ``flops / peak + bytes / bandwidth``, the bytes not hidden.

    Chapter 10, *Hardware for LLM training*.
    """
    return op.flops / compute.peak + op.bytes / compute.bandwidth


def roof(s: Setup) -> Roof:
    """The roof the planner's products run under: the peak at the calibrated efficiency
    ``mfu``, the datasheet's HBM bandwidth.

    Chapter 10, *Hardware for LLM training*.
    """
    return Roof(s.gpu_name, s.peak * s.mfu, s.hbm)


def _tokens(s: Setup) -> int:
    """Tokens of one micro-batch on one GPU: ``b s / c`` (sequence parallelism gathers
    the ``t`` shares back before each product)."""
    return s.micro_batch * (s.seq_len // s.cp)


def dense_products(s: Setup) -> list[Operation]:
    """The products of ``6 N`` on one GPU in one micro-batch's forward pass: each
    layer's (``batch`` = the layers) and the logits.

    Chapter 10, *Hardware for LLM training*.
    """
    dtype, h, t, m = PEAK_DTYPE[s.precision], s.hidden, s.tp, _tokens(s)
    d_head = h // s.heads
    heads, kv = s.heads // t, math.ceil(s.kv_heads / t)
    layers = s.layers
    out = [roofline.matmul_operation(m, h, (heads + 2 * kv) * d_head, dtype,
                                     "query-key-value projection", layers),
           roofline.matmul_operation(m, heads * d_head, h, dtype, "output projection",
                                     layers)]
    attention = h * (s.heads + 2 * s.kv_heads) * d_head + s.heads * d_head * h
    dense = (s.params - s.expert_params - s.vocab * h) / layers - attention
    width = math.floor(dense / (2 * h) / t)  # the MLP's, on this GPU
    if width >= 1:
        out += [roofline.matmul_operation(m, h, width, dtype, "MLP up", layers),
                roofline.matmul_operation(m, width, h, dtype, "MLP down", layers)]
    if s.expert_params > 0:
        width = max(1, math.floor(s.expert_params / (layers * s.experts * 2 * h) / t))
        tokens = max(1, math.floor(m * s.ep * s.top_k / s.experts))  # per expert
        here = layers * (s.experts // s.ep)
        out += [roofline.matmul_operation(tokens, h, width, dtype, "expert up", here),
                roofline.matmul_operation(tokens, width, h, dtype, "expert down", here)]
    out.append(roofline.matmul_operation(m, h, math.ceil(s.vocab / t), dtype, "logits"))
    return out


def attention_products(s: Setup) -> list[Operation]:
    """Attention's products on one GPU for one layer and micro-batch (forward pass):
    unfused, ``Q K^T`` and ``A V`` for each of its heads over the full square; fused,
    one kernel over the causal half that moves Q, K, V and the output only.

    Chapter 10, *Hardware for LLM training*.
    """
    d_head = s.hidden // s.heads
    heads, kv = s.heads // s.tp, math.ceil(s.kv_heads / s.tp)
    queries, keys = s.seq_len // s.cp, s.seq_len
    dtype = PEAK_DTYPE[s.precision]
    if not s.flash_attention:
        many = s.micro_batch * heads
        return [roofline.matmul_operation(queries, d_head, keys, dtype,
                                          "attention scores Q K^T", many),
                roofline.matmul_operation(queries, keys, d_head, dtype,
                                          "attention x V", many)]
    e = memory.PRECISIONS[s.precision].activation_bytes
    flops = 2 * 2.0 * s.micro_batch * heads * queries * keys * d_head / 2  # causal
    moved = e * s.micro_batch * d_head * (2 * heads * queries + 2 * kv * keys)
    return [Operation("fused attention", flops, moved)]


def _hbm_share(ops: list[Operation], compute: Roof) -> float:
    """HBM seconds per second of arithmetic over ``ops``."""
    arithmetic = sum(op.flops for op in ops) / compute.peak
    return sum(op.bytes for op in ops) / compute.bandwidth / arithmetic


def slowdowns(s: Setup) -> tuple[float, float]:
    """HBM seconds per second of arithmetic at the compute roof: of the dense products
    (``6 N``) and of attention's.

    Chapter 10, *Hardware for LLM training*.
    """
    compute = roof(s)
    return (_hbm_share(dense_products(s), compute),
            _hbm_share(attention_products(s), compute))
