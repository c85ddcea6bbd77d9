"""ZeRO stages 1 and 2 written out by hand: reduce-scatter the gradients, AdamW on a shard, all-gather.

Chapter 9 ("Sharding with ZeRO and FSDP") shows what ZeRO does inside a step before it uses
PyTorch's tools. :class:`ZeroAdamW` is an optimizer that every rank builds over the whole model:

1. each parameter group is laid out in one flat buffer, padded to a multiple of ``N`` x
   :data:`ALIGN` elements, and the model's parameters become views into it; rank ``r`` owns the
   ``r``-th of ``N`` equal chunks (its *shard*) and keeps AdamW's states for that chunk only;
2. after the backward pass, the flat gradients are reduce-scattered: rank ``r`` receives the sum
   of everybody's chunk ``r``, divided by ``N`` (the mean, as DDP takes it);
3. AdamW updates the shard, in place in the flat buffer;
4. an all-gather of the shards makes every rank's buffer, and so every parameter, whole again.

Stage 1 keeps the whole gradients until they are cleared; stage 2 frees them as soon as they are
reduce-scattered, so between steps a rank holds only its shard of them. (DeepSpeed's ZeRO-2
reduces bucket by bucket during the backward pass, so that the whole gradient never exists at
once; here it does, for the length of one reduce-scatter.) Gradient clipping would need the norm
of the whole gradient, one more all-reduce of a scalar: :func:`train_zero` turns clipping off, for
DDP as well, so that the two can be compared bit for bit.

:func:`train_zero` runs inside each rank (start it with :func:`course_lib.parallel.launch.launch`):
stage 0 is DDP, stages 1 and 2 this optimizer, through the course's one training loop, and it
measures the collectives' bytes (counted and on the wire).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from course_lib.numbers import memory
from course_lib.parallel import launch
from course_lib.parallel.collectives import Collectives, volume
from course_lib.parallel.ddp import (check_batch, flat_gradients, flat_parameters, fresh_model,
                                     local_batches, rank_tokenizer, recipe_for, wrap_ddp)
from course_lib.parallel.wire import WireBytes, wire_snapshot
from course_lib.text import training

__all__ = ["ALIGN", "STAGES", "WireRecord", "ZeroAdamW", "ZeroRank", "check_stage", "train_zero"]

#: Shards start and end on multiples of this many elements: whole SIMD vectors of float64, so that
#: AdamW on a shard rounds every element exactly as AdamW on the whole tensor does.
ALIGN = 16
#: The stages :func:`train_zero` runs, and what each keeps whole on every rank.
STAGES = {0: "DDP: parameters, gradients and optimizer states whole on every rank",
          1: "ZeRO-1: optimizer states sharded; gradients whole until cleared",
          2: "ZeRO-2: optimizer states and gradients sharded (freed once reduce-scattered)"}

# torch >= 2.10 names them *_single; older versions all_gather_into_tensor, reduce_scatter_tensor.
_REDUCE_SCATTER = ("reduce_scatter_single" if hasattr(dist, "reduce_scatter_single")
                   else "reduce_scatter_tensor")
_ALL_GATHER = "all_gather_single" if hasattr(dist, "all_gather_single") else "all_gather_into_tensor"


def check_stage(stage: int, allowed: Iterable[int] = STAGES) -> int:
    """Refuse a ZeRO stage this module does not write out; return it.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    allowed = list(allowed)
    if isinstance(stage, bool) or stage not in allowed:
        raise ValueError(f"stage must be one of {allowed} (0 is DDP; stage 3, the parameters "
                         f"sharded too, is FSDP's fully_shard: see course_lib.parallel.fsdp); "
                         f"got {stage!r}.")
    return stage


