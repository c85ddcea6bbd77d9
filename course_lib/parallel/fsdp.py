"""Sharded data parallelism: ZeRO stages 1-3 with PyTorch's own tools, measured per rank; also a script.

Chapter 9 ("Sharding with ZeRO and FSDP") trains the same model, on the same batches, as chapter 8
(:mod:`course_lib.parallel.ddp`) under five strategies:

* ``ddp``: ``DistributedDataParallel``, everything replicated (ZeRO stage 0);
* ``zero1``: DDP with ``torch.distributed.optim.ZeroRedundancyOptimizer``, which gives every rank
  the optimizer states of a share of the parameters (ZeRO stage 1);
* ``zero2``: FSDP2 (``fully_shard``) with ``reshard_after_forward=False``: the gathered parameters
  are kept from the forward pass to the backward pass (ZeRO-2-like);
* ``zero3``: FSDP2 with ``reshard_after_forward=True``, full sharding (ZeRO stage 3);
* ``hsdp``: FSDP2 on a 2-D device mesh, sharded within groups of ``shard_factor`` ranks and
  replicated across the groups (hybrid sharding; factor 1 replicates, factor N shards fully).

Every transformer block is one FSDP unit and the root module (embeddings, final norm, the tied
output layer) another. ``offload`` adds ``CPUOffloadPolicy``, ``mixed_precision`` a
``MixedPrecisionPolicy`` with bf16 parameters and fp32 gradient reduction. :func:`train_sharded`
runs inside each rank (start it with :func:`course_lib.parallel.launch.launch`); the module is
also the torchrun entry point, on GPUs (NCCL) or CPUs (gloo) alike::

    torchrun --nproc-per-node=4 -m course_lib.parallel.fsdp --strategy zero3 --check

Its flags are checked before any rank joins the group (:func:`check_flags`), and a bad one is
reported once, by rank 0.

Each run also measures its bytes on the wire per step (:func:`course_lib.parallel.wire.
wire_snapshot`) and the time the training thread spends issuing, waiting for and copying out
FSDP's all-gathers (the *exposed* all-gather time, forward and backward). ``prefetch`` chooses how
the next unit's all-gather is started in forward: ``implicit`` (FSDP's default, when the unit's own
forward begins), ``explicit`` (``set_modules_to_forward_prefetch`` / ``..._backward_prefetch``:
issued one unit ahead, synchronously) or ``async`` (``unshard(async_op=True)`` one unit ahead, so
that gloo gathers in its own thread while this one computes). ``reshard_after_forward`` as a whole
number ``k`` keeps, after forward, each block sharded over groups of ``k`` ranks, so that backward
all-gathers within a group (torch >= 2.6). ``memory_budget`` makes the run refuse, like an
out-of-memory error with a message, when a rank's model states would exceed that many bytes.
``links`` slows the collectives with chapter 8's link emulator (:mod:`course_lib.parallel.links`)
as if every ``ranks_per_node`` ranks were one node: a collective whose group stays inside a node
pays the ``node`` link, one whose group spans nodes the ``network`` link (see :func:`node_links`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from course_lib.numbers import memory
from course_lib.parallel import ddp, launch, links, zero
from course_lib.parallel.collectives import Collectives, volume
from course_lib.parallel.ddp import (add_run_arguments, check_batch, flat_parameters, fresh_model,
                                     gathered, local_batches, parse_run_arguments,
                                     rank_tokenizer, recipe_for, report_check)
from course_lib.parallel.traffic import Traffic, counting_hook
from course_lib.parallel.wire import AllGatherClock, WireBytes, wire_snapshot
from course_lib.text import data, models, training

__all__ = ["PREFETCH", "STRATEGIES", "BudgetRefusal", "MemoryBudgetError", "ShardedRank",
           "check_flags", "check_offload", "check_strategy", "expected_volume",
           "initial_parameters", "main", "node_links", "set_prefetch", "shard_model",
           "train_many", "train_sharded", "units"]

#: The strategies, and what each one shards.
STRATEGIES = {
    "ddp": "DDP: parameters, gradients and optimizer states replicated (ZeRO stage 0)",
    "zero1": "DDP + ZeroRedundancyOptimizer: optimizer states sharded (ZeRO stage 1)",
    "zero2": "FSDP, reshard_after_forward=False: gathered parameters kept until backward",
    "zero3": "FSDP full sharding, reshard_after_forward=True (ZeRO stage 3)",
    "hsdp": "FSDP hybrid sharding: sharded in groups of shard_factor ranks, replicated across",
}

#: How the next FSDP unit's all-gather is started in forward (see the module's docstring).
PREFETCH = ("implicit", "explicit", "async")


class MemoryBudgetError(MemoryError):
    """A rank's model states would not fit the run's memory budget; the message says by how much.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """


def check_strategy(strategy: str, world_size: int, shard_factor: int | None = None) -> int:
    """Refuse an unknown strategy or a sharding factor that does not divide the ranks; return it.

    The sharding factor is how many ranks share one copy of the model states: 1 for ``ddp`` and
    ``zero1`` (whose parameters and gradients are whole on every rank), ``world_size`` for ``zero2``
    and ``zero3``, and the given ``shard_factor`` for ``hsdp``.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; use one of: {', '.join(STRATEGIES)}.")
    if strategy != "hsdp":
        if shard_factor not in (None, 1 if strategy in ("ddp", "zero1") else world_size):
            raise ValueError(f"shard_factor={shard_factor!r} only applies to strategy 'hsdp' "
                             f"(strategy {strategy!r} fixes it); use strategy='hsdp', "
                             "or leave shard_factor out.")
        return 1 if strategy in ("ddp", "zero1") else world_size
    if isinstance(shard_factor, bool) or not isinstance(shard_factor, int) or shard_factor < 1:
        raise ValueError("strategy 'hsdp' needs shard_factor, a whole number >= 1 of ranks that "
                         f"share one copy of the model; got {shard_factor!r}.")
    if world_size % shard_factor:
        divisors = [d for d in range(1, world_size + 1) if world_size % d == 0]
        raise ValueError(f"shard_factor={shard_factor} does not divide the {world_size} ranks into "
                         f"equal groups; use one of {divisors}.")
    return shard_factor


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse flags that are fine alone and wrong together, naming them as they were typed.

    Those of :func:`course_lib.parallel.ddp.check_flags`, and: ``--strategy hsdp`` needs a
    ``--shard-factor`` that divides the ranks, which the other strategies fix themselves;
    ``--offload`` and ``--mixed-precision`` are FSDP's (not ``ddp``'s or ``zero1``'s).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    ddp.check_flags(args, world_size)
    strategy, factor = args.strategy, args.shard_factor
    divisors = ", ".join(str(d) for d in range(1, world_size + 1) if world_size % d == 0)
    if strategy == "hsdp" and factor is None:
        raise ValueError("--strategy hsdp needs --shard-factor, the number of ranks that share one "
                         f"copy of the model: one of {divisors} for {world_size} rank(s).")
    if strategy == "hsdp" and world_size % factor:
        raise ValueError(f"--shard-factor {factor} does not divide the {world_size} rank(s) into "
                         f"equal groups; use one of {divisors}.")
    if strategy != "hsdp" and factor is not None:  # even the factor it fixes: a mistyped strategy?
        raise ValueError(f"--shard-factor only applies to --strategy hsdp (--strategy {strategy} "
                         "fixes it); use --strategy hsdp, or leave --shard-factor out.")
    if strategy in ("ddp", "zero1") and (args.offload or args.mixed_precision):
        raise ValueError(f"--offload and --mixed-precision are FSDP options, not {strategy}'s: use "
                         "them with --strategy zero2, zero3 or hsdp.")


