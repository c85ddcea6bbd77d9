"""Tensor parallelism by hand, as Megatron-LM splits a GPT block; also a script.

Chapter 11 ("Beyond data parallelism: tensor and pipeline parallelism") splits the
weight matrices of the course's GPT-2 blocks across the ``t`` ranks of a tensor-parallel
group (Shoeybi et al. 2019, arXiv 1909.08053). A :class:`ColumnParallelLinear` keeps a
rank's share of a layer's output features (rows of an ``nn.Linear`` weight, columns of
the paper's ``A``), a :class:`RowParallelLinear` its share of the input features; a
column-parallel layer followed by a row-parallel one needs one all-reduce per pass, by
the operators ``f`` and ``g`` of
:mod:`course_lib.parallel.tensor_parallel_communications`. :class:`ParallelMLP` and
:class:`ParallelAttention` replace a transformers ``GPT2Block``'s ``mlp`` and ``attn``
in place (:func:`parallelize_block`): the attention heads are split across the ranks, so
``t`` must divide the number of heads (:func:`check_tensor_degree`). transformers' GPT-2
stores its layers as ``Conv1D``, whose weight is ``(in, out)``, the transpose of
``nn.Linear``'s: :func:`conv1d_as_linear` turns one into the other before slicing. The
embeddings, the layer norms and the biases added after an all-reduce stay whole on every
rank (Megatron-LM also splits the vocabulary; 4,096 rows do not need it). Dropout would
have to draw the same mask on every rank of the group (Megatron-LM's RNG tracker); the
course model has none.

``sequence_parallel=True`` is Korthikanti et al. (2022)'s variant: the block's input and
output, its layer norms and residual additions hold ``1/t`` of the sequence; the layer
norms' and the row-parallel biases' gradients are then partial sums, which
``sync_sequence_parallel_grads`` of the communications module adds up over the group.
Whatever is split, the gradient's norm for clipping needs its squares summed over the
group (``grad_norm`` there).

:func:`tp_block_check` runs inside each rank (start it with
:func:`course_lib.parallel.launch.launch`): one block of the course's GPT-2 forward and
backward, split by hand and by PyTorch's own tensor parallelism (``parallelize_module``
with ``ColwiseParallel`` and ``RowwiseParallel`` over ``init_device_mesh("cpu", (t,))``,
which runs on CPUs with gloo in torch 2.13), each against one process. The module is
also the torchrun entry point::

    torchrun --nproc-per-node=2 -m course_lib.parallel.tensor_parallel --dtype float64
"""

from __future__ import annotations

import argparse
import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_lib.base import dtypes
from course_lib.base.checks import choice
from course_lib.numbers import memory
from course_lib.parallel import ddp, launch
from course_lib.parallel.tensor_parallel_communications import (
    GatheredLinear,
    ReduceScatterSequence,
    block_pass,
    f,
    g,
    sync_sequence_parallel_grads,
)
from course_lib.text import course_model, data, models

__all__ = ["ColumnParallelLinear", "ParallelAttention", "ParallelMLP",
           "RowParallelLinear", "TPBlockCheck", "activation_bytes_tp",
           "block_parameters", "check_flags", "check_tensor_degree", "conv1d_as_linear",
           "main", "parallelize_block", "parallelize_model", "reference_shards",
           "shard_rows", "torch_parallelize_block", "tp_block_check"]

Group = Any  # a torch.distributed ProcessGroup, or None for the whole world


def _divisors(n: int) -> str:
    return ", ".join(str(d) for d in range(1, n + 1) if n % d == 0)


