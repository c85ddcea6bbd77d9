"""Data-parallel training of the course's GPT-2 with ``DistributedDataParallel``; also a script.

Chapter 8 ("Data parallelism with DDP") trains the course model's architecture (freshly initialised,
seeded) on N ranks. Every step draws the same seeded global batch as one process would
(:func:`course_lib.text.training.training_batches`); ``DistributedSampler`` gives each rank its rows,
and the course's one training loop (:func:`course_lib.text.training.train`) runs on the DDP-wrapped
model. :func:`train_ddp` runs inside each rank (start it with
:func:`course_lib.parallel.launch.launch`); :func:`train_single` is the one-process reference.
The module is also the torchrun entry point, on GPUs (NCCL) or CPUs (gloo) alike::

    torchrun --nproc-per-node=2 -m course_lib.parallel.ddp --steps 20 --check

``--check`` compares the final parameters and, since AdamW hides a gradient scaled by a constant
(its step divides each gradient by its own root mean square), the first step's gradient as well.
Its flags are checked before any rank joins the group, and a bad one is reported once, by rank 0
(:func:`parse_run_arguments`).
"""

from __future__ import annotations

import argparse
import bisect
import functools
import hashlib
import itertools
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data.distributed import DistributedSampler

from course_lib.base import dtypes
from course_lib.numbers import memory
from course_lib.parallel import launch
from course_lib.parallel.traffic import (BucketRecord, Traffic, counting_hook, ring_hook,
                                        summing_hook)
from course_lib.text import course_model, data, models, training

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

__all__ = ["CHECK_TOLERANCE", "DDPRank", "GradientGap", "Timings", "TrainingRun",
           "add_run_arguments", "check_batch", "check_flags", "checksum", "context_length",
           "flat_gradients", "flat_parameters", "fresh_model", "gathered", "gradient_gap",
           "local_batches", "main", "median_step", "parse_run_arguments", "rank_tokenizer",
           "recipe_for", "report_check", "shard", "timings", "train_ddp", "train_many",
           "train_single", "wrap_ddp"]

#: ``sum`` is a broken hook, kept for the parity checks to catch (:func:`summing_hook`).
HOOKS = {"counting": counting_hook, "ring": ring_hook, "sum": summing_hook}

#: The largest gap ``--check`` accepts, by dtype: of a parameter, of a gradient element, and of
#: the ratio of the gradients' norms from 1 (measured on 2 ranks: about 1e-5, 6e-8 and 4e-9 in
#: float32).
CHECK_TOLERANCE = {"float32": 1e-4, "float64": 1e-10}


def check_batch(global_batch: int, world_size: int, accumulate: int = 1) -> None:
    """Refuse a global batch that does not split evenly into ranks and micro-batches.

    Chapter 8, *Data parallelism with DDP*.
    """
    for name, value in (("global_batch", global_batch), ("world_size", world_size),
                        ("accumulate", accumulate)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}.")
    parts = world_size * accumulate
    if global_batch % parts:
        raise ValueError(f"a global batch of {global_batch} rows does not divide across "
                         f"{world_size} rank(s) x {accumulate} micro-batch(es); use a multiple of "
                         f"{parts}, e.g. {parts}, {2 * parts}, {3 * parts}.")


def shard(n_rows: int, world_size: int, rank: int) -> list[int]:
    """The rows of a batch of ``n_rows`` that ``DistributedSampler`` gives ``rank`` (no shuffle).

    Chapter 8, *Data parallelism with DDP*.
    """
    check_batch(n_rows, world_size)
    sampler = DistributedSampler(range(n_rows), num_replicas=world_size, rank=rank, shuffle=False)
    return list(sampler)


@functools.lru_cache(maxsize=1)
def context_length() -> int:
    """The longest sequence the chapter's model reads: the positions of the course's GPT-2.

    Chapter 8, *Data parallelism with DDP*.
    """
    return int(course_model.course_model_config(data.course_tokenizer()).n_positions)