def check_offload(n_bytes: float) -> None:
    """Refuse CPU offload when the host has fewer free bytes than the model states to offload.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not a POSIX system: cannot tell, so allow
        return
    if n_bytes > free:
        raise MemoryError(f"CPU offload would put {n_bytes / 1e9:.1f} GB of model states in host "
                          f"memory, and this machine has {free / 1e9:.1f} GB free. Use more ranks "
                          "(each offloads only its shard), a smaller model, or no offload.")


def units(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The FSDP units in forward order: the root module (its own parameters) first, then each block.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    blocks = models.blocks(model)
    return [model, *blocks]


def _check_fsdp_options(strategy: str, factor: int, policies: bool, prefetch: str,
                        reshard_after_forward: int | None) -> None:
    """Refuse FSDP options with DDP, an unknown prefetch mode, a whole-number reshard that fails."""
    if strategy in ("ddp", "zero1"):
        if policies or prefetch != "implicit" or reshard_after_forward:
            raise ValueError("offload, mixed_precision, prefetch and reshard_after_forward are "
                             "FSDP options: use strategy 'zero2', 'zero3' or 'hsdp' with them.")
        return
    if prefetch not in PREFETCH:
        raise ValueError(f"prefetch must be one of {PREFETCH}, got {prefetch!r}.")
    if reshard_after_forward is None:
        return
    k = reshard_after_forward
    divisors = [d for d in range(2, factor) if factor % d == 0]
    if strategy not in ("zero3", "hsdp"):
        raise ValueError(f"reshard_after_forward applies to 'zero3' and 'hsdp', not {strategy!r} "
                         "('zero2' keeps the parameters whole after forward).")
    if isinstance(k, bool) or not isinstance(k, int) or k not in divisors:
        raise ValueError(f"reshard_after_forward={k!r} must be a divisor of the {factor} ranks "
                         "that shard the model, other than 1 and itself: "
                         f"{divisors or 'none for so few ranks; use 4 or more'}.")


def _start_gather(unit: Any) -> Any:
    """A forward pre-hook that starts ``unit``'s all-gather without waiting (FSDP waits later)."""
    def hook(*_: object) -> None:
        unit.unshard(async_op=True)

    return hook


