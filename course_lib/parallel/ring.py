"""The ring all-reduce, written with point-to-point sends and receives.

Chapter 8 ("Data parallelism with DDP") opens the synchronisation step of DDP: every rank ends with
the sum of everyone's gradients. In a ring of N ranks each rank cuts its tensor into N chunks and,
in N - 1 steps, passes one chunk to its right-hand neighbour while it adds the chunk arriving from
its left (reduce-scatter: now each rank holds one chunk fully summed); then in N - 1 more steps the
summed chunks travel once around the ring (all-gather). Each rank sends 2 (N - 1) chunks of S / N
bytes, whatever N is: the bandwidth-optimal schedule of Patarasuk and Yuan (2009), and the one NCCL
uses for large messages. :func:`ring_all_reduce` is checked against ``dist.all_reduce``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

from course_lib.parallel import launch

__all__ = ["RingCheck", "check_against_all_reduce", "ring_all_reduce", "ring_schedule"]


def ring_schedule(world_size: int) -> list[tuple[str, int, int, int, int]]:
    """Every transfer of a ring all-reduce: (phase, step, sender, chunk index, receiver).

    Chapter 8, *Data parallelism with DDP*.
    """
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ValueError(f"world_size must be a whole number >= 1, got {world_size!r}.")
    rows = []
    for step in range(world_size - 1):
        for rank in range(world_size):
            rows.append(("reduce-scatter", step, rank, (rank - step) % world_size,
                         (rank + 1) % world_size))
    for step in range(world_size - 1):
        for rank in range(world_size):
            rows.append(("all-gather", step, rank, (rank + 1 - step) % world_size,
                         (rank + 1) % world_size))
    return rows


def _exchange(send: torch.Tensor, receive: torch.Tensor, right: int, left: int) -> None:
    request = dist.isend(send, right)
    dist.recv(receive, left)
    request.wait()


def ring_all_reduce(tensor: torch.Tensor) -> int:
    """Sum ``tensor`` over all ranks in place with a ring of sends; return bytes sent.

    Chapter 8, *Data parallelism with DDP*.
    """
    if not tensor.is_contiguous():
        raise ValueError("ring_all_reduce works in place on a contiguous tensor; pass "
                         "tensor.contiguous() and use the result.")
    world, rank = dist.get_world_size(), dist.get_rank()
    if world == 1:
        return 0
    chunks = list(tensor.view(-1).tensor_split(world))
    right, left = (rank + 1) % world, (rank - 1) % world
    sent = 0
    for step in range(world - 1):  # reduce-scatter: add the chunk coming from the left
        outgoing = chunks[(rank - step) % world]
        incoming = chunks[(rank - step - 1) % world]
        received = torch.empty_like(incoming)
        _exchange(outgoing, received, right, left)
        incoming += received
        sent += outgoing.numel() * outgoing.element_size()
    for step in range(world - 1):  # all-gather: pass the summed chunks around once
        outgoing = chunks[(rank + 1 - step) % world]
        incoming = chunks[(rank - step) % world]
        received = torch.empty_like(incoming)
        _exchange(outgoing, received, right, left)
        incoming.copy_(received)
        sent += outgoing.numel() * outgoing.element_size()
    return sent


@dataclass(frozen=True)
class RingCheck:
    """One rank's comparison of the ring with ``dist.all_reduce`` (:func:`check_against_all_reduce`).

    ``bytes_sent`` by the ring, ``tensor_bytes`` of the float32 tensor, the largest difference
    between the two float32 sums and the largest value of the sum, whether the float64 sums of
    whole numbers are equal, ``dist.all_reduce``'s float32 ``sum`` and the ring's, ``ring_sum``.

    Chapter 8, *Data parallelism with DDP*.
    """

    rank: int
    world_size: int
    bytes_sent: int
    tensor_bytes: int
    max_abs_difference: float
    max_abs_value: float
    integers_equal: bool
    sum: torch.Tensor
    ring_sum: torch.Tensor


def check_against_all_reduce(numel: int = 1000, seed: int = 0) -> RingCheck:
    """Worker: reduce the same random tensors with the ring and with ``dist.all_reduce``; compare.

    Runs inside a process group (start it with :func:`course_lib.parallel.launch.launch`). Each
    rank draws its own float32 tensor of ``numel`` random numbers and float64 whole numbers,
    whose sums are exact in any order; the result (:class:`RingCheck`) says how far the ring's
    float32 sum is from ``dist.all_reduce``'s, whether the whole numbers' sums are equal, and
    how many bytes the ring sent.

    Chapter 8, *Data parallelism with DDP*.
    """
    worker = launch.init_worker()
    g = torch.Generator().manual_seed(seed + worker.rank)
    mine = torch.randn(numel, generator=g).to(worker.device)
    ours, theirs = mine.clone(), mine.clone()
    sent = ring_all_reduce(ours)
    dist.all_reduce(theirs)
    ints = torch.randint(-1000, 1000, (numel,), generator=g).double().to(worker.device)
    ring_ints, all_ints = ints.clone(), ints.clone()
    ring_all_reduce(ring_ints)
    dist.all_reduce(all_ints)
    return RingCheck(worker.rank, worker.world_size, sent, mine.numel() * mine.element_size(),
                     max_abs_difference=float((ours - theirs).abs().max()),
                     max_abs_value=float(theirs.abs().max()),
                     integers_equal=bool(torch.equal(ring_ints, all_ints)), sum=theirs.cpu(),
                     ring_sum=ours.cpu())
