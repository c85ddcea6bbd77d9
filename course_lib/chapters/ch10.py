"""Chapter 10's own tables and plots, *Hardware for LLM training*: the measurements side by side.

The measurements live in :mod:`course_lib.hardware`: :mod:`~course_lib.hardware.matmul` (matrix
products), :mod:`~course_lib.hardware.stream` (STREAM), :mod:`~course_lib.hardware.roofline`
(intensities, published GPU figures, time to train), :mod:`~course_lib.hardware.disk` (disk),
:mod:`~course_lib.hardware.input_pipeline` (tokenisation) and
:mod:`~course_lib.hardware.allreduce_bench` (all-reduce), next to chapter 8's alpha-beta model
(:mod:`course_lib.parallel.cost_model`). This module draws and tabulates their results.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from course_lib.base.checks import positive
from course_lib.base.tables import Table, cite
from course_lib.exercises.questions import Question
from course_lib.hardware import disk, roofline, stream
from course_lib.hardware.disk import ReadResult
from course_lib.hardware.input_pipeline import ThroughputResult
from course_lib.hardware.matmul import ProductResult
from course_lib.hardware.stream import BandwidthResult
from course_lib.numbers import memory
from course_lib.parallel import cost_model

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["allreduce_table", "checkpoint_table", "gpu_table", "offload_ram_table",
           "operations_table", "platform_table", "plot_bandwidth", "plot_roofline", "read_table", "throughput_table", "roofline_diagram", "time_to_train_table"]

#: Workstation CPUs the lecture notes recommend: PCIe lanes, memory channels and their speed
#: (MT/s), and the bibliography key of the vendor's figures.
_CPU_PLATFORMS: dict[str, tuple[int, int, int, str]] = {
    "Intel Xeon W-3400": (112, 8, 4800, "intel_xeon_w3400"),
    "AMD Threadripper PRO 7000 WX": (128, 8, 5200, "amd_threadripper_pro_7000"),
}


# --- 2 · memory bandwidth -----------------------------------------------------------------------

def plot_bandwidth(results: Sequence[BandwidthResult], caches: Mapping[str, int] | None = None) -> Figure:
    """GB/s of the fastest run against working set (log scale), one line per kernel, the caches marked.

    ``caches`` maps a name to bytes, drawn as dashed vertical lines; by default the CPU's
    (:func:`course_lib.hardware.stream.cache_sizes`) for CPU results and the GPU's L2 for GPU results.

    Chapter 10, *Hardware for LLM training*.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullLocator

    from course_lib.base import plots

    if isinstance(results, BandwidthResult) or not results:
        raise ValueError("plot_bandwidth() needs a list of results (from stream.measure_bandwidth())")
    devices = list(dict.fromkeys(r.device for r in results))
    if caches is None:
        if devices == ["cuda"]:
            l2 = stream.last_level_cache("cuda")
            caches = {"L2": l2} if l2 else {}
        else:
            caches = stream.cache_sizes()
    for name, size in caches.items():
        positive(size, f"cache size of {name}", integer=True)
    plots.use_course_style()
    fig, ax = plt.subplots()
    lines: dict[tuple[str, str], list[BandwidthResult]] = {}
    for r in results:
        lines.setdefault((r.device, r.kernel), []).append(r)
    for (device, kernel), rs in lines.items():
        rs = sorted(rs, key=lambda r: r.working_set)
        label = kernel if len(devices) == 1 else f"{kernel} ({device})"
        ax.plot([r.working_set for r in rs], [r.gb_per_s for r in rs], marker="o", label=label)
    ax.set_xscale("log", base=2)
    xs = [r.working_set for r in results] + list(caches.values())
    low, high = min(xs) / 1.5, max(xs) * 1.5
    ax.set_xlim(low, high)
    for name, size in caches.items():
        ax.axvline(size, color="grey", ls="--", lw=1)
        ax.text(size, 0.98, f" {name} {stream.bytes_label(size)}", transform=ax.get_xaxis_transform(),
                rotation=90, va="top", ha="right", fontsize=9, color="grey")
    powers = [2**k for k in range(math.ceil(math.log2(low)), math.floor(math.log2(high)) + 1)]
    ticks = powers[:: max(1, math.ceil(len(powers) / 10))]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([stream.bytes_label(t) for t in ticks], rotation=30)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("working set: bytes of all arrays (log scale)")
    ax.set_ylabel("bandwidth (GB/s, fastest run)")
    runs = max(r.repeats for r in results)
    where = " and ".join(dict.fromkeys(r.device_label for r in results))
    ax.set_title(f"Memory bandwidth (STREAM) on {where}: fastest of {runs} runs")
    ax.legend(title="kernel", fontsize=9)
    fig.tight_layout()
    return fig