def shard_model(model: torch.nn.Module, strategy: str, world_size: int,
                shard_factor: int | None = None, offload: bool = False,
                mixed_precision: bool = False,
                device: torch.device | str = "cpu", prefetch: str = "implicit",
                reshard_after_forward: int | None = None) -> torch.nn.Module:
    """Apply a strategy to ``model`` (in place for FSDP); return the module to train.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    factor = check_strategy(strategy, world_size, shard_factor)
    _check_fsdp_options(strategy, factor, offload or mixed_precision, prefetch,
                        reshard_after_forward)
    device = torch.device(device)
    if strategy in ("ddp", "zero1"):
        gpu = [device] if device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=gpu)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import (CPUOffloadPolicy, MixedPrecisionPolicy,
                                        fully_shard)

    if strategy == "hsdp":
        mesh = init_device_mesh(device.type, (world_size // factor, factor),
                                mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh(device.type, (world_size,))
    options: dict[str, Any] = {"mesh": mesh,
                               "reshard_after_forward": strategy != "zero2"}
    if offload:
        check_offload(memory.tensor_bytes(model.parameters()) * 4 / factor)
        pin = torch.cuda.is_available()
        options["offload_policy"] = CPUOffloadPolicy(pin_memory=pin)
    if mixed_precision:
        options["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                    reduce_dtype=torch.float32)
    # a whole number k: each block stays sharded over k ranks after forward
    blocks = {**options, "reshard_after_forward":
              reshard_after_forward or options["reshard_after_forward"]}
    for block in models.blocks(model):
        fully_shard(block, **blocks)
    fully_shard(model, **options)
    model.sharding_mesh = mesh  # the groups FSDP uses (for node_links)
    set_prefetch(model, prefetch)
    return model


def set_prefetch(model: torch.nn.Module, prefetch: str) -> None:
    """Start each FSDP unit's forward all-gather one unit ahead: ``explicit`` or ``async``.

    ``explicit``: ``set_modules_to_forward_prefetch`` (and ``..._backward_prefetch``), which
    issue the next unit's all-gather right after the current one's; ``async``: a forward
    pre-hook that calls the next unit's ``unshard(async_op=True)`` and does not wait for it.
    ``implicit`` leaves FSDP's default.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    order = units(model)  # forward order: the root, then each block
    if prefetch == "explicit":
        for unit, after in zip(order, order[1:]):
            unit.set_modules_to_forward_prefetch([after])
        for unit, before in zip(order[2:], order[1:]):
            unit.set_modules_to_backward_prefetch([before])
    elif prefetch == "async":
        for unit, after in zip(order, order[1:]):
            unit.register_forward_pre_hook(_start_gather(after))