def check_tensor_degree(degree: int, hidden: int, heads: int,
                        world_size: int | None = None) -> int:
    """Return ``degree`` if it splits the width, heads and ranks; else say what does.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 1:
        raise ValueError(f"the tensor degree must be a whole number >= 1, got "
                         f"{degree!r}.")
    if world_size is not None and world_size % degree:
        raise ValueError(f"tensor degree {degree} does not divide the {world_size} "
                         f"ranks into groups; use one of {_divisors(world_size)}.")
    if hidden % degree:
        raise ValueError(f"the hidden size {hidden} is not divisible by the tensor "
                         f"degree {degree}: each rank takes an equal share of it; with "
                         f"{heads} heads use a degree among {_divisors(heads)}.")
    if heads % degree:
        raise ValueError(f"the {heads} attention heads (hidden size {hidden}) do not "
                         f"split across tensor degree {degree}: each rank computes "
                         f"whole heads; use a degree among {_divisors(heads)}.")
    return degree


def conv1d_as_linear(conv: nn.Module) -> nn.Linear:
    """The ``nn.Linear`` that computes what a transformers ``Conv1D`` computes.

    ``Conv1D`` keeps its weight as ``(in, out)``, ``nn.Linear`` as ``(out, in)``.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    n_in, n_out = conv.weight.shape
    linear = nn.Linear(n_in, n_out, device=conv.weight.device, dtype=conv.weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(conv.weight.T)
        linear.bias.copy_(conv.bias)
    return linear


def shard_rows(out_features: int, degree: int, rank: int,
               parts: int = 1) -> torch.Tensor:
    """The output features a rank keeps: its ``1/degree`` of each of ``parts`` blocks.

    ``parts=3`` is GPT-2's fused ``c_attn``, whose output is ``[q | k | v]``: a rank
    takes the same heads of each.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    if out_features % (parts * degree):
        raise ValueError(f"{out_features} output features do not split into {parts} "
                         f"part(s) x {degree} rank(s); use a multiple of "
                         f"{parts * degree}.")
    part, share = out_features // parts, out_features // parts // degree
    starts = [p * part + rank * share for p in range(parts)]
    return torch.cat([torch.arange(start, start + share) for start in starts])


def _place(group: Group) -> tuple[int, int]:
    """This rank's (degree, rank) in the tensor-parallel group."""
    return dist.get_world_size(group), dist.get_rank(group)


class ColumnParallelLinear(nn.Module):
    """``Y_r = f(X) A_r + b_r``: a rank's share of an ``nn.Linear``'s output features.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    def __init__(self, full: nn.Linear, group: Group = None, parts: int = 1,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        degree, rank = _place(group)
        self.group, self.sequence_parallel = group, sequence_parallel
        self.rows = shard_rows(full.out_features, degree, rank, parts)
        weight, bias = self.shard(full.weight, full.bias)
        self.weight = nn.Parameter(weight.detach().clone())
        self.bias = nn.Parameter(bias.detach().clone())
        for p in (self.weight, self.bias):
            p.tensor_parallel = True  # a shard: its gradient norm adds up over a group

    def shard(self, weight: torch.Tensor,
              bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's part of a full (out, in) weight and of its bias."""
        return weight[self.rows], bias[self.rows]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """This rank's output features for the whole input (gathered first with SP)."""
        if self.sequence_parallel:
            return GatheredLinear.apply(x, self.weight, self.bias, self.group)
        return F.linear(f.apply(x, self.group), self.weight, self.bias)


class RowParallelLinear(nn.Module):
    """``Y = g(X_r A_r) + b``: a rank's share of a full ``nn.Linear``'s input features.

    The bias is whole on every rank and added once, after the partial products are
    summed.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    def __init__(self, full: nn.Linear, group: Group = None,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        degree, rank = _place(group)
        self.group, self.sequence_parallel = group, sequence_parallel
        share = full.in_features // degree
        self.columns = slice(rank * share, (rank + 1) * share)
        weight, bias = self.shard(full.weight, full.bias)
        self.weight = nn.Parameter(weight.detach().clone())
        self.bias = nn.Parameter(bias.detach().clone())
        self.weight.tensor_parallel = True
        # added to a shard of the sequence with SP: a partial gradient
        self.bias.sequence_parallel = sequence_parallel

    def shard(self, weight: torch.Tensor,
              bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """This rank's part of a full (out, in) weight, and the whole bias."""
        return weight[:, self.columns], bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The whole output (with SP: a shard of the sequence) from this rank's inputs.
        """
        partial = F.linear(x, self.weight)
        if self.sequence_parallel:
            return ReduceScatterSequence.apply(partial, self.group) + self.bias
        return g.apply(partial, self.group) + self.bias


class ParallelMLP(nn.Module):
    """GPT-2's MLP split: ``c_fc`` column-, ``c_proj`` row-parallel, GELU on each rank.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    def __init__(self, mlp: nn.Module, group: Group = None,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        self.c_fc = ColumnParallelLinear(conv1d_as_linear(mlp.c_fc), group,
                                         sequence_parallel=sequence_parallel)
        self.act, self.dropout = mlp.act, mlp.dropout
        self.c_proj = RowParallelLinear(conv1d_as_linear(mlp.c_proj), group,
                                        sequence_parallel)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """The MLP's output; an all-reduce forward (c_proj) and one backward (c_fc)."""
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))


