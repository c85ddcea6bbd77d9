"""What a context-parallel rank keeps for the backward pass: measured, at several degrees at once.

Chapter 12, *Long sequences and many experts*, says that context parallelism leaves each rank
``1/cp`` of a layer's activations. This module measures it on real ranks rather than from the
shapes: :func:`saved_for_backward` records every tensor autograd saves while a forward pass
runs (``torch.autograd.graph.saved_tensors_hooks``), once per storage, so that views of one
tensor are not counted twice; :func:`cp_activation_memory` runs the attention of
:mod:`course_lib.parallel.context_parallel`, both schedules, on groups of 1, 2, 4 ... ranks
carved out of one launch (``dist.new_subgroups``), the same sequence in every group, and
returns what one rank of each group saved (:class:`CPMemory`).

The pass-KV ring saves only its inputs, output and log-sum-exp (its backward recomputes the
scores block by block, as FlashAttention does): ``1/cp`` of one process's. The all-gather
schedule, written with autograd, also saves the scores and probabilities of its queries
against every key (``s/cp`` by ``s``: they shrink as ``1/cp`` too), and the gathered keys and
values, which are the whole sequence's on every rank and do not shrink. Grouped-query
attention is what keeps that term small.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from course_lib.parallel import context_parallel, launch

__all__ = ["CPMemory", "SavedTensors", "check_memory_run", "cp_activation_memory",
           "saved_for_backward"]

#: The attention schedules measured, by the names chapter 12's tables use.
SCHEDULES = {"all-gather": context_parallel.allgather_attention,
             "ring": context_parallel.ring_attention}


@dataclass
class SavedTensors:
    """The tensors autograd saved for backward: one ``(shape, bytes)`` per storage, in order.

    ``bytes`` is the whole storage's (what stays allocated), however much of it the saved
    view covers.

    Used by the library's other modules.
    """

    tensors: list[tuple[tuple[int, ...], int]]

    @property
    def total(self) -> int:
        """Bytes of every storage autograd holds for the backward pass."""
        return sum(n for _, n in self.tensors)

    def as_large_as(self, one: SavedTensors) -> int:
        """Bytes of the tensors saved here that are as large as the same ones in ``one``.

        The same forward pass saves the same tensors in the same order at every degree, so
        tensor ``i`` here and in ``one`` (one process's) are the same tensor of the layer: those
        that did not shrink.
        """
        if len(self.tensors) != len(one.tensors):
            raise ValueError(f"{len(self.tensors)} saved tensors here, {len(one.tensors)} in "
                             "the other: not the same forward pass.")
        return sum(n for (_, n), (_, m) in zip(self.tensors, one.tensors) if n == m)


@contextlib.contextmanager
def saved_for_backward() -> Iterator[SavedTensors]:
    """Record the storages autograd saves for backward inside the ``with`` block.

    The hooks return each tensor unchanged, so the graph and its backward are untouched;
    a storage saved twice (a tensor and a view of it) counts once.

    Used by the library's other modules.
    """
    seen: dict[int, tuple[tuple[int, ...], int]] = {}
    record = SavedTensors([])

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:  # alive until backward: no pointer is reused
            seen[storage.data_ptr()] = (tuple(t.shape), storage.nbytes())
            record.tensors.append(seen[storage.data_ptr()])
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        yield record


@dataclass(frozen=True)
class CPMemory:
    """What one rank of a ``cp``-rank group saved for backward in one attention layer.

    ``saved`` maps each schedule ("all-gather", "ring") to its :class:`SavedTensors`;
    ``seq_len`` the whole sequence, ``own`` the rows this rank holds (``seq_len / cp``).

    Used by the library's other modules.
    """

    cp: int
    rank: int
    seq_len: int
    own: int
    saved: dict[str, SavedTensors]

    def total(self, schedule: str) -> int:
        """Bytes the schedule saved on this rank."""
        return self.saved[schedule].total

    def as_large_as(self, one: CPMemory, schedule: str) -> int:
        """Bytes the schedule saved here that did not shrink from ``one`` (``cp = 1``)'s."""
        return self.saved[schedule].as_large_as(one.saved[schedule])


def check_memory_run(world_size: int, seq_len: int, degrees: Sequence[int], heads: int,
                     kv_heads: int) -> None:
    """Refuse degrees that do not divide the ranks, or a sequence that does not split.

    Used by the library's other modules.
    """
    for cp in degrees:
        if isinstance(cp, int) and cp >= 1 and world_size % cp:
            raise ValueError(f"a context-parallel degree of {cp} does not divide the "
                             f"{world_size} ranks into groups; use degrees that divide "
                             f"{world_size}.")
        context_parallel.check_cp_degree(seq_len, cp, False)
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads}).")


def _group(cp: int, world: int) -> Any:
    """This rank's group of ``cp`` consecutive ranks (every rank creates every group)."""
    if cp == world:
        return None
    group, _ = dist.new_subgroups(cp)
    return group


def cp_activation_memory(seq_len: int = 128, heads: int = 8, kv_heads: int = 2,
                         head_dim: int = 32, batch: int = 1,
                         degrees: Sequence[int] = (1, 2, 4), seed: int = 0,
                         dtype: str = "float64") -> list[CPMemory]:
    """Worker: the bytes one attention layer saves for backward on this rank, per degree.

    For each ``cp`` in ``degrees`` the ranks form groups of ``cp`` consecutive ranks; every
    group runs both schedules on the same seeded sequence (no mask: every query reads all
    ``s`` keys, so the scores are exactly ``s/cp`` by ``s``), each rank on its ``s/cp`` rows
    (one chunk), under :func:`saved_for_backward`. ``cp = 1`` is one process.

    Used by the library's other modules.
    """
    worker = launch.init_worker()
    check_memory_run(worker.world_size, seq_len, degrees, heads, kv_heads)
    kind = {"float64": torch.float64, "float32": torch.float32}[dtype]
    draw = torch.Generator().manual_seed(seed)
    whole = [torch.randn(batch, n, seq_len, head_dim, generator=draw).to(worker.device, kind)
             for n in (heads, kv_heads, kv_heads)]  # q, k, v: (b, n, s, d)
    records = []
    for cp in degrees:
        group = _group(cp, worker.world_size)
        rank = dist.get_rank(group)
        rows = context_parallel.rank_positions(rank, cp, seq_len, False).to(worker.device)
        saved = {}
        for name, schedule in SCHEDULES.items():
            q, k, v = (t[:, :, rows].clone().requires_grad_() for t in whole)
            with saved_for_backward() as record:
                out = schedule(q, k, v, causal=False, group=group)
            saved[name] = record
            del out  # frees the graph and what it saved
        records.append(CPMemory(cp, rank, seq_len, seq_len // cp, saved))
    return records