# --- 3 · the roofline ---------------------------------------------------------------------------

def gpu_table(dtype: str = "bf16", this_machine: roofline.Roof | None = None) -> Table:
    """The published GPUs' peaks (dense, sparse, TF32, FP32), memory, bandwidth, ridge point, links.

    NVIDIA lists three FP32-like figures: TF32 on the tensor cores (FP32 numbers, products rounded
    to a 10-bit mantissa), dense and with 2:4 sparsity, and plain FP32 on the ordinary cores
    (no tensor cores, no sparsity). The roofline uses the dense figure of ``dtype``; the column
    "roofline uses" says so on every row, and "source" cites each datasheet as the book does
    ("NVIDIA (2026g)"). ``this_machine`` (a CPU's measured FP32 roof) is set under FP32.

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for gpu in roofline.DATASHEETS.values():
        roof = gpu.roof(dtype)
        rows.append([gpu.name, f"{gpu.dense[dtype] / 1e12:,.1f}",
                     f"{gpu.sparse[dtype] / 1e12:,.0f}" if dtype in gpu.sparse else "-",
                     f"{gpu.dense['tf32'] / 1e12:,.1f}", f"{gpu.sparse['tf32'] / 1e12:,.0f}",
                     f"{gpu.dense['fp32'] / 1e12:,.1f}", f"{gpu.memory / memory.GIB:.0f}",
                     f"{gpu.bandwidth / 1e12:.2f}", f"{dtype} dense", f"{roof.ridge:,.0f}",
                     gpu.gpu_link or "none (PCIe)", cite(gpu.source)])  # fmt: skip
    if this_machine is not None:
        rows.append([this_machine.name, "-", "-", "-", "-", f"{this_machine.peak / 1e12:,.3f}", "-",
                     f"{this_machine.bandwidth / 1e12:.3f}", "fp32 measured",
                     f"{this_machine.ridge:,.0f}", "-", "measured here"])  # fmt: skip
    return Table(["GPU", f"{dtype} dense TFLOP/s", f"{dtype} with 2:4 sparsity",
                  "tf32 tensor cores, dense", "tf32 with 2:4 sparsity", "fp32 (no tensor cores)",
                  "memory (GiB)", "bandwidth (TB/s)", "roofline uses", "ridge (FLOP/byte)",
                  "GPU-to-GPU link", "source"], rows,
                 title="published figures in TFLOP/s (dense unless marked) and this machine's "
                       "measured roof; the ridge point is the roofline's figure over the bandwidth")


def operations_table(operations: Sequence[roofline.Operation], roofs: Sequence[roofline.Roof]) -> Table:
    """Per operation: GFLOPs, MB moved, intensity, and on each roof whether it is memory- or compute-bound.

    Chapter 10, *Hardware for LLM training*.
    """
    if not operations or not roofs:
        raise ValueError("operations_table() needs at least one operation and one roof")
    rows = [[op.name, f"{op.flops / 1e9:,.3f}", f"{op.bytes / 1e6:,.2f}", f"{op.intensity:,.1f}",
             *[op.bound(r) for r in roofs]] for op in operations]  # fmt: skip
    return Table(["operation", "GFLOP", "MB moved (least)", "FLOP/byte",
                  *[f"{r.name}: ridge {r.ridge:,.0f}" for r in roofs]], rows,
                 title="arithmetic intensity against each machine's ridge point (FLOP/byte)")


def plot_roofline(roofs: Sequence[roofline.Roof], operations: Sequence[roofline.Operation] = (),
                  measured: Sequence[ProductResult] = (), roof_for_ops: int = 0,
                  title: str = "Roofline") -> Figure:
    """Log-log roofline: each roof, the operations at their intensity, and measured products.

    Operations are drawn on the roof at index ``roof_for_ops`` (at the speed that roof allows);
    ``measured`` holds products timed on this machine (:func:`course_lib.hardware.matmul.time_products`),
    drawn at the FLOP/s of their fastest run.

    Chapter 10, *Hardware for LLM training*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base.diagrams import SMALL
    from course_lib.base.plots import use_course_style

    if not roofs:
        raise ValueError("plot_roofline() needs at least one roof")
    use_course_style()
    fig, ax = plt.subplots(figsize=(8, 5))
    intensities = [op.intensity for op in operations] + [m.operation.intensity for m in measured]
    lo = min([0.1, *intensities]) / 2
    hi = max([*(r.ridge for r in roofs), *intensities]) * 8
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for roof in roofs:
        ax.plot(xs, [roofline.attainable(x, roof) for x in xs], label=f"{roof.name}: ridge {roof.ridge:,.0f}")
    if operations:
        roof = roofs[roof_for_ops]
        for i, op in enumerate(operations):
            ax.scatter(op.intensity, roofline.attainable(op.intensity, roof), marker="o", zorder=3,
                       color=f"C{(i + len(roofs)) % 10}", label=f"{op.name} ({op.intensity:,.1f})")
    for m in measured:
        point = (m.operation.intensity, m.flops_per_second)
        ax.scatter(*point, marker="x", s=60, zorder=4, color="black")
        ax.annotate(m.operation.name, point, textcoords="offset points", xytext=(4, -12),
                    fontsize=SMALL)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(title)
    ax.legend(fontsize=SMALL, loc="lower right")
    ax.grid(True, which="major", alpha=0.3)
    fig.tight_layout()
    return fig


