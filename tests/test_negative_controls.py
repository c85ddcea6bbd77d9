"""Negative controls for every lab (issue 39, section 4): each checker rejects wrong answers it was
not built around.

``tests/test_labs.py`` already runs the rest of the suite: every stub is rejected as "not done",
every worked solution is accepted, and every misconception a checker names is named on a wrong
answer written in ``tests/test_chNN_lab.py``. This file adds, for every code exercise of every lab
(found in the lab modules, so that a new lab is covered too), at least three further wrong answers
written for this test, none of them a recorded misconception: off-by-one boundaries, a wrong
dtype, shape or axis, a forgotten term or edge, a value hard-coded, an input changed in place
where the text forbids it. Each must be rejected by the checker for being wrong (the feedback
names the case and shows what was expected), not accepted, not taken for "not done", not named
as a recorded misconception, and the checker must not crash. For every prediction, at least
three wrong numbers (or dicts of components) are graded against the real measurement and must
be rejected, also without a recorded misconception's name. The reference (or the measurement
itself) passes in the same call, so that a rejection is not a checker that rejects everything;
on ranks, where that would cost a launch more, ``test_labs`` checks the reference.

Each wrong answer says in its docstring why it is wrong by the exercise's own text. The
functions for the exercises that run on ranks (chapters 8 and 9) travel to the ranks as source:
they use only their arguments, ``torch``, ``math`` and ``dist``.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from typing import Any, Callable

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F

from course_lib.chapters import ch02_lab, ch11_lab
from course_lib.exercises.checker import PHRASES, Exercise, function_name
from course_lib.exercises.predictions import PHRASES as PREDICTION_PHRASES
from course_lib.exercises.predictions import Prediction
from course_lib.exercises.ranks import RankExercise
from course_lib.numbers import memory
from labkit import check_all, existing, items, lab_module, measure_once

#: How many further wrong answers each exercise and each prediction needs, at least.
AT_LEAST = 3

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def mutates(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a wrong answer whose mistake is to change an argument the text says to leave alone:
    the checker must say so (its "changed" feedback) rather than compare values."""
    fn.mutates = True
    return fn


# =============================================================================================
# Chapter 1: BERT's masking and the causal-LM loss
# =============================================================================================


def masking_selects_at_015(ids, special, select, action, random_ids, mask_id):
    """``select <= 0.15``: the text says a draw of exactly 0.15 does not select."""
    chosen = (select <= 0.15) & ~special
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, torch.where(chosen, ids, -100)


def masking_random_above_09(ids, special, select, action, random_ids, mask_id):
    """The random token for actions from 0.9 up, kept from 0.8 to 0.9: the bands swapped."""
    chosen = (select < 0.15) & ~special
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, torch.where(chosen, ids, -100)


def masking_labels_zero(ids, special, select, action, random_ids, mask_id):
    """0 (the padding id) where nothing is predicted; the text asks for -100."""
    chosen = (select < 0.15) & ~special
    inputs = ids.clone()
    inputs[chosen & (action < 0.8)] = mask_id
    swap = chosen & (action >= 0.8) & (action < 0.9)
    inputs[swap] = random_ids[swap]
    return inputs, torch.where(chosen, ids, 0)


@mutates
def masking_in_place(ids, special, select, action, random_ids, mask_id):
    """Right values, but written into ``ids`` itself: "leave ids itself unchanged"."""
    chosen = (select < 0.15) & ~special
    labels = torch.where(chosen, ids, -100)
    swap = chosen & (action >= 0.8) & (action < 0.9)
    ids[swap] = random_ids[swap]
    ids[chosen & (action < 0.8)] = mask_id
    return ids, labels


def loss_mean_of_row_means(logits, labels):
    """The mean of each sequence's mean: rows with more -100 labels weigh more than the text's
    mean over all positions whose label is not -100."""
    rows = [F.cross_entropy(lg[:-1], lb[1:]) for lg, lb in zip(logits, labels)]
    return torch.stack(rows).mean()


def loss_softmax_over_positions(logits, labels):
    """log-softmax over the positions (dim 1) instead of the vocabulary: the wrong axis."""
    logp = logits.log_softmax(dim=1)
    v = logits.shape[-1]
    return F.nll_loss(logp[:, :-1].reshape(-1, v), labels[:, 1:].reshape(-1))


def loss_both_sliced_alike(logits, labels):
    """Both cut from position 1: the logits at t against the label at t, not at t + 1."""
    v = logits.shape[-1]
    return F.cross_entropy(logits[:, 1:].reshape(-1, v), labels[:, 1:].reshape(-1))


# =============================================================================================
# Chapter 2: the bytes of model states and of a layer's activations
# =============================================================================================


def states_fp16_as_fp32(n_params, precision):
    """Only "bf16-mixed" taken as mixed precision: "fp16-mixed" gets FP32's layout."""
    half = precision == "bf16-mixed"
    w = 2 if half else 4
    return {"weights": w * n_params, "gradients": w * n_params,
            "master_weights": 4 * n_params if half else 0, "optimizer_states": 8 * n_params}


def states_key_with_a_space(n_params, precision):
    """The key "optimizer states" (chapter 9's spelling) where "optimizer_states" is asked."""
    half = precision != "fp32"
    w = 2 if half else 4
    return {"weights": w * n_params, "gradients": w * n_params,
            "master_weights": 4 * n_params if half else 0, "optimizer states": 8 * n_params}


def states_in_gb(n_params, precision):
    """GB (the tables' unit) where bytes are asked."""
    half = precision != "fp32"
    w = 2 if half else 4
    return {"weights": w * n_params / 1e9, "gradients": w * n_params / 1e9,
            "master_weights": (4 * n_params if half else 0) / 1e9,
            "optimizer_states": 8 * n_params / 1e9}


def states_bf16_master(n_params, precision):
    """A 16-bit master copy (2 bytes); the text's master copy is FP32."""
    half = precision != "fp32"
    w = 2 if half else 4
    return {"weights": w * n_params, "gradients": w * n_params,
            "master_weights": 2 * n_params if half else 0, "optimizer_states": 8 * n_params}


def acts_no_score_masks(s, b, h, a, e, d):
    """The attention scores' dropout mask (one of d bytes per score) left out."""
    return s * b * h * (16 * e + 2 * d) + a * s * s * b * 2 * e


