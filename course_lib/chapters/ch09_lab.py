"""Chapter 9, *Sharding with ZeRO and FSDP*: the chapter's lab, exercises and a prediction, checked by the library.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The ZeRO arithmetic is checked against chapter 2's estimator, a ZeRO-2 step on real ranks
(:mod:`course_lib.exercises.ranks`) against the library's ``ZeroAdamW``, and the prediction
against the bytes each rank really holds under ZeRO-1, 2 and 3; the second prediction against
rank 0 of a 64-rank run of a real-size model, measured on fake ranks (:mod:`~course_lib.parallel.at_scale`).
"""

from __future__ import annotations

import functools
import warnings

import torch
import torch.distributed as dist

from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction
from course_lib.exercises.ranks import RankExercise
from course_lib.numbers import memory
from course_lib.parallel import at_scale, launch, zero

ME = "course_lib.chapters.ch09_lab"
COMPONENTS = {"weights": "weights", "gradients": "gradients", "master weights": "master_weights",
              "optimizer states": "optimizer_states"}


# -- Exercise 1: bytes of model states per rank under ZeRO -------------------------------------

def _zero_bytes(n_params: float, world_size: int, stage: int) -> dict[str, float]:
    """The reference: chapter 2's estimator, BF16 mixed precision with Adam, by component."""
    b = memory.training_memory(n_params, "bf16-mixed", "adam", gpus=world_size, zero_stage=stage)
    return {key: float(getattr(b, field)) for key, field in COMPONENTS.items()}


def _zero_cases() -> list[Case]:
    return [Case((7.5e9, 64, 1), "the ZeRO paper's 7.5B on 64 GPUs, stage 1"),
            Case((7.5e9, 64, 2), "stage 2"), Case((7.5e9, 64, 3), "stage 3"),
            Case((1e9, 8, 0), "stage 0: DDP shards nothing"),
            Case((10, 3, 3), "parameters not divisible by the ranks"),
            Case((1e6, 1, 3), "a single rank")]


def _in_bits(n_params: float, world_size: int, stage: int) -> dict[str, float]:
    return {k: 8 * v for k, v in _zero_bytes(n_params, world_size, stage).items()}


def _no_master(n_params: float, world_size: int, stage: int) -> dict[str, float]:
    return dict(_zero_bytes(n_params, world_size, stage), **{"master weights": 0.0})


def _stage1_shards_weights(n_params: float, world_size: int, stage: int) -> dict[str, float]:
    found = _zero_bytes(n_params, world_size, stage)
    if stage >= 1:
        found["weights"] = 2 * n_params / world_size
    return found


def _unsharded(n_params: float, world_size: int, stage: int) -> dict[str, float]:
    return _zero_bytes(n_params, world_size, 0)


zero_bytes = Exercise(
    "zero_bytes",
    "Bytes of model states per rank under ZeRO (BF16 mixed precision, Adam), by component.",
    _zero_bytes, _zero_cases,
    misconceptions=(
        Misconception("bits for bytes", "count bits instead of bytes (x8)", _in_bits),
        Misconception("a forgotten FP32 master copy",
                      "leave out the FP32 master weights (+4 bytes per parameter, sharded from "
                      "stage 1)", _no_master),
        Misconception("sharding the parameters in stage 1",
                      "shard the BF16 weights from stage 1: only stage 3 shards them",
                      _stage1_shards_weights),
        Misconception("not dividing by N",
                      "keep every component whole: each stage divides its sharded components "
                      "by the number of ranks", _unsharded),
    ),
)


# -- Exercise 2: one ZeRO-2 step on real ranks -------------------------------------------------

def _step_inputs(rank: int, world_size: int, numel: int, seed: int,
                 scale: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, float]:
    """The same parameters on every rank, each rank's own gradient, and the learning rate."""
    params = torch.randn(numel, generator=torch.Generator().manual_seed(seed))
    g = torch.Generator().manual_seed(1000 * seed + rank + 1)
    return params, scale * torch.randn(numel, generator=g), 0.01


