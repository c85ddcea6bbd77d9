"""Tensor parallelism's communication: Megatron-LM's f and g, sequence parallelism's.

Chapter 11 ("Beyond data parallelism: tensor and pipeline parallelism") splits each
weight matrix of a transformer block across the ranks of a tensor-parallel group.
Megatron-LM (Shoeybi et al. 2019, arXiv 1909.08053, section 3) needs only two conjugate
operators to make a split MLP or attention block compute exactly what the whole one
does:

* ``f``: the identity in the forward pass, an all-reduce of the gradient in the backward
  pass. It stands before the column-parallel layer: every rank reads the whole input,
  and the input's gradient is the sum of what each rank's columns contribute.
* ``g``: an all-reduce in the forward pass, the identity in the backward pass. It stands
  after the row-parallel layer: each rank holds a partial sum of the output.

One block (attention, then MLP) therefore all-reduces twice forward and twice backward.

Sequence parallelism (Korthikanti et al. 2022, arXiv 2205.05198) replaces each
all-reduce by its two halves and keeps the layer norms, the residual additions and the
dropouts on a shard of the sequence: before the column-parallel layer the shards are
all-gathered along the sequence (the paper's ``g``; its backward is a reduce-scatter),
after the row-parallel layer the partial sums are reduce-scattered along the sequence
(the paper's ``g-bar``; its backward is an all-gather). In the forward pass a ring
sends the same bytes as tensor parallelism's (an all-reduce is a reduce-scatter plus an
all-gather, as NCCL runs them); the backward pass sends more, since the column-parallel
layer gathers its input again; and gloo's reduce-scatter is a whole all-reduce, so on CPU
processes both passes send more (:func:`block_pass` measures it). What sequence
parallelism saves is activation memory, measured in
:mod:`course_lib.parallel.tensor_parallel`. The paper's ``g`` comes
fused with the column-parallel layer that follows it, :class:`GatheredLinear`: that
layer keeps only its shard of the input for backward and all-gathers it again there, as
Megatron-LM does; otherwise the gathered input would be kept whole and nothing saved.

Two more reductions finish a tensor-parallel step: the partial gradients of sequence
parallelism (:func:`sync_sequence_parallel_grads`) and the norm of the whole gradient
for clipping (:func:`grad_norm`). Every collective here is a call of
``torch.distributed`` from Python, which the course's counter sees
(:mod:`course_lib.parallel.collectives`); :func:`collective_counts` also reads PyTorch's
``CommDebugMode``, and :func:`block_pass` counts a block's collectives with both. The
tensors are laid out as transformers lays them out, ``(batch, sequence, hidden)``: the
sequence is dimension 1.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_lib.numbers.memory_meter import SavedTensorMeter
from course_lib.parallel import wire
from course_lib.parallel.collectives import Collectives

__all__ = ["TORCH_KINDS", "BlockPass", "GatheredLinear", "ReduceScatterSequence",
           "all_gather_sequence", "block_pass", "collective_counts", "f", "g",
           "grad_norm", "reduce_scatter_sequence", "sync_sequence_parallel_grads"]

Group = Any  # a torch.distributed ProcessGroup, or None for the whole world
#: What PyTorch's ``CommDebugMode`` calls each collective, in the course's names.
TORCH_KINDS = {"all_reduce": "all-reduce", "allreduce_": "all-reduce",
               "all_gather_into_tensor": "all-gather", "_allgather_base_": "all-gather",
               "reduce_scatter_tensor": "reduce-scatter",
               "_reduce_scatter_base_": "reduce-scatter"}


def all_gather_sequence(shard: torch.Tensor, group: Group = None) -> torch.Tensor:
    """The ranks' ``(batch, sequence / t, hidden)`` shards joined along the sequence.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    t = dist.get_world_size(group)
    # all_gather_into_tensor joins along dimension 0: bring the sequence there and back
    local = shard.transpose(0, 1).contiguous()
    out = local.new_empty((t * local.shape[0], *local.shape[1:]))
    dist.all_gather_into_tensor(out, local, group=group)
    return out.transpose(0, 1).contiguous()


