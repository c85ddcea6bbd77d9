"""This machine's profile: peak FP32 matmul FLOP/s, memory bandwidth and the gloo all-reduce link.

Chapter 10 (*Hardware for LLM training*) measures the machine part by part; chapters 8 and 9
predict their own runs from three of those numbers, so that a learner's predictions use the
learner's machine. :func:`machine_profile` returns them as a :class:`MachineProfile`, measured
once (about 5 seconds) and cached as JSON in the course cache
(:func:`course_lib.base.env.cache_dir`, file ``machine_profile.json``)::

    from course_lib.hardware.profile import machine_profile

    prof = machine_profile()          # cached; machine_profile(refresh=True) measures again
    prof.matmul_flops                 # FP32 FLOP/s of a square matrix product, all torch threads
    prof.memory_bandwidth             # bytes/s, STREAM triad over 256 MiB, all torch threads
    prof.allreduce_alpha              # seconds per ring step, gloo, 2 ranks on this machine
    prof.allreduce_beta               # bytes/s per direction, the same fit
    prof.link()                       # the same alpha and beta as a cost_model.Link
    prof.threads, prof.cpu, prof.torch_version, prof.measured_at

What is measured, and how:

* ``matmul_flops``: the fastest of 3 interleaved runs of 512 x 512 and 1024 x 1024 FP32
  products (:func:`course_lib.hardware.matmul.matmul_benchmark`), ``2 n**3`` FLOPs each, at
  torch's thread count.
* ``memory_bandwidth``: STREAM's triad ``a = b + s c`` over a 256 MiB working set with every
  torch thread (:func:`course_lib.hardware.stream.measure_bandwidth`, ``threads=None``), the
  fastest of 3 runs, by STREAM's byte count.
* ``allreduce_alpha`` / ``allreduce_beta``: 2 gloo ranks started by chapter 8's launcher
  all-reduce messages of 4 KiB to 16 MiB, 3 interleaved runs each
  (:func:`course_lib.hardware.allreduce_bench.measure_allreduce`); the ring model
  ``t = 2 (N - 1) alpha + 2 (N - 1) / N * S / beta`` is fitted to the fastest runs by relative
  least squares (:func:`course_lib.parallel.cost_model.fit_alpha_beta`).

The cache is keyed by the CPU's name, torch's thread count and torch's version: when any of them
differs from the cached profile's (another machine, ``torch.set_num_threads``, a new torch), the
profile is measured again and the file rewritten. A cache file that cannot be read (truncated,
hand-edited, an older layout) is measured again too, with a warning that names the file. The
file is written atomically, so notebooks that run at the same time never read half of it.
Call it from a notebook or a script, not from inside a launched rank: measuring starts ranks.
On a busy machine the figures come out low; ``refresh=True`` measures again.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch

from course_lib.base.env import cache_dir
from course_lib.base.tables import Table
from course_lib.hardware import allreduce_bench, matmul, stream
from course_lib.parallel.cost_model import Link

__all__ = ["PROFILE_FILE", "MachineProfile", "load_profile", "machine_profile", "measure_profile",
           "profile_key", "profile_path", "profile_table", "save_profile"]

#: The cache file's name inside :func:`course_lib.base.env.cache_dir`.
PROFILE_FILE = "machine_profile.json"
#: Layout of the JSON file; a file of another layout is measured again.
_LAYOUT = 1
_MATMUL_SIZES = (512, 1024)
_STREAM_BYTES = 256 * 2**20
_RANKS = 2


@dataclass(frozen=True)
class MachineProfile:
    """This machine's measured FP32 matmul FLOP/s, memory bandwidth and gloo all-reduce alpha and beta.

    ``matmul_flops`` FLOP/s and ``memory_bandwidth`` bytes/s with ``threads`` torch threads;
    ``allreduce_alpha`` seconds per ring step and ``allreduce_beta`` bytes/s of ``ranks`` gloo
    processes; ``cpu``, ``threads`` and ``torch_version`` key the cache; ``measured_at`` is a UTC
    time stamp and ``seconds`` how long measuring took.

    Chapter 10, *Hardware for LLM training*.
    """

    cpu: str
    threads: int
    torch_version: str
    matmul_flops: float
    memory_bandwidth: float
    allreduce_alpha: float
    allreduce_beta: float
    ranks: int = _RANKS
    backend: str = "gloo"
    measured_at: str = ""
    seconds: float = 0.0

    def __post_init__(self) -> None:
        for name in ("matmul_flops", "memory_bandwidth", "allreduce_beta"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        alpha = self.allreduce_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) \
                or not math.isfinite(alpha) or alpha < 0:
            raise ValueError(f"allreduce_alpha must be seconds >= 0, got {alpha!r}")
        if isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1:
            raise ValueError(f"threads must be a whole number >= 1, got {self.threads!r}")
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 2:
            raise ValueError(f"ranks must be a whole number >= 2, got {self.ranks!r}")

    @property
    def key(self) -> dict[str, Any]:
        """What the cache is keyed by: the CPU's name, torch's threads, torch's version."""
        return {"cpu": self.cpu, "threads": self.threads, "torch_version": self.torch_version}

    @property
    def ridge(self) -> float:
        """The roofline's ridge point of this machine in FP32, FLOP per byte."""
        return self.matmul_flops / self.memory_bandwidth

    def link(self, name: str | None = None) -> Link:
        """The measured all-reduce link as a :class:`course_lib.parallel.cost_model.Link`."""
        name = name or f"this machine ({self.backend}, {self.ranks} processes)"
        note = (f"Measured on {self.cpu} ({self.measured_at}): ring model fitted to {self.backend} "
                f"all-reduces over {self.ranks} processes.")
        return Link(name, bandwidth=self.allreduce_beta, latency=self.allreduce_alpha,
                    source="", note=note)

    def to_dict(self) -> dict[str, Any]:
        """The profile as a JSON-ready dict, with the file layout's version."""
        return {"layout": _LAYOUT, **asdict(self)}

    @classmethod
    def from_dict(cls, data: Any) -> MachineProfile:
        """A profile from :meth:`to_dict`'s dict; a ValueError that names what is wrong otherwise."""
        if not isinstance(data, dict):
            raise ValueError(f"a machine profile is a JSON object, got {type(data).__name__}")
        if data.get("layout") != _LAYOUT:
            raise ValueError(f"layout {data.get('layout')!r}, this course writes layout {_LAYOUT}")
        names = {f.name for f in fields(cls)}
        missing = sorted(n for n in ("cpu", "threads", "torch_version", "matmul_flops",
                                     "memory_bandwidth", "allreduce_alpha", "allreduce_beta")
                         if n not in data)
        if missing:
            raise ValueError(f"missing fields: {', '.join(missing)}")
        try:
            return cls(**{k: v for k, v in data.items() if k in names})
        except TypeError as err:
            raise ValueError(str(err)) from None