class ParallelAttention(nn.Module):
    """GPT-2's attention split by heads: each rank projects, attends, outputs its heads.

    ``c_attn`` is column-parallel over the same heads of ``q``, ``k`` and ``v``;
    ``c_proj`` is row-parallel over the outputs of those heads.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    def __init__(self, attn: nn.Module, group: Group = None,
                 sequence_parallel: bool = False) -> None:
        super().__init__()
        degree, _ = _place(group)
        self.heads, self.head_dim = attn.num_heads // degree, attn.head_dim
        self.scaling, self.attn_dropout = attn.scaling, attn.attn_dropout.p
        self.c_attn = ColumnParallelLinear(conv1d_as_linear(attn.c_attn), group,
                                           parts=3, sequence_parallel=sequence_parallel)
        self.c_proj = RowParallelLinear(conv1d_as_linear(attn.c_proj), group,
                                        sequence_parallel)
        self.resid_dropout = attn.resid_dropout

    def forward(self, hidden_states: torch.Tensor, past_key_values: Any = None,
                attention_mask: torch.Tensor | None = None,
                **kwargs: Any) -> tuple[torch.Tensor, None]:
        """Causal attention over this rank's heads, the output summed over the group.
        """
        width = self.heads * self.head_dim
        q, k, v = self.c_attn(hidden_states).split(width, dim=-1)
        b, s = q.shape[:2]
        q, k, v = (z.view(b, s, self.heads, self.head_dim).transpose(1, 2)
                   for z in (q, k, v))
        out = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attention_mask, is_causal=attention_mask is None,
            dropout_p=self.attn_dropout if self.training else 0.0, scale=self.scaling)
        out = out.transpose(1, 2).reshape(b, s, width)
        return self.resid_dropout(self.c_proj(out)), None


def parallelize_block(block: nn.Module, group: Group = None,
                      sequence_parallel: bool = False) -> nn.Module:
    """Replace a GPT-2 block's attention and MLP by tensor-parallel ones, in place.

    With ``sequence_parallel`` the block reads and writes ``1/t`` of the sequence, and
    its layer norms' parameters are marked: their gradients are partial.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    attn = block.attn
    check_tensor_degree(dist.get_world_size(group), attn.embed_dim, attn.num_heads)
    block.attn = ParallelAttention(attn, group, sequence_parallel)
    block.mlp = ParallelMLP(block.mlp, group, sequence_parallel)
    for p in (*block.ln_1.parameters(), *block.ln_2.parameters()):
        p.sequence_parallel = sequence_parallel
    return block


