"""How fast memory feeds the processor: STREAM's four kernels timed with torch, on the CPU and a GPU.

Chapter 10, *Hardware for LLM training*, measures this bandwidth for the roofline. McCalpin's
STREAM benchmark (1995) times four loops over arrays ``a``, ``b``, ``c`` of ``n`` elements and a
scalar ``s``: copy ``a = b``, scale ``a = s * b``, add ``a = b + c`` and triad ``a = b + s * c``.
It counts the bytes the loop must read and write at least once, *arrays touched x n x element
size*: 2 arrays for copy and scale, 3 for add and triad (:data:`KERNELS`), and divides them by the
seconds. It does not count *write-allocate* traffic: a CPU that reads a cache line from memory
before overwriting it moves one more array than STREAM counts, so the real traffic can be higher
than the figures here (half as much again for copy, a third more for triad). GB/s here are 10**9
bytes per second.

The *working set* of a case is the bytes of all the arrays its kernel touches. While it fits in a
cache (L1, L2, L3 on a CPU, L2 on a GPU) the kernel runs at that cache's speed; beyond the last
level, at the speed of DRAM (or a GPU's HBM), which is the bandwidth a roofline needs
(:func:`peak_bandwidth`). :func:`cache_sizes` reads the CPU's cache sizes from Linux, and
chapter 10's plot of bandwidth against working set marks them on the curve.

Two details make a torch measurement of small working sets honest. Every torch operation costs
about a microsecond of dispatch (a GPU launch several), longer than a 16 KiB array takes to stream
from L1: timed one operation per pass, L1 would look slower than DRAM. So a case whose arrays are
small runs its kernel many times in one operation, over ``passes`` windows of the arrays a cache
line apart, each at least half an array long (one strided view of shape ``(rows, columns,
window)`` and strides ``(line, line, 1)``: ``rows x columns`` passes over ``rows + columns - 1``
windows). An element is written with the same value every time, so the result is STREAM's, and
the bytes of every pass are counted. And the CPU runs on one thread by default: L1 and L2
belong to one core, so a curve measured with several threads would move their edges; pass
``threads=None`` for all of torch's threads, the whole machine's bandwidth as STREAM reports it
(then each thread streams its own part of the arrays). :func:`host_to_device` times copies from
the CPU's memory to a GPU, from ordinary (pageable) and from pinned memory.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from course_lib.base import dtypes
from course_lib.base.checks import choice, positive
from course_lib.base.tables import Table
from course_lib.base.timing import TimedRuns, calls_per_run, check_device, check_min_seconds, interleaved_times

__all__ = [
    "KERNELS", "SCALAR", "BandwidthResult", "StreamKernel", "bandwidth_table", "bytes_label", "cache_sizes",
    "host_to_device", "last_level_cache", "measure_bandwidth", "peak_bandwidth",
]  # fmt: skip

#: STREAM's kernels and the arrays each touches per element: bytes moved = arrays x n x element size.
#: Write-allocate traffic is not counted: a CPU that reads ``a``'s cache lines before overwriting
#: them moves one array more (copy and scale 3, add and triad 4).
KERNELS: dict[str, int] = {"copy": 2, "scale": 2, "add": 3, "triad": 3}

#: The scalar ``s`` of scale and triad (STREAM's own value).
SCALAR: float = 3.0

#: The element types the kernels run in, by the course's names (:mod:`course_lib.base.dtypes`).
_DTYPES: tuple[str, ...] = ("fp32", "fp64", "fp16", "bf16")

_SYSFS_CACHE = "/sys/devices/system/cpu/cpu0/cache"
#: Bytes between the windows of a multi-pass call: a cache line, so every window starts aligned.
_LINE = {"cpu": 64, "cuda": 128}
_MIN_SHIFT = 2  # elements between windows at least, where a line is too far (1 would tie with the inner stride)
#: Bytes a case should move per torch operation, so that its dispatch (CPU) or launch (GPU) is
#: a small part of the time; smaller working sets run several passes per operation.
_CALL_BYTES = {"cpu": 8 * 2**20, "cuda": 256 * 2**20}
_DRAM_FACTOR = 4  # working sets this many times the last-level cache measure DRAM, not the cache
_KIB, _MIB, _GIB = 2**10, 2**20, 2**30


def _dtype(dtype: Any) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        by_torch = {dtypes.TORCH[name]: name for name in _DTYPES}
        if dtype not in by_torch:
            raise ValueError(f"unknown dtype {dtype}; valid values: {', '.join(_DTYPES)} "
                             "or their torch dtypes")
        return dtype
    return dtypes.torch_dtype(dtype, _DTYPES)


def _dtype_name(dtype: torch.dtype) -> str:
    return next(name for name in _DTYPES if dtypes.TORCH[name] == dtype)


def _kernel(name: Any) -> str:
    return choice(name, KERNELS, "kernel")


def bytes_label(n: float) -> str:
    """Bytes as a short label: 16 KiB, 1.5 MiB, 1 GiB (binary units, as cache sizes are given).

    Chapter 10, *Hardware for LLM training*.
    """
    for unit, size in (("GiB", _GIB), ("MiB", _MIB), ("KiB", _KIB)):
        if n >= 0.999 * size:
            value = n / size
            return f"{value:.0f} {unit}" if value >= 99.95 else f"{value:.3g} {unit}"
    return f"{n:.0f} B"


@dataclass(frozen=True)
class BandwidthResult(TimedRuns):
    """One timed STREAM case: kernel, device, working set, bytes per call and the seconds of every run.

    ``working_set`` is the bytes of all the arrays the kernel touches, ``bytes_moved`` the bytes
    one call moves by STREAM's count (every pass of a call included), ``times`` the seconds per
    call of each run, ``number`` the calls per run. ``threads`` is the CPU threads that ran it
    (None on a GPU); ``passes`` how many times one call ran the kernel over the arrays.

    Chapter 10, *Hardware for LLM training*.
    """

    device: str
    kernel: str
    working_set: int
    bytes_moved: int
    times: tuple[float, ...]
    number: int
    threads: int | None = None
    dtype: str = "fp32"
    passes: int = 1

    @property
    def gb_per_s(self) -> float:
        """Bandwidth of the fastest run in GB/s (10**9 bytes per second, STREAM's count of bytes)."""
        return self.bytes_moved / self.seconds / 1e9

    @property
    def median_gb_per_s(self) -> float:
        """Bandwidth of the median run in GB/s."""
        return self.bytes_moved / self.median_seconds / 1e9

    @property
    def device_label(self) -> str:
        """The device, with the CPU threads that ran the case: "cpu, 1 thread", "cuda"."""
        if self.threads is None:
            return self.device
        return f"{self.device}, {self.threads} thread{'s' if self.threads > 1 else ''}"


def _seeded(n: int, seed: int, dtype: torch.dtype, dev: torch.device) -> torch.Tensor:
    """``n`` seeded small integers (-8 to 8) on ``dev``: every kernel's result is exact in every dtype."""
    g = torch.Generator().manual_seed(seed)
    block = torch.randint(-8, 9, (min(n, 4096),), generator=g).to(dev, dtype)
    out = torch.empty(n, dtype=dtype, device=dev)
    whole = n - n % len(block)
    out[:whole].view(-1, len(block)).copy_(block)  # repeat the block: fast for a GiB of arrays
    out[whole:] = block[: n - whole]
    return out


def _layout(part: int, passes: int, element_size: int, line: int) -> tuple[int, int, int, int]:
    """How ``passes`` passes over ``part`` elements are laid out: ``(rows, columns, shift, window)``.

    The view has shape ``(rows, columns, window)`` and strides ``(shift, shift, 1)``: pass (i, j)
    covers the ``window`` elements from ``(i + j) * shift``, so ``rows * columns`` passes visit only
    ``rows + columns - 1`` distinct windows, a shift apart, each at least half of the part. The
    shift is a cache line where that fits (aligned windows), else smaller, down to 2 elements.
    """
    if passes == 1:
        return 1, 1, 1, part
    rows = max(d for d in range(1, math.isqrt(passes) + 1) if passes % d == 0)
    columns = passes // rows
    shift = max(line // element_size, _MIN_SHIFT)
    while shift > _MIN_SHIFT and shift * (rows + columns - 2) > part // 2:
        shift //= 2
    if shift * (rows + columns - 2) > part // 2:
        raise ValueError(f"passes={passes} is too many for {part} elements per region; take fewer passes "
                         f"(a square such as {_max_square(part, _MIN_SHIFT)} fits) or more elements")
    return rows, columns, shift, part - shift * (rows + columns - 2)


def _max_square(part: int, shift: int) -> int:
    """The most passes, a square rows x rows, whose windows ``shift`` apart each cover half of ``part``."""
    rows = ((part // 2) // shift + 2) // 2
    return max(rows, 1) ** 2


def _plan_passes(part: int, bytes_per_pass: int, element_size: int, device_type: str) -> int:
    """Passes per call (a square) so that one call moves about ``_CALL_BYTES``, aligned windows preferred."""
    wanted = math.ceil(_CALL_BYTES[device_type] / bytes_per_pass)
    if wanted <= 1:
        return 1
    rows = math.isqrt(wanted - 1) + 1  # the smallest square of at least ``wanted``
    aligned = _max_square(part, _LINE[device_type] // element_size)
    limit = aligned if aligned > 1 else _max_square(part, _MIN_SHIFT)
    return min(rows**2, limit)


class StreamKernel:
    """STREAM's arrays for one kernel on one device, and a call that runs the kernel once over them.

    ``a`` is the output; ``b`` and, for add and triad, ``c`` the inputs; ``scalar`` is ``s``. A
    call writes, without allocating anything: copy ``a = b`` (``a.copy_(b)``), scale
    ``a = s * b`` (``torch.mul(b, s, out=a)``), add ``a = b + c`` (``torch.add(b, c, out=a)``),
    triad ``a = b + s * c`` (``torch.add(b, c, alpha=s, out=a)``). With ``passes > 1`` one call
    runs the kernel over that many overlapping windows of the arrays (see the module's text); with
    ``regions > 1`` the arrays are split into that many parts, one per CPU thread, each with its
    own windows, so that no two threads write the same cache line. :meth:`verify` checks ``a``
    after a call against STREAM's definition; :attr:`bytes_moved` and :attr:`working_set` give
    STREAM's counts. ``dtype``: a torch dtype or fp32, fp64, fp16, bf16. The arrays are seeded
    small integers; ``buffers``: 1-D tensors to take them from (the first ``n_elements`` of
    each) instead, as :func:`measure_bandwidth` shares them between the kernels of one working set.

    Chapter 10, *Hardware for LLM training*.
    """

    def __init__(self, kernel: str, n_elements: int, device: str | torch.device | None = None,
                 dtype: torch.dtype | str = torch.float32, passes: int = 1, regions: int = 1,
                 seed: int = 0, buffers: Sequence[torch.Tensor] | None = None) -> None:
        self.kernel = _kernel(kernel)
        self.n_elements = positive(n_elements, "n_elements", integer=True)
        self.dtype = _dtype(dtype)
        self.passes = positive(passes, "passes", integer=True)
        regions = positive(regions, "regions", integer=True)
        self.regions = 1 if self.passes == 1 else regions  # one pass: torch splits the arrays itself
        if self.n_elements % self.regions:
            raise ValueError(f"n_elements ({self.n_elements}) must split evenly into {self.regions} regions")
        self.element_size = torch.empty(0, dtype=self.dtype).element_size()
        self.arrays = KERNELS[self.kernel]
        dev = check_device(device)
        self.device = dev
        part = self.n_elements // self.regions
        self._plan = _layout(part, self.passes, self.element_size, _LINE[dev.type])
        self.window = self._plan[3]
        if buffers is None:
            buffers = [_seeded(self.n_elements, seed + i, self.dtype, dev) for i in range(self.arrays)]
        if len(buffers) < self.arrays or any(
                x.dim() != 1 or len(x) < self.n_elements or x.dtype != self.dtype or x.device.type != dev.type
                for x in buffers[: self.arrays]):  # fmt: skip
            raise ValueError(f"{self.kernel} needs {self.arrays} buffers: 1-D {_dtype_name(self.dtype)} tensors "
                             f"on {dev.type} of at least {self.n_elements} elements")
        self.a, self.b = buffers[0][: self.n_elements], buffers[1][: self.n_elements]
        self.c = buffers[2][: self.n_elements] if self.arrays == 3 else None
        self.scalar = SCALAR
        self._views = [self._view(x) for x in (self.a, self.b, self.c) if x is not None]

    def _view(self, x: torch.Tensor) -> torch.Tensor:
        if self.passes == 1:
            return x
        rows, columns, shift, window = self._plan
        part = self.n_elements // self.regions
        return x.as_strided((self.regions, rows, columns, window), (part, shift, shift, 1))

    @property
    def working_set(self) -> int:
        """Bytes of all the arrays the kernel touches: arrays x n_elements x element size."""
        return self.arrays * self.n_elements * self.element_size

    @property
    def bytes_moved(self) -> int:
        """Bytes one call moves by STREAM's count: arrays x elements processed (all passes) x element size."""
        return self.arrays * self.regions * self.passes * self.window * self.element_size

    def __call__(self) -> torch.Tensor:
        """Run the kernel once (every pass); returns the output array's view."""
        views = self._views
        if self.kernel == "copy":
            return views[0].copy_(views[1])
        if self.kernel == "scale":
            return torch.mul(views[1], self.scalar, out=views[0])
        if self.kernel == "add":
            return torch.add(views[1], views[2], out=views[0])
        return torch.add(views[1], views[2], alpha=self.scalar, out=views[0])

    def verify(self) -> bool:
        """Whether ``a`` holds STREAM's result of ``b`` and ``c``, exactly (the values are small integers)."""
        b = self.b.double()
        c = self.c.double() if self.c is not None else None
        want = {"copy": lambda: b, "scale": lambda: self.scalar * b, "add": lambda: b + c,
                "triad": lambda: b + self.scalar * c}[self.kernel]()  # fmt: skip
        return bool(torch.equal(self.a.double(), want))


def _default_working_sets(device: torch.device) -> tuple[int, ...]:
    """Working sets (bytes of all arrays) from inside the first cache to far beyond the last, powers of 4.

    On a CPU 16 KiB (inside any L1) to 256 MiB (beyond any L3 of one socket's share), eight sizes;
    on a GPU 1 MiB to 1 GiB (an H100's L2 holds 50 MB).
    """
    if device.type == "cuda":
        return tuple(_MIB * 4**k for k in range(6))
    return tuple(16 * _KIB * 4**k for k in range(8))


def _available_memory(dev: torch.device) -> int | None:
    """Bytes free for new arrays: MemAvailable of /proc/meminfo, or the GPU's free memory; None if unknown."""
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _check_memory(sizes: Sequence[int], allocated: int, dev: torch.device, what: str) -> None:
    """Refuse a size, or all the arrays together, that would take over half of the free memory."""
    free = _available_memory(dev)
    if free is None:
        return
    where = "GPU memory" if dev.type == "cuda" else "free RAM (MemAvailable)"
    biggest = max(sizes)
    if biggest > free / 2:
        raise ValueError(f"a {what} of {bytes_label(biggest)} is over half of the {where}, {bytes_label(free)}; "
                         f"pass a smaller one, at most {bytes_label(free // 2)}")
    if allocated > free / 2:
        raise ValueError(f"the arrays take {bytes_label(allocated)} together (all are kept, to interleave the "
                         f"runs), over half of the {where}, {bytes_label(free)}; pass fewer or smaller {what}s")


def _sizes(values: Any, what: str) -> list[int]:
    if isinstance(values, (int, str)) or not values:
        raise ValueError(f"{what}s must be a non-empty list of byte counts (whole numbers >= 1), got {values!r}")
    return [positive(v, what, integer=True) for v in values]


def measure_bandwidth(
    kernels: str | Sequence[str] = tuple(KERNELS),
    working_sets: Sequence[int] | None = None,
    device: str | torch.device | None = None,
    repeats: int = 5,
    min_seconds: float = 0.02,
    progress: bool | None = False,
    dtype: torch.dtype | str = torch.float32,
    threads: int | None = 1,
) -> list[BandwidthResult]:
    """Time STREAM ``kernels`` at every working set (bytes of all arrays) on one device, runs interleaved.

    One result per (kernel, working set), kernels in the order given and working sets within each.
    Each working set is rounded down to whole elements of every array. Every case's arrays are
    allocated first, each case timed once to choose its calls per run (about ``min_seconds`` a
    run), then the runs go round all the cases ``repeats`` times
    (:func:`course_lib.base.timing.interleaved_times`). Small working sets run several passes per call
    (see the module's text). ``threads``: CPU threads for the run (default 1: one core's caches;
    None: torch's setting, the whole machine), restored afterwards; ignored on a GPU. With the
    defaults on a CPU (4 kernels, 8 working sets up to 256 MiB) this takes about 4 seconds.

    Chapter 10, *Hardware for LLM training*.
    """
    dev = check_device(device)
    names = [kernels] if isinstance(kernels, str) else kernels
    if not isinstance(names, Sequence) or not names:
        raise ValueError(f"kernels must be a kernel name or a non-empty list of them from "
                         f"{', '.join(KERNELS)}, got {kernels!r}")
    names = [_kernel(k) for k in names]
    sets = _sizes(_default_working_sets(dev) if working_sets is None else working_sets, "working set")
    torch_dtype = _dtype(dtype)
    repeats = positive(repeats, "repeats", integer=True)
    min_seconds = check_min_seconds(min_seconds)
    if threads is not None:
        threads = positive(threads, "threads", integer=True)
    size = torch.empty(0, dtype=torch_dtype).element_size()
    cases = []
    for kernel in names:
        for ws in sets:
            n = ws // (KERNELS[kernel] * size)
            if n < 1:
                raise ValueError(f"a working set of {ws} bytes is too small for {kernel}: it needs one "
                                 f"element in each of its {KERNELS[kernel]} arrays, at least "
                                 f"{KERNELS[kernel] * size} bytes in {_dtype_name(torch_dtype)}; pass a larger one")
            cases.append((kernel, ws, n))
    # The kernels of one working set share its arrays: as many as the most any kernel touches, each as
    # long as the longest (copy's, of two arrays). Fewer pages to touch, and less memory.
    longest: dict[int, int] = {}
    for _, ws, n in cases:
        longest[ws] = max(longest.get(ws, 0), n)
    most = max(KERNELS[k] for k in names)
    _check_memory(sets, sum(most * n * size for n in longest.values()), dev, "working set")

    before = torch.get_num_threads()
    change = dev.type == "cpu" and threads is not None and threads != before
    if change:
        torch.set_num_threads(threads)
    try:
        used = torch.get_num_threads() if dev.type == "cpu" else None
        regions = used or 1
        shared = {ws: [_seeded(n, i, torch_dtype, dev) for i in range(most)] for ws, n in longest.items()}
        calls, numbers = [], []
        for kernel, ws, n in cases:
            arrays = KERNELS[kernel]
            passes = 1
            if n >= 4 * regions:
                part = n // regions
                passes = _plan_passes(part, arrays * part * regions * size, size, dev.type)
                n = part * regions if passes > 1 else n
            call = StreamKernel(kernel, n, dev, torch_dtype, passes, regions, buffers=shared[ws])
            numbers.append(calls_per_run(call, dev, min_seconds))
            calls.append(call)
        bar = progress is None or bool(progress)
        times = interleaved_times(calls, repeats, dev, numbers, bar, f"STREAM on {dev.type}")
    finally:
        if change:
            torch.set_num_threads(before)
    return [BandwidthResult(dev.type, c.kernel, c.working_set, c.bytes_moved, tuple(t), number, used,
                            _dtype_name(torch_dtype), c.passes)
            for c, t, number in zip(calls, times, numbers, strict=True)]  # fmt: skip


def _parse_size(text: str) -> int:
    """Bytes of a Linux cache size such as "48K", "2048K", "32M" or "1G" (a bare number is bytes)."""
    text = text.strip().upper().removesuffix("B")
    factor = {"K": _KIB, "M": _MIB, "G": _GIB}.get(text[-1:], 1)
    digits = text[:-1] if factor > 1 else text
    if not digits.isdigit():
        raise ValueError(f"cannot read a cache size from {text!r}; expected a number and K, M or G, like '48K'")
    return int(digits) * factor


def cache_sizes(path: str | Path = _SYSFS_CACHE) -> dict[str, int]:
    """The CPU's data caches in bytes, {"L1d": ..., "L2": ..., "L3": ...}, from Linux's sysfs; {} where unreadable.

    Reads ``level``, ``type`` and ``size`` of every ``index*`` folder under ``path`` (the first
    CPU's caches); instruction caches are left out. L1 and L2 usually belong to one core, L3 is
    shared by several.

    Chapter 10, *Hardware for LLM training*.
    """
    found = {}
    try:
        for index in sorted(Path(path).glob("index*")):
            level = int((index / "level").read_text())
            kind = (index / "type").read_text().strip()
            if kind == "Instruction":
                continue
            name = f"L{level}d" if kind == "Data" else f"L{level}"
            found[name] = _parse_size((index / "size").read_text())
    except (OSError, ValueError):
        return {}
    return dict(sorted(found.items(), key=lambda item: item[0][1:]))


def host_to_device(
    sizes: Sequence[int] | None = None,
    repeats: int = 5,
    pinned: bool = True,
    progress: bool | None = False,
    min_seconds: float = 0.02,
) -> list[BandwidthResult]:
    """Time copies of ``sizes`` bytes from the CPU's memory to the GPU (over PCIe or NVLink-C2C), runs interleaved.

    ``pinned`` copies from page-locked memory, which the GPU reads directly (asynchronously); else
    from ordinary pageable memory, which the driver first copies into a pinned buffer of its own,
    usually much slower. Default sizes 1 MiB, 16 MiB and 256 MiB. Each result's kernel is
    "host-to-device pinned" or "host-to-device pageable"; ``bytes_moved`` is the size.

    Chapter 10, *Hardware for LLM training*.
    """
    if not torch.cuda.is_available():
        raise ValueError("host-to-device bandwidth needs a CUDA GPU; on Colab choose "
                         "Runtime > Change runtime type > GPU")
    if pinned not in (True, False):
        raise ValueError(f"pinned must be True or False, got {pinned!r}")
    dev = check_device("cuda")
    sizes = _sizes((_MIB, 16 * _MIB, 256 * _MIB) if sizes is None else sizes, "size")
    repeats = positive(repeats, "repeats", integer=True)
    min_seconds = check_min_seconds(min_seconds)
    _check_memory(sizes, sum(sizes), torch.device("cpu"), "size")
    _check_memory(sizes, sum(sizes), dev, "size")
    calls, numbers = [], []
    for size in sizes:
        src = torch.empty(size, dtype=torch.uint8, pin_memory=pinned).fill_(1)
        dst = torch.empty(size, dtype=torch.uint8, device=dev)

        def call(dst: torch.Tensor = dst, src: torch.Tensor = src) -> torch.Tensor:
            return dst.copy_(src, non_blocking=pinned)

        numbers.append(calls_per_run(call, dev, min_seconds))
        calls.append(call)
    bar = progress is None or bool(progress)
    kind = "host-to-device " + ("pinned" if pinned else "pageable")
    times = interleaved_times(calls, repeats, dev, numbers, bar, kind)
    return [BandwidthResult("cuda", kind, size, size, tuple(t), number, None, "uint8")
            for size, t, number in zip(sizes, times, numbers, strict=True)]  # fmt: skip


def bandwidth_table(results: Sequence[BandwidthResult]) -> Table:
    """Per result: device, kernel, dtype, working set, GB/s of the fastest and of the median run, the spread.

    Chapter 10, *Hardware for LLM training*.
    """
    if isinstance(results, BandwidthResult) or not results:
        raise ValueError("bandwidth_table() needs a list of results (from measure_bandwidth())")
    rows = [[r.device_label, r.kernel, r.dtype, bytes_label(r.working_set), f"{r.gb_per_s:,.1f}",
             f"{r.median_gb_per_s:,.1f}", f"+{r.spread:.0%}"] for r in results]  # fmt: skip
    runs = sorted({r.repeats for r in results})
    title = (("one run per row" if runs == [1]
              else f"fastest of {' or '.join(map(str, runs))} interleaved runs per row")
             + "; GB/s = 10**9 bytes/s by STREAM's count; a shared machine is noisy, so trust the "
             "fastest run")  # fmt: skip
    headers = ["device", "kernel", "dtype", "working set", "GB/s (fastest)", "GB/s (median)", "median run"]
    return Table(headers, rows, title=title)


def last_level_cache(device: str) -> int | None:
    """Bytes of the last cache before DRAM on ``"cpu"`` or ``"cuda"``: the CPU's largest, the GPU's L2.

    None where unknown (no sysfs, no GPU).

    Chapter 10, *Hardware for LLM training*.
    """
    if device == "cuda":
        if not torch.cuda.is_available():
            return None
        return getattr(torch.cuda.get_device_properties(0), "L2_cache_size", None) or None
    caches = cache_sizes()
    return max(caches.values()) if caches else None


def peak_bandwidth(results: Sequence[BandwidthResult], kernel: str = "triad") -> BandwidthResult:
    """The DRAM (or HBM) bandwidth among the results: the fastest ``kernel`` result beyond every cache.

    A roofline needs the bandwidth of main memory, not of a cache. So this takes the highest GB/s
    among the working sets at least 4 times the last-level cache (the CPU's largest in
    :func:`cache_sizes`, a GPU's L2): a working set only a little larger still finds part of its
    arrays in the cache and reads faster than DRAM. Where the cache size is unknown, or no
    working set is that large, it takes the largest working set.

    Chapter 10, *Hardware for LLM training*.
    """
    found = [r for r in results if r.kernel == kernel]
    if not found:
        _kernel(kernel)  # a name that is no kernel at all: list STREAM's
        have = sorted({r.kernel for r in results}) or ["none"]
        raise ValueError(f"no {kernel!r} result among the results (kernels: {', '.join(have)}); "
                         f"add {kernel!r} to measure_bandwidth(kernels=...)")
    devices = sorted({r.device for r in found})
    if len(devices) > 1:
        raise ValueError(f"the results come from several devices ({', '.join(devices)}); "
                         "pass one device's results")
    llc = last_level_cache(devices[0])
    beyond = [r for r in found if llc is not None and r.working_set >= _DRAM_FACTOR * llc]
    if not beyond:
        largest = max(r.working_set for r in found)
        beyond = [r for r in found if r.working_set == largest]
    return max(beyond, key=lambda r: r.gb_per_s)