def _zero2_step(params: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """The reference: the library's ZeroAdamW (stage 2, no weight decay) for one step."""
    p = torch.nn.Parameter(params.clone())
    optimizer = zero.ZeroAdamW([{"params": [p], "weight_decay": 0.0}], lr=lr, stage=2)
    p.grad = grad.clone()
    optimizer.step()
    return p.detach().clone()


def _step_cases() -> list[Case]:
    return [Case((), "random", {"numel": 64, "seed": 1}),
            Case((), "size not divisible by 2", {"numel": 7, "seed": 2}),
            Case((), "gradients as small as Adam's eps", {"numel": 10, "seed": 3, "scale": 1e-8}),
            Case((), "a single parameter", {"numel": 1, "seed": 4})]


def _scaled_step(params: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    """A ZeRO-2 step whose gradient is ``grad`` x the world size (the sum) after the reduce-scatter."""
    p = torch.nn.Parameter(params.clone())
    optimizer = zero.ZeroAdamW([{"params": [p], "weight_decay": 0.0}], lr=lr, stage=2)
    p.grad = grad * dist.get_world_size()
    optimizer.step()
    return p.detach().clone()


def _summed(params: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    return _scaled_step(params, grad, lr)


def _local(params: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    pad = -len(params) % world
    flat, own = (torch.cat([t, t.new_zeros(pad)]) for t in (params, grad))
    shard = flat.chunk(world)[rank].clone()
    shard.grad = own.chunk(world)[rank].clone()  # this rank's own gradient, never reduced
    torch.optim.AdamW([shard], lr=lr, weight_decay=0.0, foreach=False).step()
    pieces = [torch.empty_like(shard) for _ in range(world)]
    dist.all_gather(pieces, shard.detach())
    return torch.cat(pieces)[:len(params)]


def _not_gathered(params: torch.Tensor, grad: torch.Tensor, lr: float) -> torch.Tensor:
    world, rank = dist.get_world_size(), dist.get_rank()
    after = _zero2_step(params, grad, lr)
    size = -(-len(params) // world)
    keep = torch.arange(len(params)) // size == rank  # this rank's own shard only
    return torch.where(keep, after, params)


zero2_step = RankExercise(
    "zero2_step",
    "One ZeRO-2 step on each rank: reduce-scatter the gradient, AdamW on this rank's shard, "
    "all-gather the parameters.",
    _zero2_step, _step_cases,
    misconceptions=(
        Misconception("summing gradients instead of averaging",
                      "use the reduce-scatter's sum without dividing by N: Adam's first step "
                      "hardly notices, except where gradients are as small as its eps", _summed),
        Misconception("no reduce-scatter",
                      "update with this rank's own gradient: the ranks step apart", _local),
        Misconception("no all-gather",
                      "return the parameters with only this rank's shard updated: the other "
                      "shards must come from the other ranks", _not_gathered),
    ),
    inputs=f"{ME}:_step_inputs", nprocs=(2, 3), launch_timeout=30,
)


# -- Prediction: what a rank holds under ZeRO-1, 2 and 3 ---------------------------------------

def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(512, 512, bias=False),
                               torch.nn.Linear(512, 512, bias=False))


def _step(model: torch.nn.Module, optimizer: object) -> None:
    model(torch.randn(4, 512)).square().mean().backward()
    optimizer.step()


def _held_on_ranks() -> dict[str, int]:
    """Worker: one AdamW step under ZeRO-1 (torch), ZeRO-2 (the course's) and ZeRO-3 (FSDP2); bytes held."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer

    worker = launch.init_worker()
    held = {}
    model = _model()
    first = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW)
    _step(model, first)
    held["ZeRO-1"] = sum(memory.model_state_bytes(model, first).values())
    model = _model()
    second = zero.ZeroAdamW([{"params": list(model.parameters())}], stage=2)
    _step(model, second)
    held["ZeRO-2"] = sum(second.state_bytes(model).values())
    model = _model()
    mesh = init_device_mesh("cpu", (worker.world_size,))
    for layer in model:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    third = torch.optim.AdamW(model.parameters())
    _step(model, third)
    held["ZeRO-3"] = sum(memory.model_state_bytes(model, third).values())
    return held


def _measure_held() -> dict[str, float]:
    ranks = launch.launch(f"{ME}:_held_on_ranks", 2, backend="gloo", timeout=90, echo=False)
    return {k: float(v) for k, v in ranks[0].items()}


zero_held = Prediction(
    "zero_held",
    "Bytes of model states rank 0 holds after one AdamW step in FP32 on 2 ranks, under ZeRO-1, "
    "ZeRO-2 and ZeRO-3.",
    _measure_held, unit="bytes", rel_tol=0.1,
    misconceptions=(
        (1.6, "shard nothing: every stage would hold DDP's 16 bytes per parameter"),
        (0.8, "divide everything by N in every stage: only stage 3 shards the parameters"),
        (1.2, "add an FP32 master copy: FP32 training keeps none (mixed precision does, +4 "
              "bytes per parameter, sharded from stage 1)"),
        (8.0, "count bits instead of bytes"),
    ),
)


# -- Prediction: rank 0 of 64 at full size, measured on fake ranks ------------------------------

#: Chapter 9's full-size stage: Llama 2 7B's embedding, head and 4 of its 32 blocks, rank 0 of
#: 64 under full sharding with BF16 mixed precision, sequences of 2,048 tokens.
AT_SCALE = at_scale.Layout(64, "zero3", layers=4, seq_len=2048)


#: What torch says about FSDP's hooks on a transformers model, which a reader need not see.
_HOOK_WARNINGS = ("FSDP2-wrapped module", "For backward hooks to be called",
                  "Full backward hook is firing")


@functools.lru_cache(maxsize=2)
def measure_at_scale(model: str = "llama2-7b",
                     layout: at_scale.Layout = AT_SCALE) -> at_scale.RankMemory:
    """Rank 0 of ``model`` laid out as ``layout`` (chapter 9's :data:`AT_SCALE`), measured once
    per process on a fake process group; chapter 11 measures its 2-D layout with it.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    with warnings.catch_warnings():
        for text in _HOOK_WARNINGS:
            warnings.filterwarnings("ignore", message=text, category=UserWarning)
        return at_scale.measure_rank(model, layout, isolate=False)


def _states_at_scale() -> dict[str, float]:
    end = measure_at_scale().end
    return {k: float(end[k]) for k in ("parameters", "gradients", "optimizer states")}


rank0_at_scale = Prediction(
    "rank0_at_scale",
    "Bytes of parameters, gradients and optimizer states rank 0 of 64 holds after an AdamW step "
    "of Llama 2 7B's embedding, head and 4 blocks (1,071,681,536 parameters), fully sharded by "
    "FSDP2 with BF16 mixed precision.",
    _states_at_scale, unit="bytes", rel_tol=0.05, components=True,
    misconceptions=(
        (0.5, "count the sharded parameters or gradients in BF16: FSDP keeps them in FP32 and "
              "gathers BF16 copies unit by unit"),
        (1.5, "add a master copy to the optimizer states: under FSDP the FP32 parameter "
              "shard is the master copy, AdamW keeps 8 bytes per parameter"),
        (64.0, "not divide by the 64 ranks: full sharding shards all three"),
        (8.0, "count bits instead of bytes"),
    ),
)