def acts_no_heads(s, b, h, a, e, d):
    """s² scores per sequence, not a·s²: the heads forgotten."""
    return s * b * h * (16 * e + 2 * d) + s * s * b * (2 * e + d)


def acts_one_mask(s, b, h, a, e, d):
    """One dropout mask per element of the s × b × h tensors; the text has two."""
    return s * b * h * (16 * e + d) + a * s * s * b * (2 * e + d)


# =============================================================================================
# Chapter 3: E4M3 both ways
# =============================================================================================


def encode_sign_by_comparison(x):
    """The sign from ``x < 0``, which -0.0 is not: -0.0 gives 0x00; the text asks for 0x80."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if x < 0 else 0
    a = min(abs(x), 448.0)
    e = max(math.frexp(a)[1] - 1, -6) if a > 0 else -6
    return sign | ((e + 6) * 8 + round(a / 2.0 ** (e - 3)))


def encode_saturates_to_0x7f(x):
    """Clamped to the largest 7-bit pattern, 0x7F, which is NaN: beyond 448 is ±448 (0x7E)."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = abs(x)
    e = max(math.frexp(a)[1] - 1, -6) if a > 0 else -6
    return sign | min((e + 6) * 8 + round(a / 2.0 ** (e - 3)), 0x7F)


def encode_no_floor_at_minus_6(x):
    """The exponent of |x| not held at -6: below 2**-6 the text keeps the lowest binade's
    spacing (subnormals)."""
    if math.isnan(x):
        return 0x7F
    sign = 0x80 if math.copysign(1.0, x) < 0 else 0
    a = min(abs(x), 448.0)
    e = math.frexp(a)[1] - 1 if a > 0 else -6
    return sign | ((e + 6) * 8 + round(a / 2.0 ** (e - 3)))


def decode_zero_unsigned(bits):
    """Both zeros as 0.0: the text says 0x80 is -0.0 and the checker tells them apart."""
    if (bits & 0x7F) == 0:
        return 0.0
    sign = -1.0 if bits & 0x80 else 1.0
    exponent, mantissa = (bits >> 3) & 0xF, bits & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -6
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


def decode_e3m4_fields(bits):
    """Three exponent bits and four mantissa bits: E4M3 has four and three."""
    sign = -1.0 if bits & 0x80 else 1.0
    exponent, mantissa = (bits >> 4) & 0x7, bits & 0xF
    if exponent == 0x7 and mantissa == 0xF:
        return math.nan
    if exponent == 0:
        return sign * mantissa / 16 * 2.0 ** -6
    return sign * (1 + mantissa / 16) * 2.0 ** (exponent - 7)


def decode_one_nan(bits):
    """Only 0x7F as NaN: the text says S.1111.111, so 0xFF is NaN too."""
    if bits == 0x7F:
        return math.nan
    sign = -1.0 if bits & 0x80 else 1.0
    exponent, mantissa = (bits >> 3) & 0xF, bits & 0x7
    if exponent == 0:
        return sign * mantissa / 8 * 2.0 ** -6
    return sign * (1 + mantissa / 8) * 2.0 ** (exponent - 7)


# =============================================================================================
# Chapter 4 (and the Dutch edition): absmax INT8 and BF16 on the bits
# =============================================================================================


def absmax_over_128(block):
    """``scale = absmax / 128``: the text's scale is absmax / 127."""
    absmax = block.abs().max()
    scale = absmax / 128 if absmax > 0 else torch.ones((), dtype=block.dtype)
    return torch.round(block / scale).to(torch.int8), scale


def absmax_codes_as_floats(block):
    """The rounded codes left in the block's float dtype: the text asks for torch.int8."""
    absmax = block.abs().max()
    scale = absmax / 127 if absmax > 0 else torch.ones((), dtype=block.dtype)
    return torch.round(block / scale), scale


def absmax_without_abs(block):
    """The largest value, not the largest magnitude: a block whose extreme is negative."""
    top = block.max()
    scale = top / 127 if top > 0 else torch.ones((), dtype=block.dtype)
    return torch.round(block / scale).to(torch.int8), scale


def absmax_zero_scale(block):
    """No special case for an all-zero block: scale 0, where the text asks for 1."""
    scale = block.abs().max() / 127
    return torch.round(block / scale).to(torch.int8), scale


def bf16_signed_bits(values):
    """The signed 32-bit view widened without ``& 0xFFFFFFFF``: negative values give negative
    patterns; the text asks for 0..65535."""
    bits = values.view(torch.int32).to(torch.int64)
    lsb = (bits >> 16) & 1
    rounded = (bits + 0x7FFF + lsb) >> 16
    return torch.where(torch.isnan(values), 0x7FC0, rounded)


def bf16_nan_as_infinity(values):
    """NaN given 0x7F80, the exponent of all ones with a zero fraction: that is infinity."""
    bits = values.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = (bits >> 16) & 1
    rounded = (bits + 0x7FFF + lsb) >> 16
    return torch.where(torch.isnan(values), 0x7F80, rounded)


def bf16_lsb_of_fp32(values):
    """The tie broken on FP32's last bit (``bits & 1``), not on the last bit BF16 keeps."""
    bits = values.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = bits & 1
    rounded = (bits + 0x7FFF + lsb) >> 16
    return torch.where(torch.isnan(values), 0x7FC0, rounded)


def bf16_flattened(values):
    """The patterns flattened: the text asks for them in the values' own shape."""
    bits = values.reshape(-1).view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    lsb = (bits >> 16) & 1
    rounded = (bits + 0x7FFF + lsb) >> 16
    return torch.where(torch.isnan(values.reshape(-1)), 0x7FC0, rounded)


# =============================================================================================
# Chapter 5: group-wise INT4 and zero-point codes per channel
# =============================================================================================


def _pack(codes):
    codes = codes.flatten().to(torch.uint8)
    if codes.numel() % 2:
        codes = torch.cat([codes, codes.new_zeros(1)])
    pairs = codes.reshape(-1, 2)
    return pairs[:, 0] | (pairs[:, 1] << 4)