def reduce_scatter_sequence(full: torch.Tensor, group: Group = None) -> torch.Tensor:
    """The ranks' ``(batch, sequence, hidden)`` tensors summed; this rank keeps a shard.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    t = dist.get_world_size(group)
    if full.shape[1] % t:
        raise ValueError(f"a sequence of {full.shape[1]} tokens does not split across "
                         f"{t} ranks; use a sequence length that is a multiple of {t}.")
    local = full.transpose(0, 1).contiguous()
    out = local.new_empty((local.shape[0] // t, *local.shape[1:]))
    dist.reduce_scatter_tensor(out, local, group=group)
    return out.transpose(0, 1).contiguous()


class f(torch.autograd.Function):  # noqa: N801 - the paper's name
    """Megatron-LM's f: identity forward, all-reduce of the gradient backward.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group = None) -> torch.Tensor:
        """The input unchanged: every rank of the group already holds all of it."""
        ctx.group = group
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        """The gradient summed over the ranks: each rank's columns gave a part of it."""
        grad = grad.contiguous().clone()  # reduced in place: no buffer autograd shares
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class g(torch.autograd.Function):  # noqa: N801 - the paper's name
    """Megatron-LM's g: all-reduce forward, identity backward.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, group: Group = None) -> torch.Tensor:
        """The ranks' partial outputs summed: the whole layer's output, on each rank."""
        out = x.contiguous().clone()
        dist.all_reduce(out, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        """The gradient unchanged: each rank's partial output enters the sum once."""
        return grad, None


class ReduceScatterSequence(torch.autograd.Function):
    """Sequence parallelism's g-bar: reduce-scatter forward, all-gather backward.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    @staticmethod
    def forward(ctx: Any, partial: torch.Tensor, group: Group = None) -> torch.Tensor:
        """This rank's shard of the sum of the ranks' partial outputs."""
        ctx.group = group
        return reduce_scatter_sequence(partial, group)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        """The whole sequence's gradient: each partial output fed every position."""
        return all_gather_sequence(grad, ctx.group), None


class GatheredLinear(torch.autograd.Function):
    """Sequence parallelism's column-parallel layer: all-gather, then ``x A_r + b_r``.

    It keeps only this rank's shard of the input for backward and all-gathers it again
    there (for the weight's gradient); the input's gradient is reduce-scattered back to
    the shards.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    @staticmethod
    def forward(ctx: Any, shard: torch.Tensor, weight: torch.Tensor,
                bias: torch.Tensor | None, group: Group = None) -> torch.Tensor:
        """The layer's output columns of this rank for the whole sequence."""
        ctx.save_for_backward(shard, weight)
        ctx.group, ctx.has_bias = group, bias is not None
        return F.linear(all_gather_sequence(shard, group), weight, bias)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The input shard's gradient, reduce-scattered, and the weight's."""
        shard, weight = ctx.saved_tensors
        whole = all_gather_sequence(shard, ctx.group)  # again: it was not kept
        grad_input = reduce_scatter_sequence(grad @ weight, ctx.group)
        grad_weight = grad.flatten(0, -2).T @ whole.flatten(0, -2)
        grad_bias = grad.flatten(0, -2).sum(0) if ctx.has_bias else None
        return grad_input, grad_weight, grad_bias, None


def sync_sequence_parallel_grads(module: nn.Module, group: Group = None) -> None:
    """Sum over the group the partial gradients of sequence parallelism (norms, biases).

    A parameter that sees only this rank's part of the sequence is marked
    ``sequence_parallel``; one all-reduce sums all of them, flattened together.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    partial = [p for p in module.parameters()
               if getattr(p, "sequence_parallel", False) and p.grad is not None]
    if not partial:
        return
    flat = torch.cat([p.grad.flatten() for p in partial])
    dist.all_reduce(flat, group=group)
    for p, part in zip(partial, flat.split([p.numel() for p in partial])):
        p.grad.copy_(part.view_as(p.grad))


