"""What one rank of a large training run holds, measured on fake process groups on this machine.

Chapter 9 measures rank 0 of 64 with it (``benchmarks/at_scale.py`` prints a grid): a
real-size model (GPT-2 XL to Llama 3 405B) is built with fake tensors (``FakeTensorMode``:
shapes, dtypes and strides, no storage), sharded by the same code a
real run uses (FSDP2's ``fully_shard`` or ``replicate``, ``parallelize_module`` on a 2-D
``DeviceMesh``) on a *fake* process group, where this one process is rank ``r`` of ``W``; then
one training step (forward, backward, AdamW's step) runs, and torch's own tools measure it:
``FSDPMemTracker`` attributes every byte rank ``r`` holds to parameters, gradients, optimizer
states, activations and temporaries; ``CommDebugMode`` counts the collectives (and a small
dispatch mode here their bytes); ``FlopCounterMode`` counts the FLOPs. Nothing is allocated:
Llama 2 7B on 64 ranks takes seconds and a few hundred MB.

:func:`measure_rank` takes a model (a name of :data:`MODELS`, a name of chapter 2's
:data:`course_lib.numbers.memory.MODEL_PRESETS`, or a :class:`~course_lib.numbers.memory.ModelShape`)
and a :class:`Layout`; :func:`course_lib.parallel.rank_estimate.compare` sets chapter 2's
estimator (:func:`course_lib.numbers.memory.training_memory`) next to what was measured,
category by category.

Two steps run; the second is measured. On fake tensors, DTensor's sharding propagation
(``torch/distributed/tensor/_sharding_prop.py``) computes each op's output shape on fake tensors
of the *global* shape in the fake mode already active, and the tracker counts them as allocated;
the propagation is cached, and the second step reuses it. This is why
``AdamW(foreach=True)``, whose every op takes all the parameters at once, read about 3 W times
the shard's bytes in its first step on fake tensors and 3 times on real ones (two states and one
``sqrt`` buffer). The second step is also the one a long run repeats: the optimizer states exist
while it runs forward and backward.

These torch APIs are private (``torch._subclasses``, ``torch.testing._internal``,
``torch.distributed._tools``): :data:`PRIVATE_APIS` lists them, and a torch without one raises a
RuntimeError that names it. Written against torch 2.13.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils import flop_counter
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from course_lib.numbers import memory
from course_lib.parallel import launch, selective_checkpointing, tensor_parallel

__all__ = ["CATEGORIES", "MODELS", "PRIVATE_APIS", "STRATEGIES", "Layout",
           "RankMemory", "build_model", "check_request",
           "measure_many", "measure_payload", "measure_rank", "measure_real",
           "private_api"]

#: The torch APIs used here that are not public: (module, name).
PRIVATE_APIS = (
    ("torch._subclasses.fake_tensor", "FakeTensorMode"),
    ("torch.testing._internal.distributed.fake_pg", "FakeStore"),
    ("torch.distributed._tools.fsdp2_mem_tracker", "FSDPMemTracker"),
    ("torch.distributed._composable.replicate_with_fsdp", "replicate"),
    ("torch.distributed.tensor.debug", "CommDebugMode"),
)

#: The strategies, named as chapter 9 names them (:data:`course_lib.parallel.fsdp.STRATEGIES`).
STRATEGIES = {
    "ddp": "FSDP2's replicate: parameters, gradients and AdamW states whole on every rank",
    "zero2": "fully_shard, reshard_after_forward=False: gathered blocks kept until backward",
    "zero3": "fully_shard, reshard_after_forward=True: full sharding (ZeRO stage 3)",
}
#: The ZeRO stage chapter 2's estimator uses for each strategy.
ZERO_STAGE = {"ddp": 0, "zero2": 2, "zero3": 3}

#: What rank r holds, by category; each of torch's categories (FSDPMemTracker's) goes in one.
CATEGORIES = {
    "parameters": ("Sharded Param",),
    "gathered parameters": ("Unsharded Param", "All Gather"),
    "gradients": ("Sharded Grad", "Unsharded Grad"),
    "optimizer states": ("OptState",),
    "activations": ("Activation",),
    "temporaries": ("Temp", "Reduce Scatter", "Inputs", "Buffer"),
}


@dataclass(frozen=True)
class Architecture:
    """A transformers model by its published shape: GPT-2 (``gpt2``) or Llama (``llama``).

    Used by the library's other modules.
    """

    kind: str
    shape: memory.ModelShape
    mlp: int = 0  # Llama's SwiGLU width (GPT-2's is 4 h)
    kv_heads: int = 0  # Llama's key-value heads (grouped-query attention); 0: as many as heads

    @property
    def key_value_heads(self) -> int:
        """The heads that K and V have: ``kv_heads``, or one per attention head."""
        return self.kv_heads or self.shape.n_heads


def _from_preset(name: str, **llama: int) -> Architecture:
    shape = memory.MODEL_PRESETS[name]
    return Architecture("llama", shape, **llama) if llama else Architecture("gpt2", shape)


#: Named real models. Shapes come from chapter 2's presets where there is one; the others from
#: the released configs (Llama 3 8B and 70B with the paper's vocabulary of 128,000, as the 405B).
MODELS: dict[str, Architecture] = {
    "gpt2-xl": Architecture("gpt2", memory.ModelShape(48, 1600, 25, 50257, 1024)),
    "gpt3-175b": _from_preset("gpt3-175B"),
    "llama2-7b": _from_preset("llama-7B-shape", mlp=11008, kv_heads=32),
    "llama2-70b": _from_preset("llama2-70B-shape", mlp=28672, kv_heads=8),
    "llama3-8b": Architecture("llama", memory.ModelShape(32, 4096, 32, 128000, 0), 14336, 8),
    "llama3-70b": Architecture("llama", memory.ModelShape(80, 8192, 64, 128000, 0), 28672, 8),
    "llama3-405b": _from_preset("llama3-405B-shape", mlp=53248, kv_heads=8),
}


@dataclass(frozen=True)
class Layout:
    """How the run is laid out, as rank r sees it.

    ``world_size`` ranks in all, ``tp`` of them in each tensor-parallel group (a 2-D mesh of
    ``world_size / tp`` data-parallel rows); ``strategy`` one of :data:`STRATEGIES` over the
    data-parallel ranks; ``layers``: the blocks of this rank's pipeline stage (``None``: all; the
    stage keeps the embedding and the output layer, as a first-and-last stage would);
    ``micro_batch`` sequences of ``seq_len`` tokens; ``mixed_precision``: FSDP's
    ``MixedPrecisionPolicy`` (BF16 compute, FP32 sharded parameters and gradient reduction);
    ``checkpointing``: every block recomputed in backward (``True``), or ``"selective"``:
    torchtitan's op-level policy in each block
    (:mod:`~course_lib.parallel.selective_checkpointing`); ``attention``: ``"sdpa"`` (fused, no
    ``s x s`` scores kept) or ``"eager"``; ``sequence_parallel``: with ``tp > 1`` (Llama only),
    Megatron-LM's and torchtitan's whole plan: the norms and residuals split along the
    sequence over the tensor-parallel group (Korthikanti et al., 2022) and the loss computed
    on logits split by the vocabulary, instead of both whole on every rank.

    Used by the library's other modules.
    """

    world_size: int = 8
    strategy: str = "zero3"
    tp: int = 1
    layers: int | None = None
    micro_batch: int = 1
    seq_len: int = 2048
    mixed_precision: bool = True
    checkpointing: bool | str = False
    attention: str = "sdpa"
    sequence_parallel: bool = False

    @property
    def dp(self) -> int:
        """The data-parallel ranks: the world over the tensor-parallel degree."""
        return self.world_size // self.tp


@dataclass(frozen=True)
class RankMemory:
    """What rank ``rank`` held, sent and computed in one training step, in bytes and FLOPs.

    ``peak`` and ``end``: bytes by :data:`CATEGORIES` at the step's highest point and after the
    optimizer's step (gradients still held); ``after_forward``: when the forward pass (loss
    included) has ended, where activations are highest; ``detail``: the peak in torch's words;
    ``collectives``: ``{kind: (calls, bytes)}``, bytes of the whole tensors gathered or
    reduced; ``comm_counts``: CommDebugMode's count per op; ``flops``: this rank's FLOPs (none
    for the CPU's fused attention, which ``FlopCounterMode`` has no formula for: ``"eager"``
    attention counts them); ``n_params``: the parameters as built (the stage's);
    ``shard_bytes``: this rank's parameter shards.

    Used by the library's other modules.
    """

    model: str
    shape: memory.ModelShape
    layout: Layout
    rank: int
    n_params: int
    shard_bytes: int
    peak: dict[str, int]
    end: dict[str, int]
    after_forward: dict[str, int]
    detail: dict[str, int]
    collectives: dict[str, tuple[int, int]]
    comm_counts: dict[str, int]
    flops: int
    seconds: float
    torch_version: str = torch.__version__

    @property
    def peak_total(self) -> int:
        """Everything rank r held at the step's highest point."""
        return sum(self.peak.values())


def private_api(module: str, name: str) -> Any:
    """``module.name`` from torch, or a RuntimeError naming the private API and the torch it needs.

    Used by the library's other modules.
    """
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        raise RuntimeError(
            f"measuring at scale needs torch's private API {module}.{name}, which this torch "
            f"({torch.__version__}) does not have; install torch 2.13 (the course's version), "
            "where it exists.") from None


def _architecture(model: str | memory.ModelShape) -> tuple[str, Architecture]:
    if isinstance(model, memory.ModelShape):
        return "custom", Architecture("gpt2", model)
    if model in MODELS:
        return model, MODELS[model]
    if model in memory.MODEL_PRESETS:
        return model, Architecture("gpt2", memory.MODEL_PRESETS[model])
    raise ValueError(f"unknown model {model!r}; use one of {', '.join(MODELS)} or chapter 2's "
                     f"presets {', '.join(memory.MODEL_PRESETS)}, or a memory.ModelShape.")


def _whole(value: Any, what: str, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{what} must be a whole number >= {low}, got {value!r}.")


def check_request(model: str | memory.ModelShape, layout: Layout, rank: int = 0) -> Architecture:
    """Refuse a bad model, layout or rank with one message that says what to do; return the model.

    Used by the library's other modules.
    """
    _, arch = _architecture(model)
    _whole(layout.world_size, "world_size")
    _whole(layout.tp, "tp (the tensor-parallel degree)")
    _whole(layout.micro_batch, "micro_batch (sequences per rank)")
    _whole(layout.seq_len, "seq_len")
    if layout.strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {layout.strategy!r}; use one of: "
                         f"{', '.join(STRATEGIES)} (ZeRO-1 and hybrid sharding are not measured "
                         "here: chapter 9 runs them on real ranks).")
    if layout.world_size % layout.tp:
        fits = [d for d in range(1, layout.world_size + 1) if layout.world_size % d == 0]
        raise ValueError(f"tp={layout.tp} does not divide the {layout.world_size} ranks into "
                         f"tensor-parallel groups; use a tp of {fits}, or another world_size.")
    shape = arch.shape
    kv = arch.key_value_heads
    if shape.n_heads % layout.tp or kv % layout.tp:
        fits = [d for d in range(1, kv + 1) if shape.n_heads % d == 0 and kv % d == 0]
        raise ValueError(f"tp={layout.tp} does not divide the {shape.n_heads} attention heads "
                         f"({kv} key-value heads); use a tp of {fits}.")
    if layout.layers is not None:
        _whole(layout.layers, "layers (the blocks of this pipeline stage)")
        if layout.layers > shape.n_layers:
            raise ValueError(f"layers={layout.layers} is more than the model's {shape.n_layers} "
                             "blocks; give a stage's share, or None for all of them.")
    positions = shape.positions or (2048 if arch.kind == "gpt2" else 0)  # build_model's
    if 0 < positions < layout.seq_len:
        raise ValueError(f"seq_len={layout.seq_len} is longer than the model's "
                         f"{positions} positions; use seq_len <= {positions}.")
    if not (isinstance(layout.checkpointing, bool) or layout.checkpointing == "selective"):
        raise ValueError("checkpointing must be False, True (full) or 'selective', got "
                         f"{layout.checkpointing!r}.")
    if layout.attention not in ("sdpa", "eager"):
        raise ValueError(f"attention must be 'sdpa' or 'eager', got {layout.attention!r}.")
    if layout.sequence_parallel and (arch.kind != "llama" or layout.tp == 1
                                     or layout.attention != "sdpa"):
        raise ValueError("sequence_parallel needs a Llama model, tp > 1 and attention='sdpa' "
                         "(its causal mask is built for the whole sequence); set "
                         "sequence_parallel=False for the others.")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < layout.world_size:
        raise ValueError(f"rank must be a whole number from 0 to {layout.world_size - 1}, got {rank!r}.")
    return arch


def build_model(arch: Architecture, layers: int | None = None,
                attention: str = "sdpa") -> nn.Module:
    """The transformers model of ``arch`` with ``layers`` blocks, built on whatever tensors are current.

    Under ``FakeTensorMode`` it has shapes and no storage. GPT-2's configuration has no dropout
    here (Llama has none): a training run of this size seldom uses it.

    Used by the library's other modules.
    """
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    s, n = arch.shape, layers or arch.shape.n_layers
    if arch.kind == "llama":
        config = LlamaConfig(hidden_size=s.hidden, intermediate_size=arch.mlp,
                             num_hidden_layers=n, num_attention_heads=s.n_heads,
                             num_key_value_heads=arch.key_value_heads,
                             vocab_size=s.vocab, tie_word_embeddings=False)
        build = LlamaForCausalLM
    else:
        config = GPT2Config(n_layer=n, n_embd=s.hidden, n_head=s.n_heads, vocab_size=s.vocab,
                            n_positions=s.positions or 2048, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0)
        build = GPT2LMHeadModel
    config._attn_implementation = attention
    return build(config)


def _blocks(model: nn.Module) -> nn.ModuleList:
    return model.model.layers if hasattr(model, "model") else model.transformer.h


def _tensor_parallel(model: nn.Module, arch: Architecture, mesh: Any,
                     sequence: bool = False) -> None:
    """Megatron's split of every block over ``mesh`` (chapter 11): q, k, v and the MLP's first
    layers by columns, the output projections by rows; Llama's embedding and head by the
    vocabulary (Megatron's and torchtitan's plan), GPT-2's tied pair too (one parameter, tied
    again after the split); the norms stay whole.

    ``sequence``: sequence parallelism (torchtitan's plan): the embedding's output, the norms
    and the residual stream split along the sequence; each block all-gathers the sequence
    before attention and the MLP and reduce-scatters after them (``Shard(1)``) instead of
    all-reducing; the head's logits stay split by the vocabulary for the loss
    (:func:`_step` runs it under ``loss_parallel``). Hugging Face computes the rotary
    positions from the input it sees, a ``1 / t`` slice here: :func:`_step` passes the whole
    sequence's ``position_ids``."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput,
                                                   RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    split = Shard(1) if sequence else Replicate()  # the residual stream's layout
    if arch.kind == "gpt2":  # both split by the vocabulary (Shard(0)): the same layout
        parallelize_module(model, mesh, {
            "transformer.wte": RowwiseParallel(input_layouts=Replicate()),
            "lm_head": ColwiseParallel(output_layouts=Replicate())})
        model.lm_head.weight = model.transformer.wte.weight
    else:
        root = {"model.embed_tokens": RowwiseParallel(input_layouts=Replicate(),
                                                      output_layouts=split),
                "lm_head": ColwiseParallel(input_layouts=split, output_layouts=Shard(-1),
                                           use_local_output=False) if sequence else
                ColwiseParallel(output_layouts=Replicate())}
        if sequence:
            root["model.norm"] = SequenceParallel()
        parallelize_module(model, mesh, root)
    for block in _blocks(model):
        if arch.kind == "gpt2":
            tensor_parallel.torch_parallelize_block(block, mesh)
            continue
        plan = {f"self_attn.{p}_proj": ColwiseParallel() for p in "qkv"}
        plan.update({"self_attn.o_proj": RowwiseParallel(output_layouts=split),
                     "mlp.gate_proj": ColwiseParallel(), "mlp.up_proj": ColwiseParallel(),
                     "mlp.down_proj": RowwiseParallel(output_layouts=split)})
        if sequence:
            gather = {"hidden_states": Replicate()}
            plan.update({
                "input_layernorm": SequenceParallel(),
                "post_attention_layernorm": SequenceParallel(),
                "self_attn": PrepareModuleInput(input_kwarg_layouts={"hidden_states": split},
                                                desired_input_kwarg_layouts=gather),
                "mlp": PrepareModuleInput(input_layouts=(split,),
                                          desired_input_layouts=(Replicate(),))})
        parallelize_module(block, mesh, plan)


def _shard(model: nn.Module, layout: Layout, mesh: Any) -> None:
    """Every block one FSDP unit (or replicated unit), the root (embeddings, head) another."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    options: dict[str, Any] = {"mesh": mesh}
    if layout.mixed_precision:
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                    reduce_dtype=torch.float32)
    ddp = layout.strategy == "ddp"
    wrap = private_api("torch.distributed._composable.replicate_with_fsdp", "replicate") if ddp \
        else functools.partial(fully_shard, reshard_after_forward=layout.strategy == "zero3")
    for block in _blocks(model):
        wrap(block, **options)
    # the root with FSDP's default: kept gathered from forward to backward
    (wrap if ddp else fully_shard)(model, **options)


