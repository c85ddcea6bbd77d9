"""The roofline model: how fast an operation can run, given its arithmetic intensity and the machine.

Chapter 10, *Hardware for LLM training*, teaches it (Williams, Waterman and Patterson, 2009). An
operation does ``flops`` floating-point operations and moves ``bytes`` to and from memory; its
*arithmetic intensity* is ``flops / bytes``. A machine that computes at most ``peak`` FLOP/s and
moves at most ``bandwidth`` bytes/s runs it no faster than ``min(peak, bandwidth * intensity)``
FLOP/s. Below the *ridge point* ``peak / bandwidth`` an operation is memory-bound (faster memory
helps, more FLOP/s do not); above it, compute-bound.

The byte counts here are the minimum traffic: every input read once and every output written
once, as a kernel that keeps its tiles in cache achieves. :data:`DATASHEETS` holds the vendors'
published figures of three data-centre GPUs, each cited by bibliography key; NVIDIA lists its
tensor-core figures *with 2:4 sparsity* and notes that dense figures are half of them, so both
are kept apart here and the dense ones are what training and decoding use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from course_lib.base import dtypes
from course_lib.base.checks import choice, positive
from course_lib.numbers import memory

__all__ = [
    "Accelerator", "DATASHEETS", "Operation", "Roof", "attainable", "block_operations", "check_utilisation",
    "devices_to_fit", "matmul_operation", "roof_of", "time_to_train", "training_flops",
    "training_memory_per_device",
]  # fmt: skip

#: The dtypes the roofline knows: those of the datasheets. TF32 is a tensor-core mode whose
#: numbers are stored as FP32, so it moves FP32's bytes.
_DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def _element_bytes(dtype: str) -> float:
    """Bytes that one element of ``dtype`` occupies in memory (fp32 and tf32 4, bf16/fp16 2, fp8/int8 1)."""
    return dtypes.BYTES[choice(dtype, _DTYPES, "dtype")]


@dataclass(frozen=True)
class Roof:
    """A machine as the roofline sees it: peak FLOP/s in one dtype and memory bandwidth in bytes/s.

    Chapter 10, *Hardware for LLM training*.
    """

    name: str
    peak: float
    bandwidth: float

    def __post_init__(self) -> None:
        positive(self.peak, f"{self.name}: peak (FLOP/s)")
        positive(self.bandwidth, f"{self.name}: bandwidth (bytes/s)")

    @property
    def ridge(self) -> float:
        """The arithmetic intensity (FLOP/byte) where the machine turns from memory- to compute-bound."""
        return self.peak / self.bandwidth


@dataclass(frozen=True)
class Accelerator:
    """A GPU's published figures: dense and 2:4-sparse peaks per dtype, memory, links, source.

    ``dense`` and ``sparse`` map a dtype to FLOP/s (integer operations per second for int8);
    ``bandwidth`` and ``memory`` are in bytes/s and bytes (``memory`` as chapter 2's
    :data:`course_lib.numbers.memory.GPUS` counts it: the "80GB" of HBM a datasheet sells is
    80 GiB, the one capacity every chapter and the planner use); ``host_link`` and ``gpu_link`` name
    entries of chapter 8's :data:`course_lib.parallel.cost_model.LINKS` (``gpu_link`` empty: no
    GPU-to-GPU link, peers talk over PCIe). ``source`` is the bibliography key.

    Chapter 10, *Hardware for LLM training*.
    """

    name: str
    dense: Mapping[str, float]
    sparse: Mapping[str, float]
    bandwidth: float
    memory: float
    host_link: str
    gpu_link: str
    source: str
    note: str = ""

    def roof(self, dtype: str = "bf16") -> Roof:
        """This GPU's roof for the dense peak of ``dtype``."""
        dtype = choice(dtype, _DTYPES, "dtype")
        if dtype not in self.dense:
            raise ValueError(f"{self.name} has no published {dtype} figure; "
                             f"choose one of {', '.join(self.dense)}")
        return Roof(f"{self.name} {dtype}", self.dense[dtype], self.bandwidth)