def grad_norm(parameters: Iterable[nn.Parameter], group: Group = None) -> torch.Tensor:
    """The 2-norm of the whole model's gradient: sharded parts summed over the group.

    A rank's own ``clip_grad_norm_`` sees only its shards (parameters marked
    ``tensor_parallel``), and each rank would clip by another factor; here their squares
    are summed over the group in one all-reduce of a single number, and the whole
    parameters' squares, the same on every rank, are added once.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    squares: dict[bool, list[torch.Tensor]] = {True: [], False: []}
    for p in parameters:
        if p.grad is not None:
            sharded = getattr(p, "tensor_parallel", False)
            squares[sharded].append(p.grad.detach().double().pow(2).sum())
    sharded, whole = (torch.stack(squares[k]).sum() if squares[k]
                      else torch.zeros((), dtype=torch.float64) for k in (True, False))
    total = sharded.reshape(1)
    dist.all_reduce(total, group=group)
    return (total[0] + whole).sqrt()


def collective_counts(names: Iterable[str]) -> dict[str, int]:
    """How many collectives of each kind, from the course's names or PyTorch's op names.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    kinds = (TORCH_KINDS.get(str(n).rpartition(".")[2], str(n)) for n in names)
    return dict(Counter(kinds))


@dataclass(frozen=True)
class BlockPass:
    """One forward and backward of a block, what it gave and what it communicated.

    Its output, its input's gradient, the bytes kept for backward (0 when not measured),
    the collectives of each pass, by kind, and, per pass (forward, backward), the bytes
    this rank sent over TCP (:func:`course_lib.parallel.wire.wire_snapshot`; zeros when
    not measured, or not on Linux) and what a ring sends by the formula, NCCL's way and
    gloo's (:func:`course_lib.parallel.wire.ring_sent`).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    output: torch.Tensor
    input_grad: torch.Tensor
    saved_bytes: int
    forward: dict[str, int]
    backward: dict[str, int]
    wire_sent: tuple[int, int] = (0, 0)
    ring_nccl: tuple[float, float] = (0.0, 0.0)
    ring_gloo: tuple[float, float] = (0.0, 0.0)


def block_pass(block: nn.Module, x: torch.Tensor, weights: torch.Tensor,
               measure: bool = True) -> BlockPass:
    """Forward and backward of ``block`` on ``x`` (loss ``sum(weights * y)``), counted.

    The collectives are those of ``torch.distributed`` that the course's counter sees,
    else those PyTorch's ``CommDebugMode`` sees (PyTorch's tensor parallelism calls the
    functional collectives). ``measure`` counts the bytes autograd keeps; the meter
    cannot read PyTorch's DTensors.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    from torch.distributed.tensor.debug import CommDebugMode

    x = x.detach().clone().requires_grad_()
    meter = SavedTensorMeter(exclude=block.parameters()) if measure else None
    snapshots = [wire.wire_snapshot()] if measure else []
    with Collectives() as calls, CommDebugMode() as mode:
        with meter or contextlib.nullcontext():
            y = block(x)
        calls.mark()
        snapshots += [wire.wire_snapshot()] if measure else []
        after_forward = dict(mode.get_comm_counts())
        (y * weights).sum().backward()
        calls.mark()
        snapshots += [wire.wire_snapshot()] if measure else []
        after_backward = dict(mode.get_comm_counts())
    if calls.records:
        counts = [collective_counts(r.kind for r in step) for step in calls.per_step()]
    else:
        backward = {k: n - after_forward.get(k, 0) for k, n in after_backward.items()}
        counts = [collective_counts(k for k, n in step.items() for _ in range(n))
                  for step in (after_forward, backward)]
    sent = tuple((b - a).sent for a, b in zip(snapshots, snapshots[1:])) or (0, 0)
    rings = [tuple(sum(wire.ring_sent(r.kind, r.n_bytes, r.group_size, backend)
                       for r in step) for step in calls.per_step())
             for backend in ("nccl", "gloo")]
    return BlockPass(y.detach(), x.grad, meter.total if meter else 0, *counts, sent,
                     *rings)
