"""The network, measured: all-reduce time and bandwidth against message size; also a script.

Chapter 10 (*Hardware for LLM training*) measures the link that chapter 8's cost model
(:mod:`course_lib.parallel.cost_model`) predicts from. :func:`allreduce_sweep` runs on every
rank: for each message size it all-reduces a tensor of that many bytes on the rank's device (CPU
with gloo, the rank's GPU with NCCL) a few times untimed, then times ``repeats`` calls, each
after a barrier, the device synchronised around the clock. The runs are interleaved across the
sizes (round 1 times every size once, then round 2, ...), so that other work on the machine
slows every size alike, and each call counts the time of its slowest rank; it returns an
:class:`AllReduceSweep`. :func:`measure_allreduce` starts the ranks with chapter 8's launcher and
returns rank 0's.

Bandwidth, as NVIDIA's nccl-tests report it (its doc/PERFORMANCE.md). The *algorithm bandwidth*
is ``algbw = S / t`` for a message of ``S`` bytes all-reduced in ``t`` seconds. A ring all-reduce
makes each rank send ``2 (N - 1) / N * S`` bytes, so the *bus bandwidth*
``busbw = algbw * 2 (N - 1) / N`` is what each link carried per second: it does not depend on
the number of ranks, and is the figure to set against the link's peak. Small messages are
latency-bound (flat time, tiny bandwidth), large ones bandwidth-bound (time grows with ``S``):
:meth:`AllReduceSweep.fit` fits the cost model's alpha (latency) and beta (bandwidth) to the
sweep (:func:`course_lib.parallel.cost_model.fit_alpha_beta`).

The same worker runs under torchrun, on GPUs (NCCL) or CPUs (gloo) alike; without torchrun the
script starts its own ranks::

    torchrun --nproc-per-node=8 -m course_lib.hardware.allreduce_bench
    python -m course_lib.hardware.allreduce_bench --nprocs 2 --sizes 4096 1048576

A bad flag is refused before any rank starts, once (by rank 0 under torchrun), naming the flag.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from course_lib.base import dtypes
from course_lib.base.checks import choice, positive
from course_lib.base.tables import Table
from course_lib.base.timing import sync
from course_lib.hardware.stream import bytes_label
from course_lib.parallel import cost_model, launch
from course_lib.parallel.cost_model import Link

__all__ = ["AllReduceSweep", "allreduce_sweep", "main", "measure_allreduce", "sweep_table",
           "time_allreduce"]

#: The element types a sweep can all-reduce.
_DTYPES: tuple[str, ...] = ("fp32", "fp16", "bf16")
_TARGET = "course_lib.hardware.allreduce_bench:allreduce_sweep"  # also when run as __main__


def _default_sizes(backend: str) -> list[int]:
    """Message sizes in bytes, powers of 4 from 4 KiB to 16 MiB (gloo, CPUs) or 256 MiB (NCCL)."""
    backend = choice(backend, ("gloo", "nccl"), "backend")
    top = 16 * 2**20 if backend == "gloo" else 256 * 2**20
    sizes, size = [], 4 * 2**10
    while size <= top:
        sizes.append(size)
        size *= 4
    return sizes


def _dtype(name: Any) -> torch.dtype:
    return dtypes.torch_dtype(choice(name, _DTYPES, "dtype"), _DTYPES)


def _check_sizes(sizes: Any, dtype: torch.dtype) -> list[int]:
    if isinstance(sizes, (str, bytes, int)) or not isinstance(sizes, Sequence) or not sizes:
        raise ValueError(f"sizes must be a non-empty list of message sizes in bytes "
                         f"(e.g. [4096, 1048576]), got {sizes!r}")
    item = dtype.itemsize
    out = []
    for size in sizes:
        positive(size, "every size (bytes)", integer=True)
        if size % item:
            raise ValueError(f"size {size} is not a whole number of {item}-byte elements; use "
                             f"a multiple of {item} bytes (e.g. {max(item, size - size % item)})")
        out.append(int(size))
    return out


def _check_warmup(warmup: Any) -> int:
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be a whole number >= 0 (untimed calls per size), "
                         f"got {warmup!r}")
    return warmup


def _barrier(worker: launch.Worker) -> None:
    if worker.device.type == "cuda":
        dist.barrier(device_ids=[worker.device.index])
    else:
        dist.barrier()
    sync(worker.device)


@dataclass(frozen=True)
class AllReduceSweep:
    """All-reduce times against message size: sizes in bytes, every run's seconds, the group.

    ``times[i]`` holds the seconds of each timed run of message ``sizes[i]``. Bandwidths are in
    GB/s (10**9 bytes per second), as nccl-tests reports them. Every rank's
    :func:`allreduce_sweep` returns one, which the launcher sends back pickled.

    Chapter 10, *Hardware for LLM training*.
    """

    sizes: tuple[int, ...]
    times: tuple[tuple[float, ...], ...]
    world_size: int
    backend: str
    dtype: str = "fp32"

    def __post_init__(self) -> None:
        if not self.sizes or len(self.sizes) != len(self.times) or not all(self.times):
            raise ValueError(f"an AllReduceSweep needs one non-empty list of times per size: "
                             f"{len(self.sizes)} sizes, {len(self.times)} lists of times")
        positive(self.world_size, "world_size", integer=True)

    @property
    def repeats(self) -> int:
        """Timed runs per size (the fewest, should they differ)."""
        return min(len(t) for t in self.times)

    @property
    def seconds(self) -> tuple[float, ...]:
        """Seconds of the fastest run of each size (the one least disturbed by other work)."""
        return tuple(min(t) for t in self.times)

    @property
    def median_seconds(self) -> tuple[float, ...]:
        """Seconds of the median run of each size."""
        return tuple(statistics.median(t) for t in self.times)

    @property
    def bus_factor(self) -> float:
        """``2 (N - 1) / N``: bus bandwidth over algorithm bandwidth for this world size (nccl-tests)."""
        return 2 * (self.world_size - 1) / self.world_size

    @property
    def algbw(self) -> tuple[float, ...]:
        """Algorithm bandwidth of the fastest run of each size, GB/s: ``size / seconds / 1e9``."""
        return tuple(s / t / 1e9 for s, t in zip(self.sizes, self.seconds))

    @property
    def busbw(self) -> tuple[float, ...]:
        """Bus bandwidth of the fastest run of each size, GB/s: ``algbw * 2 (N - 1) / N``."""
        return tuple(b * self.bus_factor for b in self.algbw)

    @property
    def median_busbw(self) -> tuple[float, ...]:
        """Bus bandwidth of the median run of each size, GB/s."""
        return tuple(s / t / 1e9 * self.bus_factor for s, t in zip(self.sizes, self.median_seconds))

    def fit(self, name: str | None = None, relative: bool = True) -> Link:
        """The cost model's link fitted to the fastest runs (:func:`cost_model.fit_alpha_beta`)."""
        name = name or f"measured ({self.backend}, {self.world_size} ranks)"
        return cost_model.fit_alpha_beta(self.sizes, self.seconds, self.world_size,
                                         relative=relative, name=name)