def profile_key() -> dict[str, Any]:
    """The cache key of the machine as it is now: CPU name, torch's threads, torch's version.

    Chapter 10, *Hardware for LLM training*.
    """
    return {"cpu": matmul.cpu_name(), "threads": torch.get_num_threads(),
            "torch_version": torch.__version__}


def profile_path() -> Path:
    """Where the profile is cached: ``machine_profile.json`` in the course cache.

    Chapter 10, *Hardware for LLM training*.
    """
    return cache_dir() / PROFILE_FILE


def measure_profile(timeout: float = 120.0) -> MachineProfile:
    """Measure this machine now (about 5 seconds): FP32 matmul peak, triad bandwidth, gloo alpha and beta.

    Nothing is cached here (:func:`machine_profile` does). ``timeout`` bounds the all-reduce ranks.

    Chapter 10, *Hardware for LLM training*.
    """
    start = time.perf_counter()
    key = profile_key()
    products = matmul.matmul_benchmark(sizes=_MATMUL_SIZES, dtypes=("fp32",), repeats=3)
    flops = matmul.peak_result(products, "fp32").gflops * 1e9
    triad = stream.measure_bandwidth("triad", working_sets=(_STREAM_BYTES,), repeats=3,
                                     threads=None)
    bandwidth = max(r.gb_per_s for r in triad) * 1e9
    # Fastest of 15: on a busy 2-core machine many gloo calls wait milliseconds for a rank.
    sweep = allreduce_bench.measure_allreduce(nprocs=_RANKS, repeats=15, backend="gloo",
                                              timeout=timeout)
    link = sweep.fit()
    return MachineProfile(
        cpu=key["cpu"], threads=key["threads"], torch_version=key["torch_version"],
        matmul_flops=flops, memory_bandwidth=bandwidth, allreduce_alpha=link.latency,
        allreduce_beta=link.bandwidth, ranks=_RANKS, backend=sweep.backend,
        measured_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        seconds=time.perf_counter() - start)


