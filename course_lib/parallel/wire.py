"""Bytes on the wire: what each rank really sends, the ring formulas, and FSDP's exposed all-gathers.

Chapter 9 ("Sharding with ZeRO and FSDP") sets the ZeRO paper's count of communication (2 Psi,
3 Psi) beside what leaves a rank. gloo talks TCP, and the kernel counts every byte a socket has
delivered: :func:`wire_snapshot` reads those counters (Linux's ``TCP_INFO``) for every TCP socket
of this process, and the difference of two snapshots is what this rank sent and received in
between (:class:`WireBytes`). :func:`ring_sent` is what a ring collective should send per rank,
NCCL's way or gloo's (whose reduce-scatter is an all-reduce). :class:`AllGatherClock` times how
long the training thread spends issuing, waiting for and copying out FSDP2's all-gathers: the
all-gather time that compute did not hide.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import struct
import sys
import time
from dataclasses import dataclass
from typing import Any

import torch

from course_lib.parallel import cost_model

__all__ = ["COUNTS_TCP", "GLOO_HEADER", "AllGatherClock", "WireBytes", "WireSnapshot",
           "ring_sent", "step_ring_sent", "wire_snapshot"]

#: Whether :func:`wire_snapshot` can count: it reads Linux's ``TCP_INFO`` (Colab is Linux).
COUNTS_TCP = sys.platform.startswith("linux")

#: Bytes of gloo's header before every message it sends over TCP (its ``Op`` preamble).
GLOO_HEADER = 48


# struct tcp_info (linux/tcp.h): tcpi_bytes_acked and tcpi_bytes_received, two u64 at byte 120.
_TCP_INFO_BYTES = 232
_ACKED_RECEIVED_AT = 120


@dataclass(frozen=True)
class WireBytes:
    """Bytes this process sent (and the peers acknowledged) and received over TCP in a span.

    TCP's payload: what gloo writes, its own message headers included, without TCP/IP headers.
    ``closed`` counts the sockets of the earlier snapshot that were gone by the later one:
    what they carried after the earlier snapshot is not counted, so a span with ``closed > 0``
    may count too little (the course's launcher keeps every rank's sockets open until all
    ranks have returned, so that no peer closes a connection before the last snapshot).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    sent: int
    received: int
    closed: int = 0


@dataclass(frozen=True)
class WireSnapshot:
    """Every TCP socket of this process at one moment: its inode, bytes acknowledged and received.

    ``later - earlier`` is a :class:`WireBytes`; a socket opened in between counts from zero.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    sockets: dict[int, tuple[int, int]]

    def __sub__(self, earlier: WireSnapshot) -> WireBytes:
        sent = received = 0
        for inode, (acked, got) in self.sockets.items():
            before = earlier.sockets.get(inode, (0, 0))
            sent, received = sent + acked - before[0], received + got - before[1]
        return WireBytes(sent, received, len(earlier.sockets.keys() - self.sockets.keys()))


def _tcp_sockets() -> dict[int, int]:
    """This process's socket file descriptors by inode (Linux's /proc/self/fd)."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:  # closed since the listing
            continue
        if target.startswith("socket:["):
            found[int(target[8:-1])] = int(name)
    return found


def wire_snapshot(settle: float = 5.0) -> WireSnapshot:
    """The TCP bytes every socket of this process has had acknowledged and has received so far.

    Waits up to ``settle`` seconds for the sockets' send queues to drain, so that bytes handed to
    the kernel have reached the peer. The connections of the rendezvous store (either end on
    ``MASTER_PORT``) are left out: they carry the process group's bookkeeping, never a
    collective's bytes. Linux only (it reads ``TCP_INFO``): elsewhere the snapshot is empty and
    nothing is counted (:data:`COUNTS_TCP`). gloo on CPUs talks TCP, NCCL on GPUs does not, so
    on GPUs this measures nothing of NCCL's traffic.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    if not COUNTS_TCP:
        return WireSnapshot({})
    import fcntl
    import termios

    store = os.environ.get("MASTER_PORT", "")
    deadline = time.perf_counter() + settle
    while True:
        sockets, queued = {}, 0
        for inode, fd in _tcp_sockets().items():
            try:
                s = socket.socket(fileno=os.dup(fd))
            except OSError:
                continue
            try:
                if s.type != socket.SOCK_STREAM or s.family not in (socket.AF_INET,
                                                                    socket.AF_INET6):
                    continue
                ends = {str(s.getsockname()[1])}
                with contextlib.suppress(OSError):  # a listening socket has no peer
                    ends.add(str(s.getpeername()[1]))
                if store in ends:
                    continue
                # The queue before the counters: what the peer acknowledges between the two
                # readings then counts here, and not in the next span (read the other way
                # round, a phase's last bytes now and then landed in the next phase).
                unacked = 0
                with contextlib.suppress(OSError):  # a listening socket has no send queue
                    unacked = struct.unpack("i", fcntl.ioctl(s.fileno(), termios.TIOCOUTQ,
                                                             b"\0" * 4))[0]
                info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_BYTES)
                sockets[inode] = struct.unpack_from("QQ", info, _ACKED_RECEIVED_AT)
                queued += unacked
            except OSError:  # not TCP after all, or closed meanwhile
                continue
            finally:
                s.close()
        if queued == 0 or time.perf_counter() > deadline:
            return WireSnapshot(sockets)
        time.sleep(0.001)


def ring_sent(kind: str, n_bytes: float, group_size: int, backend: str = "nccl") -> float:
    """Bytes each rank sends in a ring collective whose full tensor has ``n_bytes``.

    An all-gather or a reduce-scatter sends (N-1)/N of the tensor, an all-reduce (a
    reduce-scatter then an all-gather) twice that. gloo's ``reduce_scatter_tensor`` is an
    all-reduce of the whole tensor of which each rank keeps its chunk (ProcessGroupGloo.cpp), so
    with ``backend="gloo"`` a reduce-scatter sends what an all-reduce does.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    halves = {"all-gather": 1, "reduce-scatter": 2 if backend == "gloo" else 1, "all-reduce": 2}
    if kind not in halves:
        raise ValueError(f"kind must be one of {sorted(halves)}, got {kind!r}.")
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size < 1:
        raise ValueError(f"group_size must be a whole number >= 1, got {group_size!r}.")
    return halves[kind] / 2 * cost_model.ring_allreduce_bytes(n_bytes, group_size)