def parallelize_model(model: nn.Module, group: Group = None) -> nn.Module:
    """Make every block of a GPT-2 model tensor-parallel over ``group``, in place.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    for block in models.blocks(model):
        parallelize_block(block, group)
    return model


def reference_shards(module: nn.Module, reference: nn.Module,
                     grads: bool = False) -> dict[str, torch.Tensor]:
    """For each parameter of a parallelized ``module``, what this rank should hold.

    ``reference`` is the same module whole, its ``Conv1D`` weights transposed where the
    parallel layers are ``nn.Linear``; ``grads`` gives the gradients' shards instead.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    from transformers.pytorch_utils import Conv1D

    def pick(p: torch.Tensor) -> torch.Tensor:
        return p.grad if grads else p.detach()

    out = {}
    for name, _ in module.named_parameters():
        path, _, leaf = name.rpartition(".")
        owner, source = module.get_submodule(path), reference.get_submodule(path)
        if isinstance(owner, (ColumnParallelLinear, RowParallelLinear)):
            weight = pick(source.weight)
            weight = weight.T if isinstance(source, Conv1D) else weight
            shards = owner.shard(weight, pick(source.bias))
            out[name] = shards[0] if leaf == "weight" else shards[1]
        else:
            out[name] = pick(getattr(source, leaf))
    return out


def block_parameters(hidden: int, degree: int, inner: int | None = None) -> int:
    """Parameters one rank holds of a GPT-2 block split ``degree`` ways.

    The weights and the column-parallel biases split (``(12 h^2 + 7 h) / t`` with
    ``inner = 4h``); the two row-parallel biases and the two layer norms stay whole
    (``6 h``).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    h, i = hidden, 4 * hidden if inner is None else inner
    split = 3 * h * h + 3 * h + h * h + 2 * h * i + i
    return split // degree + 2 * h + 4 * h


def activation_bytes_tp(seq_len: int, batch: int, hidden: int, heads: int, degree: int,
                        bytes_per_element: float, sequence_parallel: bool = False,
                        attention_scores: bool = False) -> float:
    """Bytes a rank keeps for one block's backward: chapter 2's formula, split by ``t``.

    Without dropout a block keeps ``16 e s b h`` bytes (and ``e a s^2 b`` of attention
    scores unless fused). Tensor parallelism splits all but the two layer norms' inputs
    and outputs, ``4 e s b h``, which every rank keeps whole (Korthikanti et al. 2022);
    sequence parallelism splits those too: everything over ``t``
    (:func:`~course_lib.numbers.memory.activation_bytes_per_tp_rank` without dropout).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    return memory.activation_bytes_per_tp_rank(seq_len, batch, hidden, heads, degree,
                                               sequence_parallel, bytes_per_element,
                                               dropout=False,
                                               attention_scores=attention_scores)


