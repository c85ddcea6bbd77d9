"""Chapter 11, *Beyond data parallelism*: the chapter's lab, three code exercises and a prediction.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The column-parallel slice of a weight is checked against the library's own slicing
(:func:`course_lib.parallel.tensor_parallel.shard_rows`, which its ``ColumnParallelLinear`` uses),
the groups of a 2-D mesh against the layout of ``init_device_mesh`` (consecutive ranks form a
tensor-parallel group, as :mod:`course_lib.parallel.mesh` runs them), a 1F1B stage's order against
torch's ``Schedule1F1B`` (the tests compare it with the order measured on 2 ranks), and the
prediction against
what rank 0 of a 64-rank 2-D layout of Llama 2 70B holds, measured on a fake process group
(:mod:`course_lib.parallel.at_scale`).
"""

from __future__ import annotations

import dataclasses

import torch

from course_lib.chapters import ch09_lab
from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction
from course_lib.parallel import at_scale, tensor_parallel


# -- Exercise 1: a rank's slice of a column-parallel layer -------------------------------------

def _column_shard(weight: torch.Tensor, bias: torch.Tensor, degree: int, rank: int,
                  parts: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: the output features ``shard_rows`` gives this rank, of weight and bias."""
    rows = tensor_parallel.shard_rows(weight.shape[0], degree, rank, parts)
    return weight[rows].clone(), bias[rows].clone()


def _layer(out_features: int, in_features: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(out_features, in_features, generator=g),
            torch.randn(out_features, generator=g))


def _shard_cases() -> list[Case]:
    return [Case((*_layer(6, 4, 1), 2, 0), "random, rank 0 of 2"),
            Case((*_layer(6, 4, 2), 2, 1), "rank 1 of 2"),
            Case((*_layer(8, 3, 3), 4, 3), "the last of 4 ranks"),
            Case((*_layer(5, 5, 4), 1, 0), "a single rank keeps everything"),
            Case((*_layer(12, 4, 5), 2, 1), "GPT-2's fused q, k, v (parts=3)", {"parts": 3})]


def _input_features(weight: torch.Tensor, bias: torch.Tensor, degree: int, rank: int,
                    parts: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    share = weight.shape[1] // degree
    return weight[:, rank * share:(rank + 1) * share].clone(), bias.clone()


def _whole_bias(weight: torch.Tensor, bias: torch.Tensor, degree: int, rank: int,
                parts: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    return _column_shard(weight, bias, degree, rank, parts)[0], bias.clone()


def _one_block(weight: torch.Tensor, bias: torch.Tensor, degree: int, rank: int,
               parts: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    return _column_shard(weight, bias, degree, rank, 1)


column_shard = Exercise(
    "column_shard",
    "A rank's part of a column-parallel nn.Linear: its 1/degree of the output features (rows of "
    "the (out, in) weight) and of the bias; with parts=3 the same share of q, of k and of v.",
    _column_shard, _shard_cases,
    misconceptions=(
        Misconception("slicing the input features (row-parallel) instead of the output features",
                      "cut the weight along its input features (weight[:, ...], the paper's rows "
                      "of A): that is the row-parallel layer, whose partial outputs need an "
                      "all-reduce; a column-parallel rank keeps whole rows of weight", _input_features),
        Misconception("the whole bias on every rank",
                      "keep the whole bias: a column-parallel rank adds only its own output "
                      "features' bias (the row-parallel layer keeps its bias whole, added once "
                      "after the all-reduce)", _whole_bias),
        Misconception("the fused q, k, v cut as one block",
                      "cut c_attn's 3h outputs into degree contiguous pieces: rank 0 would get all "
                      "of q and part of k; each rank needs its heads' columns of q, of k and of v",
                      _one_block),
    ),
)


# -- Exercise 2: the groups of a 2-D (data x tensor) mesh --------------------------------------

def _mesh_groups(world_size: int, tp: int) -> dict[str, list[list[int]]]:
    """The reference: ``init_device_mesh((world_size // tp, tp), ("dp", "tp"))``'s groups."""
    grid = torch.arange(world_size).view(world_size // tp, tp)  # row-major, as DeviceMesh lays it
    return {"tp": grid.tolist(), "dp": grid.T.tolist()}


def _mesh_cases() -> list[Case]:
    return [Case((4, 2), "the chapter's 2 x 2 mesh"), Case((8, 2), "8 ranks, tp 2"),
            Case((8, 4), "8 ranks, tp 4"), Case((16, 8), "two nodes of 8 GPUs, tp 8"),
            Case((4, 4), "tp = world size: no data parallelism"),
            Case((4, 1), "tp 1: plain data parallelism")]


def _swapped(world_size: int, tp: int) -> dict[str, list[list[int]]]:
    groups = _mesh_groups(world_size, tp)
    return {"tp": groups["dp"], "dp": groups["tp"]}


def _tp_as_count(world_size: int, tp: int) -> dict[str, list[list[int]]]:
    return _mesh_groups(world_size, world_size // tp)


mesh_groups = Exercise(
    "mesh_groups",
    "The tensor-parallel and data-parallel groups of world_size ranks on a (dp, tp) mesh: "
    "{'tp': [...], 'dp': [...]}, each a list of groups of global ranks.",
    _mesh_groups, _mesh_cases,
    misconceptions=(
        Misconception("dp and tp groups swapped",
                      "give consecutive ranks to a data-parallel group: the tensor-parallel group, "
                      "which all-reduces in every block, must be the consecutive ranks (one "
                      "node's), the replicas the strided ones", _swapped),
        Misconception("tp read as the number of groups",
                      "make tp groups instead of groups of tp ranks: there are world_size // tp "
                      "tensor-parallel groups, each of tp ranks", _tp_as_count),
    ),
)


# -- Exercise 3: the order of a 1F1B stage ---------------------------------------------------

def _order(warmup: int, micro_batches: int) -> list[str]:
    """``warmup`` forwards, then a backward and the next forward in turn, then the backwards."""
    order = [f"F{m}" for m in range(warmup)]
    for m in range(micro_batches):
        order.append(f"B{m}")
        if warmup + m < micro_batches:
            order.append(f"F{warmup + m}")
    return order


def _one_f_one_b(stage: int, stages: int, micro_batches: int) -> list[str]:
    """The reference: torch's ``Schedule1F1B`` on ``stage``: ``min(m, p - stage)`` forwards first
    (the last stage 1, the first p), then one backward and one forward in turn."""
    return _order(min(micro_batches, stages - stage), micro_batches)


def _one_f_one_b_cases() -> list[Case]:
    return [Case((2, 4, 8), "a middle stage of 4, m = 8"),
            Case((0, 2, 4), "the chapter's first stage: p = 2, m = 4"),
            Case((1, 2, 4), "the last stage: one forward, then its backward"),
            Case((0, 4, 4), "m = p: the first stage runs every forward first"),
            Case((1, 4, 8), "the second of 4 stages"), Case((3, 4, 8), "the last of 4 stages"),
            Case((2, 3, 7), "p = 3, an odd m"), Case((0, 1, 3), "one stage: F, B in turn")]


def _gpipe_order(stage: int, stages: int, micro_batches: int) -> list[str]:
    return _order(micro_batches, micro_batches)


def _warmup_from_the_first(stage: int, stages: int, micro_batches: int) -> list[str]:
    return _order(min(micro_batches, stage + 1), micro_batches)


def _one_forward_short(stage: int, stages: int, micro_batches: int) -> list[str]:
    return _order(min(micro_batches, stages - stage - 1), micro_batches)


def _same_warmup(stage: int, stages: int, micro_batches: int) -> list[str]:
    return _order(min(micro_batches, stages), micro_batches)


one_f_one_b = Exercise(
    "one_f_one_b",
    "The order in which stage `stage` of `stages` runs its forwards and backwards under torch's "
    "Schedule1F1B with `micro_batches` micro-batches (at least `stages`), as a list such as "
    "['F0', 'F1', 'B0', 'F2', ...].",
    _one_f_one_b, _one_f_one_b_cases,
    misconceptions=(
        Misconception("GPipe's order", "run every forward before the first backward: that is "
                      "GPipe, which holds all m micro-batches' activations", _gpipe_order),
        Misconception("warm-up counted from the first stage",
                      "give stage i i + 1 forwards before its first backward: the last stage "
                      "can run a backward right after its first forward (it computes the loss), "
                      "the first stage waits longest, p - i forwards", _warmup_from_the_first),
        Misconception("one warm-up forward short",
                      "run p - i - 1 forwards and then a backward first: Megatron-LM counts p - i "
                      "- 1 warm-up forwards but starts each steady step with a forward, so a stage "
                      "still holds p - i micro-batches", _one_forward_short),
        Misconception("the same warm-up on every stage",
                      "run p forwards first on every stage: a later stage starts its backwards "
                      "sooner, so it holds fewer micro-batches", _same_warmup),
    ),
)


# -- Prediction: rank 0 of an 8 x 8 mesh at full size, measured on fake ranks -----------------

#: Chapter 11's full-size stage: Llama 2 70B's embedding, head and 4 of its 80 blocks, rank 0
#: of 64 ranks as 8 data-parallel rows of 8 tensor-parallel ranks, BF16 mixed precision.
AT_SCALE = at_scale.Layout(64, "zero3", tp=8, layers=4, seq_len=2048)


def measure_at_scale(sequence_parallel: bool = False) -> at_scale.RankMemory:
    """Rank 0 of :data:`AT_SCALE`, measured once per process on a fake process group (chapter
    9's :func:`~course_lib.chapters.ch09_lab.measure_at_scale`); ``sequence_parallel``:
    with Megatron-LM's whole plan (norms, residuals and the loss's logits split too).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    layout = dataclasses.replace(AT_SCALE, sequence_parallel=sequence_parallel)
    return ch09_lab.measure_at_scale("llama2-70b", layout)


def _rank0_2d() -> dict[str, float]:
    rank = measure_at_scale()
    states = sum(rank.end[k] for k in ("parameters", "gradients", "optimizer states"))
    return {"model states": float(states), "a gathered block": float(rank.detail["All Gather"])}


rank0_2d = Prediction(
    "rank0_2d",
    "Bytes rank 0 of an 8 x 8 mesh holds of Llama 2 70B's embedding, head and 4 blocks "
    "(3,946,913,792 parameters, 855,654,400 in a block): its model states after an AdamW step, "
    "and one block's parameters as FSDP's all-gather brings them in to compute the block.",
    _rank0_2d, unit="bytes", rel_tol=0.05, components=True,
    misconceptions=(
        (8.0, "divide by one dimension's 8 ranks where both apply: the model states are split "
              "by tensor parallelism and then sharded over the data-parallel row, 64 ways"),
        (0.125, "divide a gathered block by all 64 ranks: the all-gather runs over the "
                "data-parallel ranks only and brings back what tensor parallelism left to this "
                "rank, an eighth of the block"),
        (2.0, "count the gathered block in FP32: mixed precision gathers the BF16 copies the "
              "block computes with"),
        (0.5, "count 8 bytes per parameter of states: FSDP keeps FP32 parameter shards and "
              "gradients, and AdamW two FP32 states, 16 bytes"),
        (64.0, "divide by nothing: every parameter of the stage is split or sharded over the "
               "64 ranks"),
    ),
)
