"""Chapter 8, *Data parallelism with DDP*: the chapter's lab, code exercises on real ranks and a prediction.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The learner's functions run on ranks that the course's launcher starts (gloo on CPU processes),
all hidden cases in one launch, against the library's ring all-reduce
(:mod:`course_lib.exercises.ranks`); the prediction measures a ring all-reduce's bytes on the wire.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from course_lib.exercises.checker import Case, Misconception
from course_lib.exercises.predictions import Prediction
from course_lib.exercises.ranks import RankExercise
from course_lib.parallel import launch, ring, wire

RANKS = 3  # three ranks: left and right neighbours differ, so a wrong chunk index shows
WORLDS = (RANKS, 2)  # and two: an answer that hard-codes the number of ranks fails on the other
ME = "course_lib.chapters.ch08_lab"


# -- Exercise 1: the reduce-scatter half of the ring all-reduce --------------------------------

def _ring_inputs(rank: int, world_size: int, shape: list[int], seed: int) -> tuple[torch.Tensor]:
    """Every rank's own float32 tensor of a case: seeded by the case and the rank."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    return (torch.randn(shape, generator=g),)


def _reduce_scatter(tensor: torch.Tensor) -> torch.Tensor:
    """The reference: the library's ring all-reduce, whose reduce-scatter left chunk (rank + 1) % N here."""
    world, rank = dist.get_world_size(), dist.get_rank()
    flat = tensor.flatten().clone()
    ring.ring_all_reduce(flat)  # the all-gather never writes the chunk this rank owns
    return flat.tensor_split(world)[(rank + 1) % world]


def _ring_cases() -> list[Case]:
    return [Case((), "random", {"shape": [12], "seed": 1}),
            Case((), "size not divisible by 3 or 2", {"shape": [11], "seed": 2}),
            Case((), "a 2-D tensor", {"shape": [4, 5], "seed": 3}),
            Case((), "fewer elements than ranks", {"shape": [1], "seed": 4})]


def _ring_loop(tensor: torch.Tensor, add: bool) -> list[torch.Tensor]:
    """The reduce-scatter loop, adding (or, wrongly, copying) what arrives: every rank's chunks after it."""
    world, rank = dist.get_world_size(), dist.get_rank()
    chunks = [c.clone() for c in tensor.flatten().tensor_split(world)]
    for step in range(world - 1):
        outgoing, incoming = chunks[(rank - step) % world], chunks[(rank - step - 1) % world]
        received = torch.empty_like(incoming)
        request = dist.isend(outgoing, (rank + 1) % world)
        dist.recv(received, (rank - 1) % world)
        request.wait()
        if add:
            incoming += received
        else:
            incoming.copy_(received)
    return chunks


def _own_chunk(tensor: torch.Tensor) -> torch.Tensor:
    return _ring_loop(tensor, add=True)[dist.get_rank()]


def _copied(tensor: torch.Tensor) -> torch.Tensor:
    world = dist.get_world_size()
    return _ring_loop(tensor, add=False)[(dist.get_rank() + 1) % world]


def _averaged(tensor: torch.Tensor) -> torch.Tensor:
    return _reduce_scatter(tensor) / dist.get_world_size()


ring_reduce_scatter = RankExercise(
    "ring_reduce_scatter",
    "The reduce-scatter half of a ring all-reduce on 3 and 2 ranks: return chunk (rank + 1) % N of "
    "tensor.flatten().tensor_split(N), summed over all ranks.",
    _reduce_scatter, _ring_cases,
    misconceptions=(
        Misconception("off-by-one in the chunk index",
                      "return chunk `rank`: it left at the first step and was never added to; "
                      "after N - 1 steps the summed chunk is the next one, (rank + 1) % N",
                      _own_chunk),
        Misconception("copying instead of adding",
                      "replace the chunk with the one that arrives instead of adding it (that is "
                      "the all-gather half)", _copied),
        Misconception("averaging in the reduce-scatter",
                      "divide by the number of ranks: a reduce-scatter sums, DDP divides by N "
                      "separately", _averaged),
    ),
    inputs=f"{ME}:_ring_inputs", nprocs=WORLDS, launch_timeout=30,
)


# -- Exercise 2: averaging gradients with all_reduce -------------------------------------------

def _grad_inputs(rank: int, world_size: int, shapes: list[list[int]], seed: int,
                 dtype: str = "float32", zero_rank: int = -1) -> tuple[list[torch.Tensor]]:
    """Every rank's own gradients of a case (whole numbers in float64, to sum exactly)."""
    g = torch.Generator().manual_seed(1000 * seed + rank)
    kind = getattr(torch, dtype)
    grads = [torch.randn(s, generator=g, dtype=kind) for s in shapes]
    if kind == torch.float64:
        grads = [(10 * t).round() for t in grads]
    if rank == zero_rank:
        grads = [torch.zeros_like(t) for t in grads]
    return (grads,)


