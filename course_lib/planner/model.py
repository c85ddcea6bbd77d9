"""The training planner: will a run fit, how fast, on what -- one model, in Python.

Chapters 2 (*The memory wall*), 9 (sharding), 10 (hardware), 11 (tensor and pipeline
parallelism) and 12 (context and expert parallelism) meet in it. A
:class:`~course_lib.planner.inputs.Plan` (model, GPUs, links, strategy, batch, tokens,
MFU) goes in; :func:`plan` checks it and returns a :class:`PlanResult`. Everything comes
from the modules that teach it:

* **Memory per GPU** (the first pipeline stage, which holds the most): the model states
  of chapter 2's :func:`~course_lib.numbers.memory.training_memory` (ZeRO over the
  sharding group) divided by ``t * p``, the tensor and pipeline degrees; the activations
  of :func:`~course_lib.numbers.memory.activation_bytes_per_layer` (with the model's
  key-value heads and MLP: GPT's 4h-wide GELU MLP, or a gated SwiGLU MLP of width
  ``mlp`` as Llama's) for a micro-batch of ``b`` sequences, divided by ``t`` (sequence
  parallelism splits every activation, Korthikanti et al. 2022; without it,
  ``sequence_parallel=False``, the norms' inputs, the inputs of the QKV projection and
  the MLP and the dropout masks stay whole:
  :func:`~course_lib.numbers.memory.activation_bytes_per_tp_rank`), for the ``ceil(L /
  p)`` layers of the stage and the ``min(p, m)`` micro-batches 1F1B keeps in flight
  (with full checkpointing each layer keeps its input, split by ``t`` with sequence
  parallelism only; with selective checkpointing what torchtitan's op-level policy
  keeps; with ``attention``, Megatron-LM's selective recomputation, all but attention's
  scores: :mod:`~course_lib.planner.recomputation`; one layer is recomputed at a time);
  the loss's FP32 log-probabilities when there is one stage; chapter 2's buffers; the
  CUDA context. It fits if the tensors fit in the GPU's usable memory
  (:attr:`~course_lib.numbers.memory.GPU.usable`). If not, :func:`cheapest_change`
  tries, in order, a higher ZeRO stage, selective checkpointing, full checkpointing,
  more tensor parallelism inside the node, more pipeline stages and more nodes, and names
  the first that fits.
* **Time per step**: compute ``6 N T / (G * peak * MFU)`` for ``T`` tokens per step on
  ``G`` GPUs (chapter 10's :func:`~course_lib.hardware.roofline.training_flops`), plus
  ``2 N T`` when full checkpointing recomputes the forward pass (selective: the share
  of the products its policy does not keep), plus attention's score and value products
  (:func:`attention_flops`: causal and fused, ``6 l h s`` per token,
  half of PaLM's ``12 l h s``; unfused, the full square), each product paying its HBM
  traffic on top (chapter 10's roofline, from its shape after tensor parallelism:
  :mod:`~course_lib.planner.compute_time`), and the memory-bound work of the saved
  activations; tensor parallelism's
  all-reduces, four per layer and micro-batch (six with full recomputation, five with
  selective: :data:`~course_lib.planner.recomputation.COLLECTIVE_PASSES`) of ``s b h``
  activations on the node's link, ``tp_overlap`` of them hidden behind compute (as
  ``ep_overlap`` below, :func:`not_hidden`); pipeline sends, one activation
  and one gradient per
  micro-batch (``s b h / t`` each, on the node's link when the pipeline fits in a node,
  else the network); the bubble ``(p - 1) / (m + p - 1)`` of chapter 11's
  :func:`~course_lib.parallel.pipeline.theoretical_bubble`; data parallelism's
  collectives (chapter 8's :mod:`~course_lib.parallel.cost_model`, in 25 MiB pieces over
  the data-parallel group: an all-reduce of the gradients for DDP; a reduce-scatter of
  the gradients and an all-gather of the weights for ZeRO 1 and 2; per micro-batch two
  all-gathers and a reduce-scatter for ZeRO 3; with hybrid sharding an all-reduce of
  each shard across the replicas), of which what the compute cannot hide is exposed (the
  last micro-batch's backward pass; for the gathers, each unit's prefetched behind the
  compute of the unit before it, the first one's always:
  :mod:`~course_lib.planner.data_parallel_time`); CPU offload's copies, all exposed.
* **Context parallelism** (chapter 12, ``c`` GPUs per sequence): every activation a GPU
  saves, the loss's logits and the tensor-parallel and pipeline messages shrink to its
  ``s / c`` positions (without fused attention its queries' scores against all ``s``
  keys, ``s^2 / c``); per layer and micro-batch an all-gather of K and V in the forward
  pass (again in a recomputed one) and a reduce-scatter of their gradients in the
  backward pass, each GPU sending chapter 12's ``(c - 1) 2 (s / c) b n_kv d_head e``
  bytes (:func:`~course_lib.parallel.context_parallel.kv_bytes_per_rank`, for its
  tensor-parallel share of the ``n_kv`` key-value heads), on the node's link when ``t
  c`` GPUs fit in a node, else the network, none of it hidden (Llama 3 chose the
  all-gather because K and V are small, not because it hides). ZeRO shards over the ``d
  c`` GPUs. The causal work is balanced (2 ``c`` mirrored chunks), so the compute,
  attention's included, is the same total divided over ``c`` times the GPUs.
* **A mixture of experts** (chapter 12): a token meets the dense parameters and ``k /
  E`` of the experts', so compute is ``6 N_active T`` (:func:`active_params`) and
  attention's; the experts' parameters, gradients and optimizer states are split over
  the ``ep`` expert-parallel GPUs and ZeRO shards them over the ``shard / ep`` copies of
  each; per layer and micro-batch four all-to-alls (dispatch and combine, forward and backward;
  six with recomputation), each GPU sending ``(ep - 1) / ep`` of ``k h e`` bytes per
  token it holds (chapter 12's bound, the tokens spread evenly), on the node's link when
  ``t ep`` GPUs fit in a node, else the network; ``ep_overlap`` of them hidden behind
  the busiest GPU's compute, never more than the compute's own time (DeepSeek-V3's
  DualPipe runs one micro-batch's all-to-alls during another's compute and hides them
  all, its section 3.2.1: ``ep_overlap`` 1; the same compute also hides tensor and
  data parallelism's collectives, and each may use all of it). Every layer of the busiest
  stage is counted as a mixture (DeepSeek-V3's 3 dense layers sit on its first stage),
  and its activations as a dense layer's.
* **The whole run**: tokens / tokens per step steps, in days and GPU-hours, and the MFU
  the run achieves once the bubble and the exposed communication are counted.

``planner.js`` is the same model in JavaScript, function for function, so that the
planner's view (:mod:`course_lib.planner.widget`) runs in the page with no kernel;
:func:`course_lib.planner.widget.js_tables` hands it every number and text it uses, and
the tests require both to agree.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from course_lib.hardware import roofline
from course_lib.numbers import memory
from course_lib.parallel import context_parallel, cost_model, pipeline
from course_lib.planner import compute_time, recomputation
from course_lib.planner.data_parallel_time import data_parallel_time
from course_lib.planner.inputs import MAX_GPUS, Plan, Raw, Setup, check

__all__ = ["BACKWARD_SHARE", "COMPONENTS", "Change", "Memory", "Plan", "PlanResult",
           "StepTime", "active_params", "attention_flops", "cheapest_change",
           "context_parallel_bytes", "expert_parallel_bytes", "fsdp_buffers", "held_layers",
           "memory_per_gpu", "not_hidden", "plan", "stage_share", "step_time", "HBM_PASSES",
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


def active_params(s: Setup) -> float:
    """Parameters one token meets: the dense ones and ``top_k / experts`` of the
    experts'.

    Chapter 2, *The memory wall*.
    """
    return s.params - s.expert_params + s.expert_params * s.top_k / s.experts


def _held_params(s: Setup) -> float:
    """Parameters a GPU's tensor and pipeline slice holds before ZeRO: the experts split
    ``ep`` ways."""
    return s.params - s.expert_params * (1 - 1 / s.ep)


def _stage_shares(s: Setup) -> tuple[float, float]:
    """The first stage's share of the dense parameters and of the experts'."""
    if s.pp == 1:
        return 1.0, 1.0
    experts = min(1.0, s.edge_layers / s.layers)
    if s.expert_params == 0:
        return stage_share(s), experts
    dense = s.params - s.expert_params
    return (stage_share(s) * s.params - experts * s.expert_params) / dense, experts


def held_layers(s: Setup) -> int:
    """Layer activations the first stage holds at once: its layers for ``min(p, m)``
    micro-batches under 1F1B. Interleaved as PyTorch's ``ScheduleInterleaved1F1B`` runs
    it (Megatron-LM's schedule, in rounds of ``r = m // max(1, m // p)`` micro-batches),
    the first stage runs ``(v - 1) r + 2 (p - 1)`` chunk forward passes before its first
    backward one and one more just before it, at most all ``v m``: its chunks in turn, a
    round of ``r`` micro-batches each. With ``r = p`` and equal chunks that is
    Megatron-LM's ``interleaved_schedule_memory_penalty``, ``1 + (p - 1) / (p v)``; a
    first chunk that holds the embedding alone (Llama 3's) adds nothing. The tests count
    the same peak in PyTorch's own schedule.

    Chapter 2, *The memory wall*.
    """
    p, v, m = s.pp, s.virtual_stages, s.micro_batches
    if v == 1:
        return min(p, m) * s.edge_layers
    chunk = math.ceil(s.middle_layers / v)
    first = max(0, s.edge_layers - (v - 1) * chunk)  # the chunk with the embedding
    per_round = m // max(1, m // p)
    forwards = min((v - 1) * per_round + 2 * (p - 1) + 1, v * m)
    rounds, rest = divmod(forwards, per_round)
    layers = [first if j % v == 0 else chunk for j in range(rounds + 1)]
    return per_round * sum(layers[:rounds]) + rest * layers[rounds]


#: Bytes per element FSDP reduce-scatters gradients in (``reduce_dtype`` FP32, as torchtitan
#: and the course's measurement on fake ranks, :mod:`course_lib.parallel.at_scale`, run it).
REDUCE_BYTES = 4


def fsdp_buffers(s: Setup) -> float:
    """What full sharding holds beyond chapter 2's two gathered layers, measured on fake
    ranks (chapter 9): the root unit (embedding and head, one of them on a pipeline's
    first stage) gathered for the whole step, and one layer's gradients reduce-scattered
    in FP32; both split by tensor parallelism. Zero for ZeRO 0 to 2.

    With ``zero3_live`` (DeepSpeed's ZeRO 3), instead of all of that and of the two
    layers: that many parameters gathered and as many gradients being reduced, in the
    precision's bytes, and no root unit held (DeepSpeed gathers the embedding as any
    other module).

    Chapter 2, *The memory wall*.
    """
    if s.zero < 3 or s.shard == 1:
        return 0.0
    precision = memory.PRECISIONS[s.precision]
    if s.zero3_live:
        return s.zero3_live * (precision.weight_bytes + precision.grad_bytes)
    weight = precision.weight_bytes
    embedding = s.vocab * s.hidden  # and as much again for an untied head
    per_layer = max(0.0, _held_params(s) - 2 * embedding) / s.layers
    root = (2 if s.pp == 1 else 1) * embedding * weight
    return (root + per_layer * REDUCE_BYTES) / s.tp


def memory_per_gpu(s: Setup) -> Memory:
    """Bytes per GPU by component on the first pipeline stage, and whether they fit.

    Chapter 2, *The memory wall*.
    """
    shape = memory.ModelShape(s.layers, s.hidden, s.heads, s.vocab, 0)
    # Model states only: chapter 2's estimator for the dense parameters, over s.shard
    # GPUs; the experts', split over ep GPUs, over the shard / ep copies of each.
    states = memory.training_memory(s.params - s.expert_params, s.precision,
                                    s.optimizer, batch=1, seq_len=1, gpus=s.shard,
                                    zero_stage=s.zero, shape=shape)
    dense_share, experts_share = _stage_shares(s)
    here = dense_share / s.tp
    parameters = states.weights * here
    gradients = states.gradients * here
    optimizer = (states.master_weights + states.optimizer_states) * here
    if s.expert_params:
        routed = memory.training_memory(s.expert_params, s.precision, s.optimizer,
                                        batch=1, seq_len=1,
                                        gpus=max(1, s.shard // s.ep),
                                        zero_stage=s.zero, shape=shape)
        mine = experts_share / (s.ep * s.tp)
        parameters += routed.weights * mine
        gradients += routed.gradients * mine
        optimizer += (routed.master_weights + routed.optimizer_states) * mine
    host = 0.0
    if s.offload:
        host, optimizer = optimizer, 0.0
    per_layer = recomputation.saved_per_layer(s)
    kept = recomputation.kept_per_layer(s)
    # and the layer being recomputed: all it saves, or attention's core alone
    again = per_layer if s.checkpointing in ("full", "selective") else per_layer - kept
    activations = held_layers(s) * kept + again
    if s.pp == 1:
        activations += s.micro_batch * s.seq_len * s.vocab * 4 / s.tp / s.cp
    # Chapter 2's two gathered layers (ZeRO 3) are split by tensor parallelism too.
    weight = memory.PRECISIONS[s.precision].weight_bytes  # chapter 2's 12 h^2 + 13 h
    gathered = (2 * (12 * s.hidden**2 + 13 * s.hidden) * weight
                if s.zero == 3 and s.shard > 1 else 0.0)
    kept = 0.0 if s.zero3_live else gathered / s.tp  # fsdp_buffers stands for them
    buffers = states.temporaries - gathered + kept + fsdp_buffers(s)
    total = parameters + gradients + optimizer + activations + buffers
    usable = memory.GPU(s.gpu_name, s.capacity).usable
    return Memory(parameters, gradients, optimizer, activations, buffers,
                  memory.CUDA_CONTEXT_BYTES, host, total, usable, s.capacity,
                  total <= usable)


@dataclass(frozen=True)
class Change:
    """One change to a plan: its kind (zero, selective, checkpointing, full, tp, pp,
    nodes), from what to what.

    Chapter 2, *The memory wall*.
    """

    kind: str
    start: int
    end: int
    gpus: int


def cheapest_change(spec: Plan, s: Setup, language: str = "en") -> Change | None:
    """The first change that makes ``spec`` fit, in the order of their cost, or None.

    A higher ZeRO stage (communication only), selective activation checkpointing (some
    products and the elementwise work again), full checkpointing (a third more compute;
    ``full`` when the plan checkpoints already), a larger tensor-parallel degree inside the
    node (NVLink traffic), more pipeline stages (a larger bubble), twice, four times, ...
    the nodes (more GPUs). Each is tried alone.

    Chapter 2, *The memory wall*.
    """
    candidates: list[tuple[str, int, int, dict[str, Any]]] = []
    candidates += [("zero", s.zero, z, {"zero": z}) for z in range(s.zero + 1, 4)]
    if s.checkpointing in ("none", "attention"):
        candidates.append(("selective", 0, 1, {"checkpointing": "selective"}))
    if s.checkpointing != "full":
        kind = "checkpointing" if s.checkpointing == "none" else "full"
        candidates.append((kind, 0, 1, {"checkpointing": True}))
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
    (``memory_bound`` of it: the products' HBM traffic and the elementwise work);
    ``tp`` the tensor-parallel all-reduces compute does not
    hide; ``cp`` context parallelism's all-gathers and reduce-scatters of K and V,
    ``ep`` expert parallelism's all-to-alls (all exposed), ``cp_bytes`` and
    ``ep_bytes`` what one GPU sends in one of them (per layer and micro-batch);
    ``bubble_share`` is ``(p - 1) / (v m + p - 1)``; ``dp`` is all of data
    parallelism's communication, ``dp_exposed`` the part compute does not hide;
    ``step`` = compute + tp + pp + cp + ep + bubble + dp_exposed + offload.

    Chapter 2, *The memory wall*.
    """

    compute: float
    memory_bound: float
    tp: float
    pp: float
    cp: float
    ep: float
    bubble: float
    dp: float
    dp_exposed: float
    offload: float
    step: float
    bubble_share: float
    cp_bytes: float
    ep_bytes: float


#: Passes over HBM of every activation a layer saves (written in the forward, read in the
#: backward pass); a recomputed forward pass writes what it recomputes once more.
HBM_PASSES = 2


def attention_flops(s: Setup) -> float:
    """FLOPs of attention's score and value products (``Q K^T``, ``A V``) in one step,
    on all GPUs together.

    Per token and layer the forward pass of a full mask is ``2 * 2 s h_a`` (``h_a``:
    heads x head size), the backward pass twice that: PaLM's ``12 l h_a s`` per token.
    The course's models are causal: a fused kernel (flash attention) skips the masked
    half, ``6 l h_a s``; without it the planner materialises the scores as PyTorch's
    unfused path does, the full ``s x s`` square then masked, all of ``12 l h_a s``.
    Recomputation adds a forward pass. Like ``6 N``, it counts useful products only
    (flash attention's backward recomputes the scores inside the kernel). Context
    parallelism balances the causal work over its GPUs and tensor parallelism splits
    the heads, so the total is divided over the GPUs with the rest of the compute.
    Selective checkpointing keeps fused attention's output: no forward pass again.

    Chapter 2, *The memory wall*.
    """
    head_width = s.heads * (s.hidden // s.heads)
    # forward, backward (two), recomputed forward
    passes = 4 if recomputation.recomputes_attention(s) else 3
    per_token = float(passes * 4 * s.layers * head_width * s.seq_len)
    if s.flash_attention:
        per_token /= 2  # the causal mask's upper half is never computed
    return per_token * s.global_batch * s.seq_len


def _compute(s: Setup) -> tuple[float, float]:
    """The busiest GPU's seconds of computing in one step, and the memory-bound part.

    Matrix products: ``6 N T`` (``8 N T`` with full recomputation, ``(6 + 2 x) N T``
    with selective, ``x`` the share of the products it runs again) and attention's
    (:func:`attention_flops`) over the GPUs at ``mfu`` of the peak, times the busiest
    stage's layers over the average, plus each product's HBM traffic at the GPU's
    bandwidth (chapter 10's roofline, product by product from its shape:
    :mod:`~course_lib.planner.compute_time`). Memory-bound work besides
    (normalisations, activations, softmax, dropout; chapter 10's roofline puts them
    under the bandwidth roof): every saved activation of chapter 2's estimate crosses
    HBM :data:`HBM_PASSES` times, and the loss's FP32 logits too on one stage; a
    recomputed forward pass writes once more what it recomputes
    (:func:`~course_lib.planner.recomputation.recomputed_writes`).
    ``memory_bound`` is both: the products' bytes and this work.
    Their share falls as ``1 / h`` (and a product's, as its smallest dimension grows),
    so per-GPU throughput rises with the model's width.
    """
    tokens = s.global_batch * s.seq_len
    active = active_params(s)
    work = roofline.training_flops(active, tokens)
    work += 2 * active * tokens * recomputation.recomputed_share(s)
    attention = attention_flops(s)
    busiest = max(s.edge_layers, s.middle_layers)
    scale = busiest * s.pp / s.layers / (s.gpus * s.peak * s.mfu)
    dense_bytes, attention_bytes = compute_time.slowdowns(s)
    arithmetic = (work + attention) * scale
    traffic = (work * dense_bytes + attention * attention_bytes) * scale
    saved = recomputation.saved_per_layer(s) * busiest
    if s.pp == 1:
        saved += s.micro_batch * s.seq_len * s.vocab * 4 / s.tp / s.cp
    again = recomputation.recomputed_writes(s) * busiest
    bound = s.micro_batches * (HBM_PASSES * saved + again) / s.hbm + traffic
    return arithmetic + bound, bound


def context_parallel_bytes(s: Setup) -> float:
    """Bytes one GPU sends in context parallelism's all-gather of K and V, per layer and
    micro-batch (and as many in the reduce-scatter of their gradients): chapter 12's
    ``(c - 1) 2 (s / c) b n_kv d_head e``, for the GPU's tensor-parallel share of the
    key-value heads (at least one: a head is copied when ``t > n_kv``).

    Chapter 2, *The memory wall*.
    """
    e = memory.PRECISIONS[s.precision].activation_bytes
    kv_here = math.ceil(s.kv_heads / s.tp)
    return float(context_parallel.kv_bytes_per_rank(
        s.seq_len, s.cp, kv_here, s.hidden // s.heads, e, s.micro_batch))


def expert_parallel_bytes(s: Setup) -> float:
    """Bytes one GPU sends to the others in one of expert parallelism's all-to-alls, per
    layer and micro-batch: ``(ep - 1) / ep`` of ``k h e`` per token it holds (chapter
    12's bound, the tokens spread evenly over the experts), its ``s b / c`` tokens
    split ``t`` ways by sequence parallelism.

    Chapter 2, *The memory wall*.
    """
    e = memory.PRECISIONS[s.precision].activation_bytes
    tokens = s.seq_len // s.cp * s.micro_batch / s.tp
    return (s.ep - 1) / s.ep * s.top_k * tokens * s.hidden * e


def not_hidden(seconds: float, overlap: float, compute: float) -> float:
    """What is left of ``seconds`` of communication once its share ``overlap`` hides
    behind ``compute`` seconds of computing: never more than the compute's own time.

    Chapter 2, *The memory wall*.
    """
    return seconds - min(overlap * seconds, compute)


def _context_and_experts(s: Setup) -> tuple[float, float]:
    """Seconds of context parallelism's K/V collectives and of expert parallelism's
    all-to-alls in one step on the busiest stage, before any is hidden."""
    layers = max(s.edge_layers, s.middle_layers) * s.micro_batches
    cp = ep = 0.0
    if s.cp > 1:
        link = s.node_link if s.tp * s.cp <= s.gpus_per_node else s.network_link
        gathered = context_parallel_bytes(s) / (s.cp - 1) * s.cp
        each = cost_model.ring_time("all-gather", gathered, s.cp, link)
        cp = layers * recomputation.collective_passes(s, "cp") * each
    if s.ep > 1:
        link = s.node_link if s.tp * s.ep <= s.gpus_per_node else s.network_link
        # Pairwise exchange: ep - 1 steps, what an all-gather of as many bytes takes.
        each = cost_model.ring_time("all-gather", expert_parallel_bytes(s) * s.ep
                                    / (s.ep - 1), s.ep, link)
        ep = layers * recomputation.collective_passes(s, "ep") * each
    return cp, ep


def step_time(s: Setup) -> StepTime:
    """The seconds of one step: compute, communication, bubble (see the module's
    docstring).

    Chapter 2, *The memory wall*.
    """
    precision = memory.PRECISIONS[s.precision]
    compute, bound = _compute(s)
    message = s.seq_len // s.cp * s.micro_batch * s.hidden * precision.activation_bytes
    all_reduce = cost_model.ring_time("all-reduce", message, s.tp, s.node_link)
    layers_here = max(s.edge_layers, s.middle_layers)
    passes = recomputation.collective_passes(s, "tp")
    tp = not_hidden(layers_here * s.micro_batches * passes * all_reduce, s.tp_overlap,
                    compute)
    pp = 0.0
    if s.pp > 1:
        link = s.node_link if s.tp * s.pp <= s.gpus_per_node else s.network_link
        send = cost_model.ring_time("broadcast", message / s.tp, 2, link)
        pp = 2 * s.micro_batches * s.virtual_stages * send
    cp, ep = _context_and_experts(s)
    ep = not_hidden(ep, s.ep_overlap, compute)
    busy = compute + tp + pp + cp + ep
    share = pipeline.theoretical_bubble(s.pp, s.micro_batches, s.virtual_stages)
    bubble = busy * share / (1 - share)
    local = _held_params(s) * stage_share(s) / s.tp
    dp, exposed = data_parallel_time(s, local, compute)
    offload = 0.0
    if s.offload:
        offload = cost_model.offload_transfer_time(
            _held_params(s) / (s.tp * s.pp), s.shard, s.host_link,
            precision.grad_bytes + precision.weight_bytes)
    step = busy + bubble + exposed + offload
    return StepTime(compute, bound, tp, pp, cp, ep, bubble, dp, exposed, offload, step,
                    share, context_parallel_bytes(s), expert_parallel_bytes(s))


@dataclass(frozen=True)
class PlanResult:
    """A checked plan and what the planner says: memory, verdict, change, step time, the
    run.

    ``flops``: the run's ``6 N D``; ``achieved_mfu``: ``6 N T`` per step over the step's
    time and the GPUs' peak, bubble and exposed communication included (``N``: the
    active parameters of a mixture of experts). Both count ``6 N`` per token only, as
    the ``6 N D`` rule does: attention's products take time in the step
    (:func:`attention_flops`) but are not in these counts, so at long sequences the
    achieved MFU is below what a paper counting PaLM's ``6 N + 12 l h s`` publishes.

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
    active = active_params(s)
    flops = roofline.training_flops(active, tokens_per_step)
    return PlanResult(s, held, change, time, tokens_per_step, steps, seconds,
                      seconds / SECONDS_PER_DAY, seconds * s.gpus / 3600,
                      roofline.training_flops(active, s.tokens),
                      flops / (time.step * s.gpus * s.peak), language)