_T, _G = 1e12, 1e9
#: Published figures of three data-centre GPUs (vendors' datasheets, cited by key).
DATASHEETS: dict[str, Accelerator] = {a.name: a for a in (
    Accelerator(
        "A100 SXM 80GB",
        dense={"fp32": 19.5 * _T, "tf32": 156 * _T, "bf16": 312 * _T, "fp16": 312 * _T,
               "int8": 624 * _T},
        sparse={"tf32": 312 * _T, "bf16": 624 * _T, "fp16": 624 * _T, "int8": 1248 * _T},
        bandwidth=2039 * _G, memory=80 * memory.GIB, host_link="PCIe 4.0 x16", gpu_link="NVLink 3 (A100)",
        source="nvidia_a100",
        note="The datasheet gives dense tensor-core figures and, with an asterisk, the sparse ones."),
    Accelerator(
        "H100 SXM",
        dense={"fp32": 67 * _T, "tf32": 494.5 * _T, "bf16": 989.5 * _T, "fp16": 989.5 * _T,
               "fp8": 1979 * _T, "int8": 1979 * _T},
        sparse={"tf32": 989 * _T, "bf16": 1979 * _T, "fp16": 1979 * _T, "fp8": 3958 * _T,
                "int8": 3958 * _T},
        bandwidth=3350 * _G, memory=80 * memory.GIB, host_link="PCIe 5.0 x16", gpu_link="NVLink 4 (H100)",
        source="nvidia_h100",
        note="The datasheet lists tensor-core figures with sparsity only and says the dense ones "
             "are half as large: the dense figures here are those halves."),
    Accelerator(
        "L40S",
        dense={"fp32": 91.6 * _T, "tf32": 183 * _T, "bf16": 362.05 * _T, "fp16": 362.05 * _T,
               "fp8": 733 * _T, "int8": 733 * _T},
        sparse={"tf32": 366 * _T, "bf16": 733 * _T, "fp16": 733 * _T, "fp8": 1466 * _T,
                "int8": 1466 * _T},
        bandwidth=864 * _G, memory=48 * memory.GIB, host_link="PCIe 4.0 x16", gpu_link="",
        source="nvidia_l40s",
        note="GDDR6 instead of HBM and no NVLink: GPUs of one machine talk over PCIe 4.0."),
)}  # fmt: skip


def roof_of(name: str, dtype: str = "bf16") -> Roof:
    """The roof of a GPU of :data:`DATASHEETS` at the dense peak of ``dtype``.

    Chapter 10, *Hardware for LLM training*.
    """
    if name not in DATASHEETS:
        raise ValueError(f"unknown GPU {name!r}; choose one of {', '.join(DATASHEETS)}")
    return DATASHEETS[name].roof(dtype)


def attainable(intensity: float, roof: Roof) -> float:
    """The fastest an operation of ``intensity`` FLOP/byte can run: ``min(peak, bandwidth * intensity)``.

    Chapter 10, *Hardware for LLM training*.
    """
    return min(roof.peak, roof.bandwidth * positive(intensity, "intensity (FLOP/byte)"))


@dataclass(frozen=True)
class Operation:
    """One operation's floating-point operations and the bytes it must move at least.

    Chapter 10, *Hardware for LLM training*.
    """

    name: str
    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes

    def bound(self, roof: Roof) -> str:
        """'memory' if the operation sits left of the roof's ridge point, else 'compute'."""
        return "memory" if self.intensity < roof.ridge else "compute"

    def seconds(self, roof: Roof) -> float:
        """The least time on ``roof``: ``max(flops / peak, bytes / bandwidth)``."""
        return max(self.flops / roof.peak, self.bytes / roof.bandwidth)


def matmul_operation(m: int, k: int, n: int, dtype: str = "bf16", name: str = "",
                     batch: int = 1) -> Operation:
    """``batch`` products of an (m x k) by a (k x n) matrix: ``2 m k n`` FLOPs, ``m k + k n + m n`` elements.

    Chapter 10, *Hardware for LLM training*.
    """
    for value, what in ((m, "m"), (k, "k"), (n, "n"), (batch, "batch")):
        positive(value, what, integer=True)
    e = _element_bytes(dtype)
    return Operation(name or f"({m} x {k}) @ ({k} x {n})", 2.0 * batch * m * k * n,
                     float(batch * (m * k + k * n + m * n) * e))


def _elementwise(name: str, elements: int, flops_per_element: float, e: int) -> Operation:
    # Read every element once and write it once.
    return Operation(name, flops_per_element * elements, 2.0 * elements * e)


