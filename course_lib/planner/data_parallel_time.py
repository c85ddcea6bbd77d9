"""Data parallelism's communication in a training step, and the part compute hides.

Chapters 8 (DDP) and 9 (ZeRO and FSDP) teach the collectives; the planner
(:mod:`course_lib.planner.model`) adds them to its step. Chapter 8's
:mod:`~course_lib.parallel.cost_model` times them, in 25 MiB pieces over the
data-parallel group: an all-reduce of the gradients for DDP, hidden behind the last micro-batch's
backward pass as far as it fits; for ZeRO 1 and 2 a reduce-scatter of the gradients in
the last backward pass and an all-gather of the weights in the next step's first forward
pass, one call per wrapped layer; for ZeRO 3, per micro-batch, a gather of each unit in
the forward pass, another in the backward pass and a reduce-scatter of its gradients;
with hybrid sharding an all-reduce of each shard across the replicas. A unit's gather is
prefetched behind the compute of the unit before it, so the first one always waits
(:func:`exposed_gathers`).
"""

from __future__ import annotations

import math

from course_lib.numbers import memory
from course_lib.parallel import cost_model
from course_lib.planner.inputs import Setup
from course_lib.planner.recomputation import recomputed_share

__all__ = ["data_parallel_time", "exposed_gathers"]


def _collective(kind: str, n_bytes: float, n: int,
                cluster: cost_model.Cluster) -> float:
    """Seconds of a collective of ``n_bytes`` over ``n`` GPUs, in 25 MiB pieces."""
    if n == 1 or n_bytes == 0:
        return 0.0
    piece = cost_model.DDP_BUCKET_BYTES
    full = math.floor(n_bytes / piece)
    rest = n_bytes - full * piece

    def one(size: float) -> float:
        if kind == "all-reduce":
            return cost_model.allreduce_time(size, n, cluster)
        return cost_model.allgather_time(size, n, cluster)

    return (full * one(piece) if full else 0.0) + (one(rest) if rest > 0 else 0.0)


def _per_unit(n_bytes: float, units: int, n: int, cluster: cost_model.Cluster) -> float:
    """Seconds of ``units`` all-gathers (or reduce-scatters), one call per wrapped layer,
    of ``n_bytes`` in all over ``n`` GPUs."""
    if n == 1 or n_bytes == 0:
        return 0.0
    return units * cost_model.allgather_time(n_bytes / units, n, cluster)


def _group(s: Setup, spacing: int) -> cost_model.Cluster:
    """The cluster a group of GPUs ``spacing`` ranks apart sees (tensor, pipeline, data
    order)."""
    return cost_model.Cluster(s.node_link, s.network_link,
                              max(1, s.gpus_per_node // spacing))


def exposed_gathers(gather: float, units: int, compute: float) -> float:
    """Seconds of ``gather`` (the all-gathers of ``units`` wrapped layers, one each)
    that ``compute`` (their forward pass) does not hide, between 0 and ``gather``.

    Each unit's gather ``g = gather / units`` is prefetched behind the compute of the
    unit before it, ``f = compute / units``; the first waits. The pass takes ``g +
    (units - 1) max(f, g) + f``, so ``g + (units - 1) max(0, g - f)`` is exposed.

    Used by the library's other modules.
    """
    return gather / units + (units - 1) / units * max(0.0, gather - compute)


def data_parallel_time(s: Setup, local: float, compute: float) -> tuple[float, float]:
    """Seconds of data parallelism's collectives in one step, and the part ``compute``
    (the busiest GPU's seconds of computing in the step) does not hide.

    ``local``: the parameters of the GPU's tensor and pipeline slice, before ZeRO. The
    gathers of a forward pass are exposed as :func:`exposed_gathers` says, the rest as
    far as it overruns the backward pass it overlaps: the exposed part lies between 0
    and all of the communication.

    Used by the library's other modules.
    """
    precision = memory.PRECISIONS[s.precision]
    weights, grads = local * precision.weight_bytes, local * precision.grad_bytes
    group = _group(s, s.tp * s.pp)
    per_micro = compute / s.micro_batches
    last_backward = cost_model.BACKWARD_SHARE * per_micro
    if s.zero == 0:  # the context-parallel GPUs reduce their gradients too
        total = _collective("all-reduce", grads, s.dp * s.cp, group)
        return total, max(0.0, total - last_backward)
    units = s.edge_layers
    gather = _per_unit(weights, units, s.shard, group)
    scatter = _per_unit(grads, units, s.shard, group)
    replicas = _collective("all-reduce", grads / s.shard, s.dp * s.cp // s.shard,
                           _group(s, s.tp * s.pp * s.shard))
    # forward 2, backward 4 and what recomputation runs again, of 6 N per token
    forward = per_micro * 2 / (6 + 2 * recomputed_share(s))
    if s.zero < 3:
        # Gradients reduce-scattered in the last backward pass; the weights gathered in
        # the next step's first forward pass, unit by unit, prefetched.
        total = scatter + replicas + gather
        exposed = (max(0.0, scatter + replicas - last_backward)
                   + exposed_gathers(gather, units, forward))
        return total, exposed
    # ZeRO 3: every micro-batch gathers each unit in its forward and again in its
    # backward pass, and reduce-scatters its gradients; the next unit's gather is
    # prefetched behind the current unit's compute, the first one waits.
    backward = per_micro - forward
    per_step = (exposed_gathers(gather, units, forward)
                + max(0.0, gather + scatter - backward))
    total = s.micro_batches * (2 * gather + scatter) + replicas
    return total, s.micro_batches * per_step + max(0.0, replicas - last_backward)