class _RankCounter(TorchDispatchMode):
    """This rank's FLOPs (``FlopCounterMode``'s formulas) and the kind and bytes of every c10d
    collective (the whole tensor's bytes). A DTensor's op is left to DTensor, which calls the
    op again on the local shards: those are what this rank computes."""

    KINDS = {"reduce_scatter": "reduce-scatter", "allgather": "all-gather", "all_gather":
             "all-gather", "allreduce": "all-reduce", "all_reduce": "all-reduce"}

    def __init__(self) -> None:
        super().__init__()
        self.flops = 0
        self.calls: dict[str, tuple[int, int]] = {}

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        from torch.distributed.tensor import DTensor

        if any(issubclass(t, DTensor) for t in types):
            return NotImplemented
        out = func(*args, **(kwargs or {}))
        formula = flop_counter.flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.flops += int(formula(*args, **(kwargs or {}), out_val=out))
        kind = next((k for key, k in self.KINDS.items() if key in func.__name__), None)
        if func.namespace in ("c10d", "_c10d_functional") and kind:
            sizes = [t.numel() * t.element_size() for t in tree_leaves((args, out))
                     if isinstance(t, torch.Tensor)]
            calls, n_bytes = self.calls.get(kind, (0, 0))
            self.calls[kind] = (calls + 1, n_bytes + max(sizes, default=0))
        return out


