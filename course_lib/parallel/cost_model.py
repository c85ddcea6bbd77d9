"""The alpha-beta (latency-bandwidth) model of communication, and the links of real machines.

Chapter 8, *Data parallelism with DDP*, teaches it. A learner's machine has two CPU cores, so how
DDP scales on GPUs cannot be measured there; it can be predicted. Sending ``S`` bytes costs
``alpha + S / beta``: a fixed latency ``alpha`` per step, then the transfer at bandwidth ``beta``.
A ring all-reduce over ``N`` ranks takes ``2 (N - 1)`` steps and sends ``2 (N - 1) / N * S``
bytes per rank (Patarasuk and Yuan, 2009), so it takes
``2 (N - 1) alpha + 2 (N - 1) / N * S / beta``; NCCL's own tuning model has the same form.

A cluster (:class:`Cluster`) has two links: NVLink inside a server of 8 GPUs, the network
between servers (one port per GPU). :func:`allreduce_time` models NCCL's algorithms on it as
NCCL's tuning model (src/graph/tuning.cc) does: the ring, whose latency grows with N (only its
steps between nodes pay the network's latency), the tree, whose latency grows with log N, and
the hierarchical all-reduce (reduce-scatter in the node, all-reduce of 1/8 across nodes,
all-gather in the node); :func:`data_parallel_step` predicts a DDP step on a link or a cluster.

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

__all__ = ["ALGORITHMS", "BACKWARD_SHARE", "DDP_BUCKET_BYTES", "GPUS_PER_NODE", "LINKS", "Cluster", "Link",
           "StepTime", "allgather_time", "allreduce_time", "data_parallel_step",
           "fit_alpha_beta", "get_link", "offload_transfer_time", "queue_on_link",
           "ring_allreduce_bytes", "ring_allreduce_time", "ring_time"]

#: DDP's default gradient bucket: ``bucket_cap_mb=25``, i.e. 25 MiB.
DDP_BUCKET_BYTES: int = 25 * 2**20
#: The share of a step's compute that is the backward pass (forward : backward = 1 : 2): what a
#: gradient all-reduce can hide behind.
BACKWARD_SHARE: float = 2 / 3


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
    Link("RoCE 400G", 50e9, 9.6e-6, "dubey2024llama3", "nccl_tuning_model",
         "One 400 Gb/s RDMA-over-Ethernet port per GPU: the network Llama 3 405B trained on "
         "(Meta's RoCE cluster). Its bandwidth is InfiniBand NDR's; NCCL's tuning model has "
         "one latency for every network. " + _NCCL_LATENCY.format(9.6, "the network")),
    Link("Ethernet 100G", 12.5e9, 9.6e-6, "nvidia_connectx6", "nccl_tuning_model",
         "One 100 Gb/s Ethernet port per GPU, with RDMA (RoCE) as NCCL uses it; ports of 200 and "
         "400 Gb/s exist too (ConnectX-7). NCCL's tuning model has one latency for every network, "
         "so this link differs from InfiniBand in bandwidth only. "
         + _NCCL_LATENCY.format(9.6, "the network")),
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


def get_link(link: Link | str) -> Link:
    """``link`` itself, or the :data:`LINKS` entry of that name; a clear error for another name.

    Chapter 8, *Data parallelism with DDP*.
    """
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
    n, link = _check_world(world_size), get_link(link)
    return 2 * (n - 1) * link.latency + ring_allreduce_bytes(n_bytes, n) / link.bandwidth


def ring_time(kind: str, n_bytes: float, world_size: int, link: Link | str) -> float:
    """Seconds of one ring collective whose full tensor has ``n_bytes``, by ``kind``.

    ``kind`` is "all-reduce" (:func:`ring_allreduce_time`), "all-gather" or "reduce-scatter"
    (each half of it: ``(N - 1) alpha + (N - 1) / N * n_bytes / bandwidth``, ``n_bytes`` the
    gathered output or the scattered input), or "broadcast" (a pipelined chain:
    ``(N - 1) alpha + n_bytes / bandwidth``). Zero for one rank.

    Chapter 8, *Data parallelism with DDP*.
    """
    n, link = _check_world(world_size), get_link(link)
    n_bytes = _check_bytes(n_bytes)
    if n == 1:
        return 0.0
    if kind == "all-reduce":
        return ring_allreduce_time(n_bytes, n, link)
    if kind in ("all-gather", "reduce-scatter"):
        return (n - 1) * link.latency + (n - 1) / n * n_bytes / link.bandwidth
    if kind == "broadcast":
        return (n - 1) * link.latency + n_bytes / link.bandwidth
    raise ValueError(f"kind must be 'all-reduce', 'all-gather', 'reduce-scatter' or "
                     f"'broadcast', got {kind!r}.")


def queue_on_link(ready: Sequence[float], durations: Sequence[float]) -> list[float]:
    """When each transfer ends on a link that carries one at a time, in order of arrival.

    Transfer ``i`` can start when it is ready (``ready[i]``, seconds) and when transfer ``i - 1``
    has ended: ``end[i] = max(ready[i], end[i - 1]) + durations[i]``. DDP's buckets queue like
    this: the backward pass makes them ready one after the other, and the link reduces them in
    order.

    Chapter 8, *Data parallelism with DDP*.
    """
    if len(ready) != len(durations):
        raise ValueError(f"ready and durations must have one entry per transfer, got "
                         f"{len(ready)} and {len(durations)}.")
    ends: list[float] = []
    for start, seconds in zip(ready, durations):
        ends.append(max(start, ends[-1] if ends else start) + seconds)
    return ends


#: GPUs in one server, joined by NVLink (DGX/HGX A100 and H100 have 8).
GPUS_PER_NODE: int = 8


@dataclass(frozen=True)
class Cluster:
    """GPUs in nodes: ``node`` joins the GPUs of one server, ``network`` the servers.

    Every GPU has its own network port (one NIC per GPU, as DGX machines have), so a node sends
    ``gpus_per_node`` times one port's bandwidth. ``node`` and ``network`` are :class:`Link` objects
    or names of :data:`LINKS`.

    Chapter 8, *Data parallelism with DDP*.
    """

    node: Link | str = "NVLink 4 (H100)"
    network: Link | str = "InfiniBand NDR"
    gpus_per_node: int = GPUS_PER_NODE

    def __post_init__(self) -> None:
        object.__setattr__(self, "node", get_link(self.node))
        object.__setattr__(self, "network", get_link(self.network))
        _check_world(self.gpus_per_node)

    @property
    def name(self) -> str:
        """The cluster in words."""
        return f"{self.gpus_per_node} x {self.node.name} per node, {self.network.name} between"

    def nodes(self, world_size: int) -> int:
        """Nodes that ``world_size`` GPUs fill (whole nodes; fewer GPUs: one node)."""
        return max(1, math.ceil(_check_world(world_size) / self.gpus_per_node))

    def bus_bandwidth(self, world_size: int) -> float:
        """Bytes/s each GPU moves in a ring: NVLink in one node; across nodes the slower of
        NVLink and the node's ports shared by its GPUs (each GPU carries 1/g of the inter-node
        hops of g rings)."""
        if self.nodes(world_size) == 1:
            return self.node.bandwidth
        return min(self.node.bandwidth, self.gpus_per_node * self.network.bandwidth)


#: The all-reduce algorithms of :func:`allreduce_time`.
ALGORITHMS = ("ring", "tree", "hierarchical")


def allreduce_time(n_bytes: float, world_size: int, cluster: Cluster,
                   algorithm: str = "best") -> float:
    """Seconds to all-reduce ``n_bytes`` over ``world_size`` GPUs of ``cluster``, as NCCL models it.

    With ``N`` GPUs in ``n`` nodes of ``g`` GPUs, ``S = n_bytes``, per-step latencies
    ``a_node`` and ``a_net`` and the bus bandwidth ``B`` (:meth:`Cluster.bus_bandwidth`):

    * "ring" (NCCL's ring, src/graph/tuning.cc): ``2 (N - 1)`` steps, of which ``2 (n - 1)`` cross
      the network: ``2 (N - n) a_node + 2 (n - 1) a_net + 2 (N - 1) / N * S / B``. The latency
      grows with N.
    * "tree" (NCCL's double binary tree across nodes, a chain inside each):
      ``2 ((g - 1) a_node + log2(n) a_net) + 2 S / B``. The latency grows with log N.
    * "hierarchical": reduce-scatter inside the node, a ring all-reduce of the ``S / g`` shard
      across nodes (each GPU with its own port), all-gather inside the node:
      ``2 (g - 1) a_node + 2 (g - 1) / g * S / bw_node + 2 (n - 1) a_net
      + 2 (n - 1) / n * S / g / bw_net``.
    * "best": the fastest of the three, as NCCL picks an algorithm per call from its model.

    Inside one node all three reduce to the ring over ``node``. NCCL's refinements (protocols,
    channels, a ring "plateau" factor across nodes, tree corrections) are left out.

    Chapter 8, *Data parallelism with DDP*.
    """
    size, big_n = _check_bytes(n_bytes), _check_world(world_size)
    if not isinstance(cluster, Cluster):
        raise ValueError(f"cluster must be a cost_model.Cluster (e.g. Cluster('NVLink 4 (H100)', "
                         f"'InfiniBand NDR')), got {cluster!r}.")
    if algorithm == "best":
        return min(allreduce_time(size, big_n, cluster, a) for a in ALGORITHMS)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be one of {ALGORITHMS} or 'best', got {algorithm!r}.")
    n, g = cluster.nodes(big_n), min(cluster.gpus_per_node, big_n)
    if n == 1:
        return ring_allreduce_time(size, big_n, cluster.node)
    a_node, a_net = cluster.node.latency, cluster.network.latency
    bus = cluster.bus_bandwidth(big_n)
    if algorithm == "ring":
        return (2 * (big_n - n) * a_node + 2 * (n - 1) * a_net
                + 2 * (big_n - 1) / big_n * size / bus)
    if algorithm == "tree":
        return 2 * ((g - 1) * a_node + math.log2(n) * a_net) + 2 * size / bus
    return (ring_allreduce_time(size, g, cluster.node)
            + ring_allreduce_time(size / g, n, cluster.network))


def allgather_time(n_bytes: float, world_size: int, cluster: Cluster) -> float:
    """Seconds of a ring all-gather (or reduce-scatter) of a full tensor of ``n_bytes``.

    Half of :func:`allreduce_time`'s "ring": ``(N - n) a_node + (n - 1) a_net
    + (N - 1) / N * S / B``. NCCL's tuning model of the release cited offers only the ring for
    these two collectives (later releases add a logarithmic algorithm, PAT), so FSDP's
    collectives pay a latency that grows with N.

    Chapter 8, *Data parallelism with DDP*.
    """
    return allreduce_time(n_bytes, world_size, cluster, "ring") / 2


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
    n, link = _check_world(world_size), get_link(link)
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
                       link: Link | str | Cluster, overlap: float = BACKWARD_SHARE,
                       bucket_bytes: float = DDP_BUCKET_BYTES,
                       algorithm: str = "best") -> StepTime:
    """Predict one DDP step: bucketed ring all-reduces of the gradients, partly hidden by backward.

    The model, kept simple on purpose. DDP all-reduces the gradients in buckets of
    ``bucket_bytes`` (25 MiB by default), each one a ring all-reduce that pays its own latency. A
    bucket starts as soon as its gradients are ready, while backward goes on, so communication can
    hide behind ``overlap * compute_seconds`` (backward is about 2/3 of the compute, forward to
    backward about 1 : 2); pass ``overlap=0`` for no overlap. The last bucket is ready only when
    backward ends, so its all-reduce is always exposed::

        exposed = max(0, communication - last - overlap * compute) + last

    ``link`` a :class:`Link` (or its name): one flat ring over that link, every step paying its
    latency. ``link`` a :class:`Cluster`: NVLink inside each node, the network between, each
    bucket all-reduced by ``algorithm`` (:func:`allreduce_time`; "best" picks the fastest, as
    NCCL does). Real steps add what this leaves out: NCCL's fixed cost per call, compute and
    communication contending for the GPU, and stragglers.

    Chapter 8, *Data parallelism with DDP*.
    """
    if isinstance(compute_seconds, bool) or not isinstance(compute_seconds, numbers.Real) \
            or not math.isfinite(compute_seconds) or compute_seconds <= 0:
        raise ValueError(f"compute_seconds must be the forward + backward time of one GPU's "
                         f"step in seconds, > 0 (e.g. 0.25), got {compute_seconds!r}.")
    grad_bytes = _check_bytes(grad_bytes, "grad_bytes")
    n = _check_world(world_size)
    if not isinstance(link, Cluster):
        link = get_link(link)
    if isinstance(link, Cluster):
        cluster = link

        def seconds(size: float) -> float:
            return allreduce_time(size, n, cluster, algorithm)
    else:
        flat = link

        def seconds(size: float) -> float:
            return ring_allreduce_time(size, n, flat)
    if isinstance(overlap, bool) or not isinstance(overlap, numbers.Real) \
            or not 0 <= overlap <= 1:
        raise ValueError(f"overlap must be the fraction of the compute that communication can "
                         f"hide behind, between 0 and 1 (default 2/3), got {overlap!r}.")
    if _check_bytes(bucket_bytes, "bucket_bytes") == 0:
        raise ValueError("bucket_bytes must be > 0; DDP's default is 25 MiB (DDP_BUCKET_BYTES).")
    full, rest = divmod(grad_bytes, bucket_bytes)
    buckets = [bucket_bytes] * int(full) + ([rest] if rest > 0 else [])
    communication = sum(seconds(b) for b in buckets)
    last = seconds(min(bucket_bytes, grad_bytes)) if buckets else 0.0
    exposed = max(0.0, communication - last - overlap * compute_seconds) + last
    return StepTime(n, link.name, float(compute_seconds), communication, exposed)
