"""The training planner: will a run fit, how fast, on what -- one model, in Python.

Chapters 2 (*The memory wall*), 9 (sharding), 10 (hardware) and 11 (tensor and pipeline
parallelism) meet in it. A :class:`~course_lib.planner.inputs.Plan` (model, GPUs, links,
strategy, batch, tokens, MFU) goes in; :func:`plan` checks it and returns a
:class:`PlanResult`. Everything comes from the modules that teach it:

* **Memory per GPU** (the first pipeline stage, which holds the most): the model states
  of chapter 2's :func:`~course_lib.numbers.memory.training_memory` (ZeRO over the
  sharding group) divided by ``t * p``, the tensor and pipeline degrees; the activations
  of :func:`~course_lib.numbers.memory.activation_bytes_per_layer` for a micro-batch of
  ``b`` sequences, divided by ``t`` (sequence parallelism splits every activation,
  Korthikanti et al. 2022), for the ``ceil(L / p)`` layers of the stage and the
  ``min(p, m)`` micro-batches 1F1B keeps in flight (with checkpointing each layer keeps
  its input, one layer is recomputed at a time); the loss's FP32 log-probabilities when
  there is one stage; chapter 2's buffers; the CUDA context. It fits if the tensors fit
  in the GPU's usable memory (:attr:`~course_lib.numbers.memory.GPU.usable`). If not,
  :func:`cheapest_change` tries, in order, a higher ZeRO stage, checkpointing, more
  tensor parallelism inside the node, more pipeline stages and more nodes, and names the
  first that fits.
* **Time per step**: compute ``6 N T / (G * peak * MFU)`` for ``T`` tokens per step on
  ``G`` GPUs (chapter 10's :func:`~course_lib.hardware.roofline.training_flops`), plus
  ``2 N T`` when checkpointing recomputes the forward pass; tensor parallelism's
  all-reduces, four per layer and micro-batch (six with recomputation) of ``s b h``
  activations on the node's link; pipeline sends, one activation and one gradient per
  micro-batch (``s b h / t`` each, on the node's link when the pipeline fits in a node,
  else the network); the bubble ``(p - 1) / (m + p - 1)`` of chapter 11's
  :func:`~course_lib.parallel.pipeline.theoretical_bubble`; data parallelism's
  collectives (chapter 8's :mod:`~course_lib.parallel.cost_model`, in 25 MiB pieces over
  the data-parallel group: an all-reduce of the gradients for DDP; a reduce-scatter of
  the gradients and an all-gather of the weights for ZeRO 1 and 2; per micro-batch two
  all-gathers and a reduce-scatter for ZeRO 3; with hybrid sharding an all-reduce of
  each shard across the replicas), of which what the compute cannot hide is exposed (the
  last micro-batch's backward pass; all of the compute for ZeRO 3, which prefetches);
  CPU offload's copies, all exposed.
* **The whole run**: tokens / tokens per step steps, in days and GPU-hours, and the MFU
  the run achieves once the bubble and the exposed communication are counted.

``planner.js`` is the same model in JavaScript, function for function, so that the
planner's view (:mod:`course_lib.planner.widget`) runs in the page with no kernel;
:func:`js_tables` hands it every number and text it uses, and the tests require both to
agree.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from course_lib.hardware import roofline
from course_lib.numbers import i18n, memory
from course_lib.parallel import cost_model, pipeline
from course_lib.planner import texts
from course_lib.planner.inputs import (CUSTOM_GLOBAL_BATCH, CUSTOM_GPU_LINKS, FIELDS,
                                       GPUS, LINK_KEYS, MAX_GPUS, PEAK_DTYPE, PRESETS,
                                       TOKENS_PER_PARAM, Plan, Raw, Setup, check,
                                       choices)

__all__ = ["BACKWARD_SHARE", "COMPONENTS", "Change", "Memory", "Plan", "PlanResult",
           "StepTime", "cheapest_change", "fsdp_buffers", "in_flight", "js_tables",
           "memory_per_gpu", "plan", "stage_share", "step_time", "HBM_PASSES",
           "REDUCE_BYTES"]

#: The share of a step's compute that DDP's gradient all-reduce can hide behind: the cost
#: model's, which chapter 8's data_parallel_step assumes too.
BACKWARD_SHARE = cost_model.BACKWARD_SHARE
#: The components of a GPU's memory, in the order the bar stacks them.
COMPONENTS = ("parameters", "gradients", "optimizer", "activations", "buffers",
              "cuda_context")
SECONDS_PER_DAY = 86400


@dataclass(frozen=True)
class Memory:
    """What one GPU holds, in bytes, against what it can hold; ``host``: kept in CPU
    memory.

    Chapter 2, *The memory wall*.
    """

    parameters: float
    gradients: float
    optimizer: float
    activations: float
    buffers: float
    cuda_context: float
    host: float
    total: float
    usable: float
    capacity: float
    fits: bool


def stage_share(s: Setup) -> float:
    """The first pipeline stage's share of the parameters: its layers and the embedding.

    One stage: all of them. A layer holds ``(N - V h) / L`` parameters (a head of its
    own, untied, is counted in the layers), so the first of ``p`` equal stages holds
    more than ``1 / p``: Llama 3 405B's embedding is 2.1B parameters, 262M per GPU at
    ``t = 8``.

    Chapter 2, *The memory wall*.
    """
    if s.pp == 1:
        return 1.0
    embedding = s.vocab * s.hidden
    per_layer = max(0.0, s.params - embedding) / s.layers
    return min(1.0, (s.edge_layers * per_layer + embedding) / s.params)


def in_flight(s: Setup) -> int:
    """Micro-batches whose activations the first stage holds at once: ``min(p, m)`` for
    1F1B; interleaving multiplies ``p`` by ``1 + (p - 1) / (p v)`` (Megatron-LM's
    ``interleaved_schedule_memory_penalty``), rounded up.

    Chapter 2, *The memory wall*.
    """
    p, v = s.pp, s.virtual_stages
    held = p if v == 1 else math.ceil((1 + (p - 1) / (p * v)) * p)
    return min(held, s.micro_batches)


#: Bytes per element FSDP reduce-scatters gradients in (``reduce_dtype`` FP32, as torchtitan
#: and the course's measurement on fake ranks, :mod:`course_lib.parallel.at_scale`, run it).
REDUCE_BYTES = 4


def _saved_per_layer(s: Setup) -> float:
    """Bytes one layer saves for backward per micro-batch on one GPU (chapter 2's estimate,
    split by tensor parallelism)."""
    e = memory.PRECISIONS[s.precision].activation_bytes
    return memory.activation_bytes_per_layer(
        s.seq_len, s.micro_batch, s.hidden, s.heads, e, 1, s.dropout,
        not s.flash_attention) / s.tp


def fsdp_buffers(s: Setup) -> float:
    """What full sharding holds beyond chapter 2's two gathered layers, measured on fake
    ranks (chapter 9): the root unit (embedding and head, one of them on a pipeline's
    first stage) gathered for the whole step, and one layer's gradients reduce-scattered
    in FP32; both split by tensor parallelism. Zero for ZeRO 0 to 2.

    Chapter 2, *The memory wall*.
    """
    if s.zero < 3 or s.shard == 1:
        return 0.0
    weight = memory.PRECISIONS[s.precision].weight_bytes
    embedding = s.vocab * s.hidden  # and as much again for an untied head
    per_layer = max(0.0, s.params - 2 * embedding) / s.layers
    root = (2 if s.pp == 1 else 1) * embedding * weight
    return (root + per_layer * REDUCE_BYTES) / s.tp


def memory_per_gpu(s: Setup) -> Memory:
    """Bytes per GPU by component on the first pipeline stage, and whether they fit.

    Chapter 2, *The memory wall*.
    """
    shape = memory.ModelShape(s.layers, s.hidden, s.heads, s.vocab, 0)
    # Model states only: chapter 2's estimator for the whole model, over s.shard GPUs.
    states = memory.training_memory(s.params, s.precision, s.optimizer, batch=1,
                                    seq_len=1, gpus=s.shard, zero_stage=s.zero,
                                    shape=shape)
    here = stage_share(s) / s.tp
    parameters = states.weights * here
    gradients = states.gradients * here
    optimizer = (states.master_weights + states.optimizer_states) * here
    host = 0.0
    if s.offload:
        host, optimizer = optimizer, 0.0
    e = memory.PRECISIONS[s.precision].activation_bytes
    per_layer = _saved_per_layer(s)
    held = in_flight(s)
    if s.checkpointing:
        kept = s.seq_len * s.micro_batch * s.hidden * e / s.tp
        activations = held * s.edge_layers * kept + per_layer
    else:
        activations = held * s.edge_layers * per_layer
    if s.pp == 1:
        activations += s.micro_batch * s.seq_len * s.vocab * 4 / s.tp
    # Chapter 2's two gathered layers (ZeRO 3) are split by tensor parallelism too.
    weight = memory.PRECISIONS[s.precision].weight_bytes  # chapter 2's 12 h^2 + 13 h
    gathered = (2 * (12 * s.hidden**2 + 13 * s.hidden) * weight
                if s.zero == 3 and s.shard > 1 else 0.0)
    buffers = states.temporaries - gathered * (1 - 1 / s.tp) + fsdp_buffers(s)
    total = parameters + gradients + optimizer + activations + buffers
    usable = memory.GPU(s.gpu_name, s.capacity).usable
    return Memory(parameters, gradients, optimizer, activations, buffers,
                  memory.CUDA_CONTEXT_BYTES, host, total, usable, s.capacity,
                  total <= usable)


@dataclass(frozen=True)
class Change:
    """One change to a plan: its kind (zero, checkpointing, tp, pp, nodes), from what to
    what.

    Chapter 2, *The memory wall*.
    """

    kind: str
    start: int
    end: int
    gpus: int


def cheapest_change(spec: Plan, s: Setup, language: str = "en") -> Change | None:
    """The first change that makes ``spec`` fit, in the order of their cost, or None.

    A higher ZeRO stage (communication only), activation checkpointing (a third more
    compute), a larger tensor-parallel degree inside the node (NVLink traffic), more
    pipeline stages (a larger bubble), twice, four times, ... the nodes (more GPUs).
    Each is tried alone.

    Chapter 2, *The memory wall*.
    """
    candidates: list[tuple[str, int, int, dict[str, Any]]] = []
    candidates += [("zero", s.zero, z, {"zero": z}) for z in range(s.zero + 1, 4)]
    if not s.checkpointing:
        candidates.append(("checkpointing", 0, 1, {"checkpointing": True}))
    t = s.tp * 2
    while t <= s.gpus_per_node:
        candidates.append(("tp", s.tp, t, {"tp": t}))
        t *= 2
    p = s.pp * 2
    while p <= s.layers:
        candidates.append(("pp", s.pp, p, {"pp": p}))
        p *= 2
    n = s.nodes * 2
    while n * s.gpus_per_node <= MAX_GPUS:
        candidates.append(("nodes", s.nodes, n, {"nodes": n}))
        n *= 2
    for kind, start, end, changes in candidates:
        try:
            changed = check(dataclasses.replace(spec, **changes), language)
        except ValueError:
            continue
        if memory_per_gpu(changed).fits:
            return Change(kind, start, end, changed.gpus)
    return None


@dataclass(frozen=True)
class StepTime:
    """Seconds of one training step, by part, and the bubble's share of the pipeline.

    ``compute`` is the busiest GPU's matrix products and its memory-bound work
    (``memory_bound`` of it); ``tp`` the tensor-parallel all-reduces compute does not
    hide; ``bubble_share`` is ``(p - 1) / (v m + p - 1)``; ``dp`` is all of data
    parallelism's communication, ``dp_exposed`` the part compute does not hide; ``step``
    = compute + tp + pp + bubble + dp_exposed + offload.

    Chapter 2, *The memory wall*.
    """

    compute: float
    memory_bound: float
    tp: float
    pp: float
    bubble: float
    dp: float
    dp_exposed: float
    offload: float
    step: float
    bubble_share: float


def _collective(kind: str, n_bytes: float, n: int,
                cluster: cost_model.Cluster) -> float:
    """Seconds of a collective of ``n_bytes`` over ``n`` GPUs, in 25 MiB pieces."""
    if n == 1 or n_bytes == 0:
        return 0.0
    piece = cost_model.DDP_BUCKET_BYTES
    full = math.floor(n_bytes / piece)
    rest = n_bytes - full * piece

    def one(size: float) -> float:
        if kind == "all-reduce":
            return cost_model.allreduce_time(size, n, cluster)
        return cost_model.allgather_time(size, n, cluster)

    return (full * one(piece) if full else 0.0) + (one(rest) if rest > 0 else 0.0)


def _per_unit(n_bytes: float, units: int, n: int, cluster: cost_model.Cluster) -> float:
    """Seconds of ``units`` all-gathers (or reduce-scatters), one call per wrapped layer,
    of ``n_bytes`` in all over ``n`` GPUs."""
    if n == 1 or n_bytes == 0:
        return 0.0
    return units * cost_model.allgather_time(n_bytes / units, n, cluster)


def _group(s: Setup, spacing: int) -> cost_model.Cluster:
    """The cluster a group of GPUs ``spacing`` ranks apart sees (tensor, pipeline, data
    order)."""
    return cost_model.Cluster(s.node_link, s.network_link,
                              max(1, s.gpus_per_node // spacing))


def _data_parallel(s: Setup, compute: float) -> tuple[float, float]:
    """Seconds of data parallelism's collectives in one step, and the part ``compute``
    (the busiest GPU's seconds of computing in the step) does not hide."""
    precision = memory.PRECISIONS[s.precision]
    local = s.params * stage_share(s) / s.tp
    weights, grads = local * precision.weight_bytes, local * precision.grad_bytes
    group = _group(s, s.tp * s.pp)
    per_micro = compute / s.micro_batches
    last_backward = BACKWARD_SHARE * per_micro
    if s.zero == 0:
        total = _collective("all-reduce", grads, s.dp, group)
        return total, max(0.0, total - last_backward)
    units = s.edge_layers
    gather = _per_unit(weights, units, s.shard, group)
    scatter = _per_unit(grads, units, s.shard, group)
    replicas = _collective("all-reduce", grads / s.shard, s.dp // s.shard,
                           _group(s, s.tp * s.pp * s.shard))
    forward = per_micro * 2 / (8 if s.checkpointing else 6)
    if s.zero < 3:
        # Gradients reduce-scattered in the last backward pass; the weights gathered in
        # the next step's first forward pass, unit by unit, prefetched.
        total = scatter + replicas + gather
        exposed = (max(0.0, scatter + replicas - last_backward)
                   + gather / units + max(0.0, gather - forward))
        return total, exposed
    # ZeRO 3: every micro-batch gathers each unit in its forward and again in its
    # backward pass, and reduce-scatters its gradients; the next unit's gather is
    # prefetched behind the current unit's compute, the first one waits.
    backward = per_micro - forward
    per_step = (gather / units + max(0.0, gather - forward)
                + max(0.0, gather + scatter - backward))
    total = s.micro_batches * (2 * gather + scatter) + replicas
    return total, s.micro_batches * per_step + max(0.0, replicas - last_backward)


#: Passes over HBM of every activation a layer saves (written in the forward, read in the
#: backward pass); activation checkpointing writes them once more when it recomputes.
HBM_PASSES = 2


def _compute(s: Setup) -> tuple[float, float]:
    """The busiest GPU's seconds of computing in one step, and the memory-bound part.

    Matrix products: ``6 N T`` (``8 N T`` with recomputation) over the GPUs at ``mfu``
    of the peak, times the busiest stage's layers over the average. Memory-bound work
    (normalisations, activations, softmax, dropout; chapter 10's roofline puts them
    under the bandwidth roof): every saved activation of chapter 2's estimate crosses
    HBM :data:`HBM_PASSES` times (three with recomputation), and the loss's FP32 logits
    too on one stage. Its share falls as ``1 / h``, so per-GPU throughput rises with
    the model's width.
    """
    tokens = s.global_batch * s.seq_len
    work = roofline.training_flops(s.params, tokens)
    work += 2 * s.params * tokens if s.checkpointing else 0.0
    busiest = max(s.edge_layers, s.middle_layers)
    matmul = work / (s.gpus * s.peak * s.mfu) * (busiest * s.pp / s.layers)
    saved = _saved_per_layer(s) * busiest
    if s.pp == 1:
        saved += s.micro_batch * s.seq_len * s.vocab * 4 / s.tp
    passes = HBM_PASSES + (1 if s.checkpointing else 0)
    bound = s.micro_batches * passes * saved / s.hbm
    return matmul + bound, bound


def step_time(s: Setup) -> StepTime:
    """The seconds of one step: compute, communication, bubble (see the module's
    docstring).

    Chapter 2, *The memory wall*.
    """
    precision = memory.PRECISIONS[s.precision]
    compute, bound = _compute(s)
    message = s.seq_len * s.micro_batch * s.hidden * precision.activation_bytes
    all_reduce = cost_model.ring_time("all-reduce", message, s.tp, s.node_link)
    layers_here = max(s.edge_layers, s.middle_layers)
    tp = (layers_here * s.micro_batches * (6 if s.checkpointing else 4) * all_reduce
          * (1 - s.tp_overlap))
    pp = 0.0
    if s.pp > 1:
        link = s.node_link if s.tp * s.pp <= s.gpus_per_node else s.network_link
        send = cost_model.ring_time("broadcast", message / s.tp, 2, link)
        pp = 2 * s.micro_batches * s.virtual_stages * send
    busy = compute + tp + pp
    share = pipeline.theoretical_bubble(s.pp, s.micro_batches, s.virtual_stages)
    bubble = busy * share / (1 - share)
    dp, exposed = _data_parallel(s, compute)
    offload = 0.0
    if s.offload:
        offload = cost_model.offload_transfer_time(
            s.params / (s.tp * s.pp), s.shard, s.host_link,
            precision.grad_bytes + precision.weight_bytes)
    step = busy + bubble + exposed + offload
    return StepTime(compute, bound, tp, pp, bubble, dp, exposed, offload, step, share)


@dataclass(frozen=True)
class PlanResult:
    """A checked plan and what the planner says: memory, verdict, change, step time, the
    run.

    ``flops``: the run's ``6 N D``; ``achieved_mfu``: ``6 N T`` per step over the step's
    time and the GPUs' peak, bubble and exposed communication included.

    Chapter 2, *The memory wall*.
    """

    setup: Setup
    memory: Memory
    change: Change | None
    time: StepTime
    tokens_per_step: float
    steps: float
    seconds: float
    days: float
    gpu_hours: float
    flops: float
    achieved_mfu: float
    language: str = "en"

    @property
    def fits(self) -> bool:
        """Whether the plan fits in the GPUs' memory."""
        return self.memory.fits

    def as_dict(self) -> dict[str, Any]:
        """Plain data (numbers, names, links as dicts), as the JavaScript returns it."""
        out = dataclasses.asdict(self)
        out.pop("language")
        for name in ("node_link", "network_link", "host_link"):
            link = out["setup"][name]
            out["setup"][name] = {k: link[k] for k in ("name", "bandwidth", "latency")}
        return out


def plan(spec: Plan | None = None, language: str = "en", **inputs: Raw) -> PlanResult:
    """Check a plan and say whether it fits, the cheapest change if not, its step time
    and run.

    ``plan(model="llama3-405b", gpus_per_node=8, nodes=2048, tp=8, pp=16, zero=1,
    checkpointing=True)``; or pass a :class:`Plan` and change some of its inputs. Bad
    input is a ValueError whose one line (in ``language``, 'en' or 'nl') says what to
    do.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    spec = dataclasses.replace(spec or Plan(), **inputs)
    s = check(spec, language)
    held = memory_per_gpu(s)
    change = None if held.fits else cheapest_change(spec, s, language)
    time = step_time(s)
    tokens_per_step = float(s.global_batch * s.seq_len)
    steps = s.tokens / tokens_per_step
    seconds = steps * time.step
    flops = roofline.training_flops(s.params, tokens_per_step)
    return PlanResult(s, held, change, time, tokens_per_step, steps, seconds,
                      seconds / SECONDS_PER_DAY, seconds * s.gpus / 3600,
                      roofline.training_flops(s.params, s.tokens),
                      flops / (time.step * s.gpus * s.peak), language)


def js_tables() -> dict[str, Any]:
    """Every number and text ``planner.js`` uses, from the tables the Python model uses.

    Chapter 2, *The memory wall*.
    """
    def link(l: cost_model.Link) -> dict[str, Any]:
        return {"name": l.name, "bandwidth": l.bandwidth, "latency": l.latency}

    key_of = {name: key for key, name in LINK_KEYS.items()}
    return {
        "fields": [dataclasses.asdict(f) for f in FIELDS],
        "defaults": {f.name: f.default for f in dataclasses.fields(Plan)},
        "choices": {f.name: choices(f.name) for f in FIELDS if f.kind == "choice"},
        "presets": {key: {"name": p.name, "params": p.params,
                          "layers": p.shape.n_layers, "hidden": p.shape.hidden,
                          "heads": p.shape.n_heads, "vocab": p.shape.vocab,
                          "seq_len": p.seq_len, "global_batch": p.global_batch,
                          "tokens": p.tokens}
                    for key, p in PRESETS.items()},
        "gpus": {key: {"name": a.name, "memory": a.memory, "hbm": a.bandwidth,
                       "peak": {name: a.dense[dtype]
                                for name, dtype in PEAK_DTYPE.items()},
                       "own_link": key_of[a.gpu_link or a.host_link],
                       "host_link": key_of[a.host_link]} for key, a in GPUS.items()},
        "links": {key: link(cost_model.LINKS[name]) for key, name in LINK_KEYS.items()},
        "precisions": {name: dataclasses.asdict(p)
                       for name, p in memory.PRECISIONS.items()},
        "optimizers": {name: dataclasses.asdict(o)
                       for name, o in memory.OPTIMIZERS.items()},
        "constants": {
            "cuda_context": memory.CUDA_CONTEXT_BYTES,
            "margin": memory.ALLOCATOR_MARGIN, "bucket": cost_model.DDP_BUCKET_BYTES,
            "max_gpus": MAX_GPUS, "custom_global_batch": CUSTOM_GLOBAL_BATCH,
            "tokens_per_param": TOKENS_PER_PARAM, "backward_share": BACKWARD_SHARE,
            "custom_gpu_links": list(CUSTOM_GPU_LINKS),
            "seconds_per_day": SECONDS_PER_DAY, "hbm_passes": HBM_PASSES,
            "reduce_bytes": REDUCE_BYTES,
            # the gradient buckets chapter 2's estimator adds on more than one GPU
            "bucket_temporaries": memory.training_memory(
                1, batch=1, seq_len=1, gpus=2, shape=memory.ModelShape(1, 1, 1, 1, 0)
            ).temporaries,
        },
        "texts": {language: texts.texts(language) for language in i18n.LANGUAGES},
    }