def int4_twos_complement(w, group_size):
    """The signed code's low nibble (two's complement) where the text stores code + 8."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // group_size, group_size)
    scale = g.abs().amax(-1) / 7
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.clamp(torch.round(g / scale[..., None]), -7, 7).to(torch.int64) & 0xF
    return _pack(codes), scale


def int4_flat_scales(w, group_size):
    """The scales flattened; the text asks for the shape (rows, cols // group_size)."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // group_size, group_size)
    scale = g.abs().amax(-1) / 7
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = torch.clamp(torch.round(g / scale[..., None]), -7, 7) + 8
    return _pack(codes), scale.flatten()


def int4_odd_drops_last(w, group_size):
    """An odd number of codes loses the last one: the text pads its byte with a 0 high nibble."""
    rows, cols = w.shape
    g = w.reshape(rows, cols // group_size, group_size)
    scale = g.abs().amax(-1) / 7
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    codes = (torch.clamp(torch.round(g / scale[..., None]), -7, 7) + 8).flatten()
    pairs = codes[: codes.numel() // 2 * 2].to(torch.uint8).reshape(-1, 2)
    return pairs[:, 0] | (pairs[:, 1] << 4), scale


def zp_sign_slip(w, bits):
    """``zero = round(lo / scale)`` without the minus: clamped to 0 for every row with a
    negative value."""
    top = 2**bits - 1
    lo, hi = w.amin(1).clamp(max=0), w.amax(1).clamp(min=0)
    scale = (hi - lo) / top
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.clamp(torch.round(lo / scale), 0, top)
    codes = torch.clamp(torch.round(w / scale[:, None]) + zero[:, None], 0, top)
    return codes.to(torch.uint8), scale, zero.to(torch.uint8)


def zp_keepdim(w, bits):
    """Scales and zero points of shape (rows, 1); the text asks for (rows,)."""
    top = 2**bits - 1
    lo = w.amin(1, keepdim=True).clamp(max=0)
    hi = w.amax(1, keepdim=True).clamp(min=0)
    scale = (hi - lo) / top
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.clamp(-torch.round(lo / scale), 0, top)
    codes = torch.clamp(torch.round(w / scale) + zero, 0, top)
    return codes.to(torch.uint8), scale, zero.to(torch.uint8)


def zp_hard_coded_8_bits(w, bits):
    """255 levels whatever ``bits`` is: right at 8 bits, wrong at 4."""
    top = 255
    lo, hi = w.amin(1).clamp(max=0), w.amax(1).clamp(min=0)
    scale = (hi - lo) / top
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    zero = torch.clamp(-torch.round(lo / scale), 0, top)
    codes = torch.clamp(torch.round(w / scale[:, None]) + zero[:, None], 0, top)
    return codes.to(torch.uint8), scale, zero.to(torch.uint8)


# =============================================================================================
# Chapter 6: the 2:4 mask and Wanda's mask
# =============================================================================================


def _two_four_keep(weight):
    """The right 2:4 keep-mask, for the answers below that get something else wrong."""
    groups = weight.abs().reshape(weight.shape[0], -1, 4)
    order = torch.sort(groups, dim=2, descending=True, stable=True).indices
    keep = torch.zeros(groups.shape, dtype=torch.bool)
    keep.scatter_(2, order[..., :2], True)
    return keep.reshape(weight.shape)


def two_four_ties_to_later(weight):
    """Sorted ascending (stably) and the last two kept: among equal magnitudes the later input
    stays; the text keeps the earlier."""
    groups = weight.abs().reshape(weight.shape[0], -1, 4)
    order = torch.sort(groups, dim=2, stable=True).indices
    keep = torch.zeros(groups.shape, dtype=torch.bool)
    keep.scatter_(2, order[..., 2:], True)
    return keep.reshape(weight.shape)


def two_four_float_mask(weight):
    """The mask as 0.0 / 1.0 floats; the text asks for torch.bool."""
    return _two_four_keep(weight).to(weight.dtype)


def two_four_pruned_marked(weight):
    """True where the weight is pruned: the text's mask is True where the weight stays."""
    return ~_two_four_keep(weight)


def _prune_smallest(score, count, dim=1):
    """A keep-mask without the ``count`` smallest scores along ``dim``."""
    keep = torch.ones(score.shape, dtype=torch.bool)
    keep.scatter_(dim, score.argsort(dim=dim).narrow(dim, 0, count), False)
    return keep


def wanda_ceil(weight, x, sparsity):
    """``math.ceil(sparsity * in)`` pruned per row; the text says Python's round."""
    score = weight.abs() * x.norm(dim=0)
    return _prune_smallest(score, math.ceil(sparsity * weight.shape[1]))


def wanda_int(weight, x, sparsity):
    """``int(sparsity * in)``, which cuts 1.5 to 1; the text's round(1.5) = 2."""
    score = weight.abs() * x.norm(dim=0)
    return _prune_smallest(score, int(sparsity * weight.shape[1]))


def wanda_per_column(weight, x, sparsity):
    """round(sparsity * out) pruned in every input column; the text prunes within each row."""
    score = weight.abs() * x.norm(dim=0)
    return _prune_smallest(score, round(sparsity * weight.shape[0]), dim=0)


# =============================================================================================
# Chapter 7: the dampened Hessian and GPTQ's column loop
# =============================================================================================


def hessian_trace_dampening(x, percdamp):
    """percdamp times the trace (the sum of the diagonal), not its mean."""
    H = 2 * x.T @ x / len(x)
    return H + percdamp * H.diag().sum() * torch.eye(len(H), dtype=H.dtype)


def hessian_float32(x, percdamp):
    """Computed in float32: the text says keep the dtype of x (float64 here)."""
    x = x.float()
    H = 2 * x.T @ x / len(x)
    return H + percdamp * H.diag().mean() * torch.eye(len(H), dtype=H.dtype)


def hessian_dampens_every_entry(x, percdamp):
    """The dampening added to every entry (no identity): the text adds it to the diagonal."""
    H = 2 * x.T @ x / len(x)
    return H + percdamp * H.diag().mean()


@mutates
def gptq_in_place(w, U, scale, zero, bits):
    """The errors fed forward into ``w`` itself: the text says work on a copy of w."""
    codes = torch.zeros(w.shape, dtype=torch.uint8)
    for j in range(w.shape[1]):
        code = torch.clamp(torch.round(w[:, j] / scale) + zero, 0, 2**bits - 1)
        codes[:, j] = code.to(torch.uint8)
        error = (w[:, j] - (code - zero) * scale) / U[j, j]
        w[:, j:] -= torch.outer(error, U[j, j:])
    return codes


def gptq_error_in_steps(w, U, scale, zero, bits):
    """The error measured against ``code - zero`` without the scale: the decoded value is
    (code − zero) · scale."""
    W = w.clone()
    codes = torch.zeros(W.shape, dtype=torch.uint8)
    for j in range(W.shape[1]):
        code = torch.clamp(torch.round(W[:, j] / scale) + zero, 0, 2**bits - 1)
        codes[:, j] = code.to(torch.uint8)
        error = (W[:, j] - (code - zero)) / U[j, j]
        W[:, j:] -= torch.outer(error, U[j, j:])
    return codes


def gptq_error_added(w, U, scale, zero, bits):
    """The scaled error added to the columns to come; the text subtracts it."""
    W = w.clone()
    codes = torch.zeros(W.shape, dtype=torch.uint8)
    for j in range(W.shape[1]):
        code = torch.clamp(torch.round(W[:, j] / scale) + zero, 0, 2**bits - 1)
        codes[:, j] = code.to(torch.uint8)
        error = (W[:, j] - (code - zero) * scale) / U[j, j]
        W[:, j:] += torch.outer(error, U[j, j:])
    return codes


def gptq_hard_coded_4_bits(w, U, scale, zero, bits):
    """Codes clamped to 0..15 whatever ``bits`` is: at 3 bits the top is 2**3 - 1 = 7."""
    W = w.clone()
    codes = torch.zeros(W.shape, dtype=torch.uint8)
    for j in range(W.shape[1]):
        code = torch.clamp(torch.round(W[:, j] / scale) + zero, 0, 15)
        codes[:, j] = code.to(torch.uint8)
        error = (W[:, j] - (code - zero) * scale) / U[j, j]
        W[:, j:] -= torch.outer(error, U[j, j:])
    return codes


# =============================================================================================
# Chapter 8, on ranks: the ring's reduce-scatter and averaging gradients
# =============================================================================================


def ring_without_flatten(tensor):
    """The tensor split along its first dimension, not flattened first: a 2-D tensor gives
    2-D chunks of whole rows."""
    rank, world = dist.get_rank(), dist.get_world_size()
    chunks = [c.clone() for c in tensor.tensor_split(world)]
    for step in range(world - 1):
        outgoing = chunks[(rank - step) % world]
        incoming = chunks[(rank - step - 1) % world]
        received = torch.empty_like(incoming)
        request = dist.isend(outgoing, (rank + 1) % world)
        dist.recv(received, (rank - 1) % world)
        request.wait()
        incoming += received
    return chunks[(rank + 1) % world]


def ring_one_step_short(tensor):
    """N - 2 steps, not N - 1: the chunk returned misses contributions."""
    rank, world = dist.get_rank(), dist.get_world_size()
    chunks = [c.clone() for c in tensor.flatten().tensor_split(world)]
    for step in range(world - 2):
        outgoing = chunks[(rank - step) % world]
        incoming = chunks[(rank - step - 1) % world]
        received = torch.empty_like(incoming)
        request = dist.isend(outgoing, (rank + 1) % world)
        dist.recv(received, (rank - 1) % world)
        request.wait()
        incoming += received
    return chunks[(rank + 1) % world]


def ring_chunk_to_the_left(tensor):
    """Chunk (rank - 1) % N returned, not (rank + 1) % N (the same only on 2 ranks)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    chunks = [c.clone() for c in tensor.flatten().tensor_split(world)]
    for step in range(world - 1):
        outgoing = chunks[(rank - step) % world]
        incoming = chunks[(rank - step - 1) % world]
        received = torch.empty_like(incoming)
        request = dist.isend(outgoing, (rank + 1) % world)
        dist.recv(received, (rank - 1) % world)
        request.wait()
        incoming += received
    return chunks[(rank - 1) % world]


def average_divided_twice(grads):
    """Divided by N before the all-reduce (as DDP's hook does) and again after it: N² in all."""
    world = dist.get_world_size()
    for grad in grads:
        grad /= world
        dist.all_reduce(grad)
        grad /= world
    return grads


def average_by_tensor_count(grads):
    """Summed, then divided by the number of gradient tensors: the average is over the ranks."""
    for grad in grads:
        dist.all_reduce(grad)
        grad /= len(grads)
    return grads


def average_in_float32(grads):
    """Reduced in float32 whatever the gradient's dtype: float64 gradients come back float32."""
    out = []
    for grad in grads:
        total = grad.float()
        dist.all_reduce(total)
        out.append(total / dist.get_world_size())
    return out


def average_first_only(grads):
    """The ``return`` indented into the loop: only the first gradient is averaged."""
    for grad in grads:
        dist.all_reduce(grad)
        grad /= dist.get_world_size()
        return grads


# =============================================================================================
# Chapter 9: the bytes of ZeRO, and a ZeRO-2 step on ranks
# =============================================================================================


def zero_floor_division(n_params, world_size, stage):
    """``//``: the text asks for exact quotients (20/3 bytes of weights, not 6)."""
    n = world_size
    return {"weights": 2 * n_params // (n if stage >= 3 else 1),
            "gradients": 2 * n_params // (n if stage >= 2 else 1),
            "master weights": 4 * n_params // (n if stage >= 1 else 1),
            "optimizer states": 8 * n_params // (n if stage >= 1 else 1)}


def zero_fp32_gradients(n_params, world_size, stage):
    """FP32 gradients (4 bytes); the text's are BF16, 2 bytes."""
    n = world_size
    return {"weights": 2 * n_params / (n if stage >= 3 else 1),
            "gradients": 4 * n_params / (n if stage >= 2 else 1),
            "master weights": 4 * n_params / (n if stage >= 1 else 1),
            "optimizer states": 8 * n_params / (n if stage >= 1 else 1)}


def zero_master_from_stage_2(n_params, world_size, stage):
    """The master weights sharded from stage 2, with the gradients: stage 1 shards them."""
    n = world_size
    return {"weights": 2 * n_params / (n if stage >= 3 else 1),
            "gradients": 2 * n_params / (n if stage >= 2 else 1),
            "master weights": 4 * n_params / (n if stage >= 2 else 1),
            "optimizer states": 8 * n_params / (n if stage >= 1 else 1)}


def zero2_keeps_padding(params, grad, lr):
    """The gathered parameters returned with the padding: the text drops it."""
    rank, world = dist.get_rank(), dist.get_world_size()
    pad = -len(params) % world
    flat = torch.cat([params, params.new_zeros(pad)])
    grads = torch.cat([grad, grad.new_zeros(pad)])
    mean = torch.empty(len(flat) // world)
    dist.reduce_scatter(mean, list(grads.chunk(world)))
    mean /= world
    shard = flat.chunk(world)[rank].clone()
    shard.grad = mean
    torch.optim.AdamW([shard], lr=lr, weight_decay=0.0).step()
    pieces = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(pieces, shard.detach())
    return torch.cat(pieces)


def zero2_default_weight_decay(params, grad, lr):
    """AdamW with its default weight decay (0.01); the text says weight_decay=0.0."""
    rank, world = dist.get_rank(), dist.get_world_size()
    pad = -len(params) % world
    flat = torch.cat([params, params.new_zeros(pad)])
    grads = torch.cat([grad, grad.new_zeros(pad)])
    mean = torch.empty(len(flat) // world)
    dist.reduce_scatter(mean, list(grads.chunk(world)))
    mean /= world
    shard = flat.chunk(world)[rank].clone()
    shard.grad = mean
    torch.optim.AdamW([shard], lr=lr).step()
    pieces = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(pieces, shard.detach())
    return torch.cat(pieces)[:len(params)]


def zero2_plain_sgd(params, grad, lr):
    """The shard stepped by SGD, ``shard - lr * grad``: the text steps AdamW."""
    rank, world = dist.get_rank(), dist.get_world_size()
    pad = -len(params) % world
    flat = torch.cat([params, params.new_zeros(pad)])
    grads = torch.cat([grad, grad.new_zeros(pad)])
    mean = torch.empty(len(flat) // world)
    dist.reduce_scatter(mean, list(grads.chunk(world)))
    mean /= world
    shard = flat.chunk(world)[rank] - lr * mean
    pieces = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(pieces, shard)
    return torch.cat(pieces)[:len(params)]


# =============================================================================================
# Chapter 10: a product's arithmetic intensity and a run's MFU
# =============================================================================================


def intensity_output_not_counted(m, k, n, bits):
    """Only the two inputs' bytes: the text counts the output written once too."""
    return 2 * m * k * n / ((m * k + k * n) * bits / 8)


def intensity_output_twice(m, k, n, bits):
    """The output read and written (2 m n): the text writes it once."""
    return 2 * m * k * n / ((m * k + k * n + 2 * m * n) * bits / 8)


def intensity_floor_division(m, k, n, bits):
    """``//``: a whole number of FLOP per byte; the text asks for a float (2/3 for 1 x 1)."""
    return 2 * m * k * n // ((m * k + k * n + m * n) * bits // 8)


def hfu_attention_squared(tokens_per_second, n_params, layers, hidden, seq_len, peak_flops):
    """16 L d T², squaring the sequence length: attention's term is 16 L d T per token."""
    per_token = 8 * n_params + 16 * layers * hidden * seq_len**2
    return tokens_per_second * per_token / peak_flops


def hfu_weights_recomputed_only(tokens_per_second, n_params, layers, hidden, seq_len,
                                peak_flops):
    """8 N + 12 L d T: recomputes the weights' products but not attention's, which the
    recomputed forward runs too."""
    per_token = 8 * n_params + 12 * layers * hidden * seq_len
    return tokens_per_second * per_token / peak_flops


def hfu_backward_recomputed(tokens_per_second, n_params, layers, hidden, seq_len,
                            peak_flops):
    """10 N + 20 L d T: adds the backward's 4 N + 8 L d T where recomputation repeats the
    forward, 2 N + 4 L d T."""
    per_token = 10 * n_params + 20 * layers * hidden * seq_len
    return tokens_per_second * per_token / peak_flops


# =============================================================================================
# Chapter 11: a column-parallel slice and a mesh's groups
# =============================================================================================


def _qkv_rows(out, degree, rank, parts):
    share = out // parts // degree
    return torch.cat([torch.arange(p * out // parts + rank * share,
                                   p * out // parts + (rank + 1) * share) for p in range(parts)])


def shard_strided(weight, bias, degree, rank, parts=1):
    """Every degree-th output feature: the text keeps a contiguous share."""
    return weight[rank::degree].clone(), bias[rank::degree].clone()


def shard_bias_one_block(weight, bias, degree, rank, parts=1):
    """The weight's rows right, q, k and v each, but the bias cut as one block: the text keeps
    the same share of q's, k's and v's bias too."""
    rows = _qkv_rows(weight.shape[0], degree, rank, parts)
    share = bias.shape[0] // degree
    return weight[rows].clone(), bias[rank * share:(rank + 1) * share].clone()


def shard_transposed(weight, bias, degree, rank, parts=1):
    """The right rows returned transposed, (in, out/degree): the text keeps weight's layout."""
    rows = _qkv_rows(weight.shape[0], degree, rank, parts)
    return weight[rows].T.clone(), bias[rows].clone()


def mesh_as_tensors(world_size, tp):
    """The groups as tensors; the text asks for lists of lists of ranks."""
    grid = torch.arange(world_size).view(world_size // tp, tp)
    return {"tp": grid, "dp": grid.T}


def mesh_one_based(world_size, tp):
    """Ranks counted from 1: global ranks start at 0."""
    grid = torch.arange(1, world_size + 1).view(world_size // tp, tp)
    return {"tp": grid.tolist(), "dp": grid.T.tolist()}


def mesh_leaders_only(world_size, tp):
    """One data-parallel group of each tensor-parallel group's first rank: there are tp of
    them, one per position in the tensor-parallel groups."""
    grid = torch.arange(world_size).view(world_size // tp, tp)
    return {"tp": grid.tolist(), "dp": [grid[:, 0].tolist()]}


def one_f_one_b_from_one(stage, stages, micro_batches):
    """Micro-batches numbered from 1: the text's list starts "F0"."""
    order = ch11_lab._one_f_one_b(stage, stages, micro_batches)
    return [e[0] + str(int(e[1:]) + 1) for e in order]


def one_f_one_b_no_cooldown(stage, stages, micro_batches):
    """Stops with the last forward: the backwards still owed at the end are the cooldown."""
    order = ch11_lab._one_f_one_b(stage, stages, micro_batches)
    last_forward = max(i for i, e in enumerate(order) if e[0] == "F")
    return order[:last_forward + 1]


def one_f_one_b_as_tuples(stage, stages, micro_batches):
    """("F", 0) pairs: the text asks for strings such as "F0"."""
    return [(e[0], int(e[1:])) for e in ch11_lab._one_f_one_b(stage, stages, micro_batches)]


# =============================================================================================
# Chapter 12: the online-softmax merge and the all-to-all's split sizes
# =============================================================================================


def merge_lse_as_max(out_a, lse_a, out_b, lse_b):
    """The larger log-sum-exp kept as the joint one: the joint denominator is the sum."""
    lse = torch.logaddexp(lse_a, lse_b)
    out = torch.exp(lse_a - lse)[..., None] * out_a + torch.exp(lse_b - lse)[..., None] * out_b
    return out, torch.maximum(lse_a, lse_b)


def merge_weights_swapped(out_a, lse_a, out_b, lse_b):
    """Each output weighted by the other's share of the denominator."""
    lse = torch.logaddexp(lse_a, lse_b)
    out = torch.exp(lse_b - lse)[..., None] * out_a + torch.exp(lse_a - lse)[..., None] * out_b
    return out, lse


def merge_in_float32(out_a, lse_a, out_b, lse_b):
    """The merge computed in float32: the partial results are float64, and so is the text's."""
    lse = torch.logaddexp(lse_a.float(), lse_b.float())
    out = (torch.exp(lse_a.float() - lse)[..., None] * out_a.float()
           + torch.exp(lse_b.float() - lse)[..., None] * out_b.float())
    return out, lse


def split_as_tensor(assignments, experts, ep):
    """The counts as a tensor: the text asks for a list of whole numbers."""
    return torch.bincount(assignments.reshape(-1) // (experts // ep), minlength=ep)


def split_off_by_one(assignments, experts, ep):
    """Expert e placed on rank (e + 1) // (E / ep): the first expert of each rank slips back."""
    owner = (assignments.reshape(-1) + 1) // (experts // ep)
    return torch.bincount(owner.clamp(max=ep - 1), minlength=ep).tolist()


def split_first_choice_only(assignments, experts, ep):
    """Only each token's first expert counted: every kept assignment is a row to send."""
    rows = assignments[:, 0] if assignments.dim() == 2 else assignments
    return torch.bincount(rows // (experts // ep), minlength=ep).tolist()


#: Further wrong answers per exercise, "lab module.exercise".
WRONG_ANSWERS: dict[str, tuple[Callable[..., Any], ...]] = {
    "ch01_lab.bert_masking": (masking_selects_at_015, masking_random_above_09,
                              masking_labels_zero, masking_in_place),
    "ch01_lab.causal_lm_loss": (loss_mean_of_row_means, loss_softmax_over_positions,
                                loss_both_sliced_alike),
    "ch02_lab.adam_model_states": (states_fp16_as_fp32, states_key_with_a_space, states_in_gb,
                                   states_bf16_master),
    "ch02_lab.activation_bytes_per_layer": (acts_no_score_masks, acts_no_heads, acts_one_mask),
    "ch03_lab.encode_e4m3": (encode_sign_by_comparison, encode_saturates_to_0x7f,
                             encode_no_floor_at_minus_6),
    "ch03_lab.decode_e4m3": (decode_zero_unsigned, decode_e3m4_fields, decode_one_nan),
    "ch04_lab.absmax_int8": (absmax_over_128, absmax_codes_as_floats, absmax_without_abs,
                             absmax_zero_scale),
    "ch04_lab.bf16_bits": (bf16_signed_bits, bf16_nan_as_infinity, bf16_lsb_of_fp32,
                           bf16_flattened),
    "ch05_lab.int4_groups": (int4_twos_complement, int4_flat_scales, int4_odd_drops_last),
    "ch05_lab.zeropoint_channel": (zp_sign_slip, zp_keepdim, zp_hard_coded_8_bits),
    "ch06_lab.two_four_mask": (two_four_ties_to_later, two_four_float_mask,
                               two_four_pruned_marked),
    "ch06_lab.wanda_mask": (wanda_ceil, wanda_int, wanda_per_column),
    "ch07_lab.damped_hessian": (hessian_trace_dampening, hessian_float32,
                                hessian_dampens_every_entry),
    "ch07_lab.gptq_columns": (gptq_in_place, gptq_error_in_steps, gptq_error_added,
                              gptq_hard_coded_4_bits),
    "ch08_lab.ring_reduce_scatter": (ring_without_flatten, ring_one_step_short,
                                     ring_chunk_to_the_left),
    "ch08_lab.average_gradients": (average_divided_twice, average_in_float32,
                                   average_first_only, average_by_tensor_count),
    "ch09_lab.zero_bytes": (zero_floor_division, zero_fp32_gradients, zero_master_from_stage_2),
    "ch09_lab.zero2_step": (zero2_keeps_padding, zero2_default_weight_decay, zero2_plain_sgd),
    "ch10_lab.matmul_intensity": (intensity_output_not_counted, intensity_output_twice,
                                  intensity_floor_division),
    "ch10_lab.hardware_flops_utilisation": (hfu_attention_squared, hfu_weights_recomputed_only,
                                            hfu_backward_recomputed),
    "ch11_lab.column_shard": (shard_strided, shard_bias_one_block, shard_transposed),
    "ch11_lab.mesh_groups": (mesh_as_tensors, mesh_one_based, mesh_leaders_only),
    "ch11_lab.one_f_one_b": (one_f_one_b_from_one, one_f_one_b_no_cooldown,
                             one_f_one_b_as_tuples),
    "ch12_lab.merge": (merge_lse_as_max, merge_weights_swapped, merge_in_float32),
    "ch12_lab.split_sizes": (split_as_tensor, split_off_by_one, split_first_choice_only),
}
# The Dutch edition's exercises are chapter 4's in Dutch: the same wrong answers, Dutch feedback.
WRONG_ANSWERS["nl_lab.absmax_int8"] = WRONG_ANSWERS["ch04_lab.absmax_int8"]
WRONG_ANSWERS["nl_lab.bf16_bits"] = WRONG_ANSWERS["ch04_lab.bf16_bits"]


# =============================================================================================
# Predictions: wrong numbers, each a mistake a learner makes with the prompt's figures
# =============================================================================================


@dataclasses.dataclass(frozen=True)
class Times:
    """A prediction ``factor`` times the measured total: for a measurement (a time) that
    differs from one machine to the next, the mistake is a factor, not a number."""

    factor: float
    why: str


def _training_step_mb(state_bytes: float = 16, e: float = 4, d: float = 4,
                      layers: int | None = None) -> float:
    """Chapter 2's step in MB with one figure changed: bytes per parameter of the model states,
    the activations' e and d, or the number of layers whose activations are counted."""
    shape = ch02_lab.SHAPE
    if layers is None:
        acts = memory.activation_bytes(shape, ch02_lab.SEQ, ch02_lab.BATCH, e, d)
    else:
        acts = layers * memory.activation_bytes_per_layer(ch02_lab.SEQ, ch02_lab.BATCH,
                                                          shape.hidden, shape.n_heads, e, d)
    return (state_bytes * shape.n_params + acts) / 1e6


_LLAMA_SHARD = 1_071_681_536 // 64  # chapter 9's parameters on rank 0 of 64
_LLAMA_BLOCK = 4 * 4096**2 + 3 * 4096 * 11_008 + 2 * 4096  # one Llama 2 7B block
_PSI_70B, _BLOCK_70B = 3_946_913_792, 855_654_400  # chapter 11's stage of Llama 2 70B, a block

#: Further wrong predictions per prediction, "lab module.prediction".
WRONG_PREDICTIONS: dict[str, tuple[Any, ...]] = {
    "ch01_lab.tiny_gpt2_parameters": (
        929_280 + (1024 - 64) * 128,  # GPT-2's 1,024 positions, not the tiny model's 64
        4 * 929_280,  # bytes of FP32 parameters, not parameters
        124_439_808,  # GPT-2 small's count, hard-coded from the chapter
    ),
    "ch02_lab.training_step_memory": (
        _training_step_mb(state_bytes=20),  # an FP32 master copy on top of FP32 weights
        _training_step_mb(e=2, d=1),  # the paper's 16-bit activations and 1-byte masks
        _training_step_mb(layers=1),  # the activations of one layer, not L, nothing outside
    ),
    "ch03_lab.weight_file_sizes": (
        # E4M3 as 4 bits a value (the 4 of its exponent field)
        {"fp32": 9.437184, "bf16": 4.718592, "e4m3": 1.179648},
        # BF16 stored in 4 bytes like FP32
        {"fp32": 9.437184, "bf16": 9.437184, "e4m3": 2.359296},
        # kB (10**3 bytes), not MB
        {"fp32": 9437.184, "bf16": 4718.592, "e4m3": 2359.296},
        # the right total with the formats' sizes in the wrong order: each part is graded
        {"fp32": 2.359296, "bf16": 4.718592, "e4m3": 9.437184},
        # the right sizes under a name the prompt does not ask for ("fp8" for "e4m3")
        {"fp32": 9.437184, "bf16": 4.718592, "fp8": 2.359296},
    ),
    "ch04_lab.int4_on_disk": (
        0.5 + 1e6 / 32 * 4 / 1e6,  # a scale per 32 values, not per 64
        562.5,  # kB, not MB
        0.5 + 1e6 / 64 * 32 / 1e6,  # the scales' 32 bits counted as bytes
    ),
    "ch05_lab.nf4_on_disk": (
        (2048**2 / 2 + 2048**2 / 64 * 2) / 1e6,  # FP16 scales, not 8-bit codes of them
        2164.0,  # kB, not MB
        (2048**2 + 2048**2 / 64) / 1e6,  # a byte per 4-bit code, nothing packed
    ),
    "ch06_lab.two_four_checkpoint": (
        4 * 131_072 + 8 * 131_072,  # an int64 index per kept value (torch's COO), no bitmask
        131_072 + 32_768,  # the kept values counted, not their 4 bytes each
        557.36,  # kB, not bytes
    ),
    "ch07_lab.gptq_layer_bytes": (
        65_536 / 2 + 65_536 // 128 * 2 + 65_536 // 128 / 2,  # groups of 128 (g128), not 32
        37.888,  # kB, not bytes
        65_536,  # the number of weights, not the bytes of codes, scales and zero points
    ),
    "ch08_lab.ring_bytes": (
        1_050_112,  # the number of gradients, not their bytes
        4.2,  # MB, not bytes
        2 * (3 - 1) / 3 * 4_200_448,  # N = 3, the exercise's ranks, where the cell runs 2
    ),
    "ch09_lab.zero_held": (
        # one Linear(512, 512) counted, not two
        {"ZeRO-1": 3_145_728, "ZeRO-2": 2_621_440, "ZeRO-3": 2_097_152},
        15.73,  # MB, not bytes
        # both ranks' bytes added up, not rank 0's
        {"ZeRO-1": 12_582_912, "ZeRO-2": 10_485_760, "ZeRO-3": 8_388_608},
    ),
    "ch09_lab.rank0_at_scale": (
        # the 4 blocks only: the embedding and the head forgotten
        {"parameters": 4 * 4 * _LLAMA_BLOCK / 64, "gradients": 4 * 4 * _LLAMA_BLOCK / 64,
         "optimizer states": 8 * 4 * _LLAMA_BLOCK / 64},
        # the whole Llama 2 7B (6,738,415,616 parameters), not the stage the prompt builds
        {"parameters": 4 * 6_738_415_616 / 64, "gradients": 4 * 6_738_415_616 / 64,
         "optimizer states": 8 * 6_738_415_616 / 64},
        # GB, not bytes
        {"parameters": 4 * _LLAMA_SHARD / 1e9, "gradients": 4 * _LLAMA_SHARD / 1e9,
         "optimizer states": 8 * _LLAMA_SHARD / 1e9},
        # the gradients taken as freed by the step
        {"parameters": 4 * _LLAMA_SHARD, "gradients": 0, "optimizer states": 8 * _LLAMA_SHARD},
    ),
    "ch10_lab.triad_time": (
        Times(1e3, "microseconds where milliseconds are asked"),
        Times(2.0**-24, "one element of each array, not 2**24 of them"),
        Times(20, "the 20 runs the cell times added up, not one triad"),
    ),
    "ch11_lab.rank0_2d": (
        # the states split 8 + 8 = 16 ways, adding the mesh's dimensions instead of multiplying
        {"model states": 16 * _PSI_70B / 16, "a gathered block": 2 * _BLOCK_70B / 8},
        # the whole stage gathered at once (no unit per block): its tensor-parallel eighth
        {"model states": 16 * _PSI_70B / 64, "a gathered block": 2 * _PSI_70B / 8},
        # GB, not bytes
        {"model states": 16 * _PSI_70B / 64 / 1e9, "a gathered block": 2 * _BLOCK_70B / 8 / 1e9},
        # a separate FP32 master copy too: 20 bytes per parameter of states
        {"model states": 20 * _PSI_70B / 64, "a gathered block": 2 * _BLOCK_70B / 8},
    ),
    "ch12_lab.ring_bytes": (
        # the backward as the gradients' cp steps alone, K and V not passed on again
        {"forward": 32_768, "backward": 65_536},
        # kB, not bytes
        {"forward": 32.768, "backward": 98.304},
        # the right total with forward and backward swapped: each part is graded
        {"forward": 98_304, "backward": 32_768},
    ),
}
# The Dutch edition's prediction is chapter 4's, its parts named in Dutch.
WRONG_PREDICTIONS["nl_lab.int4_op_schijf"] = WRONG_PREDICTIONS["ch04_lab.int4_on_disk"]


# =============================================================================================
# The tests
# =============================================================================================


def _all(kind: type) -> list[str]:
    return [f"{name}.{key}" for name in existing()
            for key, item in items(lab_module(name)).items() if isinstance(item, kind)]


def _item(qualified: str) -> Exercise | Prediction:
    name, key = qualified.split(".")
    return items(lab_module(name))[key]


def test_every_wrong_answer_names_an_exercise_that_exists():
    stale = sorted(set(WRONG_ANSWERS) - set(_all(Exercise)))
    assert not stale, f"wrong answers for exercises no lab has: {stale}"
    stale = sorted(set(WRONG_PREDICTIONS) - set(_all(Prediction)))
    assert not stale, f"wrong predictions for predictions no lab has: {stale}"


@pytest.mark.parametrize("qualified", _all(Exercise))
def test_further_wrong_answers_are_rejected_as_wrong(qualified):
    wrong = WRONG_ANSWERS.get(qualified, ())
    assert len(wrong) >= AT_LEAST, (
        f"{qualified}: write at least {AT_LEAST} further wrong answers in "
        f"tests/test_negative_controls.py (WRONG_ANSWERS[{qualified!r}]); it has {len(wrong)}")
    exercise = _item(qualified)
    say = PHRASES[exercise.language]
    # the reference in the same call, so that a rejection is not a checker that rejects all;
    # on ranks it would cost a launch per world size more (test_labs checks it there)
    ranks = isinstance(exercise, RankExercise)
    *feedback, right = check_all(exercise, [*wrong, *(() if ranks else (exercise.reference,))])
    if ranks:
        feedback.append(right)
    else:
        assert right.passed, f"{qualified}: the reference fails its own checker: {right.message}"
    cases = exercise.cases() if callable(exercise.cases) else exercise.cases
    labels = {c.label for c in cases}
    for fn, got in zip(wrong, feedback):
        who = f"{qualified}, {fn.__name__} ({(fn.__doc__ or '').strip()})"
        assert not got.passed, f"{who}: ACCEPTED by the checker:\n{got.message}"
        assert got.misconception is None, (
            f"{who}: named as the recorded misconception {got.misconception!r}; a further "
            "wrong answer must be another mistake")
        assert got.case is not None, f"{who}: the feedback names no case:\n{got.message}"
        if not ranks:  # on ranks a label also says how many
            assert got.case in labels, f"{who}: unknown case {got.case!r}"
        if getattr(fn, "mutates", False):
            position = exercise.unchanged[0]
            arg = list(inspect.signature(fn).parameters)[position]
            assert got.message == say["changed"].format(
                name=function_name(fn), arg=arg, label=got.case), got.message
        else:
            start = say["wrong"].format(name=exercise.name, label=got.case).splitlines()[0]
            assert got.message.startswith(start), f"{who}: not rejected as wrong:\n{got.message}"
            assert f"{say['expected']}" in got.message, got.message


@pytest.mark.parametrize("qualified", _all(Prediction))
def test_further_wrong_predictions_are_rejected(qualified):
    wrong = WRONG_PREDICTIONS.get(qualified, ())
    assert len(wrong) >= AT_LEAST, (
        f"{qualified}: write at least {AT_LEAST} further wrong predictions in "
        f"tests/test_negative_controls.py (WRONG_PREDICTIONS[{qualified!r}]); it has "
        f"{len(wrong)}")
    prediction = _item(qualified)
    say = PREDICTION_PHRASES[prediction.language]
    measured = measure_once(prediction)
    fixed = dataclasses.replace(prediction, measure=lambda: dict(measured))
    total = sum(measured.values())
    right = dict(measured) if prediction.components else total
    assert fixed.check(right).passed, f"{qualified}: the measurement itself is not accepted"
    rejected = tuple(say[k].split("{")[0] for k in ("far", "parts_wrong", "components"))
    for answer in wrong:
        given = answer.factor * total if isinstance(answer, Times) else answer
        got = fixed.check(given)
        who = f"{qualified}, the prediction {answer!r}"
        assert not got.passed, f"{who}: ACCEPTED against the measured {measured}:\n{got.message}"
        assert got.misconception is None, (
            f"{who}: named as the recorded misconception {got.misconception!r}")
        assert got.message.startswith(rejected), f"{who}: not graded as wrong:\n{got.message}"


def test_a_triad_prediction_90_percent_above_the_measurement_is_rejected():
    prediction = _item("ch10_lab.triad_time")
    fixed = dataclasses.replace(prediction, measure=lambda: {"triad, one thread": 10.0})
    assert not fixed.check(19.0).passed  # 90 % above 10 ms: not "within 50 %"
    # "within 50 %" of the measurement, relative to it: both edges
    assert fixed.check(14.9).passed and fixed.check(5.1).passed
    assert not fixed.check(15.1).passed and not fixed.check(4.9).passed