def recipe_for(steps: int, global_batch: int, seq_len: int, lr: float, seed: int,
               device: str = "cpu") -> training.Recipe:
    """The chapter's recipe: the global batch per step, a short warm-up, the given device.

    ``seq_len`` may not pass the model's context (:func:`context_length`).

    Chapter 8, *Data parallelism with DDP*.
    """
    recipe = training.Recipe(steps=steps, batch_size=global_batch, seq_len=seq_len, lr=lr,
                             warmup_steps=min(5, steps), seed=seed, device=device)
    if seq_len > context_length():
        raise ValueError(f"seq_len={seq_len} is longer than the model's context: the course's "
                         f"GPT-2 reads at most {context_length()} tokens; use seq_len <= "
                         f"{context_length()}.")
    return recipe


def local_batches(tokenizer: PreTrainedTokenizerBase, recipe: training.Recipe, world_size: int,
                  rank: int, accumulate: int = 1) -> Iterator[dict[str, torch.Tensor]]:
    """This rank's micro-batches: its ``shard`` of each global batch, cut into ``accumulate`` parts.

    Chapter 8, *Data parallelism with DDP*.
    """
    check_batch(recipe.batch_size, world_size, accumulate)
    rows = torch.tensor(shard(recipe.batch_size, world_size, rank))
    for batch in training.training_batches("gpt2", tokenizer, recipe):
        mine = {k: v[rows] for k, v in batch.items()}
        for part in range(accumulate):
            yield {k: v.chunk(accumulate)[part] for k, v in mine.items()}


def flat_parameters(model: torch.nn.Module) -> torch.Tensor:
    """All parameters of ``model`` in one CPU vector of their dtype (shared weights once).

    Chapter 8, *Data parallelism with DDP*.
    """
    return torch.cat([p.detach().flatten().cpu() for p in model.parameters()])


def flat_gradients(model: torch.nn.Module) -> torch.Tensor:
    """All gradients of ``model`` in one CPU vector, in the order of its parameters (zeros where
    a parameter has none).

    Chapter 8, *Data parallelism with DDP*.
    """
    return torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).detach().flatten().cpu()
                      for p in model.parameters()])


