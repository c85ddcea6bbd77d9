"""Micro-benchmarks of the machine at hand: how fast it multiplies matrices in each precision.

The same code times the CPU and, when there is one, a CUDA GPU: :func:`matmul_benchmark` multiplies
two seeded ``size x size`` matrices of each dtype, synchronising the device around the clock, and
times every case several times, the runs interleaved across the cases so that other work on the
machine slows every case alike; tables report the fastest run (the one least disturbed) and how
much slower the median run was. A product of
two n x n matrices takes ``2 n**3`` floating-point operations (a multiply and an add for each of
n**3 terms), so the throughput is ``2 n**3 / seconds``.

Low precision is fast only where the hardware has units for it: NVIDIA tensor cores (FP16, BF16
since Ampere, FP8 since Hopper), and on CPUs Intel AMX or AVX-512 BF16 / FP16, or Arm's BF16
instructions. Elsewhere torch converts to FP32 and back, and 16-bit products can be *slower*
than FP32. :func:`describe_machine` lists which of these units the CPU announces. INT8 products
(int8 times int8, summed in int32) go through ``torch._int_mm``, the kernel that torch's own
INT8 quantization uses, and count integer operations; :func:`int8_supported` says whether the
device has it. Chapter 10 (*Hardware for LLM training*) measures the peaks of this module's
benchmark and places them on a roofline, next to products of any shape (:func:`time_products`)
that sit at the arithmetic intensity of one of the roofline's operations.
"""

from __future__ import annotations

import functools
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from course_lib.base import dtypes
from course_lib.base.checks import choice, positive
from course_lib.base.tables import Table
from course_lib.base.timing import TimedRuns, calls_per_run, check_device, check_min_seconds, interleaved_times
from course_lib.hardware.roofline import Operation, matmul_operation

__all__ = [
    "MatmulResult", "ProductResult", "available_devices", "cpu_name", "describe_machine", "int8_supported",
    "matmul_benchmark", "matmul_table", "peak_result", "speedups", "time_products",
]  # fmt: skip

#: The dtypes the matrix benchmark knows, by the course's names (:mod:`course_lib.base.dtypes`).
_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16", "fp64", "int8")
#: The dtypes of :func:`time_products`: floating point, and known to the roofline.
_PRODUCT_DTYPES: tuple[str, ...] = ("fp32", "bf16", "fp16")

#: CPU feature flags (as Linux's /proc/cpuinfo spells them) that matter for low-precision maths.
_CPU_FEATURES: dict[str, str] = {
    "avx2": "256-bit vector FP32 maths (x86)",
    "fma": "fused multiply-add (x86)",
    "f16c": "FP16 <-> FP32 conversion only, no FP16 maths (x86)",
    "avx512f": "512-bit vector FP32 maths (x86)",
    "avx512_bf16": "BF16 dot products into FP32 (x86, AVX-512)",
    "avx512_fp16": "FP16 vector arithmetic (x86, AVX-512)",
    "amx_bf16": "AMX tile matrix units for BF16 (Intel Sapphire Rapids and later)",
    "amx_fp16": "AMX tile matrix units for FP16 (Intel Granite Rapids and later)",
    "amx_int8": "AMX tile matrix units for INT8",
    "asimdhp": "FP16 vector arithmetic (Arm)",
    "bf16": "BF16 dot products (Arm)",
    "i8mm": "INT8 matrix multiply (Arm)",
}


def _dtype(name: Any) -> torch.dtype:
    return dtypes.torch_dtype(choice(name, _DTYPES, "dtype"), _DTYPES)


@dataclass(frozen=True)
class MatmulResult(TimedRuns):
    """One timed matrix product: device, dtype, size, the seconds per product of every run, products per run.

    Chapter 3, *Number formats*.
    """

    device: str
    dtype: str
    size: int
    times: tuple[float, ...]  # seconds per product, one entry per timed run
    number: int  # products per timed run

    @property
    def flops(self) -> int:
        """Floating-point operations of one product, ``2 * size**3``."""
        return 2 * self.size**3

    @property
    def gflops(self) -> float:
        """Throughput of the fastest run in GFLOP/s (10**9 floating-point operations per second)."""
        return self.flops / self.seconds / 1e9


def _default_sizes(device: torch.device) -> tuple[int, ...]:
    """Matrix sizes that time well in a second or so: small on a CPU, large on a GPU."""
    return (1024, 4096, 8192) if device.type == "cuda" else (256, 512, 1024)


def available_devices() -> list[str]:
    """'cpu', plus 'cuda' when a CUDA GPU is visible.

    Chapter 3, *Number formats*.
    """
    return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def int8_supported(device: str | torch.device | None = None) -> bool:
    """Whether torch multiplies INT8 matrices into INT32 on ``device`` (``torch._int_mm``).

    Chapter 10, *Hardware for LLM training*.
    """
    dev = check_device(device)
    a = torch.ones(32, 32, dtype=torch.int8, device=dev)
    try:
        return bool(torch._int_mm(a, a)[0, 0].item() == 32)
    except (RuntimeError, AttributeError, NotImplementedError):
        return False


