"""Chapter 11, *Beyond data parallelism*: the chapter's lab, two code exercises and a prediction.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The column-parallel slice of a weight is checked against the library's own slicing
(:func:`course_lib.parallel.tensor_parallel.shard_rows`, which its ``ColumnParallelLinear`` uses),
the groups of a 2-D mesh against the layout of ``init_device_mesh`` (consecutive ranks form a
tensor-parallel group, as :mod:`course_lib.parallel.mesh` runs them), and the prediction against
the bytes of parameters a rank really holds of a GPT-2 block split two ways on 2 ranks.
"""

from __future__ import annotations

import torch

from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction
from course_lib.numbers import memory
from course_lib.parallel import launch, tensor_parallel

ME = "course_lib.chapters.ch11_lab"


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


# -- Prediction: the parameter bytes a rank holds of a 2-way tensor-parallel block -------------

def _block_bytes_on_ranks() -> dict[str, int]:
    """Worker: the course GPT-2's first block (FP32) split over all ranks; bytes this rank holds."""
    from course_lib.parallel import ddp
    from course_lib.text import course_model, models

    worker = launch.init_worker()
    tokenizer = ddp.rank_tokenizer(worker)
    shape = course_model.course_model_config(tokenizer)
    config = models.tiny_config("gpt2", tokenizer, hidden=shape.n_embd, layers=1,
                                heads=shape.n_head, context=shape.n_positions)
    block = models.blocks(models.build_model(config, 0))[0].float()
    tensor_parallel.parallelize_block(block)
    split = [p for p in block.parameters() if getattr(p, "tensor_parallel", False)]
    whole = [p for p in block.parameters() if not getattr(p, "tensor_parallel", False)]
    return {"split weights and biases": memory.tensor_bytes(split),
            "whole biases and layer norms": memory.tensor_bytes(whole)}


def _measure_block_bytes() -> dict[str, float]:
    ranks = launch.launch(f"{ME}:_block_bytes_on_ranks", 2, backend="gloo", timeout=90,
                          echo=False)
    return {k: float(v) for k, v in ranks[0].items()}


tp_block_bytes = Prediction(
    "tp_block_bytes",
    "Bytes of parameters rank 0 holds of one course GPT-2 block (h = 128, FP32) split 2 ways by "
    "tensor parallelism: the split weights and biases, and what stays whole.",
    _measure_block_bytes, unit="bytes", rel_tol=0.02,
    misconceptions=(
        (2.0, "split nothing: without tensor parallelism every rank holds the whole block, "
              "(12h^2 + 13h) parameters"),
        (0.5, "count 2 bytes per parameter: this block is FP32, 4 bytes each"),
        (8.0, "count bits instead of bytes"),
    ),
)
