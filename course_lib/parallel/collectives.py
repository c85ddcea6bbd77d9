"""Counting the collectives a training step calls: all-gathers, reduce-scatters, all-reduces, broadcasts.

Chapter 9 ("Sharding with ZeRO and FSDP") measures what sharding costs in communication. FSDP2 and
``ZeroRedundancyOptimizer`` call the collectives of ``torch.distributed`` from Python;
:class:`Collectives` wraps those functions while it is active and writes down, for every call, what
kind of collective it was, the bytes of the whole tensor it assembles or reduces, the number of
ranks in its group and the dtype on the wire. DDP's own all-reduces run inside its C++ reducer,
out of sight; with chapter 8's communication hook (:func:`course_lib.parallel.traffic.counting_hook`),
which calls ``dist.all_reduce``, they are counted too.

The volume of a collective follows the ZeRO paper's accounting: an all-gather or a reduce-scatter of
a tensor of B bytes moves B, an all-reduce 2B (a reduce-scatter followed by an all-gather), and a
broadcast B. In a ring each rank sends (N-1)/N of that.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

__all__ = ["VOLUME_FACTOR", "CollectiveRecord", "Collectives", "volume"]

#: The function names of ``torch.distributed`` that are counted, and the kind of collective each is
#: (torch >= 2.10 names FSDP's all-gather and reduce-scatter ``*_single``; older versions
#: ``all_gather_into_tensor`` and ``reduce_scatter_tensor``).
KINDS = {"all_gather_into_tensor": "all-gather", "all_gather_single": "all-gather",
         "reduce_scatter_tensor": "reduce-scatter", "reduce_scatter_single": "reduce-scatter",
         "all_reduce": "all-reduce", "broadcast": "broadcast"}

#: Bytes moved per byte of the collective's full tensor (the ZeRO paper's accounting).
VOLUME_FACTOR = {"all-gather": 1, "reduce-scatter": 1, "all-reduce": 2, "broadcast": 1}


@dataclass(frozen=True)
class CollectiveRecord:
    """One collective call: its kind, the full tensor's bytes, the group's size, the dtype's name.

    Used by the library's other modules.
    """

    kind: str
    n_bytes: int
    group_size: int
    dtype: str

    @property
    def volume(self) -> int:
        """The bytes this collective moves in the ZeRO paper's accounting."""
        return VOLUME_FACTOR[self.kind] * self.n_bytes

    @property
    def sent_per_rank(self) -> float:
        """The bytes each rank sends in a ring implementation: (N-1)/N of the volume."""
        n = self.group_size
        return self.volume * (n - 1) / n


def _group_size(args: tuple, kwargs: dict[str, Any]) -> int:
    group = kwargs.get("group")
    if group is None:
        group = next((a for a in args if isinstance(a, dist.ProcessGroup)), None)
    return dist.get_world_size(group)


class Collectives:
    """A context manager that records every counted collective called while it is active.

    ``with Collectives() as calls: ...`` then ``calls.records``; ``calls.mark()`` notes where a
    step ends, so that :meth:`per_step` can split the records by step.

    Used by the library's other modules.
    """

    def __init__(self) -> None:
        self.records: list[CollectiveRecord] = []
        self.marks: list[int] = []
        self._saved: dict[str, Callable[..., Any]] = {}

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        kind = KINDS[name]

        @functools.wraps(function)
        def counted(*args: Any, **kwargs: Any) -> Any:
            tensors = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
            if tensors:  # the full tensor: an all-gather's output, a reduce-scatter's input
                full = max(tensors, key=torch.Tensor.numel)
                self.records.append(CollectiveRecord(kind, full.numel() * full.element_size(),
                                                     _group_size(args, kwargs),
                                                     str(full.dtype).removeprefix("torch.")))
            return function(*args, **kwargs)

        return counted

    def __enter__(self) -> Collectives:
        for name in KINDS:
            if hasattr(dist, name) and name not in self._saved:
                self._saved[name] = getattr(dist, name)
                setattr(dist, name, self._wrap(name, self._saved[name]))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, function in self._saved.items():
            setattr(dist, name, function)
        self._saved.clear()

    def mark(self) -> None:
        """Note that a step has ended: the records so far belong to it and the steps before."""
        self.marks.append(len(self.records))

    def per_step(self) -> list[list[CollectiveRecord]]:
        """The records of every marked step, in order."""
        starts = [0, *self.marks[:-1]]
        return [self.records[a:b] for a, b in zip(starts, self.marks)]


def volume(records: Iterable[CollectiveRecord]) -> dict[str, int]:
    """The volume of some records by kind of collective (bytes, the ZeRO paper's accounting).

    Used by the library's other modules.
    """
    out: dict[str, int] = {}
    for record in records:
        out[record.kind] = out.get(record.kind, 0) + record.volume
    return out