def _arguments(sizes: Any, repeats: Any, warmup: Any,
               dtype: Any) -> tuple[list[int] | None, int, int, torch.dtype]:
    """A sweep's arguments checked: sizes (None kept: the backend's default), repeats, warmup,
    and the torch dtype of ``dtype``."""
    torch_dtype = _dtype(dtype)
    repeats = positive(repeats, "repeats", integer=True)
    warmup = _check_warmup(warmup)
    return (None if sizes is None else _check_sizes(sizes, torch_dtype)), repeats, warmup, \
        torch_dtype


def allreduce_sweep(sizes: list[int] | None = None, repeats: int = 5, warmup: int = 2,
                    dtype: str = "fp32") -> AllReduceSweep:
    """Worker: time ``repeats`` all-reduces of every message size (bytes), interleaved; return them.

    Runs on every rank: checks its arguments, joins the process group, runs
    :func:`time_allreduce`'s sweep, and leaves. ``sizes`` None: powers of 4 from 4 KiB to
    16 MiB (gloo) or 256 MiB (NCCL).

    Chapter 10, *Hardware for LLM training*.
    """
    checked = _arguments(sizes, repeats, warmup, dtype)  # refused before joining a group
    worker = launch.init_worker()
    try:
        return _sweep(worker, *checked, dtype)
    finally:
        launch.shutdown()