def roofline_diagram(name: str = "H100 SXM", dtype: str = "bf16") -> Figure:
    """The roofline as a diagram: one GPU's roof from its datasheet, the memory-bound
    and the compute-bound regions, the ridge point, and an operation on each side.

    Chapter 10, *Hardware for LLM training*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base import diagrams

    roof, tera, colours = roofline.roof_of(name, dtype), 1e12, diagrams.COLOURS
    ops = [(f"{mode}, batch {batch}: {op.name}", op) for mode, batch in
           (("decode", 1), ("train", 64))
           for op in roofline.block_operations(batch=batch, mode=mode)
           if op.name == "MLP up"]
    diagrams.use_course_style()
    fig, ax = plt.subplots(figsize=(diagrams.COLUMN_INCHES, 5.2))
    fig.subplots_adjust(left=0.1, right=0.97, bottom=0.12, top=0.9)  # angles hold
    lo, hi, peak, slope = 0.1, roof.ridge * 300, roof.peak / tera, roof.bandwidth / tera
    xs = [lo * (hi / lo) ** (i / 100) for i in range(101)]
    ax.plot(xs, [roofline.attainable(x, roof) / tera for x in xs], lw=2.5,
            color=colours["text"])
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo * slope / 2, peak * 40))
    ax.axvspan(lo, roof.ridge, color=colours["parameters"], alpha=0.1, lw=0)
    ax.axvspan(roof.ridge, hi, color=colours["communication"], alpha=0.12, lw=0)
    ax.axvline(roof.ridge, color=colours["line"], ls="--", lw=1)
    ax.scatter([roof.ridge], [peak], color=colours["text"], zorder=4, s=40)
    text = {"fontsize": diagrams.FONT, "linespacing": 1.4}
    ax.text(lo * 1.3, peak * 28, "memory-bound\nthe arithmetic units wait on memory\n"
            "time = bytes moved / W", va="top", **text)
    ax.text(hi / 1.3, peak * 28, "compute-bound\nmemory waits on the arithmetic\n"
            "time = FLOPs / P", va="top", ha="right", **text)
    ax.annotate(f"ridge point\nI = P / W = {roof.ridge:,.0f} FLOP/byte",
                (roof.ridge, peak), (roof.ridge * 1.5, peak / 100), ha="left", va="top",
                arrowprops={"arrowstyle": "->", "color": colours["line"]}, **text)
    ax.text(hi / 1.3, peak * 1.25, f"peak P = {peak:,.0f} TFLOP/s", ha="right",
            va="bottom", **text)
    a, b = ax.transData.transform([(1, slope), (10, 10 * slope)])  # slope on the page
    ax.text(2, 3 * slope, f"W × I: bandwidth W = {slope:g} TB/s", ha="left",
            va="bottom",
            rotation=math.degrees(math.atan2(b[1] - a[1], b[0] - a[0])),
            rotation_mode="anchor", **text)
    for label, op in ops:
        speed = roofline.attainable(op.intensity, roof)
        ax.scatter([op.intensity], [speed / tera], color=colours["sign"], zorder=5,
                   s=40)
        ax.annotate(f"{label}\n{op.intensity:,.1f} FLOP/byte: "
                    f"{speed / roof.peak:.1%} of P", (op.intensity, speed / tera),
                    textcoords="offset points", xytext=(10, -10), ha="left", va="top",
                    color=colours["sign"], **text)
    ax.set_xlabel("arithmetic intensity I (FLOP per byte moved)")
    ax.set_ylabel("attainable TFLOP/s")
    ax.set_title(f"The roofline of the {name} in dense {dtype.upper()}: min(P, W × I)",
                 fontsize=diagrams.TITLE)
    ax.grid(True, which="major", alpha=0.3)
    return fig


# --- 4 · storage --------------------------------------------------------------------------------

_SHORT_METHOD = {disk.O_DIRECT: "O_DIRECT", disk.FADVISE: "fadvise", disk.WARM_CACHE: "warm cache",
                 disk.NO_CACHE_CONTROL: "no cache control"}  # fmt: skip


def _read_results(results: Any, caller: str, allow_empty: bool = False) -> list[ReadResult]:
    if isinstance(results, ReadResult):
        results = [results]
    if not isinstance(results, Sequence) or not all(isinstance(r, ReadResult) for r in results):
        raise ValueError(f"{caller}() needs a list of ReadResult (from disk.read_speed()), got {results!r}")
    if not results and not allow_empty:
        raise ValueError(f"{caller}() needs at least one result (from disk.read_speed())")
    return list(results)


def read_table(results: Sequence[ReadResult]) -> Table:
    """One row per result: pattern, method, filesystem, sizes, MB/s of the fastest and median runs, IOPS.

    IOPS (block reads per second, fastest run) are shown for random reads only. The title says
    that the machine may be shared, so runs differ, and warns of files held in RAM (tmpfs).

    Chapter 10, *Hardware for LLM training*.
    """
    results = _read_results(results, "read_table")
    rows = [[r.pattern, r.method, r.filesystem, f"{r.file_bytes / 2**20:g}", f"{r.block_bytes / 2**10:g}",
             f"{r.mb_per_s:,.0f}", f"{r.median_mb_per_s:,.0f}",
             f"{r.iops:,.0f}" if r.pattern == "random" else "-"]
            for r in results]  # fmt: skip
    runs = sorted({r.repeats for r in results})
    title = (f"disk reads, {' or '.join(map(str, runs))} run(s) each: the machine is shared and runs differ, "
             "so compare the fastest with the median")
    if any(r.in_ram for r in results):
        title += "; tmpfs keeps files in RAM, so its rows measure memory, not a disk"
    if any(r.method == disk.NO_CACHE_CONTROL for r in results):
        title += "; rows without cache control may be the page cache's speed"
    headers = ["pattern", "method", "filesystem", "file MiB", "block KiB", "MB/s fastest", "MB/s median", "IOPS"]
    return Table(headers, rows, title=title)


def _params_label(n: float) -> str:
    """1e9 -> '1B', 7e9 -> '7B', 1.5e9 -> '1.5B', 125e6 -> '125M'."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:.3g}{suffix}"
    return f"{n:g}"


