"""Tables and measurements that only chapter 10, *Hardware for LLM training*, shows.

The algorithms live elsewhere: :mod:`course_lib.hardware.matmul` (matrix products),
:mod:`course_lib.hardware.stream` (STREAM), :mod:`course_lib.hardware.roofline` (intensities, published
GPU figures, time to train), :mod:`course_lib.hardware.disk` (disk), :mod:`course_lib.hardware.input_pipeline`
(tokenisation) and :mod:`course_lib.parallel.cost_model` (the alpha-beta model). This module
lays their results side by side.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from types import SimpleNamespace

import torch

from course_lib.base import dtypes, timing
from course_lib.base.tables import Table
from course_lib.exercises.questions import Question
from course_lib.hardware import roofline
from course_lib.numbers import memory
from course_lib.parallel import cost_model

__all__ = ["CPU_PLATFORMS", "allreduce_table", "gpu_table", "offload_ram_table", "platform_table",
           "time_operations", "time_to_train_table"]

#: Workstation CPUs the lecture notes recommend: PCIe lanes, memory channels and their speed (MT/s).
CPU_PLATFORMS: dict[str, tuple[int, int, int, str]] = {
    "Intel Xeon W-3400": (112, 8, 4800, "intel_xeon_w3400"),
    "AMD Threadripper PRO 7000 WX": (128, 8, 5200, "amd_threadripper_pro_7000"),
}


def gpu_table(dtype: str = "bf16", this_machine: roofline.Roof | None = None) -> Table:
    """The published GPUs' dense and sparse peaks, memory, bandwidth, ridge point and links.

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for gpu in roofline.DATASHEETS.values():
        roof = gpu.roof(dtype)
        rows.append([gpu.name, f"{gpu.dense[dtype] / 1e12:,.1f}",
                     f"{gpu.sparse[dtype] / 1e12:,.0f}" if dtype in gpu.sparse else "-",
                     f"{gpu.dense['fp32'] / 1e12:,.1f}", f"{gpu.memory / 1e9:.0f}",
                     f"{gpu.bandwidth / 1e12:.2f}", f"{roof.ridge:,.0f}", gpu.gpu_link or "none (PCIe)",
                     gpu.source])  # fmt: skip
    if this_machine is not None:
        rows.append([this_machine.name, f"{this_machine.peak / 1e12:,.3f}", "-", "-", "-",
                     f"{this_machine.bandwidth / 1e12:.3f}", f"{this_machine.ridge:,.0f}", "-",
                     "measured here"])  # fmt: skip
    return Table(["GPU", f"{dtype} dense TFLOP/s", f"{dtype} with 2:4 sparsity", "fp32 TFLOP/s",
                  "memory (GB)", "bandwidth (TB/s)", "ridge (FLOP/byte)", "GPU-to-GPU link",
                  "source"], rows,
                 title="published figures (dense unless marked) and this machine's measured roof")


def time_operations(operations: Mapping[str, tuple[int, int, int]], dtype: str = "fp32",
                    repeats: int = 5, min_seconds: float = 0.02,
                    seed: int = 0) -> list[tuple[str, float, float]]:
    """Time (m x k) @ (k x n) products on the CPU: ``(label, intensity, FLOP/s)`` of the fastest run.

    The runs are interleaved across the products (:func:`course_lib.base.timing.interleaved_times`).

    Chapter 10, *Hardware for LLM training*.
    """
    if not operations:
        raise ValueError("time_operations() needs at least one {label: (m, k, n)}")
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"time_operations() times fp32 or bf16 products, got {dtype!r}")
    torch_dtype = dtypes.TORCH[dtype]
    g = torch.Generator().manual_seed(seed)
    calls, numbers, ops = [], [], []
    for label, (m, k, n) in operations.items():
        op = roofline.matmul_operation(m, k, n, dtype, label)
        a = torch.randn(m, k, generator=g).to(torch_dtype)
        b = torch.randn(k, n, generator=g).to(torch_dtype)
        call = functools.partial(torch.matmul, a, b)
        numbers.append(timing.calls_per_run(call, "cpu", min_seconds))
        calls.append(call)
        ops.append(op)
    times = timing.interleaved_times(calls, repeats, "cpu", numbers)
    return [(op.name, op.intensity, op.flops / min(t)) for op, t in zip(ops, times)]