def _check_int8(dev: torch.device, size: int) -> None:
    if not int8_supported(dev):
        raise ValueError(f"this torch ({torch.__version__}) has no INT8 matrix product on "
                         f"{dev.type}; leave 'int8' out of dtypes")
    if dev.type == "cuda" and (size <= 16 or size % 8):
        raise ValueError(f"INT8 products on a GPU need sizes above 16 and a multiple of 8, got {size}")


def _time_products(
    shapes: Sequence[tuple[int, int, int, str]],
    dev: torch.device,
    repeats: int,
    min_seconds: float,
    progress: bool | None,
) -> tuple[list[list[float]], list[int]]:
    """Seconds per product of every run of each ``(m, k, n, dtype)`` and the products per run.

    Each case multiplies a seeded (m x k) by a (k x n) matrix; the runs are interleaved across
    the cases (:func:`course_lib.base.timing.interleaved_times`).
    """
    calls, numbers = [], []
    for m, k, n, dtype in shapes:
        g = torch.Generator().manual_seed(0)
        if _dtype(dtype) == torch.int8:
            _check_int8(dev, min(m, k, n))
            a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8).to(dev)
            b = torch.randint(-128, 128, (k, n), generator=g, dtype=torch.int8).to(dev)
            call = functools.partial(torch._int_mm, a, b)
        else:
            a = torch.randn(m, k, generator=g).to(dev, _dtype(dtype))
            b = torch.randn(k, n, generator=g).to(dev, _dtype(dtype))
            call = functools.partial(torch.matmul, a, b)
        # GPUs are too fast to time one small product: run enough back to back to last min_seconds.
        numbers.append(calls_per_run(call, dev, min_seconds))
        calls.append(call)
    # progress=None (the benchmark script): a bar only on a real terminal, as progress_bar does.
    bar = progress is None or bool(progress)
    return interleaved_times(calls, repeats, dev, numbers, bar, f"matmul on {dev.type}"), numbers


def matmul_benchmark(
    sizes: Sequence[int] | None = None,
    dtypes: Sequence[str] = ("fp32", "bf16", "fp16"),
    device: str | torch.device | None = None,
    repeats: int = 5,
    min_seconds: float = 0.05,
    progress: bool | None = False,
) -> list[MatmulResult]:
    """Time every size in every dtype on one device (chapter 3), ``repeats`` runs each, interleaved.

    Each run does enough products of two seeded ``size x size`` matrices back to back to last
    about ``min_seconds``; the runs go round all the cases ``repeats`` times, so that other work
    on the machine slows every case alike. Each result keeps every run's seconds per product
    (its ``seconds`` is the fastest run's, ``median_seconds`` the median's). ``sizes`` None: a
    few that time well on the device; ``progress=None``: a bar in a terminal.

    Chapter 3, *Number formats*.
    """
    dev = check_device(device)
    sizes = _default_sizes(dev) if sizes is None else sizes
    if isinstance(sizes, (int, str)) or not sizes:
        raise ValueError(f"sizes must be a non-empty list of whole numbers >= 1, got {sizes!r}")
    if isinstance(dtypes, str) or not dtypes:
        raise ValueError(f"dtypes must be a non-empty list from {', '.join(_DTYPES)}, got {dtypes!r}")
    for s in sizes:
        positive(s, "size", integer=True)
    for d in dtypes:
        _dtype(d)
    repeats = positive(repeats, "repeats", integer=True)
    min_seconds = check_min_seconds(min_seconds)
    cases = [(s, d) for s in sizes for d in dtypes]
    times, numbers = _time_products([(s, s, s, d) for s, d in cases], dev, repeats, min_seconds, progress)
    return [MatmulResult(dev.type, d.strip().lower(), s, tuple(t), n)
            for (s, d), t, n in zip(cases, times, numbers, strict=True)]  # fmt: skip


@dataclass(frozen=True)
class ProductResult(TimedRuns):
    """One timed product of an (m x k) and a (k x n) matrix: the roofline's operation, every run's seconds.

    ``operation`` holds its FLOPs and least bytes (:func:`course_lib.hardware.roofline.matmul_operation`),
    ``times`` the seconds per product of each run, ``number`` the products per run.

    Chapter 3, *Number formats*.
    """

    operation: Operation
    device: str
    times: tuple[float, ...]
    number: int

    @property
    def flops_per_second(self) -> float:
        """FLOP/s of the fastest run: where the product sits on this machine's roofline."""
        return self.operation.flops / self.seconds


