"""The alpha-beta (latency-bandwidth) model of communication, and the links of real machines.

Chapter 8, *Data parallelism with DDP*, teaches it. A learner's machine has two CPU cores, so how
DDP scales on GPUs cannot be measured there; it can be predicted. Sending ``S`` bytes costs
``alpha + S / beta``: a fixed latency ``alpha`` per step, then the transfer at bandwidth ``beta``.
A ring all-reduce over ``N`` ranks takes ``2 (N - 1)`` steps and sends ``2 (N - 1) / N * S``
bytes per rank (Patarasuk and Yuan, 2009), so it takes
``2 (N - 1) alpha + 2 (N - 1) / N * S / beta``; NCCL's own tuning model has the same form.

:data:`LINKS` holds the interconnects of common machines. Bandwidths are the vendors' peak figures
per direction (cited by bibliography key); real transfers reach perhaps 70-90 % of them. Latencies
are rough orders of magnitude (a few microseconds per ring step), taken from NCCL's tuning model or
labelled as assumptions. Nothing here imports torch: it is arithmetic.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DDP_BUCKET_BYTES", "LINKS", "Link", "StepTime", "data_parallel_step",
           "fit_alpha_beta", "offload_transfer_time", "ring_allreduce_bytes",
           "ring_allreduce_time"]

#: DDP's default gradient bucket: ``bucket_cap_mb=25``, i.e. 25 MiB.
DDP_BUCKET_BYTES: int = 25 * 2**20


@dataclass(frozen=True)
class Link:
    """One interconnect: peak bandwidth per direction per GPU, latency per message step, sources.

    ``bandwidth`` is in bytes per second that one GPU can send while it receives as much;
    ``latency`` (alpha) is in seconds per step of a collective. ``source`` is the bibliography key
    of the bandwidth figure, ``latency_source`` that of the latency (empty: an assumption, which
    ``note`` says).

    Chapter 8, *Data parallelism with DDP*.
    """

    name: str
    bandwidth: float
    latency: float
    source: str
    latency_source: str = ""
    note: str = ""

    def __post_init__(self) -> None:
        if not self.bandwidth > 0 or not math.isfinite(self.bandwidth):
            raise ValueError(f"{self.name}: bandwidth must be a positive number of bytes per "
                             f"second (e.g. 50e9), got {self.bandwidth!r}.")
        if not self.latency >= 0 or not math.isfinite(self.latency):
            raise ValueError(f"{self.name}: latency must be seconds >= 0 (e.g. 5e-6), "
                             f"got {self.latency!r}.")


_NCCL_LATENCY = ("Latency: NCCL's tuning model (src/graph/tuning.cc) charges a ring step about "
                 "{} us over {} (Simple protocol); a rough figure, not a measurement.")

#: Interconnects of common GPU machines, by name. Bandwidth: per direction, per GPU.
LINKS: dict[str, Link] = {link.name: link for link in (
    Link("PCIe 4.0 x16", 32e9, 5.7e-6, "pcisig_specifications", "nccl_tuning_model",
         "16 GT/s per lane: 64 GB/s for both directions, as the A100 datasheet says; 31.5 GB/s "
         "of payload after 128b/130b encoding. " + _NCCL_LATENCY.format(5.7, "PCIe")),
    Link("PCIe 5.0 x16", 64e9, 5.7e-6, "pcisig_specifications", "nccl_tuning_model",
         "32 GT/s per lane: 128 GB/s for both directions, as the H100 datasheet says. "
         + _NCCL_LATENCY.format(5.7, "PCIe")),
    Link("NVLink 3 (A100)", 300e9, 3.4e-6, "nvidia_a100", "nccl_tuning_model",
         "A100 SXM: 12 links, 600 GB/s for both directions together. "
         + _NCCL_LATENCY.format(3.4, "NVLink")),
    Link("NVLink 4 (H100)", 450e9, 3.4e-6, "nvidia_h100", "nccl_tuning_model",
         "H100 SXM: 18 links, 900 GB/s for both directions together. "
         + _NCCL_LATENCY.format(3.4, "NVLink")),
    Link("InfiniBand HDR", 25e9, 9.6e-6, "nvidia_connectx6", "nccl_tuning_model",
         "One 200 Gb/s port (ConnectX-6) per GPU. " + _NCCL_LATENCY.format(9.6, "the network")),
    Link("InfiniBand NDR", 50e9, 9.6e-6, "nvidia_connectx7", "nccl_tuning_model",
         "One 400 Gb/s port (ConnectX-7) per GPU. " + _NCCL_LATENCY.format(9.6, "the network")),
    Link("Ethernet 100G", 12.5e9, 30e-6, "nvidia_connectx6", "",
         "One 100 Gb/s Ethernet port per GPU, TCP sockets without RDMA. Latency: an assumption "
         "(tens of microseconds through the kernel's network stack), not a cited figure."),
)}


def _check_bytes(n_bytes: float, what: str = "n_bytes") -> float:
    if isinstance(n_bytes, bool) or not isinstance(n_bytes, numbers.Real) \
            or not math.isfinite(n_bytes) or n_bytes < 0:
        raise ValueError(f"{what} must be a number of bytes >= 0 (e.g. 4 * n_params for FP32 "
                         f"gradients), got {n_bytes!r}.")
    return float(n_bytes)


def _check_world(world_size: int) -> int:
    if isinstance(world_size, bool) or not isinstance(world_size, numbers.Integral) \
            or world_size < 1:
        raise ValueError(f"world_size must be a whole number >= 1 (the number of GPUs), "
                         f"got {world_size!r}.")
    return int(world_size)


def _link(link: Link | str) -> Link:
    if isinstance(link, Link):
        return link
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; pass a Link or one of {list(LINKS)}.")
    return LINKS[link]


def ring_allreduce_bytes(n_bytes: float, world_size: int) -> float:
    """Bytes each rank sends in a ring all-reduce of ``n_bytes``: ``2 (N - 1) / N * n_bytes``.

    The bandwidth-optimal schedule of Patarasuk and Yuan (2009): N - 1 reduce-scatter steps and
    N - 1 all-gather steps, each sending one chunk of ``n_bytes / N``. It tends to twice the
    tensor, whatever the number of ranks.

    Chapter 8, *Data parallelism with DDP*.
    """
    n = _check_world(world_size)
    return 2 * (n - 1) / n * _check_bytes(n_bytes)


def ring_allreduce_time(n_bytes: float, world_size: int, link: Link | str) -> float:
    """Seconds for a ring all-reduce: ``2 (N - 1) alpha + 2 (N - 1) / N * n_bytes / bandwidth``.

    Zero for one rank. The latency term grows with N; the bandwidth term tends to
    ``2 * n_bytes / bandwidth``.

    Chapter 8, *Data parallelism with DDP*.
    """
    n, link = _check_world(world_size), _link(link)
    return 2 * (n - 1) * link.latency + ring_allreduce_bytes(n_bytes, n) / link.bandwidth


def fit_alpha_beta(sizes: Sequence[float], seconds: Sequence[float], world_size: int,
                   relative: bool = True, name: str = "measured") -> Link:
    """Fit the ring all-reduce model to measured times: a :class:`Link` with the fitted alpha and beta.

    A straight line ``t = a + b * S`` is fitted to the all-reduce times ``seconds`` of messages of
    ``sizes`` bytes over ``world_size`` ranks (pass each size's fastest time; a size may repeat),
    then the ring model of :func:`ring_allreduce_time`,
    ``t = 2 (N - 1) alpha + 2 (N - 1) / N * S / beta``, is inverted:
    ``alpha = a / (2 (N - 1))`` and ``beta = 2 (N - 1) / (N b)``. The result plugs into
    :func:`ring_allreduce_time` and :func:`data_parallel_step`.

    Which errors count. Times span orders of magnitude (microseconds for small messages,
    milliseconds for large ones), and a plain least-squares fit minimises absolute errors, so the
    largest messages decide it and the latency (the small messages' time) comes out as noise.
    ``relative=True`` (the default) minimises relative errors instead, weighting each point by
    ``1 / t**2``, so that every size counts alike; ``relative=False`` is the plain fit. Noise can
    push the intercept below zero: the latency is then clamped at 0, the slope refitted through
    the origin, and the link's ``note`` says so. A slope <= 0 (times that do not grow with size)
    raises a ValueError: measure larger messages.

    Chapter 8, *Data parallelism with DDP*.
    """
    if isinstance(sizes, (str, bytes)) or isinstance(seconds, (str, bytes)) \
            or not isinstance(sizes, Sequence) or not isinstance(seconds, Sequence):
        raise ValueError("sizes and seconds must be lists of numbers: bytes per message and the "
                         "seconds of its all-reduce.")
    if len(sizes) != len(seconds):
        raise ValueError(f"sizes and seconds must have the same length (one time per size), got "
                         f"{len(sizes)} sizes and {len(seconds)} times.")
    xs = [_check_bytes(s, "every size") for s in sizes]
    ts = []
    for t in seconds:
        if isinstance(t, bool) or not isinstance(t, numbers.Real) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"every time must be a positive number of seconds, got {t!r}.")
        ts.append(float(t))
    n = _check_world(world_size)
    if n < 2:
        raise ValueError("world_size must be >= 2 to fit the ring model: one rank sends nothing.")
    if len(set(xs)) < 2:
        raise ValueError(f"fitting a line needs at least 2 distinct message sizes, got "
                         f"{sorted(set(xs))}; measure small and large messages (e.g. 4 KiB to "
                         "16 MiB).")
    weights = [1 / t**2 if relative else 1.0 for t in ts]
    total = sum(weights)
    mean_x = sum(w * x for w, x in zip(weights, xs)) / total
    mean_t = sum(w * t for w, t in zip(weights, ts)) / total
    slope = (sum(w * (x - mean_x) * (t - mean_t) for w, x, t in zip(weights, xs, ts))
             / sum(w * (x - mean_x) ** 2 for w, x in zip(weights, xs)))
    intercept = mean_t - slope * mean_x
    kind = "relative" if relative else "absolute"
    note = (f"Fitted ({kind} least squares) to {len(xs)} all-reduce times of {min(xs):,.0f} to "
            f"{max(xs):,.0f} bytes over {n} ranks.")
    if intercept < 0:
        note += (f" The fitted latency was negative ({intercept:.3g} s over all steps, noise): "
                 "set to 0 and the slope refitted through the origin.")
        intercept = 0.0
        slope = (sum(w * x * t for w, x, t in zip(weights, xs, ts))
                 / sum(w * x * x for w, x in zip(weights, xs)))
    if not slope > 0:
        raise ValueError(f"the times do not grow with the message size (fitted slope {slope:.3g} "
                         "s per byte): the sizes are too small for the bandwidth to show; "
                         "measure larger messages (up to several MiB).")
    return Link(name, bandwidth=2 * (n - 1) / (n * slope), latency=intercept / (2 * (n - 1)),
                source="", note=note)


def offload_transfer_time(n_params: float, world_size: int, link: Link | str,
                          bytes_per_param: float = 12) -> float:
    """Seconds per step that CPU offload spends copying one GPU's shard between host and GPU.

    With FSDP's CPU offload, each GPU keeps its shard of the FP32 parameters, gradients and
    optimizer states in host memory: the shard is copied to the GPU before the all-gather of the
    forward pass and again before that of the backward pass (4 + 4 bytes per parameter), and
    its FP32 gradient back to the host (4 bytes): ``bytes_per_param`` = 12 in all, over
    ``n_params / world_size`` parameters, at the link's bandwidth. The optimizer step then runs
    on the CPU, which is not counted here.

    Chapter 8, *Data parallelism with DDP*.
    """
    n, link = _check_world(world_size), _link(link)
    per_rank = _check_bytes(n_params, "n_params") / n * _check_bytes(bytes_per_param,
                                                                      "bytes_per_param")
    return per_rank / link.bandwidth


@dataclass(frozen=True)
class StepTime:
    """One predicted data-parallel step: compute, communication, the part not hidden, and scaling.

    Weak scaling: every GPU keeps its own batch, so one GPU's step is ``compute`` alone and
    ``efficiency = compute / step``; ``speedup = world_size * efficiency`` is the throughput
    against one GPU.

    Chapter 8, *Data parallelism with DDP*.
    """

    world_size: int
    link: str
    compute: float
    communication: float
    exposed: float

    @property
    def step(self) -> float:
        """Seconds per step: the compute plus the communication that overlap did not hide."""
        return self.compute + self.exposed

    @property
    def efficiency(self) -> float:
        """One GPU's step time over this step time (at most 1)."""
        return self.compute / self.step

    @property
    def speedup(self) -> float:
        """Throughput against one GPU: ``world_size * efficiency``."""
        return self.world_size * self.efficiency


def data_parallel_step(compute_seconds: float, grad_bytes: float, world_size: int,
                       link: Link | str, overlap: float = 2 / 3,
                       bucket_bytes: float = DDP_BUCKET_BYTES) -> StepTime:
    """Predict one DDP step: bucketed ring all-reduces of the gradients, partly hidden by backward.

    The model, kept simple on purpose. DDP all-reduces the gradients in buckets of
    ``bucket_bytes`` (25 MiB by default), each one a ring all-reduce that pays its own latency. A
    bucket starts as soon as its gradients are ready, while backward goes on, so communication can
    hide behind ``overlap * compute_seconds`` (backward is about 2/3 of the compute, forward to
    backward about 1 : 2); pass ``overlap=0`` for no overlap. The last bucket is ready only when
    backward ends, so its all-reduce is always exposed::

        exposed = max(0, communication - last - overlap * compute) + last

    The ring runs over one kind of link: NVLink joins the GPUs of one server, so across servers
    pass the network's link. Real steps add what this leaves out: NCCL's fixed cost per call and
    its switch to trees when latency dominates, compute and communication contending for the
    GPU, and stragglers.

    Chapter 8, *Data parallelism with DDP*.
    """
    if isinstance(compute_seconds, bool) or not isinstance(compute_seconds, numbers.Real) \
            or not math.isfinite(compute_seconds) or compute_seconds <= 0:
        raise ValueError(f"compute_seconds must be the forward + backward time of one GPU's "
                         f"step in seconds, > 0 (e.g. 0.25), got {compute_seconds!r}.")
    grad_bytes = _check_bytes(grad_bytes, "grad_bytes")
    n, link = _check_world(world_size), _link(link)
    if isinstance(overlap, bool) or not isinstance(overlap, numbers.Real) \
            or not 0 <= overlap <= 1:
        raise ValueError(f"overlap must be the fraction of the compute that communication can "
                         f"hide behind, between 0 and 1 (default 2/3), got {overlap!r}.")
    if _check_bytes(bucket_bytes, "bucket_bytes") == 0:
        raise ValueError("bucket_bytes must be > 0; DDP's default is 25 MiB (DDP_BUCKET_BYTES).")
    full, rest = divmod(grad_bytes, bucket_bytes)
    buckets = [bucket_bytes] * int(full) + ([rest] if rest > 0 else [])
    communication = sum(ring_allreduce_time(b, n, link) for b in buckets)
    last = ring_allreduce_time(min(bucket_bytes, grad_bytes), n, link) if buckets else 0.0
    exposed = max(0.0, communication - last - overlap * compute_seconds) + last
    return StepTime(n, link.name, float(compute_seconds), communication, exposed)