@dataclass(frozen=True)
class WireRecord:
    """One collective of the optimizer's step: its kind, full tensor's bytes, group size, wire bytes.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    kind: str
    n_bytes: int
    group_size: int
    wire: WireBytes


class ZeroAdamW:
    """AdamW with its states (stage 1) and gradients (stage 2) sharded across the ranks.

    Built as the training loop builds AdamW: ``ZeroAdamW(param_groups, lr=..., betas=...)``, each
    group a dict with ``params`` and optionally ``weight_decay``. ``param_groups`` are the inner
    AdamW's (one flat shard per group), so a learning-rate schedule reaches it. With ``measure``,
    every collective of a step is recorded in ``wire`` with its bytes on the wire; with
    ``keep_first``, the first step's inputs are kept in ``first_record`` (to replay it by hand).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    def __init__(self, param_groups: Sequence[dict[str, Any]], lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.01, stage: int = 2, measure: bool = False,
                 keep_first: bool = False) -> None:
        self.stage = check_stage(stage, (1, 2))
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        self.groups: list[tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]] = []
        shards = []
        for group in param_groups:
            params = [p for p in group["params"]]
            if not params:
                continue
            flat = self._flatten(params)
            size = flat.numel() // self.world_size
            shard = flat[self.rank * size:(self.rank + 1) * size]  # a view: updated in place
            self.groups.append((params, flat, shard))
            shards.append({"params": [shard],
                           "weight_decay": group.get("weight_decay", weight_decay)})
        self.optim = torch.optim.AdamW(shards, lr=lr, betas=betas, eps=eps, foreach=False)
        self.measure, self.wire = measure, []
        self.first: dict[str, Any] | None = {} if keep_first else None
        self.first_record: dict[str, Any] = {}

    def gradient_shards(self) -> list[torch.Tensor]:
        """A copy of this rank's shard of each group's mean gradient, as the last step made it."""
        return [shard.grad.clone() for _, _, shard in self.groups]

    def gather_gradients(self, shards: Sequence[torch.Tensor]
                         ) -> dict[torch.Tensor, torch.Tensor]:
        """Each parameter's whole gradient from every rank's ``shards`` (a collective that is
        not recorded in ``wire``): the parameters are the keys."""
        whole = {}
        for (params, flat, _), shard in zip(self.groups, shards):
            gathered = torch.empty_like(flat)
            getattr(dist, _ALL_GATHER)(gathered, shard)
            offset = 0
            for p in params:
                whole[p] = gathered[offset:offset + p.numel()].view_as(p)
                offset += p.numel()
        return whole

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        """The inner AdamW's groups, one shard each."""
        return self.optim.param_groups

    def _flatten(self, params: list[torch.Tensor]) -> torch.Tensor:
        """One zero-padded buffer holding ``params``, which become views into it."""
        n = sum(p.numel() for p in params)
        multiple = self.world_size * ALIGN
        flat = torch.zeros(-(-n // multiple) * multiple, dtype=params[0].dtype,
                           device=params[0].device)
        offset = 0
        for p in params:
            flat[offset:offset + p.numel()] = p.detach().flatten()
            p.data = flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
        return flat

    def _collective(self, kind: str, function: str, output: torch.Tensor,
                    source: torch.Tensor) -> None:
        """Call ``dist.<function>(output, source)``, recording its bytes on the wire if asked."""
        before = wire_snapshot() if self.measure else None
        getattr(dist, function)(output, source)
        if before is not None:
            full = max(output.numel(), source.numel()) * output.element_size()
            self.wire.append(WireRecord(kind, full, self.world_size, wire_snapshot() - before))

    @torch.no_grad()
    def step(self) -> None:
        """Reduce-scatter the gradients, update this rank's shard, all-gather the parameters."""
        n = self.world_size
        for (params, flat, shard), group in zip(self.groups, self.optim.param_groups):
            grads = torch.zeros_like(flat)
            offset = 0
            for p in params:
                if p.grad is not None:
                    grads[offset:offset + p.numel()] = p.grad.flatten()
                offset += p.numel()
            if self.first is not None:
                self.first.setdefault("start", []).append(flat.clone())
                self.first.setdefault("gradients", []).append(grads.clone())
                self.first.setdefault("weight_decay", []).append(group["weight_decay"])
                self.first["lr"], self.first["betas"] = group["lr"], group["betas"]
            shard.grad = torch.empty_like(shard)
            self._collective("reduce-scatter", _REDUCE_SCATTER, shard.grad, grads)
            shard.grad.div_(n)  # the sum of N gradients -> their mean
            if self.stage == 2:  # only the shard of the gradients stays
                for p in params:
                    p.grad = None
        self.optim.step()
        for _, flat, shard in self.groups:
            self._collective("all-gather", _ALL_GATHER, flat, shard)
        if self.first is not None:  # recorded once: the first step
            self.first_record, self.first = self.first, None

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the model's gradients and the shards' (always to ``None``)."""
        for params, _, shard in self.groups:
            shard.grad = None
            for p in params:
                p.grad = None

    def state_bytes(self, model: torch.nn.Module) -> dict[str, int]:
        """Bytes this rank holds of parameters, gradients (the shards' too) and AdamW's states."""
        held = memory.model_state_bytes(model, self)
        shards = [shard.grad for _, _, shard in self.groups if shard.grad is not None]
        held["parameters"] = memory.tensor_bytes(flat for _, flat, _ in self.groups)
        held["gradients"] += memory.tensor_bytes(shards)
        return held


@dataclass(frozen=True)
class ZeroRank:
    """What one rank of :func:`train_zero` measured.

    Its rank and the group's size; the stage; the loss of every step; the bytes of parameters,
    gradients and optimizer states it held after the first step; each step's collectives
    (bytes, the ZeRO paper's accounting) and its bytes on the wire (sent, received); the
    optimizer's collectives one by one with their wire bytes (stages 1 and 2); the parameters of
    each group after the first step (flat, unpadded); what the first step started from (stages 1
    and 2: the padded flat parameters and this rank's own gradients per group, weight decays,
    learning rate, betas); the number of parameters; and the final parameters as one vector.
    Last, the first step's mean gradient as one vector in the order of the parameters (stages 1
    and 2: this rank's shard as reduce-scattered, gathered after training).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """

    rank: int
    world_size: int
    stage: int
    history: tuple[float, ...]
    state_bytes: dict[str, int]
    volume: tuple[dict[str, int], ...]
    wire: tuple[WireBytes, ...]
    collectives: tuple[WireRecord, ...]
    after_first: tuple[torch.Tensor, ...]
    first: dict[str, Any]
    n_params: int
    parameters: torch.Tensor
    gradient: torch.Tensor | None = None


def _groups(model: torch.nn.Module) -> list[list[torch.Tensor]]:
    """The training loop's two parameter groups: with weight decay (matrices) and without."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    return [[p for p in trainable if p.dim() >= 2], [p for p in trainable if p.dim() < 2]]


class _Meter:
    """The ``on_step`` of :func:`train_zero`: wire bytes and collectives per step, states, groups,
    and the first step's mean gradient: DDP's whole, or this rank's shards of ZeroAdamW's."""

    def __init__(self, model: torch.nn.Module, calls: Collectives) -> None:
        self.model, self.calls = model, calls
        self.snapshots = [wire_snapshot()]
        self.states: dict[str, int] = {}
        self.after_first: list[torch.Tensor] = []
        self.gradient: torch.Tensor | list[torch.Tensor] = []

    def __call__(self, step: int, loss: float, optimizer: Any) -> None:
        self.snapshots.append(wire_snapshot())
        self.calls.mark()
        if step == 0:
            self.states = (optimizer.state_bytes(self.model) if isinstance(optimizer, ZeroAdamW)
                           else memory.model_state_bytes(self.model, optimizer))
            self.after_first = [torch.cat([p.detach().flatten().cpu() for p in group])
                                for group in _groups(self.model)]
            # clipping is off: DDP's gradients are still the mean; ZeroAdamW reduced into shards
            self.gradient = (optimizer.gradient_shards() if isinstance(optimizer, ZeroAdamW)
                             else flat_gradients(self.model))


def train_zero(stage: int = 2, steps: int = 3, global_batch: int = 8, seq_len: int = 64,
               lr: float = 3e-3, seed: int = 0, dtype: str = "float64",
               measure_collectives: bool = True) -> ZeroRank:
    """Worker: train the course's GPT-2 with DDP (stage 0) or ZeroAdamW (1, 2); measure it.

    Gradient clipping is off (see the module's docstring); the rest is chapter 8's recipe, each
    rank on its rows of the global batch.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    check_stage(stage)
    worker = launch.init_worker()
    check_batch(global_batch, worker.world_size)
    tokenizer = rank_tokenizer(worker)
    recipe = dataclasses.replace(recipe_for(steps, global_batch, seq_len, lr, seed,
                                            str(worker.device)), clip=math.inf)
    model = fresh_model(tokenizer, seed, dtype, worker.device)
    optimizer = None
    trained: torch.nn.Module = model
    if stage == 0:
        trained, _ = wrap_ddp(model, worker)
    else:
        optimizer = functools.partial(ZeroAdamW, stage=stage, measure=measure_collectives,
                                      keep_first=True)
    with Collectives() as calls:
        meter = _Meter(model, calls)
        holder: dict[str, Any] = {}

        def on_step(step: int, loss: float, opt: Any) -> None:
            holder["optimizer"] = opt
            meter(step, loss, opt)

        history = training.train(trained, "gpt2", tokenizer, recipe, optimizer=optimizer,
                                 on_step=on_step, progress=False,
                                 batches=local_batches(tokenizer, recipe, worker.world_size,
                                                       worker.rank))
    opt = holder["optimizer"]
    first: dict[str, Any] = {}
    records: tuple[WireRecord, ...] = ()
    gradient = meter.gradient
    if isinstance(opt, ZeroAdamW):
        first, records = opt.first_record, tuple(opt.wire)
        whole = opt.gather_gradients(meter.gradient)
        gradient = torch.cat([whole[p].flatten().cpu() for p in model.parameters()])
    wire = tuple(b - a for a, b in zip(meter.snapshots, meter.snapshots[1:]))
    return ZeroRank(worker.rank, worker.world_size, stage, tuple(history), meter.states,
                    tuple(volume(r) for r in calls.per_step()), wire, records,
                    tuple(meter.after_first), first,
                    sum(p.numel() for p in model.parameters()), flat_parameters(model),
                    gradient)