def _average(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """The reference: DDP's default hook on each gradient, divide by N and sum with the library's ring."""
    world = dist.get_world_size()
    out = []
    for grad in grads:
        flat = grad.flatten().div(world)  # as traffic.counting_hook: divide, then all-reduce
        ring.ring_all_reduce(flat)
        out.append(flat.view_as(grad))
    return out


def _grad_cases() -> list[Case]:
    # four tensors: a count of tensors taken for the number of ranks is not the world size
    return [Case((), "random", {"shapes": [[4, 3], [3], [2, 2], [5]], "seed": 1}),
            Case((), "one rank's gradients all zero", {"shapes": [[5]], "seed": 2, "zero_rank": 0}),
            Case((), "a scalar parameter", {"shapes": [[]], "seed": 3}),
            Case((), "float64 whole numbers", {"shapes": [[2, 2], [7]], "seed": 4,
                                               "dtype": "float64"})]


def _summed(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    world = dist.get_world_size()
    return [g * world for g in _average(grads)]


def _local(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    return [g.clone() for g in grads]


def _hard_coded(grads: list[torch.Tensor]) -> list[torch.Tensor]:
    """The sum divided by the other world size the checker runs: 2 on 3 ranks, 3 on 2."""
    world = dist.get_world_size()
    other = {3: 2, 2: 3}.get(world, 2)
    return [g * world / other for g in _average(grads)]


average_gradients = RankExercise(
    "average_gradients",
    "Average every gradient over the ranks, as DDP does: all-reduce, then divide by N.",
    _average, _grad_cases,
    misconceptions=(
        Misconception("summing instead of averaging",
                      "all-reduce without dividing by the world size: the gradient is N times "
                      "too large, as if the learning rate were N times larger", _summed),
        Misconception("no all-reduce",
                      "skip the all-reduce: each rank keeps its own gradient, and the copies of "
                      "the model drift apart", _local),
        Misconception("a hard-coded world size",
                      "divide by a number of ranks written in the code (2, the chapter's runs, "
                      "or 3) instead of dist.get_world_size()", _hard_coded),
    ),
    inputs=f"{ME}:_grad_inputs", nprocs=WORLDS, launch_timeout=30,
)


# -- Prediction: the bytes a ring all-reduce sends, per phase ----------------------------------

def _model() -> torch.nn.Module:
    """The prediction's model: 512 -> 1024 -> 512, float32."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(),
                               torch.nn.Linear(1024, 512))


def _ring_on_the_wire() -> dict[str, int]:
    """Worker: all-reduce the model's gradients with the library's ring; bytes sent per phase."""
    launch.init_worker()
    model = _model()
    model(torch.randn(8, 512)).square().mean().backward()
    grads = torch.cat([p.grad.flatten() for p in model.parameters()])
    snapshots, counted, isend = [], [], dist.isend

    def watched(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        snapshots.append(wire.wire_snapshot())  # before each send: a phase ends
        counted.append(tensor.numel() * tensor.element_size())
        return isend(tensor, *args, **kwargs)

    dist.isend = watched  # the ring sends one chunk per step: N - 1 = 1 per phase on 2 ranks
    try:
        ring.ring_all_reduce(grads)
    finally:
        dist.isend = isend
    snapshots.append(wire.wire_snapshot())
    if not wire.COUNTS_TCP:  # no kernel counters (not Linux): the bytes handed to the sends
        return {"reduce-scatter": counted[0], "all-gather": counted[1]}
    return {"reduce-scatter": (snapshots[1] - snapshots[0]).sent,
            "all-gather": (snapshots[2] - snapshots[1]).sent}


def _measure_ring() -> dict[str, float]:
    ranks = launch.launch(f"{ME}:_ring_on_the_wire", 2, backend="gloo", timeout=60, echo=False)
    return {k: float(v) for k, v in ranks[0].items()}


ring_bytes = Prediction(
    "ring_bytes",
    "Bytes rank 0 sends in a ring all-reduce of the model's float32 gradients on 2 ranks, per "
    "phase (reduce-scatter, all-gather), measured on the wire.",
    _measure_ring, unit="bytes", rel_tol=0.1,
    misconceptions=(
        (2.0, "forget the ring factor: 2(N - 1)/N x the gradient bytes is 1x on 2 ranks, not its "
              "limit 2x (nor N x the bytes)"),
        (0.5, "count one phase only: the reduce-scatter and the all-gather each send "
              "(N - 1)/N of the bytes"),
        (8.0, "count bits instead of bytes"),
    ),
)