def torch_parallelize_block(block: nn.Module, mesh: Any) -> nn.Module:
    """The same split by PyTorch's own tensor parallelism (``parallelize_module``).

    Its ``ColwiseParallel`` needs ``nn.Linear`` layers and splits contiguous output
    features, so the ``Conv1D`` layers become ``nn.Linear`` and ``c_attn``'s features
    are reordered rank by rank (``[q_0 k_0 v_0 | q_1 k_1 v_1 | ...]``); transformers'
    attention then splits a rank's columns into its ``q``, ``k`` and ``v`` (by
    ``split_size``, set to ``h / t``) and counts the heads from their width.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    degree, hidden = mesh.size(), block.attn.embed_dim
    check_tensor_degree(degree, hidden, block.attn.num_heads)
    for owner, name in ((block.attn, "c_attn"), (block.attn, "c_proj"),
                        (block.mlp, "c_fc"), (block.mlp, "c_proj")):
        setattr(owner, name, conv1d_as_linear(getattr(owner, name)))
    order = torch.cat([shard_rows(3 * hidden, degree, r, 3) for r in range(degree)])
    qkv = block.attn.c_attn
    with torch.no_grad():
        qkv.weight.copy_(qkv.weight[order])
        qkv.bias.copy_(qkv.bias[order])
    block.attn.split_size = hidden // degree
    plan = {"attn.c_attn": ColwiseParallel(), "attn.c_proj": RowwiseParallel(),
            "mlp.c_fc": ColwiseParallel(), "mlp.c_proj": RowwiseParallel()}
    return parallelize_module(block, mesh, plan)


@dataclass(frozen=True)
class TPBlockCheck:
    """What a rank of :func:`tp_block_check` measured on a block split ``degree`` ways.

    The largest differences from one process of the block's output (with SP: of this
    rank's part of the sequence), of its input's gradient and of the parameters'
    gradients (this rank's shards), and of the output and gradients from PyTorch's
    ``parallelize_module`` (NaN with sequence parallelism, not compared); the
    collectives of one forward and one backward pass by kind, by hand (the course's
    ``Collectives``) and by PyTorch (``CommDebugMode``); the parameter bytes this rank
    holds and the formula's (:func:`block_parameters`); the bytes autograd kept for
    backward on this rank, in one process, and by the formula
    (:func:`activation_bytes_tp`); per pass (forward, backward) the bytes this rank sent
    over TCP and what a ring sends by the formula, NCCL's way and gloo's
    (:class:`~course_lib.parallel.tensor_parallel_communications.BlockPass`). With
    sequence parallelism one more all-reduce, once a step and not counted here, sums the
    partial gradients of the norms and biases.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    rank: int
    degree: int
    dtype: str
    sequence_parallel: bool
    output_gap: float
    input_grad_gap: float
    grad_gap: float
    torch_output_gap: float
    torch_grad_gap: float
    forward: dict[str, int]
    backward: dict[str, int]
    torch_forward: dict[str, int]
    torch_backward: dict[str, int]
    parameter_bytes: int
    parameter_bytes_formula: int
    activation_bytes: int
    single_activation_bytes: int
    activation_bytes_formula: float
    wire_sent: tuple[int, int]
    ring_nccl: tuple[float, float]
    ring_gloo: tuple[float, float]


def _gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach() - b.detach()).abs().max())