def _by_category(snap: dict[str, int]) -> dict[str, int]:
    return {cat: sum(snap.get(name, 0) for name in names) for cat, names in CATEGORIES.items()}


def _snapshot(tracker: Any, kind: str) -> dict[str, int]:
    snap = tracker.get_tracker_snapshot(kind)
    out: dict[str, int] = {}
    for device_snap in snap.values():
        for key, value in device_snap.items():
            name = getattr(key, "value", key)
            if name != "Total":
                out[name] = out.get(name, 0) + value
    return out


def _shard_bytes(model: nn.Module) -> int:
    """Bytes of this rank's local shards of the parameters (FSDP pads dim 0 to a multiple of W)."""
    local = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
    return sum(t.untyped_storage().nbytes() for t in local)


def _step(model: nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor,
          sequence_parallel: bool = False) -> None:
    """One training step; ``sequence_parallel``: the whole sequence's positions given, the
    loss on logits split by the vocabulary (see :func:`_tensor_parallel`).

    With sequence parallelism an empty cache goes in too: with checkpointing Hugging Face
    turns its own cache off, and without one it looks for packed sequences in the positions,
    which on fake tensors it cannot rule out, and builds a mask for the ``1 / t`` slice it
    sees. The checkpointed layers leave the cache empty; attention stays SDPA's causal kernel
    with no mask, as without checkpointing."""
    from torch.distributed.tensor.parallel import loss_parallel
    from transformers import DynamicCache

    if not sequence_parallel:
        model(input_ids=batch, labels=batch).loss.backward()
    else:
        with loss_parallel():
            positions = torch.arange(batch.shape[1]).expand_as(batch)
            model(input_ids=batch, labels=batch, position_ids=positions,
                  past_key_values=DynamicCache(config=model.config)).loss.backward()
    optimizer.step()