def step_ring_sent(volume: dict[str, int], group_size: int, backend: str = "nccl") -> float:
    """Bytes each rank sends in a step whose collectives moved ``volume`` (the ZeRO paper's count).

    ``volume`` counts an all-reduce of B bytes as 2B (``collectives.volume``); its ring sends
    2B (N-1)/N, as :func:`ring_sent` of a B-byte all-reduce.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    paper_factor = {"all-gather": 1, "reduce-scatter": 1, "all-reduce": 2}
    return sum(ring_sent(kind, n / paper_factor[kind], group_size, backend)
               for kind, n in volume.items())


class AllGatherClock:
    """Seconds the training thread spends in FSDP's ``unshard`` and ``wait_for_unshard``.

    Issuing an all-gather, waiting for it and copying it out: the all-gather time that compute
    does not hide. Split by phase: from the root's forward pre-hook to its forward hook is
    ``forward``, the rest of the step ``backward``. It also counts the all-gathers started in
    forward (``gathers``) and those started *ahead*, before their unit's forward began
    (``ahead``: prefetched). (FSDP2's private ``FSDPParamGroup`` is wrapped while the clock runs:
    torch 2.6 to 2.13 have both methods.) ``units`` are the FSDP modules in forward order.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    def __init__(self, model: torch.nn.Module, units: list[torch.nn.Module]) -> None:
        self.seconds = self._zero()
        self.phase, self.current = "backward", None
        self._saved: dict[str, Any] = {}
        model.register_forward_pre_hook(lambda *_: self._enter("forward"), prepend=True)
        model.register_forward_hook(lambda *_: self._enter("backward"))
        for unit in units:  # runs before FSDP's own pre-forward of the unit
            unit.register_forward_pre_hook(functools.partial(self._entering, unit),
                                           prepend=True)

    @staticmethod
    def _zero() -> dict[str, float]:
        return {"forward": 0.0, "backward": 0.0, "gathers": 0, "ahead": 0}

    def _enter(self, phase: str) -> None:
        self.phase = phase

    def _entering(self, unit: torch.nn.Module, *_: object) -> None:
        self.current = unit

    def take(self) -> dict[str, float]:
        """The seconds and counts so far, and start again from zero."""
        taken, self.seconds = self.seconds, self._zero()
        return taken

    def _timed(self, function: Any) -> Any:
        @functools.wraps(function)
        def timed(group: Any, *args: Any, **kwargs: Any) -> Any:
            idle = getattr(group, "_all_gather_result", None) is None
            start = time.perf_counter()
            try:
                return function(group, *args, **kwargs)
            finally:
                self.seconds[self.phase] += time.perf_counter() - start
                started = idle and getattr(group, "_all_gather_result", None) is not None
                if function.__name__ == "unshard" and self.phase == "forward" and started:
                    self.seconds["gathers"] += 1
                    mine = any(m is self.current for m in getattr(group, "modules", ()))
                    self.seconds["ahead"] += 0 if mine else 1

        return timed

    def __enter__(self) -> AllGatherClock:
        from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

        self._class = FSDPParamGroup
        for name in ("unshard", "wait_for_unshard"):
            self._saved[name] = getattr(FSDPParamGroup, name)
            setattr(FSDPParamGroup, name, self._timed(self._saved[name]))
        return self

    def __exit__(self, *exc: object) -> None:
        for name, function in self._saved.items():
            setattr(self._class, name, function)
        self._saved.clear()