def _seconds_cell(s: float) -> str:
    return f"{s:.2f}" if s < 10 else f"{s:,.1f}" if s < 100 else f"{s:,.0f}"


def checkpoint_table(
    results: Sequence[ReadResult],
    n_params: Sequence[float] = (1e9, 7e9, 70e9),
    bytes_per_param: float = 2.0,
    references: Mapping[str, float] | None = None,
) -> Table:
    """Seconds to load a checkpoint of each model size at each measured speed and each reference speed.

    One row per model size (``"1B"``, ``"7B"``, ``"70B"``): its checkpoint in GB at
    ``bytes_per_param`` bytes per parameter (2: BF16 weights only), then the seconds to read it at
    the fastest run of each result and at each of ``references`` (``{label: MB/s}``, e.g. a
    datasheet's NVMe, SATA SSD and hard-disk figures, which the caller cites).

    Chapter 10, *Hardware for LLM training*.
    """
    results = _read_results(results, "checkpoint_table", allow_empty=True)
    references = dict(references or {})
    for label, speed in references.items():
        positive(speed, f"reference speed of {label!r} (MB/s)")
    if not results and not references:
        raise ValueError("checkpoint_table() needs at least one result (from disk.read_speed()) or a "
                         "reference speed, e.g. references={'my disk': 500}")
    if isinstance(n_params, (int, float)) or not n_params:
        raise ValueError(f"n_params must be a non-empty list of parameter counts, got {n_params!r}")
    for n in n_params:
        positive(n, "n_params")
    bytes_per_param = positive(bytes_per_param, "bytes_per_param")
    speeds = [(f"s, {r.pattern} {_SHORT_METHOD.get(r.method, r.method)} ({r.mb_per_s:,.0f} MB/s)", r.mb_per_s)
              for r in results]  # fmt: skip
    speeds += [(f"s, {label} ({speed:,.0f} MB/s)", float(speed)) for label, speed in references.items()]
    rows = [[_params_label(n), f"{n * bytes_per_param / 1e9:,.1f}"]
            + [_seconds_cell(disk.checkpoint_load_seconds(n, bytes_per_param, mb)) for _, mb in speeds]
            for n in n_params]  # fmt: skip
    title = (f"seconds to read a checkpoint at {bytes_per_param:g} bytes per parameter "
             "(measured: the fastest run of each result)")
    return Table(["model", "checkpoint GB"] + [h for h, _ in speeds], rows, title=title)