def time_to_train_table(n_params: float, tokens: float, machines: Mapping[str, tuple[float, int]],
                        utilisation: float = 0.4) -> Table:
    """Time to train with C = 6 N D on each machine: ``{name: (FLOP/s per device, devices)}``.

    Chapter 10, *Hardware for LLM training*.
    """
    flops = roofline.training_flops(n_params, tokens)
    rows = []
    for name, (peak, devices) in machines.items():
        seconds = roofline.time_to_train(n_params, tokens, peak, utilisation, devices)
        rows.append([name, devices, f"{peak / 1e12:,.3g}", _duration(seconds)])
    return Table(["machine", "devices", "peak TFLOP/s per device", "time to train"], rows,
                 title=f"N = {n_params:.3g} parameters, D = {tokens:.3g} tokens: C = 6 N D = "
                       f"{flops:.2e} FLOPs at {utilisation:.0%} of peak")


def _duration(seconds: float) -> str:
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("hours", 3600),
                       ("minutes", 60)):
        if seconds >= size:
            return f"{seconds / size:,.1f} {unit}"
    return f"{seconds:.1f} s"


def offload_ram_table(n_params: Sequence[float] = (1.3e9, 7e9, 13e9, 70e9)) -> Table:
    """Host RAM that CPU offload needs: master weights, Adam states and gradients in host memory.

    With ZeRO-Offload (Ren et al., 2021) the GPU keeps the BF16 weights and the host the FP32
    master weights, Adam's two moments and the BF16 gradients: chapter 2's estimator gives them.

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for n in n_params:
        b = memory.training_memory(n, "bf16-mixed")
        host = b.master_weights + b.optimizer_states + b.gradients
        rows.append([f"{n / 1e9:g}B", f"{b.weights / 1e9:,.1f}", f"{host / 1e9:,.0f}",
                     f"{host / n:.0f}"])
    return Table(["model", "on the GPU: BF16 weights (GB)", "in host RAM (GB)",
                  "host bytes per parameter"], rows,
                 title="CPU offload of Adam training in BF16 mixed precision (chapter 2's estimator)")


def platform_table() -> Table:
    """The recommended workstation CPUs: PCIe lanes, GPUs at x16, memory channels and peak bandwidth.

    Peak memory bandwidth = channels x 8 bytes x transfers per second (computed, not measured).

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for name, (lanes, channels, mts, source) in CPU_PLATFORMS.items():
        rows.append([name, lanes, lanes // 16, channels, f"DDR5-{mts}",
                     f"{channels * 8 * mts * 1e6 / 1e9:,.1f}", source])
    return Table(["CPU", "PCIe 5.0 lanes", "GPUs at x16", "memory channels", "memory",
                  "peak memory GB/s (computed)", "source"], rows,
                 title="workstation platforms of the lecture notes (vendors' figures)")


def allreduce_table(n_bytes: float, world_size: int,
                    links: Sequence[cost_model.Link | str]) -> Table:
    """Seconds for one ring all-reduce of ``n_bytes`` over ``world_size`` ranks on each link.

    Chapter 10, *Hardware for LLM training*.
    """
    rows = []
    for link in links:
        link = cost_model.LINKS[link] if isinstance(link, str) else link
        seconds = cost_model.ring_allreduce_time(n_bytes, world_size, link)
        rows.append([link.name, f"{link.bandwidth / 1e9:,.2f}", f"{link.latency * 1e6:,.1f}",
                     f"{seconds:,.3f}", link.source or "measured here"])
    return Table(["link", "GB/s per direction", "latency (us)", "seconds per all-reduce",
                  "source"], rows,
                 title=f"one ring all-reduce of {n_bytes / 1e9:,.1f} GB over {world_size} ranks "
                       "(alpha-beta model)")


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
