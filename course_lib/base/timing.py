"""The course's one timing harness: runs timed with the device synchronised, interleaved across cases.

Chapter 3 (*Number formats*) times matrix products with it, chapter 6 sparse products, and
chapter 10 (*Hardware for LLM training*) every measurement of the machine: the fastest of several
runs is the one least disturbed by other work, and interleaving the runs across the cases makes a
burst of other work slow one run of every case rather than every run of one case.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import Any, Callable, Sequence

import torch

from course_lib.base.checks import positive

__all__ = ["TimedRuns", "calls_per_run", "check_device", "check_min_seconds", "interleaved_times", "sync",
           "timed"]


def check_device(device: str | torch.device | None) -> torch.device:
    """The torch device to time on: ``"cpu"``, ``"cuda"``, a device, or None for the GPU when there is one.

    Used by the library's other modules.
    """
    from course_lib.base.env import get_device

    if device is not None and not isinstance(device, (str, torch.device)):
        raise ValueError(f"device must be 'cpu', 'cuda', a torch.device or None, got {device!r}")
    try:
        return get_device(None if device is None else str(device))
    except RuntimeError as err:  # torch's own message for a malformed device string
        raise ValueError(f"unknown device {device!r}: {err}; use 'cpu' or 'cuda'") from None


class TimedRuns:
    """The seconds of every timed run of one measurement (``times``), and its fastest and median run.

    Every measurement of the course shares it (matrix products, memory bandwidth, disk reads, the
    input pipeline): the fastest run is the one least disturbed by other work on the machine, the
    median says how noisy the runs were.

    Used by the library's other modules.
    """

    times: tuple[float, ...]

    @property
    def repeats(self) -> int:
        """How many runs were timed."""
        return len(self.times)

    @property
    def seconds(self) -> float:
        """Seconds of the fastest run (the one least disturbed by other work)."""
        return min(self.times)

    @property
    def median_seconds(self) -> float:
        """Seconds of the median run."""
        return statistics.median(self.times)

    @property
    def spread(self) -> float:
        """How much slower the median run was than the fastest: 0.05 means 5%."""
        return self.median_seconds / self.seconds - 1


def sync(device: torch.device) -> None:
    """Wait until the device has finished its queued work (a no-op on the CPU).

    Used by the library's other modules.
    """
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_min_seconds(min_seconds: Any) -> float:
    """``min_seconds`` as a float, or a clear error unless it is a number >= 0.

    Used by the library's other modules.
    """
    if isinstance(min_seconds, bool) or not isinstance(min_seconds, (int, float)) or not min_seconds >= 0:
        raise ValueError(f"min_seconds must be a number >= 0, got {min_seconds!r}")
    return float(min_seconds)


def interleaved_times(
    calls: Sequence[Callable[[], object]],
    repeats: int,
    device: str | torch.device | None = None,
    number: Sequence[int] | None = None,
    progress: bool = False,
    desc: str = "",
) -> list[list[float]]:
    """Seconds per call of every callable in each of ``repeats`` runs, interleaved across the callables.

    Round 1 times every callable once, then round 2, and so on: a burst of other work on the machine
    slows one run of every case rather than all runs of one case, so the best run of each case,
    and the ratios between cases, stay stable. A run of callable ``i`` makes ``number[i]`` calls
    back to back (default 1), the device synchronised before and after, and records the seconds
    divided by ``number[i]``. ``device`` is the one synchronised (None: CUDA when present, else CPU).
    There is no warm-up here: call each callable once before.

    Used by the library's other modules.
    """
    dev = check_device(device)
    repeats = positive(repeats, "repeats", integer=True)
    if callable(calls) or not calls or not all(callable(c) for c in calls):
        raise ValueError(f"calls must be a non-empty list of functions without arguments, got {calls!r}")
    numbers = [1] * len(calls) if number is None else [positive(n, "number", integer=True) for n in number]
    if len(numbers) != len(calls):
        raise ValueError(f"number needs one count per call: {len(calls)} calls, {len(numbers)} counts")
    from course_lib.base.env import progress_bar

    times: list[list[float]] = [[] for _ in calls]
    rounds = [i for _ in range(repeats) for i in range(len(calls))]
    for i in progress_bar(rounds, len(rounds), desc, progress):
        times[i].append(timed(calls[i], dev, numbers[i]) / numbers[i])
    return times


def calls_per_run(call: Callable[[], object], device: str | torch.device | None = None,
                  min_seconds: float = 0.05, cap: int = 10_000) -> int:
    """How many calls back to back make a run of about ``min_seconds`` (1 to ``cap``).

    The first call is a warm-up (it picks kernels and touches memory); the faster of the next two
    timed calls sets the count.

    Used by the library's other modules.
    """
    dev = check_device(device)
    call()
    one = min(timed(call, dev, 1), timed(call, dev, 1))
    return max(1, min(cap, math.ceil(check_min_seconds(min_seconds) / max(one, 1e-9))))


def timed(call: Callable[[], object], dev: torch.device, number: int) -> float:
    """Seconds for ``number`` calls back to back, the device synchronised before and after.

    Used by the library's other modules.
    """
    sync(dev)
    start = time.perf_counter()
    for _ in range(number):
        call()
    sync(dev)
    return time.perf_counter() - start