# --- 5 · tokenisation ---------------------------------------------------------------------------

def throughput_table(results: Sequence[ThroughputResult],
                     demands: Mapping[str, float] | None = None) -> Table:
    """Per measurement: workers, tokens, tokens/s (fastest and median), and against each GPU demand.

    ``demands`` maps a label to the tokens per second a GPU consumes
    (:func:`course_lib.hardware.input_pipeline.gpu_tokens_per_second`). For each, a column gives
    the share of that demand the measurement meets, and in brackets the cores it would take to
    keep up at this measurement's rate per process: ``ceil(demand / (tokens/s / processes))``.

    Chapter 10, *Hardware for LLM training*.
    """
    if isinstance(results, ThroughputResult) or not results:
        raise ValueError("throughput_table() needs a list of results from "
                         "input_pipeline.tokenize_throughput()")
    demands = dict(demands or {})
    for label, demand in demands.items():
        positive(demand, f"demand {label!r} (tokens per second)")
    headers = ["workers", "tokens", "tokens/s (fastest)", "tokens/s (median)",
               *[f"{label}: share met (cores to keep up)" for label in demands]]
    rows = []
    for r in results:
        cells = [f"{r.workers}" + (" (main process)" if r.workers == 0 else ""),
                 f"{r.tokens:,}", f"{r.tokens_per_second:,.0f}", f"{r.median_tokens_per_second:,.0f}"]
        for demand in demands.values():
            cores = math.ceil(demand / r.tokens_per_second_per_process)
            cells.append(f"{r.tokens_per_second / demand:.0%} ({cores})")
        rows.append(cells)
    runs = sorted({len(r.times) for r in results})
    title = (f"Tokenising {results[0].texts:,} texts on the CPU, fastest of "
             f"{' or '.join(map(str, runs))} passes after a warm-up pass")
    if demands:
        title += "; GPU demand: " + ", ".join(f"{k} {v:,.0f} tokens/s" for k, v in demands.items())
    return Table(headers, rows, title=title)


# --- 6 · network --------------------------------------------------------------------------------

def _latency_source(link: cost_model.Link) -> str:
    """Where a link's latency comes from: its source as the book cites it, "measured here",
    or "assumption"."""
    if not link.source and not link.latency_source:
        return "measured here"
    return cite(link.latency_source) if link.latency_source else "assumption"