def gathered(tensors: Sequence[torch.Tensor]) -> torch.Tensor:
    """``tensors`` (parameters or gradients, FSDP's shards gathered) in one CPU vector.

    A collective: every rank calls it, with its tensors in the same order. FSDP2's shards (dim 0
    split over one mesh dimension) travel in one all-gather per group and dtype, padded to whole
    ``torch.chunk`` pieces; other layouts go through ``DTensor.full_tensor()``, a call each.

    Chapter 8, *Data parallelism with DDP*.
    """
    from torch.distributed.tensor import DTensor

    whole = [t.detach() for t in tensors]  # a DTensor's is replaced below
    batches: dict[tuple[Any, torch.dtype], list[int]] = {}
    for i, t in enumerate(tensors):
        if isinstance(t, DTensor):
            split = [d for d, p in enumerate(t.placements) if not p.is_replicate()]
            if t.ndim and len(split) == 1 and t.placements[split[0]].is_shard(0):
                batches.setdefault((t.device_mesh.get_group(split[0]), t.dtype), []).append(i)
            else:
                whole[i] = t.full_tensor().detach()
    for (group, dtype), members in batches.items():
        n = dist.get_world_size(group)
        sizes = [-(-tensors[i].shape[0] // n) * math.prod(tensors[i].shape[1:]) for i in members]
        starts = list(itertools.accumulate([0, *sizes]))
        mine = torch.zeros(starts[-1], dtype=dtype, device=tensors[members[0]].device)
        for i, start in zip(members, starts):
            local = tensors[i].to_local().detach().flatten()
            mine[start:start + len(local)] = local
        everyone = mine.new_empty(n * len(mine))
        dist.all_gather_into_tensor(everyone, mine, group=group)
        for i, start, size in zip(members, starts, sizes):
            whole[i] = everyone.view(n, -1)[:, start:start + size].flatten()[:tensors[i].numel()]
    return torch.cat([t.flatten().cpu() for t in whole])


@dataclass(frozen=True)
class GradientGap:
    """How a gradient differs from one process's: the largest difference of an element, and
    the ratio of their norms (1 when equal, N when N ranks add where they should average).

    Chapter 8, *Data parallelism with DDP*.
    """

    max_difference: float
    norm_ratio: float

    def within(self, tolerance: float) -> bool:
        """Whether both the difference and the ratio's distance from 1 are at most ``tolerance``."""
        return self.max_difference <= tolerance and abs(self.norm_ratio - 1) <= tolerance


def gradient_gap(gradient: torch.Tensor, reference: torch.Tensor) -> GradientGap:
    """Compare a flat gradient with the one-process reference's (computed in float64).

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    if gradient.shape != reference.shape:
        raise ValueError(f"the gradients have {gradient.numel()} and {reference.numel()} "
                         "elements: compare gradients of the same model, laid out alike.")
    mine, theirs = gradient.double().cpu(), reference.double().cpu()
    return GradientGap(float((mine - theirs).abs().max()), float(mine.norm() / theirs.norm()))


def checksum(model: torch.nn.Module) -> str:
    """The first 12 hex digits of the SHA-256 of every parameter's bytes: equal iff bit-identical.

    Chapter 8, *Data parallelism with DDP*.
    """
    return hashlib.sha256(flat_parameters(model).numpy().tobytes()).hexdigest()[:12]


def _dtype(name: str) -> torch.dtype:
    if name not in ("float32", "float64"):
        raise ValueError(f"dtype must be 'float32' or 'float64', got {name!r}.")
    return dtypes.torch_dtype(name)


def rank_tokenizer(worker: launch.Worker) -> PreTrainedTokenizerBase:
    """The course tokenizer in a rank: rank 0 builds it if needed while the others wait.

    Chapter 8, *Data parallelism with DDP*.
    """
    if worker.rank == 0:  # builds and caches it if this machine has none yet
        data.course_tokenizer()
    dist.barrier()
    return data.course_tokenizer()


def fresh_model(tokenizer: PreTrainedTokenizerBase, seed: int, dtype: str,
                device: torch.device | str = "cpu") -> torch.nn.Module:
    """The course model's GPT-2, freshly initialised with ``seed``, in ``dtype`` on ``device``.

    Chapter 8, *Data parallelism with DDP*.
    """
    model = models.build_model(course_model.course_model_config(tokenizer), seed=seed)
    return model.to(device, _dtype(dtype))


@dataclass(frozen=True)
class TrainingRun:
    """One process's training: the loss and a parameter checksum after every step, the bytes of
    parameters, gradients and optimizer states it held, and its final parameters as one vector;
    and the first step's gradient as one vector, taken after the backward pass and before
    clipping (both ``None`` when they were not asked for).

    Chapter 8, *Data parallelism with DDP*.
    """

    history: tuple[float, ...]
    checksums: tuple[str, ...]
    state_bytes: dict[str, int]
    parameters: torch.Tensor | None
    gradient: torch.Tensor | None = field(default=None, kw_only=True)


@dataclass(frozen=True)
class DDPRank(TrainingRun):
    """What one rank of :func:`train_ddp` measured, besides its :class:`TrainingRun`.

    Its rank, the group's size and backend, its rows of each global batch, when training began
    (``start``), the end of every step and the start of every forward pass (seconds of
    ``time.perf_counter``), the all-reduce rounds done by the end of each step, every bucket
    all-reduced, the tokens of the whole run (all ranks), the number of parameters and the
    torch threads.

    Chapter 8, *Data parallelism with DDP*.
    """

    rank: int
    world_size: int
    backend: str
    rows: tuple[int, ...]
    start: float
    step_times: tuple[float, ...]
    forwards: tuple[float, ...]
    rounds: tuple[int, ...]
    buckets: tuple[BucketRecord, ...]
    tokens: int
    n_params: int
    threads: int


class _Observer:
    """The ``on_step`` of both runs: step end times, checksums, and the model states' bytes;
    its ``backward``, their ``on_backward``: the first step's gradient."""

    def __init__(self, model: torch.nn.Module, traffic: Traffic | None = None) -> None:
        self.model, self.traffic = model, traffic
        self.checksums: list[str] = []
        self.step_times: list[float] = []
        self.rounds: list[int] = []
        self.states: dict[str, int] = {}
        self.gradient: torch.Tensor | None = None
        self.start = time.perf_counter()

    def backward(self, step: int) -> None:
        if step == 0:  # reduced across the ranks, not yet clipped (clipping hides a scale)
            self.gradient = flat_gradients(self.model)

    def __call__(self, step: int, loss: float, optimizer: torch.optim.Optimizer) -> None:
        if next(self.model.parameters()).is_cuda:
            torch.cuda.synchronize()
        self.step_times.append(time.perf_counter())
        if self.traffic is not None:
            self.rounds.append(self.traffic.rounds)
        if step == 0:  # after the first step every state exists, before the gradients are cleared
            self.states = memory.model_state_bytes(self.model, optimizer)
        self.checksums.append(checksum(self.model))

    def training_run(self, history: list[float], return_parameters: bool = True) -> TrainingRun:
        """What one process measured (its first gradient with its parameters, if asked for)."""
        return TrainingRun(tuple(history), tuple(self.checksums), self.states,
                           flat_parameters(self.model) if return_parameters else None,
                           gradient=self.gradient if return_parameters else None)

    def ddp_rank(self, history: list[float], worker: launch.Worker, recipe: training.Recipe,
                 return_parameters: bool) -> DDPRank:
        """What one rank measured, its traffic included."""
        return DDPRank(**vars(self.training_run(history, return_parameters)), rank=worker.rank,
                       world_size=worker.world_size, backend=worker.backend,
                       rows=tuple(shard(recipe.batch_size, worker.world_size, worker.rank)),
                       start=self.start, step_times=tuple(self.step_times),
                       forwards=tuple(self.traffic.forwards), rounds=tuple(self.rounds),
                       buckets=tuple(self.traffic.buckets), tokens=recipe.tokens,
                       n_params=models.count_parameters(self.model),
                       threads=torch.get_num_threads())


def wrap_ddp(model: torch.nn.Module, worker: launch.Worker,
             bucket_cap_mb: float | None = None,
             hook: str = "counting") -> tuple[DistributedDataParallel, Traffic]:
    """Wrap ``model`` in DDP; ``hook`` notes every bucket it all-reduces in the Traffic.

    Chapter 8, *Data parallelism with DDP*.
    """
    if hook not in HOOKS:
        raise ValueError(f"hook must be one of {sorted(HOOKS)}, got {hook!r}.")
    gpu = [worker.device] if worker.device.type == "cuda" else None
    ddp_model = DistributedDataParallel(model, device_ids=gpu,
                                        bucket_cap_mb=bucket_cap_mb)
    traffic = Traffic()
    ddp_model.register_comm_hook(traffic, HOOKS[hook])
    traffic.attach(model)
    return ddp_model, traffic


def train_ddp(steps: int = 10, global_batch: int = 8, seq_len: int = 64,
              lr: float = 3e-3, seed: int = 0, accumulate: int = 1,
              no_sync: bool = True, bucket_cap_mb: float | None = None,
              hook: str = "counting", dtype: str = "float32",
              return_parameters: bool = True) -> DDPRank:
    """Worker: train the course's GPT-2 with DDP on this rank's rows; return a DDPRank.

    ``dtype`` "float64" trains in double precision, where runs that add in another
    order end about 1e-15 apart instead of 1e-5 (transformers still computes the
    loss from float32 logits). ``return_parameters`` also returns the first gradient.

    Chapter 8, *Data parallelism with DDP*.
    """
    worker = launch.init_worker()
    check_batch(global_batch, worker.world_size, accumulate)
    tokenizer = rank_tokenizer(worker)
    recipe = recipe_for(steps, global_batch, seq_len, lr, seed, str(worker.device))
    model = fresh_model(tokenizer, seed, dtype, worker.device)
    ddp_model, traffic = wrap_ddp(model, worker, bucket_cap_mb, hook)
    mine = local_batches(tokenizer, recipe, worker.world_size, worker.rank, accumulate)
    observe = _Observer(model, traffic)
    history = training.train(ddp_model, "gpt2", tokenizer, recipe, batches=mine,
                             accumulate=accumulate, no_sync=no_sync, on_step=observe,
                             on_backward=observe.backward, progress=False)
    return observe.ddp_rank(history, worker, recipe, return_parameters)


def train_single(steps: int = 10, global_batch: int = 8, seq_len: int = 64, lr: float = 3e-3,
                 seed: int = 0, device: str = "cpu", dtype: str = "float32") -> TrainingRun:
    """The reference: the same model and recipe trained by one process on the whole global batch.

    Chapter 8, *Data parallelism with DDP*.
    """
    tokenizer = data.course_tokenizer()
    model = fresh_model(tokenizer, seed, dtype)
    recipe = recipe_for(steps, global_batch, seq_len, lr, seed, device)
    observe = _Observer(model)
    history = training.train(model, "gpt2", tokenizer, recipe, progress=False, on_step=observe,
                             on_backward=observe.backward)
    return observe.training_run(history)


@dataclass(frozen=True)
class Timings:
    """A DDP rank's speed (:func:`timings`): seconds timed, tokens per second, the median step,
    seconds in all-reduces and their share of the time, and the bytes all-reduced in the last step.

    Chapter 8, *Data parallelism with DDP*.
    """

    seconds: float
    tokens_per_second: float
    step: float
    all_reduce: float
    all_reduce_share: float
    bytes_per_step: int


def median_step(step_times: Sequence[float]) -> float:
    """The median time between the ends of consecutive steps (seconds): the first step left out.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    if len(step_times) < 2:
        raise ValueError("timing steps needs at least 2 steps: the first one is not timed.")
    return statistics.median(b - a for a, b in zip(step_times, step_times[1:]))


def timings(result: DDPRank) -> Timings:
    """A run's speed from the end of its first step to the end of its last (start-up excluded).

    The all-reduces are timed from each bucket's being ready to its all-reduce's end, the first
    step's left out; a bucket's step comes from ``rounds``.

    Chapter 8, *Data parallelism with DDP*.
    """
    ends, rounds = result.step_times, result.rounds
    median = median_step(ends)
    elapsed = ends[-1] - ends[0]
    comm, last_bytes = 0.0, 0
    for bucket in result.buckets:
        step = bisect.bisect_right(rounds, bucket.round)  # rounds[s]: done by the end of step s
        if step > 0:
            comm += bucket.done - bucket.ready
        if step == len(ends) - 1:
            last_bytes += bucket.n_bytes
    return Timings(elapsed, result.tokens * (len(ends) - 1) / len(ends) / elapsed, median, comm,
                   comm / elapsed, last_bytes)


def train_many(runs: Sequence[dict[str, Any]]) -> list[DDPRank]:
    """Worker: several :func:`train_ddp` runs in one process group (starting processes costs seconds).

    Chapter 8, *Data parallelism with DDP*.
    """
    return [train_ddp(**run) for run in runs]


def add_run_arguments(parser: argparse.ArgumentParser, steps: int) -> None:
    """The options of both torchrun entry points: the recipe, the seed, and ``--check``.

    Chapter 8, *Data parallelism with DDP*.
    """
    parser.add_argument("--steps", type=launch.whole_number(1), default=steps)
    parser.add_argument("--global-batch", type=launch.whole_number(1), default=8,
                        help="rows per step, all ranks together")
    parser.add_argument("--seq-len", type=launch.whole_number(2), default=64,
                        help="tokens per row, at most the model's context")
    parser.add_argument("--lr", type=launch.positive_number, default=3e-3)
    parser.add_argument("--seed", type=launch.whole_number(0), default=0)
    parser.add_argument("--check", action="store_true",
                        help="rank 0 also trains one process on the global batch and compares")


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse flags that are fine alone and wrong together, naming them as they were typed.

    Each flag's own range is checked as it is parsed (:func:`add_run_arguments`); here the
    global batch must split into ``world_size`` ranks x ``--accumulate`` micro-batches, and
    ``--seq-len`` must fit the model's context.

    Chapter 8, *Data parallelism with DDP*.
    """
    accumulate = getattr(args, "accumulate", 1)
    parts = world_size * accumulate
    if args.global_batch % parts:
        per = "" if accumulate == 1 else f" x --accumulate {accumulate}"
        raise ValueError(f"--global-batch {args.global_batch} does not split evenly across "
                         f"{world_size} rank(s){per}; use a multiple of {parts}, e.g. "
                         f"--global-batch {parts} or {2 * parts}.")
    if args.seq_len > context_length():
        raise ValueError(f"--seq-len {args.seq_len} is longer than the model's context: the "
                         f"course's GPT-2 reads at most {context_length()} tokens; use --seq-len "
                         f"{context_length()} or less.")


def parse_run_arguments(parser: launch.RankArgumentParser, argv: Sequence[str] | None,
                        check: Callable[[argparse.Namespace, int], None]) -> argparse.Namespace:
    """The command line, checked before any rank joins the group; each problem reported once.

    ``check`` (e.g. :func:`check_flags`) gets the parsed flags and torchrun's world size. A bad
    flag, or a script that torchrun did not start, is printed by rank 0 only, and every rank
    exits with status 2, without a traceback.

    Chapter 8, *Data parallelism with DDP*.
    """
    args = parser.parse_args(argv)
    try:
        world_size = max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        world_size = 1
    try:
        check(args, world_size)
    except ValueError as err:
        parser.error(str(err))
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
               if k not in os.environ]
    if missing:
        parser.error(f"{', '.join(missing)} not set: this script runs on the ranks that "
                     f"torchrun starts; run it as {parser.prog.replace('=N', '=2')} ...")
    return args


def report_check(args: argparse.Namespace, rank: int, backend: str, parameters: torch.Tensor,
                 gradient: torch.Tensor,
                 tolerance: float = CHECK_TOLERANCE["float32"]) -> bool:
    """With ``--check``, rank 0 trains one process on the global batch and prints the gaps.

    The largest gap of the final parameters, of the first step's gradient, and the ratio of the
    gradients' norms. Returns whether all are within ``tolerance`` (see :class:`GradientGap`);
    without ``--check``, and on other ranks, True.

    Chapter 8, *Data parallelism with DDP*.
    """
    if not (args.check and rank == 0):
        return True
    device = "cuda" if backend == "nccl" else "cpu"
    single = train_single(args.steps, args.global_batch, args.seq_len, args.lr, args.seed,
                          device)
    gap = float((single.parameters - parameters).abs().max())
    grad = gradient_gap(gradient, single.gradient)
    print(f"one process on the global batch: max |difference| of the parameters {gap:.2e} "
          f"and of the first gradient {grad.max_difference:.2e}; gradient norm ratio "
          f"{grad.norm_ratio:.6f}", flush=True)
    if gap <= tolerance and grad.within(tolerance):
        return True
    print(f"check failed: a gap is larger than {tolerance:g}", file=sys.stderr, flush=True)
    return False


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: train with DDP, print each rank's summary, optionally check.

    Chapter 8, *Data parallelism with DDP*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.ddp",
        description="Train the course's GPT-2 with DistributedDataParallel (gloo or NCCL).")
    add_run_arguments(parser, steps=20)
    parser.add_argument("--accumulate", type=launch.whole_number(1), default=1,
                        help="micro-batches per step (gradient accumulation)")
    parser.add_argument("--bucket-cap-mb", type=launch.positive_number, default=None,
                        help="DDP's bucket size in MiB (default: DDP's own, 25 with a first of 1)")
    args = parse_run_arguments(parser, argv, check_flags)
    result = train_ddp(args.steps, args.global_batch, args.seq_len, args.lr, args.seed,
                       args.accumulate, bucket_cap_mb=args.bucket_cap_mb)
    seconds = result.step_times[-1] - result.start
    launch.say(f"rank {result.rank}/{result.world_size} ({result.backend}): final loss "
               f"{result.history[-1]:.4f}, parameters {result.checksums[-1]}, "
               f"{result.tokens / seconds:,.0f} tokens/s in all")
    passed = report_check(args, result.rank, result.backend, result.parameters,
                          result.gradient)
    launch.shutdown()
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