def block_operations(hidden: int = 768, heads: int = 12, seq: int = 1024, batch: int = 1,
                     mode: str = "decode", dtype: str = "bf16") -> list[Operation]:
    """The operations of one GPT-2 block, with their FLOPs and least bytes, in one of two modes.

    ``mode="decode"``: each of ``batch`` sequences adds one token and attends to ``seq`` cached
    keys and values (generation with a KV cache). ``mode="train"``: ``batch`` whole sequences of
    ``seq`` tokens go through the block (the forward pass of training, and of a prompt). Layer
    norm and softmax are counted as about 5 FLOPs per element (a rough count: mean, variance,
    scale; or max, subtract, exp, sum, divide), the rest exactly.

    Chapter 10, *Hardware for LLM training*.
    """
    for value, what in ((hidden, "hidden"), (heads, "heads"), (seq, "seq"), (batch, "batch")):
        positive(value, what, integer=True)
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be a multiple of heads ({heads})")
    mode = choice(mode, ("decode", "train"), "mode")
    e, dh = _element_bytes(dtype), hidden // heads
    tokens, queries = (batch, 1) if mode == "decode" else (batch * seq, seq)
    bh = batch * heads
    return [
        _elementwise("layer norm", tokens * hidden, 5, e),
        matmul_operation(tokens, hidden, 3 * hidden, dtype, "QKV projection"),
        matmul_operation(queries, dh, seq, dtype, "attention scores Q K^T", bh),
        _elementwise("softmax", bh * queries * seq, 5, e),
        matmul_operation(queries, seq, dh, dtype, "attention x V", bh),
        matmul_operation(tokens, hidden, hidden, dtype, "output projection"),
        matmul_operation(tokens, hidden, 4 * hidden, dtype, "MLP up"),
        matmul_operation(tokens, 4 * hidden, hidden, dtype, "MLP down"),
    ]


def training_flops(n_params: float, tokens: float) -> float:
    """Training compute ``C = 6 N D``: 2 FLOPs per parameter per token forward, 4 backward.

    Chapter 10, *Hardware for LLM training*.
    """
    return 6.0 * positive(n_params, "n_params") * positive(tokens, "tokens")


def check_utilisation(utilisation: float) -> float:
    """``utilisation`` if it is a share of the peak in (0, 1], else a ValueError that says so.

    Chapter 10, *Hardware for LLM training*.
    """
    if isinstance(utilisation, bool) or not isinstance(utilisation, (int, float)) \
            or not 0 < utilisation <= 1:
        raise ValueError(f"utilisation must be a share in (0, 1] of the peak FLOP/s that training "
                         f"sustains, e.g. 0.4, got {utilisation!r}")
    return float(utilisation)


def time_to_train(n_params: float, tokens: float, flops_per_second: float,
                  utilisation: float = 0.4, devices: int = 1) -> float:
    """Seconds to train on ``devices`` devices of ``flops_per_second`` each, used at ``utilisation``.

    ``utilisation`` is the model-FLOPs utilisation (MFU): the share of the peak that training
    reaches; 0.3-0.5 is typical of large, well-tuned runs on GPUs.

    Chapter 10, *Hardware for LLM training*.
    """
    utilisation = check_utilisation(utilisation)
    devices = positive(devices, "devices", integer=True)
    return training_flops(n_params, tokens) / (positive(flops_per_second, "flops_per_second")
                                                * utilisation * devices)


def training_memory_per_device(n_params: float, devices: int = 1, shape: memory.ModelShape | None = None,
                               seq_len: int = 2048) -> memory.Breakdown:
    """What each of ``devices`` devices holds to train: ZeRO-3 over them, micro-batch 1, checkpointing.

    Chapter 2's estimator (:func:`course_lib.numbers.memory.training_memory`) for BF16 mixed
    precision with Adam (16 bytes of model states per parameter), the states sharded over the
    devices with ZeRO-3 / FSDP when there are several (nothing sharded on one), plus what each
    device keeps whole: the activations of one sequence of ``seq_len`` tokens with activation
    checkpointing, the gathered layers and the buckets. ``shape`` None: a GPT-3-like shape for
    the parameter count.

    Chapter 10, *Hardware for LLM training*.
    """
    devices = positive(devices, "devices", integer=True)
    return memory.training_memory(n_params, "bf16-mixed", "adam", batch=1, seq_len=seq_len,
                                  gpus=devices, zero_stage=3 if devices > 1 else 0, shape=shape,
                                  activation_checkpointing=True)


def devices_to_fit(n_params: float, memory_per_device: float, shape: memory.ModelShape | None = None,
                   seq_len: int = 2048, most: int = 65536) -> int | None:
    """The fewest devices of ``memory_per_device`` bytes over which ZeRO-3 fits training; None past ``most``.

    Uses :func:`training_memory_per_device`: the model states shrink as 1 / devices, the rest does
    not, so a device too small for that rest fits at no count.

    Chapter 10, *Hardware for LLM training*.
    """
    capacity = positive(memory_per_device, "memory_per_device (bytes)")
    most = positive(most, "most", integer=True)
    low, high = 1, most
    if training_memory_per_device(n_params, most, shape, seq_len).total > capacity:
        return None
    while low < high:  # the total falls as the devices grow: bisect
        mid = (low + high) // 2
        if training_memory_per_device(n_params, mid, shape, seq_len).total <= capacity:
            high = mid
        else:
            low = mid + 1
    return low