def save_profile(profile: MachineProfile, path: str | Path | None = None) -> Path:
    """Write ``profile`` as JSON to ``path`` (default :func:`profile_path`) atomically; return the path.

    Chapter 10, *Hardware for LLM training*.
    """
    if not isinstance(profile, MachineProfile):
        raise ValueError(f"save_profile() needs a MachineProfile (from measure_profile()), "
                         f"got {type(profile).__name__}")
    path = Path(path) if path is not None else profile_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".machine_profile.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(profile.to_dict(), f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_profile(path: str | Path | None = None) -> MachineProfile | None:
    """The cached profile at ``path`` (default :func:`profile_path`); None when there is no file.

    A file that is not a profile raises a ValueError that names the file and says to delete it
    or call ``machine_profile(refresh=True)``.

    Chapter 10, *Hardware for LLM training*.
    """
    path = Path(path) if path is not None else profile_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        return MachineProfile.from_dict(json.loads(text))
    except ValueError as err:  # json.JSONDecodeError is a ValueError too
        raise ValueError(f"the machine profile {path} cannot be read ({err}); delete the file, "
                         "or call machine_profile(refresh=True) to measure again") from None


def machine_profile(refresh: bool = False, path: str | Path | None = None) -> MachineProfile:
    """This machine's profile: from the cache when its key matches the machine, else measured and cached.

    ``refresh=True`` always measures (about 5 seconds) and rewrites the cache. A cache of another
    CPU, thread count or torch version is measured again; an unreadable one too, with a warning.
    ``path`` overrides the cache file (default :func:`profile_path`).

    Chapter 10, *Hardware for LLM training*.
    """
    if refresh not in (True, False):
        raise ValueError(f"refresh must be True or False, got {refresh!r}")
    path = Path(path) if path is not None else profile_path()
    if not refresh:
        try:
            cached = load_profile(path)
        except ValueError as err:
            warnings.warn(f"{err}; measuring again", stacklevel=2)
            cached = None
        if cached is not None and cached.key == profile_key():
            return cached
    profile = measure_profile()
    try:
        save_profile(profile, path)
    except OSError as err:
        warnings.warn(f"the machine profile could not be cached at {path} ({err}); it will be "
                      "measured again next time. Set COURSE_LIB_CACHE to a writable folder.",
                      stacklevel=2)
    return profile


def profile_table(profile: MachineProfile) -> Table:
    """The profile as a table: each figure, its value, and how it was measured.

    Chapter 10, *Hardware for LLM training*.
    """
    if not isinstance(profile, MachineProfile):
        raise ValueError(f"profile_table() needs a MachineProfile (from machine_profile()), "
                         f"got {type(profile).__name__}")
    p = profile
    rows = [
        ["matmul_flops", f"{p.matmul_flops / 1e9:,.1f} GFLOP/s",
         f"FP32 square products ({' and '.join(map(str, _MATMUL_SIZES))}), {p.threads} threads"],
        ["memory_bandwidth", f"{p.memory_bandwidth / 1e9:,.1f} GB/s",
         f"STREAM triad, {stream.bytes_label(_STREAM_BYTES)}, {p.threads} threads"],
        ["allreduce_alpha", f"{p.allreduce_alpha * 1e6:,.1f} us",
         f"ring model fitted to {p.backend} all-reduces, {p.ranks} processes"],
        ["allreduce_beta", f"{p.allreduce_beta / 1e9:,.2f} GB/s", "the same fit"],
    ]
    title = (f"machine profile: {p.cpu}, {p.threads} torch threads, torch {p.torch_version}, "
             f"measured {p.measured_at} in {p.seconds:.1f} s")
    return Table(["figure", "value", "how"], rows, title=title)
