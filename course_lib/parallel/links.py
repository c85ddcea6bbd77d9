"""A link emulator: this machine's collectives slowed down to NVLink, InfiniBand or Ethernet.

Chapters 8 and 9 run real ``torch.distributed`` code on CPU processes, where gloo moves bytes
through shared memory at its own speed. To see what a real link does to a training step (DDP's
overlap of communication with the backward pass, the effect of ``bucket_cap_mb``, why hybrid
sharding helps on a slow network), every collective is made to cost what the link would add:
after gloo has done the real work, the collective completes only ``scale * t_link`` seconds later,
where ``t_link`` is the ring model of :mod:`course_lib.parallel.cost_model` for the emulated link
and number of ranks. The collectives of one emulator queue on one link, as NCCL's queue on one
stream: the next one's delay starts when the previous one has completed. The public API::

    from course_lib.parallel import links

    with links.emulate("InfiniBand NDR", world_size=64, scale=100) as link:
        dist.all_reduce(x)               # gloo's time + 100 x the ring time over 64 NDR ranks
        ...                              # FSDP2's all-gathers and reduce-scatters too
    link.records                         # one Transfer per collective (kind, bytes, times)

    # DDP all-reduces its buckets in C++; a communication hook routes them through a link:
    emulator = links.LinkEmulator("Ethernet 100G", scale=100)
    ddp_model.register_comm_hook(emulator, links.allreduce_hook)

* :func:`emulate` (a context manager) replaces, while it is active, the functions of
  ``torch.distributed`` that :data:`course_lib.parallel.collectives.KINDS` names (``all_reduce``,
  ``all_gather_single`` / ``all_gather_into_tensor``, ``reduce_scatter_single`` /
  ``reduce_scatter_tensor``, ``broadcast``): those that FSDP2 (``_fsdp_collectives.py``),
  ``ZeroRedundancyOptimizer``, the course's hooks and a learner's own code call. The real
  function runs, asynchronously; the emulator's thread waits for it, sleeps the link's time, and
  completes the returned work (``async_op=True``) or returns (``async_op=False``). Code that calls
  ``torch.distributed.distributed_c10d`` or a process group directly is not slowed down; neither
  are DDP's own all-reduces (use :func:`allreduce_hook`).
* ``group``: only collectives on that process group are slowed (``None``: all). For hybrid
  sharding, nest two emulators, each with its own group and link (intra-node NVLink, inter-node
  InfiniBand); give every emulator a group then, or a collective pays both links.
* ``world_size``: the number of ranks whose ring is charged (default: the collective's group
  size), so that two CPU processes can pay what 64 GPUs would.
* ``scale``: multiplies every emulated time. A step on a CPU takes hundreds of times longer than
  on a GPU; scaling the link by a similar factor keeps a GPU's ratio of communication to compute.
* :func:`allreduce_hook` calls ``distributed_c10d.all_reduce`` itself, so a DDP bucket pays its
  emulator's link once, even inside an :func:`emulate` block.

The ring costs, per collective of a full tensor of ``S`` bytes over ``N`` ranks (see
:func:`course_lib.parallel.cost_model.ring_time`): all-reduce ``2 (N-1) alpha + 2 (N-1)/N S/beta``;
all-gather and reduce-scatter ``(N-1) alpha + (N-1)/N S/beta`` (``S``: the gathered output, the
scattered input); broadcast ``(N-1) alpha + S/beta`` (a pipelined chain). What a run measures is
gloo's own time plus the emulated time: the tests check it against that sum.
"""

# No ``from __future__ import annotations`` here: DDP checks the hooks' annotations at run time.
import contextlib
import functools
import inspect
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from course_lib.parallel import cost_model, launch
from course_lib.parallel.collectives import KINDS

__all__ = ["CollectiveTime", "LinkEmulator", "Transfer", "allreduce_hook", "emulate",
           "fsdp_step_transfers", "time_collectives"]


@dataclass(frozen=True)
class Transfer:
    """One emulated collective: kind, full tensor's bytes, ranks charged, times, label.

    ``start`` is when it was called, ``gloo_done`` when gloo had finished it, ``done`` when the
    emulated link had (seconds of ``time.perf_counter``); ``emulated`` is the delay the link
    added (already multiplied by the emulator's scale); ``label`` names it (a DDP bucket: its
    index).

    Chapter 8, *Data parallelism with DDP*.
    """

    kind: str
    n_bytes: int
    world_size: int
    start: float
    gloo_done: float
    done: float
    emulated: float
    label: str = ""

    @property
    def seconds(self) -> float:
        """From the call to the end of the emulated transfer."""
        return self.done - self.start


class _DelayedWork(dist.Work):
    """The work handle of an emulated asynchronous collective: done when the link is."""

    def __init__(self, future: torch.futures.Future) -> None:
        super().__init__()
        self._future = future

    def wait(self, timeout: Any = None) -> bool:
        self._future.wait()
        return True

    def is_completed(self) -> bool:
        return self._future.done()

    def get_future(self) -> torch.futures.Future:
        return self._future

    def result(self) -> list[torch.Tensor]:
        return self._future.value()