@contextlib.contextmanager
def _group(rank: int, world_size: int, fake: bool) -> Any:
    """This process as rank ``rank`` of a fake group of ``world_size``, or as the real rank that
    :func:`course_lib.parallel.launch.launch` started; the group is left at exit."""
    if fake and dist.is_initialized():
        raise RuntimeError("this process is already in a process group; measure in a fresh "
                           "process (measure_rank(..., isolate=True), the default).")
    if fake:
        store = private_api("torch.testing._internal.distributed.fake_pg", "FakeStore")
        dist.init_process_group("fake", store=store(), rank=rank, world_size=world_size)
    else:
        launch.init_worker("gloo")
    try:
        yield
    finally:
        dist.destroy_process_group()


def _measure_here(model: str | memory.ModelShape, layout: Layout, rank: int,
                  fake: bool = True) -> RankMemory:
    """One measurement in this process (in no process group); ``fake=False``: a real rank."""
    name, arch = _architecture(model)
    fake_mode = private_api("torch._subclasses.fake_tensor", "FakeTensorMode")
    tracker_class = private_api("torch.distributed._tools.fsdp2_mem_tracker", "FSDPMemTracker")
    comm_mode = private_api("torch.distributed.tensor.debug", "CommDebugMode")
    from torch.distributed.device_mesh import init_device_mesh

    start = time.perf_counter()
    # allow_non_fake_inputs: the meta tensors become fake ones
    storage = fake_mode(allow_non_fake_inputs=True) if fake else contextlib.nullcontext()
    with _group(rank, layout.world_size, fake):
        mesh = init_device_mesh("cpu", (layout.dp, layout.tp), mesh_dim_names=("dp", "tp"))
        dp_mesh, tp_mesh = mesh["dp"], mesh["tp"]
        # Built and split on the meta device (shapes only), where the meshes' own bookkeeping
        # runs on real numbers; then given fake storage (or real, on a real rank).
        with torch.device("meta"):
            built = build_model(arch, layout.layers, layout.attention)
        n_params = sum(p.numel() for p in built.parameters())
        if layout.checkpointing:
            options: dict[str, Any] = {"use_reentrant": False}
            if layout.checkpointing == "selective":
                options["context_fn"] = selective_checkpointing.context_fn()
            built.gradient_checkpointing_enable(options)
        if layout.tp > 1:
            _tensor_parallel(built, arch, tp_mesh, layout.sequence_parallel)
        _shard(built, layout, dp_mesh)
        with storage:
            built.to_empty(device="cpu")
            optimizer = torch.optim.AdamW(built.parameters(), lr=1e-4, foreach=True)
            batch = torch.randint(0, arch.shape.vocab, (layout.micro_batch, layout.seq_len))
            split = layout.sequence_parallel
            _step(built, optimizer, batch, split)  # warms DTensor's propagation cache (above)
            optimizer.zero_grad()
            tracker, comms, counter = tracker_class(built, optimizer), comm_mode(), _RankCounter()
            tracker.track_inputs((batch,))
            forward: dict[str, int] = {}
            hook = built.register_forward_hook(
                lambda *_: forward.update(_snapshot(tracker, "current")))
            with tracker, comms, counter:
                _step(built, optimizer, batch, split)
                end = _snapshot(tracker, "current")
            hook.remove()
            peak = _snapshot(tracker, "peak")
            shard = _shard_bytes(built)
    counts = {str(op): n for op, n in comms.get_comm_counts().items()}
    return RankMemory(name, arch.shape, layout, rank, n_params, shard, _by_category(peak),
                      _by_category(end), _by_category(forward), peak, counter.calls, counts,
                      counter.flops, time.perf_counter() - start)