def allreduce_table(n_bytes: float, world_size: int,
                    links: Sequence[cost_model.Link | str]) -> Table:
    """Seconds for one ring all-reduce of ``n_bytes`` over ``world_size`` ranks on each link.

    Each link's bandwidth and latency have their own source column: the source as the book
    cites it ("NVIDIA (2024)"), "measured here" (a fitted link), or "assumption" for a latency
    that no source gives.

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for link in links:
        link = cost_model.LINKS[link] if isinstance(link, str) else link
        seconds = cost_model.ring_allreduce_time(n_bytes, world_size, link)
        rows.append([link.name, f"{link.bandwidth / 1e9:,.2f}", cite(link.source) or "measured here",
                     f"{link.latency * 1e6:,.1f}", _latency_source(link), f"{seconds:,.3f}"])
    return Table(["link", "GB/s per direction", "bandwidth source", "latency (us)",
                  "latency source", "seconds per all-reduce"], rows,
                 title=f"one ring all-reduce of {n_bytes / 1e9:,.1f} GB over {world_size} ranks "
                       "(alpha-beta model)")


# --- 7 · putting it together --------------------------------------------------------------------

def time_to_train_table(n_params: float, tokens: float,
                        machines: Mapping[str, tuple[float, int] | tuple[float, int, float]],
                        utilisation: float = 0.4, shape: memory.ModelShape | None = None,
                        seq_len: int = 2048) -> Table:
    """Time to train with C = 6 N D on each machine, and whether training fits in its memory.

    ``machines`` maps a name to ``(FLOP/s per device, devices)`` or ``(FLOP/s per device,
    devices, bytes of memory per device)``. With the memory, the table adds the part of it that
    tensors can use (chapter 2's :attr:`~course_lib.numbers.memory.GPU.usable`: the capacity
    less the allocator's margin and the CUDA context), what each device must hold by chapter 2's
    estimator (BF16 mixed precision with Adam: 16 bytes of model states per parameter, sharded
    over the devices with ZeRO-3 / FSDP when there are several, plus the activations of one
    sequence of ``seq_len`` tokens with activation checkpointing, the margin the title states)
    and whether that fits in the usable memory; where it does not, the fewest devices of that
    kind over which ZeRO-3 makes it fit.

    Chapter 10, *Hardware for LLM training*.
    """
    flops = roofline.training_flops(n_params, tokens)
    rows = []
    for name, spec in machines.items():
        if not isinstance(spec, tuple) or len(spec) not in (2, 3):
            raise ValueError(f"machines[{name!r}] must be (FLOP/s per device, devices) or (FLOP/s "
                             f"per device, devices, bytes of memory per device), got {spec!r}")
        peak, devices = spec[0], spec[1]
        seconds = roofline.time_to_train(n_params, tokens, peak, utilisation, devices)
        row = [name, devices, f"{peak / 1e12:,.3g}", _duration(seconds)]
        if len(spec) == 3:
            capacity = positive(spec[2], f"memory per device of {name!r} (bytes)")
            usable = memory.GPU(name, capacity).usable
            need = roofline.training_memory_per_device(n_params, devices, shape, seq_len).total
            verdict = "yes"
            if need > usable:
                fewest = roofline.devices_to_fit(n_params, usable, shape, seq_len)
                verdict = (f"no: ZeRO-3 over {fewest} fits" if fewest
                           else "no: not even with ZeRO-3")
            row += [f"{capacity / memory.GIB:,.0f}", f"{usable / 1e9:,.1f}",
                    f"{need / 1e9:,.1f}", verdict]
        else:
            row += ["-", "-", "-", "-"]
        rows.append(row)
    states = roofline.training_memory_per_device(n_params, 1, shape, seq_len)
    return Table(["machine", "devices", "peak TFLOP/s per device", "time to train",
                  "memory per device (GiB)", "usable for tensors (GB)",
                  "needed per device (GB)", "fits?"], rows,
                 title=f"N = {n_params:.3g} parameters, D = {tokens:.3g} tokens: C = 6 N D = "
                       f"{flops:.2e} FLOPs at {utilisation:.0%} of peak; needed = "
                       f"{states.model_states / 1e9:,.0f} GB of model states (BF16 mixed "
                       "precision, Adam), sharded over the devices (ZeRO-3) when there are "
                       f"several, + activations of 1 sequence of {seq_len} tokens with "
                       "checkpointing (chapter 2's estimator); it fits when the usable memory "
                       "holds it")


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600),
                       ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.1f} s"


def platform_table() -> Table:
    """The recommended workstation CPUs: PCIe lanes, GPUs at x16, memory channels and peak bandwidth.

    Peak memory bandwidth = channels x 8 bytes x transfers per second (computed, not measured).

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for name, (lanes, channels, mts, source) in _CPU_PLATFORMS.items():
        rows.append([name, lanes, lanes // 16, channels, f"DDR5-{mts}",
                     f"{channels * 8 * mts * 1e6 / 1e9:,.1f}", cite(source)])
    return Table(["CPU", "PCIe 5.0 lanes", "GPUs at x16", "memory channels", "memory",
                  "peak memory GB/s (computed)", "source"], rows,
                 title="workstation platforms of the lecture notes (vendors' figures)")


def offload_ram_table(n_params: Sequence[float] = (1.3e9, 7e9, 13e9, 70e9)) -> Table:
    """Host RAM that CPU offload of Adam training in BF16 mixed precision needs, in two schemes.

    ZeRO-Offload (Ren et al., 2021) keeps the BF16 parameters on the GPU and moves the gradients
    (BF16, 2 bytes), the FP32 master weights (4) and Adam's two moments (8) to the host, where the
    optimizer step runs: 14 bytes per parameter in host RAM. ZeRO-Infinity (Rajbhandari et al.,
    2021) and FSDP's ``CPUOffloadPolicy`` offload the parameters too: all 16 bytes of model states
    live in host RAM (FSDP keeps FP32 parameters and gradients there, 4 + 4, with Adam's 8).
    Chapter 2's estimator gives the components.

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for n in n_params:
        b = memory.training_memory(n, "bf16-mixed")
        host = b.master_weights + b.optimizer_states + b.gradients
        rows.append([f"{n / 1e9:g}B", f"{b.weights / 1e9:,.1f}", f"{host / 1e9:,.0f}",
                     f"{host / n:.0f}", f"{b.model_states / 1e9:,.0f}",
                     f"{b.model_states / n:.0f}"])
    return Table(["model", "ZeRO-Offload: GPU keeps BF16 parameters (GB)",
                  "ZeRO-Offload: host RAM (GB)", "ZeRO-Offload: host bytes per parameter",
                  "parameters offloaded too: host RAM (GB)", "all offloaded: host bytes per parameter"],
                 rows, title="CPU offload of Adam training in BF16 mixed precision (chapter 2's "
                             "estimator): ZeRO-Offload moves gradients and optimizer states; "
                             "ZeRO-Infinity and FSDP's CPUOffloadPolicy move the parameters too")


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "At what arithmetic intensity (FLOP per byte) does an A100 SXM 80GB turn from memory-bound to "
        "compute-bound in dense BF16? Use the datasheet's figures (roofline.DATASHEETS).",
        lambda: roofline.roof_of("A100 SXM 80GB", "bf16").ridge,
        unit="FLOP/byte",
        rel_tol=0.01,
        hint="The ridge point is peak / bandwidth: 312e12 FLOP/s over 2,039e9 bytes/s.",
    ),
    q2=Question(
        "Decoding at batch 1 reads every weight once per token. At most how many tokens per second can "
        "one H100 SXM generate with a 7B-parameter model in BF16, counting the weights only?",
        lambda: roofline.DATASHEETS["H100 SXM"].bandwidth / (7e9 * 2),
        unit="tokens/s",
        rel_tol=0.02,
        hint="Each token moves 7e9 x 2 bytes; the memory delivers 3.35e12 bytes per second.",
    ),
    q3=Question(
        "How many hours does it take to train a 1B-parameter model on 20B tokens on 8 H100 SXM GPUs at 40 % "
        "of their dense BF16 peak? Use C = 6 N D.",
        lambda: roofline.time_to_train(1e9, 20e9, roofline.DATASHEETS["H100 SXM"].dense["bf16"], 0.4, 8) / 3600,
        unit="hours",
        rel_tol=0.02,
        hint="6 x 1e9 x 20e9 FLOPs divided by 8 x 989.5e12 x 0.4 FLOP/s gives seconds.",
    ),
    q4=Question(
        "How many seconds does it take to load a 70B-parameter checkpoint stored in BF16 from a disk that "
        "reads 2 GB/s (2e9 bytes per second)?",
        lambda: 70e9 * 2 / 2e9,
        unit="s",
        rel_tol=0.02,
        hint="Bytes of the checkpoint (2 per parameter) divided by the read speed.",
    ),
)