def _bytes(tensors: Any) -> int:
    if isinstance(tensors, torch.Tensor):
        return tensors.numel() * tensors.element_size()
    return sum(_bytes(t) for t in tensors)


#: For each wrapped function: the argument whose bytes are the collective's full tensor.
_FULL_TENSOR = {"all_reduce": "tensor", "broadcast": "tensor",
                "all_gather_into_tensor": "output_tensor", "all_gather_single": "output_tensor",
                "reduce_scatter_tensor": "input", "reduce_scatter_single": "input"}


class LinkEmulator:
    """Collectives slowed to ``link``: each completes ``scale`` x its ring time after gloo's end.

    ``link`` is a :class:`~course_lib.parallel.cost_model.Link` or a name of
    ``cost_model.LINKS``; ``world_size`` the ranks charged (``None``: the collective's group);
    ``group`` the only process group slowed (``None``: all); ``scale`` multiplies the delays
    (0: none). Use it through :func:`emulate`, or
    as the state of :func:`allreduce_hook`. Its thread is a daemon; :meth:`close` ends it.

    Chapter 8, *Data parallelism with DDP*.
    """

    def __init__(self, link: cost_model.Link | str, world_size: int | None = None,
                 group: dist.ProcessGroup | None = None, scale: float = 1.0) -> None:
        self.link = cost_model.get_link(link)
        if world_size is not None and (isinstance(world_size, bool)
                                       or not isinstance(world_size, int) or world_size < 1):
            raise ValueError(f"world_size must be a whole number >= 1 (the ranks to charge), or "
                             f"None for the collective's own group, got {world_size!r}.")
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale >= 0:
            raise ValueError(f"scale must be a number >= 0 (1: the link's own times; 0: gloo "
                             f"alone, through the same code), got {scale!r}.")
        self.world_size, self.group, self.scale = world_size, group, float(scale)
        self.records: list[Transfer] = []
        self._queue: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def predict(self, kind: str, n_bytes: float, world_size: int) -> float:
        """Seconds this emulator adds to a collective (``kind`` as in ``collectives.KINDS``)."""
        n = self.world_size or world_size
        return self.scale * cost_model.ring_time(kind, n_bytes, n, self.link)

    def applies_to(self, group: dist.ProcessGroup | None) -> bool:
        """Whether a collective on ``group`` (``None``: the default group) is slowed here."""
        if self.group is None:
            return True
        group = group if group is not None else dist.group.WORLD
        return group.group_name == self.group.group_name

    def submit(self, work: dist.Work, kind: str, n_bytes: int, world_size: int,
               result: list[torch.Tensor], label: str = "") -> _DelayedWork:
        """Queue a started collective on the link; its returned work completes after the delay."""
        future: torch.futures.Future = torch.futures.Future()
        self._queue.put((work, kind, n_bytes, world_size, result, label, time.perf_counter(),
                         future))
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="course-link-emulator")
                self._thread.start()
        return _DelayedWork(future)

    def _serve(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            work, kind, n_bytes, world_size, result, label, start, future = item
            try:
                work.wait()
                gloo_done = time.perf_counter()
                delay = self.predict(kind, n_bytes, world_size)
                _sleep_until(gloo_done + delay)
                self.records.append(Transfer(kind, n_bytes, self.world_size or world_size,
                                             start, gloo_done, time.perf_counter(), delay, label))
                future.set_result(result)
            except Exception as err:  # the caller's wait() raises it
                future.set_exception(err)

    def all_reduce(self, tensor: torch.Tensor, group: dist.ProcessGroup | None = None,
                   label: str = "") -> torch.futures.Future:
        """Sum ``tensor`` over ``group`` asynchronously through the link; a future of ``[tensor]``."""
        # torch.distributed.distributed_c10d's own function: never wrapped by emulate()
        work = dist.distributed_c10d.all_reduce(tensor, group=group, async_op=True)
        return self.submit(work, KINDS["all_reduce"], _bytes(tensor),
                           dist.get_world_size(group), [tensor], label).get_future()

    def close(self) -> None:
        """End the emulator's thread once the collectives queued so far are done."""
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                self._queue.put(None)
                self._thread.join(timeout=60)
            self._thread = None

    def _wrap(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(function)
        kind = KINDS[name]

        @functools.wraps(function)
        def slowed(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            group = bound.arguments.get("group")
            if not self.applies_to(group):
                return function(*args, **kwargs)
            wants_async = bound.arguments.get("async_op", False)
            bound.arguments["async_op"] = True
            work = function(*bound.args, **bound.kwargs)
            if work is None:  # this rank is not in the group
                return None
            tensors = bound.arguments[_FULL_TENSOR[name]]
            handle = self.submit(work, kind, _bytes(tensors), dist.get_world_size(group),
                                 [tensors] if isinstance(tensors, torch.Tensor) else tensors)
            if wants_async:
                return handle
            handle.wait()
            return None

        return slowed


def _sleep_until(deadline: float) -> None:
    """Sleep to ``deadline`` (``time.perf_counter`` seconds); the last millisecond spinning."""
    while (left := deadline - time.perf_counter()) > 1e-3:
        time.sleep(left - 1e-3)
    while time.perf_counter() < deadline:
        pass



@contextlib.contextmanager
def emulate(link: cost_model.Link | str, world_size: int | None = None,
            group: dist.ProcessGroup | None = None, scale: float = 1.0) -> Iterator[LinkEmulator]:
    """While active, ``torch.distributed``'s collectives cost ``link``'s ring time more.

    Yields the :class:`LinkEmulator`, whose ``records`` list every slowed collective. The
    functions of ``torch.distributed`` are put back on exit, even after an error.

    Chapter 8, *Data parallelism with DDP*.
    """
    emulator = LinkEmulator(link, world_size, group, scale)
    saved = {n: getattr(dist, n) for n in _FULL_TENSOR if hasattr(dist, n)}
    try:
        for name, function in saved.items():
            setattr(dist, name, emulator._wrap(name, function))
        yield emulator
    finally:
        for name, function in saved.items():
            setattr(dist, name, function)
        emulator.close()


def allreduce_hook(state: LinkEmulator,
                   bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """A DDP comm hook: DDP's averaging (divide by N, all-reduce) over ``state``'s link.

    ``ddp_model.register_comm_hook(LinkEmulator("Ethernet 100G"), allreduce_hook)``;
    each bucket's :class:`Transfer` is labelled with the bucket's index.

    Chapter 8, *Data parallelism with DDP*.
    """
    buffer = bucket.buffer().div_(dist.get_world_size())
    future = state.all_reduce(buffer, label=str(bucket.index()))
    return future.then(lambda fut: fut.value()[0])


@dataclass(frozen=True)
class CollectiveTime:
    """A collective timed by :func:`time_collectives`: gloo alone, and through the emulated link.

    ``gloo`` is the fastest of the repeats without the emulator, ``measured`` the median with
    it, ``emulated`` the delay the link model adds; ``predicted`` is their sum.

    Chapter 8, *Data parallelism with DDP*.
    """

    kind: str
    n_bytes: int
    gloo: float
    measured: float
    emulated: float

    @property
    def predicted(self) -> float:
        """gloo's own time plus the link's alpha-beta time."""
        return self.gloo + self.emulated


def _timed(call: Callable[[], Any], repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def time_collectives(link: str, sizes: list[int], world_size: int | None = None,
                     scale: float = 1.0, repeats: int = 3,
                     kinds: tuple[str, ...] = ("all-reduce", "all-gather", "reduce-scatter")
                     ) -> list[CollectiveTime]:
    """Worker: time collectives of ``sizes`` bytes (float32), with and without the emulated link.

    Start it with :func:`course_lib.parallel.launch.launch`. The all-gathers and reduce-scatters
    use the functions FSDP2 calls (``all_gather_single``, ``reduce_scatter_single``).

    Chapter 8, *Data parallelism with DDP*.
    """
    worker = launch.init_worker()
    n = worker.world_size
    results = []
    for kind in kinds:
        for size in sizes:
            full = torch.ones(max(n, size // 4 // n * n))
            part = torch.ones(full.numel() // n)
            calls = {"all-reduce": lambda: dist.all_reduce(full),
                     "all-gather": lambda: dist.all_gather_single(full, part),
                     "reduce-scatter": lambda: dist.reduce_scatter_single(part, full)}
            if kind not in calls:
                raise ValueError(f"kinds must be among {sorted(calls)}, got {kind!r}.")
            gloo = min(_timed(calls[kind], repeats))
            with emulate(link, world_size, scale=scale) as emulator:
                measured = sorted(_timed(calls[kind], repeats))[repeats // 2]
            delay = emulator.predict(kind, full.numel() * 4, n)
            results.append(CollectiveTime(kind, full.numel() * 4, gloo, measured, delay))
    return results


def fsdp_step_transfers(link: str, world_size: int | None = None, scale: float = 1.0,
                        width: int = 64) -> list[Transfer]:
    """Worker: one forward and backward of a two-layer FSDP2 model under :func:`emulate`.

    Returns the transfers the link carried: FSDP2's all-gathers and reduce-scatters.

    Chapter 8, *Data parallelism with DDP*.
    """
    from torch.distributed.fsdp import fully_shard

    launch.init_worker()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.Linear(width, width))
    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    with emulate(link, world_size, scale=scale) as emulator:
        model(torch.ones(4, width)).sum().backward()
    return list(emulator.records)