def measure_rank(model: str | memory.ModelShape, layout: Layout, rank: int = 0,
                 isolate: bool = True, timeout: float = 300.0) -> RankMemory:
    """What rank ``rank`` of ``layout`` holds, sends and computes in one AdamW training step.

    The model is built with fake tensors and sharded on a fake process group (see the module's
    docstring). ``isolate`` runs it in a fresh process started by
    :func:`course_lib.parallel.launch.launch` (stopped after ``timeout`` seconds), so that no
    process group or fake mode stays behind here; ``isolate=False`` runs it in this process, which
    must be in no process group. Bad input is refused before any work.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    return measure_many([(model, layout, rank)], isolate, timeout)[0]


def measure_many(requests: Sequence[tuple[Any, Layout, int]], isolate: bool = True,
                 timeout: float = 600.0) -> list[RankMemory]:
    """:func:`measure_rank` for each ``(model, layout, rank)``, one after another in one process.

    Used by the library's other modules.
    """
    for m, layout, r in requests:
        check_request(m, layout, r)
    for module, name in PRIVATE_APIS:
        private_api(module, name)
    if not isolate:
        return [_measure_here(m, layout, r) for m, layout, r in requests]
    payload = [{"model": dataclasses.asdict(m) if isinstance(m, memory.ModelShape) else m,
                "layout": dataclasses.asdict(layout), "rank": r} for m, layout, r in requests]
    return launch.launch(f"{__name__}:measure_payload", 1, {"requests": payload},
                         backend="gloo", timeout=timeout, echo=False)[0]


def measure_payload(requests: list[dict[str, Any]]) -> list[RankMemory]:
    """The worker of :func:`measure_many`: the requests as JSON, measured in this process.

    Used by the library's other modules.
    """
    return [_measure_here(memory.ModelShape(**r["model"]) if isinstance(r["model"], dict)
                          else r["model"], Layout(**r["layout"]), r["rank"]) for r in requests]


def measure_real(model: dict[str, int], layout: dict[str, Any]) -> RankMemory:
    """Worker: the same measurement on a real gloo rank with real storage (start it with
    :func:`course_lib.parallel.launch.launch`, one process per rank of ``layout``), for a small
    ``model`` (a :class:`~course_lib.numbers.memory.ModelShape` as a dict): a fake rank should
    hold what this one does.

    Used by the library's other modules.
    """
    shape, lay = memory.ModelShape(**model), Layout(**layout)
    check_request(shape, lay)
    return _measure_here(shape, lay, int(os.environ["RANK"]), fake=False)