def node_links(model: torch.nn.Module, node: str, network: str,
               ranks_per_node: int) -> list[tuple[str, Any]]:
    """The link each process group of a sharded ``model`` pays: in-node groups ``node``, others.

    A group of the model's device mesh whose ranks all sit in one node (``rank //
    ranks_per_node``) pays ``node``'s link, any other ``network``'s: a ring that leaves a node
    runs at the speed of its slowest hop. Returns (link name, group) pairs, for
    ``links.emulate(name, group=group)``.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    if isinstance(ranks_per_node, bool) or not isinstance(ranks_per_node, int) \
            or ranks_per_node < 1:
        raise ValueError(f"ranks_per_node must be a whole number >= 1, got {ranks_per_node!r}.")
    mesh = getattr(model, "sharding_mesh", None)
    if mesh is None:
        raise ValueError("node_links needs a model sharded by shard_model with FSDP (strategy "
                         "'zero2', 'zero3' or 'hsdp'); DDP's all-reduce goes through "
                         "links.allreduce_hook.")
    pairs = []
    for dim in range(mesh.ndim):
        group = mesh.get_group(dim)
        nodes = {r // ranks_per_node for r in dist.get_process_group_ranks(group)}
        pairs.append((node if len(nodes) == 1 else network, group))
    return pairs


def initial_parameters(seed: int = 0, dtype: str = "float32") -> torch.Tensor:
    """The parameters every run starts from (the course's GPT-2 initialised with ``seed``), flat.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    return flat_parameters(fresh_model(data.course_tokenizer(), seed, dtype))


def expected_volume(unit_numels: Sequence[int], strategy: str, world_size: int,
                    shard_factor: int | None = None, param_bytes: int = 4,
                    reduce_bytes: int = 4) -> dict[str, int]:
    """Bytes each kind of collective should move in one step, from the units' sizes.

    DDP all-reduces every gradient (2 Psi); ZeroRedundancyOptimizer adds a broadcast
    of every updated parameter from its owner (Psi). FSDP all-gathers every unit for
    forward (Psi), again for backward unless it kept them (Psi more, except for
    ``zero2``), and reduce-scatters the gradients (Psi); hybrid sharding adds an
    all-reduce of each shard across the replica groups (2 Psi / shard factor).
    Every unit is resharded after forward here, the root included (FSDP's default
    keeps the root gathered for backward: one all-gather of the root less).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    factor = check_strategy(strategy, world_size, shard_factor)
    total = sum(unit_numels)
    if strategy in ("ddp", "zero1"):
        out = {"all-reduce": 2 * total * reduce_bytes}
        if strategy == "zero1":
            out["broadcast"] = total * param_bytes
        return out
    out = {}
    if factor > 1:  # a shard group of one rank has nothing to gather or scatter
        gathered = total if strategy == "zero2" else 2 * total
        out = {"all-gather": gathered * param_bytes,
               "reduce-scatter": total * reduce_bytes}
    if strategy == "hsdp" and factor < world_size:
        out["all-reduce"] = 2 * total * reduce_bytes // factor
    return out


@dataclass(frozen=True)
class ShardedRank:
    """What one rank of :func:`train_sharded` measured.

    Its rank, the group's size and backend; the strategy, its sharding factor and options; the
    loss of every step; the bytes of parameters, gradients and optimizer states it held after the
    first step, and the peak of parameter bytes during forward; the volume of every kind of
    collective in each step (bytes, the ZeRO paper's accounting); the FSDP units' sizes (root
    first); the step end times; and the final parameters, gathered into one vector (``None``
    when they were not asked for). Then each step's bytes on the wire (sent, received), the
    seconds of each step spent in FSDP's all-gathers (``forward``, ``backward``), the parameter
    bytes held at the end of the forward pass, the prefetch and reshard options, and each step's
    volume by kind and group size ("all-gather over 2"), the seconds an emulated link added to
    each step's collectives (``emulate``), and the seconds those collectives took, from call to
    completion. Last, the first step's gradient after the backward pass, before clipping,
    gathered into one vector (``None`` when the parameters were not asked for).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    rank: int
    world_size: int
    backend: str
    strategy: str
    shard_factor: int
    offload: bool
    mixed_precision: bool
    history: tuple[float, ...]
    state_bytes: dict[str, int]
    peak_parameter_bytes: int
    volume: tuple[dict[str, int], ...]
    unit_numels: tuple[int, ...]
    step_times: tuple[float, ...]
    parameters: torch.Tensor | None
    wire: tuple[WireBytes, ...] = ()
    exposed: tuple[dict[str, float], ...] = ()
    after_forward_bytes: int = 0
    prefetch: str = "implicit"
    reshard_after_forward: int | None = None
    group_volume: tuple[dict[str, int], ...] = ()
    link_delays: tuple[float, ...] = ()
    link_seconds: tuple[float, ...] = ()
    gradient: torch.Tensor | None = None

    @property
    def n_params(self) -> int:
        """The model's parameters (the units' sizes added up)."""
        return sum(self.unit_numels)


class _Meter:
    """The ``on_step`` of a sharded run: step times, collectives and wire bytes per step, model
    states' bytes (checked against a budget), the parameter bytes held at the start of every
    unit's forward (where gathering peaks) and at the end of the forward pass; its ``backward``,
    the ``on_backward``: a copy of the first step's gradients (FSDP's shards, gathered later)."""

    def __init__(self, model: torch.nn.Module, calls: Collectives, clock: AllGatherClock,
                 budget: int | None = None) -> None:
        from torch.distributed.tensor import DTensor

        self.model, self.calls, self.clock, self._dtensor = model, calls, clock, DTensor
        self.budget = budget
        self.step_times: list[float] = []
        self.states: dict[str, int] = {}
        # The local shards (FSDP keeps them all the time); DDP's whole parameters are their own.
        self.shards = [p.to_local() if isinstance(p, DTensor) else p for p in model.parameters()]
        self.peak = self.after_forward = 0
        for unit in units(model):
            unit.register_forward_pre_hook(self._held)
        model.register_forward_hook(self._forward_done)
        self.snapshots = [wire_snapshot()]
        self.start = time.perf_counter()
        self.exposed: list[dict[str, float]] = []
        self.gradients: list[torch.Tensor] = []
        clock.take()

    def backward(self, step: int) -> None:
        if step == 0:  # reduced, not yet clipped; gathered after training, out of the measures
            self.gradients = [torch.zeros_like(p) if p.grad is None else p.grad.detach().clone()
                              for p in self.model.parameters()]

    def _held(self, *_: object) -> None:
        """The shards plus every parameter that is whole right now (gathered, or never sharded)."""
        whole = [p for p in self.model.parameters() if not isinstance(p, self._dtensor)]
        self.peak = max(self.peak, memory.tensor_bytes([*self.shards, *whole]))

    def _forward_done(self, *_: object) -> None:
        """The shards plus what the parameters are after forward (shards, or resharded, or whole)."""
        now = [p.to_local() if isinstance(p, self._dtensor) else p
               for p in self.model.parameters()]
        self.after_forward = max(self.after_forward, memory.tensor_bytes([*self.shards, *now]))

    def _check_budget(self) -> None:
        """Refuse, on every rank at once, when the fullest rank's states exceed the budget."""
        gathered = max(self.peak - self.states["parameters"], 0)
        needed = torch.tensor([sum(self.states.values()) + gathered])
        dist.all_reduce(needed, op=dist.ReduceOp.MAX)
        need = int(needed)
        if self.budget is not None and need > self.budget:
            held = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in self.states.items())
            raise MemoryBudgetError(
                f"out of memory: a rank needs {need / 1e6:.2f} MB for its model states ({held}, "
                f"+ {gathered / 1e6:.2f} MB gathered at the peak) and the budget is "
                f"{self.budget / 1e6:.2f} MB per rank: {(need - self.budget) / 1e6:.2f} MB too "
                "many. Shard the states (strategy 'zero3': 16 bytes per parameter / N ranks), "
                "use more ranks, or a smaller model.")

    def __call__(self, step: int, loss: float, optimizer: torch.optim.Optimizer) -> None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
        self.step_times.append(time.perf_counter())
        self.exposed.append(self.clock.take())
        if step == 0:  # every state exists now, before the gradients are cleared
            self.states = memory.model_state_bytes(self.model, optimizer)
            if self.budget is not None:  # its all-reduce of one number counts in step 0
                self._check_budget()
        self.snapshots.append(wire_snapshot())
        self.calls.mark()


def train_sharded(strategy: str = "zero3", steps: int = 3, global_batch: int = 8,
                  seq_len: int = 64, lr: float = 3e-3, seed: int = 0,
                  shard_factor: int | None = None, offload: bool = False,
                  mixed_precision: bool = False, dtype: str = "float32",
                  return_parameters: bool = True, prefetch: str = "implicit",
                  reshard_after_forward: int | None = None,
                  memory_budget: int | None = None,
                  emulate: dict[str, Any] | None = None) -> ShardedRank:
    """Worker: train the course's GPT-2 with a sharding strategy on this rank's share; measure it.

    What it measured comes back as a :class:`ShardedRank`. ``emulate``: the arguments of
    :func:`node_links` (``node``, ``network``, ``ranks_per_node``) and ``scale``, the link
    emulator's factor.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    worker = launch.init_worker()
    factor = check_strategy(strategy, worker.world_size, shard_factor)
    check_batch(global_batch, worker.world_size)
    tokenizer = rank_tokenizer(worker)
    model = fresh_model(tokenizer, seed, dtype, worker.device)
    blocks = [sum(p.numel() for p in b.parameters()) for b in models.blocks(model)]
    unit_numels = [sum(p.numel() for p in model.parameters()) - sum(blocks), *blocks]  # root first
    wrapped = shard_model(model, strategy, worker.world_size, shard_factor, offload,
                          mixed_precision, worker.device, prefetch, reshard_after_forward)
    optimizer = None
    traffic = Traffic()
    if strategy in ("ddp", "zero1"):  # DDP's own all-reduce runs in C++, out of Collectives' sight;
        wrapped.register_comm_hook(traffic, counting_hook)  # this hook calls dist.all_reduce
    if strategy == "zero1":
        from torch.distributed.optim import ZeroRedundancyOptimizer

        optimizer = functools.partial(ZeroRedundancyOptimizer, optimizer_class=torch.optim.AdamW)
    recipe = recipe_for(steps, global_batch, seq_len, lr, seed, str(worker.device))
    with contextlib.ExitStack() as stack:
        spec = dict(emulate or {})
        scale = spec.pop("scale", 1.0)
        emulators = [stack.enter_context(links.emulate(name, group=group, scale=scale))
                     for name, group in (node_links(model, **spec) if emulate else [])]
        with Collectives() as calls, AllGatherClock(model, units(model)) as clock:
            meter = _Meter(model, calls, clock, memory_budget)
            history = training.train(wrapped, "gpt2", tokenizer, recipe, optimizer=optimizer,
                                     on_step=meter, on_backward=meter.backward,
                                     progress=False,
                                     batches=local_batches(tokenizer, recipe, worker.world_size,
                                                           worker.rank))
    edges = [meter.start, *meter.step_times]
    steps = [[t for e in emulators for t in e.records if lo <= t.start < hi]
             for lo, hi in zip(edges, edges[1:])]
    per_step = [volume(records) for records in calls.per_step()]
    by_group = []
    for records in calls.per_step():
        step: dict[str, int] = {}
        for r in records:
            key = f"{r.kind} over {r.group_size}"
            step[key] = step.get(key, 0) + r.volume
        by_group.append(step)
    parameters = gathered(list(model.parameters())) if return_parameters else None
    gradient = gathered(meter.gradients) if return_parameters else None
    return ShardedRank(worker.rank, worker.world_size, worker.backend, strategy, factor, offload,
                       mixed_precision, tuple(history), meter.states,
                       peak_parameter_bytes=max(meter.peak, meter.states["parameters"]),
                       volume=tuple(per_step), unit_numels=tuple(unit_numels),
                       step_times=tuple(meter.step_times), parameters=parameters,
                       wire=tuple(b - a for a, b in zip(meter.snapshots, meter.snapshots[1:])),
                       exposed=tuple(meter.exposed), after_forward_bytes=meter.after_forward,
                       prefetch=prefetch, reshard_after_forward=reshard_after_forward,
                       group_volume=tuple(by_group),
                       link_delays=tuple(sum(t.emulated for t in step) for step in steps),
                       link_seconds=tuple(sum(t.seconds for t in step) for step in steps),
                       gradient=gradient)


@dataclass(frozen=True)
class BudgetRefusal:
    """A run that stopped at its memory budget: the rank, the strategy and what it said.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    rank: int
    strategy: str
    message: str


def train_many(runs: Sequence[dict[str, Any]]) -> list[Any]:
    """Worker: several runs in one process group (starting ranks costs seconds); a ShardedRank each.

    A run with ``"stage"`` is :func:`course_lib.parallel.zero.train_zero`'s (a ZeroRank), the
    others :func:`train_sharded`'s; a run stopped by its ``memory_budget`` gives a
    :class:`BudgetRefusal` instead.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    results: list[Any] = []
    for run in runs:
        try:
            results.append(zero.train_zero(**run) if "stage" in run else train_sharded(**run))
        except MemoryBudgetError as refusal:
            results.append(BudgetRefusal(dist.get_rank(), run.get("strategy", "zero3"),
                                         str(refusal)))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: train with a strategy, print each rank's bytes, optionally check.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.fsdp",
        description="Train the course's GPT-2 with ZeRO / FSDP sharding (gloo or NCCL).")
    parser.add_argument("--strategy", default="zero3", choices=list(STRATEGIES))
    parser.add_argument("--shard-factor", type=launch.whole_number(1), default=None,
                        help="ranks that share one copy of the model (strategy hsdp only)")
    parser.add_argument("--offload", action="store_true", help="FSDP's CPUOffloadPolicy")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="FSDP's MixedPrecisionPolicy: bf16 parameters, fp32 reduction")
    add_run_arguments(parser, steps=10)
    args = parse_run_arguments(parser, argv, check_flags)
    result = train_sharded(args.strategy, args.steps, args.global_batch, args.seq_len, args.lr,
                           args.seed, args.shard_factor, args.offload, args.mixed_precision)
    held = ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in result.state_bytes.items())
    launch.say(f"rank {result.rank}/{result.world_size} ({result.backend}, {args.strategy}): "
               f"final loss {result.history[-1]:.4f}; holds {held}; peak parameters "
               f"{result.peak_parameter_bytes / 1e6:.2f} MB")
    tolerance = 5e-2 if args.mixed_precision else ddp.CHECK_TOLERANCE["float32"]  # bf16 rounds
    passed = report_check(args, result.rank, result.backend, result.parameters, result.gradient,
                          tolerance)
    launch.shutdown()
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