def time_allreduce(worker: launch.Worker, sizes: list[int] | None = None, repeats: int = 5,
                   warmup: int = 2, dtype: str = "fp32") -> AllReduceSweep:
    """The sweep of :func:`allreduce_sweep`, in a process group this rank has joined already.

    For each size a tensor of that many bytes of ``dtype`` lives on the rank's device; ``warmup``
    untimed calls per size come first. Each timed call follows a barrier, and the device is
    synchronised before and after it; each call's time is the largest over the ranks (the
    all-reduce is done when the last rank is), the same on every rank. A worker that has just
    trained calls this to measure the link under the same conditions as its run.

    Chapter 10, *Hardware for LLM training*.
    """
    return _sweep(worker, *_arguments(sizes, repeats, warmup, dtype), dtype)


def _sweep(worker: launch.Worker, sizes: list[int] | None, repeats: int, warmup: int,
           torch_dtype: torch.dtype, dtype: str) -> AllReduceSweep:
    device = worker.device
    sizes = _default_sizes(worker.backend) if sizes is None else sizes
    tensors = [torch.zeros(s // torch_dtype.itemsize, dtype=torch_dtype, device=device)
               for s in sizes]  # zeros: the sums stay zero, however many calls
    for x in tensors:
        for _ in range(warmup):
            dist.all_reduce(x)
    sync(device)
    times: list[list[float]] = [[] for _ in sizes]
    for _ in range(repeats):
        for i, x in enumerate(tensors):
            _barrier(worker)
            start = time.perf_counter()
            dist.all_reduce(x)
            sync(device)
            times[i].append(time.perf_counter() - start)
    slowest = torch.tensor(times, dtype=torch.float64, device=device)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
    return AllReduceSweep(tuple(sizes), tuple(map(tuple, slowest.cpu().tolist())),
                          worker.world_size, worker.backend, dtype.strip().lower())


def measure_allreduce(sizes: Sequence[int] | None = None, nprocs: int = 2, repeats: int = 5,
                      timeout: float = 120.0, backend: str = "auto", dtype: str = "fp32",
                      warmup: int = 2, echo: bool = False) -> AllReduceSweep:
    """Start ``nprocs`` ranks with chapter 8's launcher and sweep all-reduce over message sizes.

    Every rank runs :func:`allreduce_sweep`; ``backend`` "auto" picks NCCL when there is a GPU
    per rank, else gloo (:func:`course_lib.parallel.launch.resolve_backend`), and ``sizes``
    None powers of 4 from 4 KiB to 16 MiB (gloo) or 256 MiB (NCCL).
    ``echo`` shows the ranks' output as it comes (a failing rank's last lines are in the error
    anyway). Starting the processes costs a few seconds, not counted in the times.

    Chapter 10, *Hardware for LLM training*.
    """
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 2:
        raise ValueError(f"an all-reduce needs at least 2 ranks: nprocs must be a whole number "
                         f">= 2 (e.g. 2), got {nprocs!r}")
    sizes, repeats, warmup, _ = _arguments(sizes, repeats, warmup, dtype)
    chosen = launch.resolve_backend(backend, nprocs)
    sizes = _default_sizes(chosen) if sizes is None else sizes
    kwargs = {"sizes": sizes, "repeats": repeats, "warmup": warmup, "dtype": dtype}
    results = launch.launch(_TARGET, nprocs, kwargs, backend=chosen, timeout=timeout, echo=echo)
    return results[0]


def _number(x: float) -> str:
    """Three significant digits without an exponent: 0.0123, 1.23, 123, 12,345."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    digits = max(0, 2 - math.floor(math.log10(abs(x))))
    return f"{x:,.{digits}f}"


def sweep_table(sweep: AllReduceSweep, link: Link | None = None) -> Table:
    """Per message size: ms of the fastest and median run, algbw and busbw in GB/s; the model's ms.

    With ``link`` (e.g. ``sweep.fit()``, or a link of :data:`cost_model.LINKS`), a last column
    gives the time the ring model predicts (:func:`cost_model.ring_allreduce_time`).

    Chapter 10, *Hardware for LLM training*.
    """
    if not isinstance(sweep, AllReduceSweep):
        raise ValueError(f"sweep_table() needs an AllReduceSweep (from measure_allreduce()), "
                         f"got {type(sweep).__name__}")
    headers = ["message", "fastest ms", "median ms", "algbw GB/s", "busbw GB/s"]
    if link is not None:
        headers.append("model ms")
    rows = []
    for i, size in enumerate(sweep.sizes):
        row = [bytes_label(size), _number(sweep.seconds[i] * 1e3),
               _number(sweep.median_seconds[i] * 1e3), _number(sweep.algbw[i]),
               _number(sweep.busbw[i])]
        if link is not None:
            row.append(_number(cost_model.ring_allreduce_time(size, sweep.world_size, link) * 1e3))
        rows.append(row)
    title = (f"All-reduce of {sweep.dtype} over {sweep.world_size} ranks ({sweep.backend}), "
             f"fastest and median of {sweep.repeats} interleaved runs; "
             f"busbw = algbw x 2(N-1)/N = algbw x {sweep.bus_factor:.3g}")
    if link is not None:
        title += (f"; model: {link.name}, alpha {link.latency * 1e6:.3g} us, "
                  f"beta {link.bandwidth / 1e9:.3g} GB/s")
    return Table(headers, rows, title=title)


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse flags that are fine alone and wrong together, naming them as typed."""
    item = _dtype(args.dtype).itemsize
    for size in args.sizes or ():
        if size % item:
            nearest = size - size % item or item
            raise ValueError(f"--sizes {size} is not a whole number of {item}-byte {args.dtype} "
                             f"elements; use a multiple of {item} (e.g. {nearest}).")
    if "RANK" in os.environ:  # under torchrun, which chose the ranks and the backend
        return
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if args.backend == "nccl" and gpus < args.nprocs:
        raise ValueError(f"--backend nccl runs one rank per GPU: --nprocs {args.nprocs} asked for, "
                         f"{gpus} GPU(s) here; use --backend gloo (CPU processes) or auto"
                         + (f", or --nprocs {gpus} or fewer." if gpus >= 2 else "."))
    try:
        launch.check_world_size(args.nprocs, launch.resolve_backend(args.backend, args.nprocs))
    except (ValueError, launch.LaunchError) as err:
        raise ValueError(f"--nprocs {args.nprocs}: {err}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """The script: under torchrun every rank sweeps and rank 0 prints; alone, it starts its ranks.

    Chapter 10, *Hardware for LLM training*.
    """
    parser = launch.RankArgumentParser(
        prog="python -m course_lib.hardware.allreduce_bench",
        description="All-reduce time and bandwidth against message size (gloo or NCCL); under "
                    "torchrun --nproc-per-node=N -m ... it runs on torchrun's ranks.")
    parser.add_argument("--sizes", type=launch.whole_number(1), nargs="+", default=None,
                        help="message sizes in bytes (default: powers of 4 from 4 KiB)")
    parser.add_argument("--repeats", type=launch.whole_number(1), default=5)
    parser.add_argument("--warmup", type=launch.whole_number(0), default=2)
    parser.add_argument("--dtype", default="fp32", choices=list(_DTYPES))
    parser.add_argument("--nprocs", type=launch.whole_number(2), default=2,
                        help="ranks to start, at least 2 (not under torchrun)")
    parser.add_argument("--backend", default="auto", choices=["auto", "gloo", "nccl"],
                        help="not under torchrun, where the backend follows the device")
    args = parser.parse_args(argv)
    try:
        _check_flags(args)
    except ValueError as err:
        parser.error(str(err))
    if "RANK" in os.environ:  # started by torchrun: this process is one rank
        sweep = allreduce_sweep(args.sizes, args.repeats, args.warmup, args.dtype)
        if int(os.environ["RANK"]) != 0:
            return 0
    else:
        sweep = measure_allreduce(args.sizes, args.nprocs, args.repeats, backend=args.backend,
                                  dtype=args.dtype, warmup=args.warmup)
    link = None
    if sweep.world_size >= 2:
        try:
            link = sweep.fit()
        except ValueError as err:
            print(f"no alpha-beta fit: {err}")
    print(sweep_table(sweep, link), flush=True)
    return 0


if __name__ == "__main__":
    # Run the imported module's main, so that this process and the ranks share one AllReduceSweep.
    import importlib

    raise SystemExit(importlib.import_module("course_lib.hardware.allreduce_bench").main())