def time_products(
    shapes: Mapping[str, tuple[int, int, int]],
    dtype: str = "fp32",
    device: str | torch.device | None = None,
    repeats: int = 5,
    min_seconds: float = 0.02,
) -> list[ProductResult]:
    """Time ``{label: (m, k, n)}`` products of an (m x k) and a (k x n) matrix, runs interleaved.

    Each product is also the roofline's operation of that shape, so a result gives the
    operation's arithmetic intensity and the FLOP/s it reached: a measured point to set under
    the machine's roof. ``dtype`` is fp32, bf16 or fp16; runs as in :func:`matmul_benchmark`.

    Chapter 10, *Hardware for LLM training*.
    """
    if not isinstance(shapes, Mapping) or not shapes:
        raise ValueError(f"shapes must be a non-empty {{label: (m, k, n)}}, got {shapes!r}")
    dtype = choice(dtype, _PRODUCT_DTYPES, "dtype")
    dev = check_device(device)
    repeats = positive(repeats, "repeats", integer=True)
    min_seconds = check_min_seconds(min_seconds)
    operations = [matmul_operation(m, k, n, dtype, label) for label, (m, k, n) in shapes.items()]
    cases = [(m, k, n, dtype) for m, k, n in shapes.values()]
    times, numbers = _time_products(cases, dev, repeats, min_seconds, False)
    return [ProductResult(op, dev.type, tuple(t), n)
            for op, t, n in zip(operations, times, numbers, strict=True)]  # fmt: skip


def speedups(results: Sequence[MatmulResult], baseline: str = "fp32") -> dict[tuple[str, int, str], float]:
    """Throughput of each result divided by the ``baseline`` dtype's at the same device and size.

    Chapter 3, *Number formats*.
    """
    base = {(r.device, r.size): r.gflops for r in results if r.dtype == baseline}
    return {(r.device, r.size, r.dtype): r.gflops / base[(r.device, r.size)]
            for r in results if (r.device, r.size) in base}  # fmt: skip


def peak_result(results: Sequence[MatmulResult], dtype: str = "fp32") -> MatmulResult:
    """The fastest result (highest GFLOP/s) of one dtype: the measured peak of a roofline.

    Chapter 10, *Hardware for LLM training*.
    """
    dtype = choice(dtype, _DTYPES, "dtype")
    found = [r for r in results if r.dtype == dtype]
    if not found:
        have = sorted({r.dtype for r in results}) or ["none"]
        raise ValueError(f"no {dtype} result among the results (dtypes: {', '.join(have)}); "
                         f"add {dtype!r} to matmul_benchmark(dtypes=...)")
    return max(found, key=lambda r: r.gflops)


def matmul_table(results: Sequence[MatmulResult], baseline: str = "fp32") -> Table:
    """Per result: ms per product and GFLOP/s of the fastest run, the ratio to ``baseline``, the spread.

    The title says how many runs each row had; "median run" is how much slower the median run was
    than the fastest (chapter 3).

    Chapter 3, *Number formats*.
    """
    if not results:
        raise ValueError("matmul_table() needs at least one result (from matmul_benchmark())")
    ratio = speedups(results, baseline)
    rows = [[r.device, f"{r.size} x {r.size}", r.dtype, f"{r.seconds * 1e3:.3f}", f"{r.gflops:,.1f}",
             f"{ratio[(r.device, r.size, r.dtype)]:.2f}x" if (r.device, r.size, r.dtype) in ratio else "-",
             f"+{r.spread:.0%}"]
            for r in results]  # fmt: skip
    runs = sorted({r.repeats for r in results})
    title = ("one run per row" if runs == [1]
             else f"fastest of {' or '.join(map(str, runs))} interleaved runs per row")
    if any(r.dtype == "int8" for r in results):
        title += "; int8 rows count integer operations (GOP/s)"
    headers = ["device", "matrices", "dtype", "ms per product", "GFLOP/s", f"vs {baseline}", "median run"]
    return Table(headers, rows, title=title)


def _cpu_features() -> dict[str, bool]:
    """Which of :data:`_CPU_FEATURES` the CPU announces (Linux /proc/cpuinfo); empty where that cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return {}
    flags: set[str] = set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return {name: name in flags for name in _CPU_FEATURES} if flags else {}


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux, else the platform's description).

    Chapter 3, *Number formats*.
    """
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def describe_machine() -> list[str]:
    """Lines describing the CPU (name, cores, torch threads, vector extensions) and the GPU, if any.

    Chapter 3, *Number formats*.
    """
    lines = [
        f"CPU: {cpu_name()}, {os.cpu_count()} logical cores, torch uses {torch.get_num_threads()} threads",
        f"torch CPU kernels: {torch.backends.cpu.get_cpu_capability()}",
    ]
    found = [name for name, present in _cpu_features().items() if present]
    if found:
        lines.append("low-precision CPU features: " + ", ".join(found))
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        lines.append(f"GPU: {props.name}, compute capability {props.major}.{props.minor}, "
                     f"{props.total_memory / 2**30:.0f} GiB")  # fmt: skip
    else:
        lines.append("GPU: none")
    return lines