def tp_block_check(dtype: str = "float64", seed: int = 0, batch: int = 2,
                   seq_len: int = 32, hidden: int | None = None,
                   heads: int | None = None, sequence_parallel: bool = False,
                   activation: str | None = None) -> TPBlockCheck:
    """Worker: a GPT-2 block split over all ranks, by hand and by PyTorch; vs 1 process.

    The block is the first of the course's GPT-2 (``hidden`` and ``heads`` change its
    shape, ``activation`` its MLP's: "gelu" keeps one tensor for backward where the
    course model's tanh-approximated "gelu_new" keeps four), seeded; its input and the
    weights of the loss ``sum(w * block(x))`` are seeded random.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    worker = launch.init_worker()
    degree = worker.world_size
    tokenizer = ddp.rank_tokenizer(worker)
    shape = course_model.course_model_config(tokenizer)
    config = models.tiny_config("gpt2", tokenizer, hidden=hidden or shape.n_embd,
                                layers=1, heads=heads or shape.n_head,
                                context=shape.n_positions, activation=activation)
    check_tensor_degree(degree, config.n_embd, config.n_head)
    if sequence_parallel and seq_len % degree:
        raise ValueError(f"sequence parallelism splits the {seq_len} tokens across "
                         f"{degree} ranks; use a sequence length that is a multiple of "
                         f"{degree}.")
    kind = dtypes.torch_dtype(choice(dtype, ("float64", "float32"), "dtype"))
    block = models.blocks(models.build_model(config, seed))[0]
    reference = block.to(worker.device, kind)
    draw = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(batch, seq_len, config.n_embd, generator=draw)
    weights = torch.randn(x.shape, generator=draw).to(worker.device, kind)
    x = x.to(worker.device, kind)
    mine = parallelize_block(copy.deepcopy(reference), None, sequence_parallel)
    single = block_pass(reference, x, weights)
    part = slice(None)
    if sequence_parallel:  # this rank's part of the sequence
        share = seq_len // degree
        part = slice(worker.rank * share, (worker.rank + 1) * share)
    split = block_pass(mine, x[:, part], weights[:, part])
    if sequence_parallel:
        sync_sequence_parallel_grads(mine)
    expected = reference_shards(mine, reference, grads=True)
    grads = max(_gap(p.grad, expected[n]) for n, p in mine.named_parameters())
    torch_gaps, torch_counts = (math.nan, math.nan), ({}, {})
    if not sequence_parallel:
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(worker.device.type, (degree,))
        theirs = torch_parallelize_block(copy.deepcopy(reference), mesh)
        torch_pass = block_pass(theirs, x, weights, measure=False)
        local = {n: p.grad.to_local() if hasattr(p.grad, "to_local") else p.grad
                 for n, p in theirs.named_parameters()}
        torch_gaps = (_gap(torch_pass.output, split.output),
                      max(_gap(p.grad, local[n]) for n, p in mine.named_parameters()))
        torch_counts = (torch_pass.forward, torch_pass.backward)
    element = x.element_size()
    return TPBlockCheck(
        worker.rank, degree, dtype, sequence_parallel,
        _gap(split.output, single.output[:, part]),
        _gap(split.input_grad, single.input_grad[:, part]), grads, *torch_gaps,
        split.forward, split.backward, *torch_counts,
        memory.tensor_bytes(mine.parameters()),
        element * block_parameters(config.n_embd, degree), split.saved_bytes,
        single.saved_bytes,
        activation_bytes_tp(seq_len, batch, config.n_embd, config.n_head, degree,
                            element, sequence_parallel),
        split.wire_sent, split.ring_nccl, split.ring_gloo)


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse a block shape that does not split across the ranks, naming the flags.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    shape = course_model.course_model_config(data.course_tokenizer())
    hidden, heads = args.hidden or shape.n_embd, args.heads or shape.n_head
    if hidden % heads:
        raise ValueError(f"--hidden {hidden} is not divisible by --heads {heads}; use "
                         f"a hidden size that is a multiple of {heads}.")
    try:
        check_tensor_degree(world_size, hidden, heads)
    except ValueError as err:
        raise ValueError(f"{err} (the tensor degree is torchrun's world size, "
                         f"{world_size}: change --nproc-per-node, --hidden or --heads)"
                         ) from None
    if args.sequence_parallel and args.seq_len % world_size:
        raise ValueError(f"--seq-len {args.seq_len} does not split across {world_size} "
                         f"ranks for --sequence-parallel; use a multiple of "
                         f"{world_size}.")


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: check a tensor-parallel block; each rank prints a line.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.tensor_parallel",
        description="One GPT-2 block split across the ranks (Megatron-LM), checked "
                    "against one process and PyTorch's own tensor parallelism.")
    parser.add_argument("--dtype", choices=("float64", "float32"), default="float64")
    parser.add_argument("--seed", type=launch.whole_number(0), default=0)
    parser.add_argument("--batch", type=launch.whole_number(1), default=2)
    parser.add_argument("--seq-len", type=launch.whole_number(2), default=32)
    parser.add_argument("--hidden", type=launch.whole_number(1), default=None,
                        help="the block's hidden size (default: the course model's)")
    parser.add_argument("--heads", type=launch.whole_number(1), default=None)
    parser.add_argument("--sequence-parallel", action="store_true")
    args = ddp.parse_run_arguments(parser, argv, check_flags)
    r = tp_block_check(args.dtype, args.seed, args.batch, args.seq_len, args.hidden,
                       args.heads, args.sequence_parallel)
    launch.say(f"rank {r.rank}/{r.degree} ({args.dtype}): max |difference| from one "
               f"process: output {r.output_gap:.1e}, gradients {r.grad_gap:.1e}; from "
               f"PyTorch's parallelize_module {r.torch_grad_gap:.1e}; collectives "
               f"forward {r.forward}, backward {r.backward}; parameters "
               f"{r.parameter_bytes:,} bytes (formula {r.parameter_bytes_formula:,}); "
               f"activations {r.activation_bytes:,} bytes (formula "
               f"{r.activation_bytes_formula:,.0f}, one process "
               f"{r.single_activation_bytes:,})")
    launch.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
