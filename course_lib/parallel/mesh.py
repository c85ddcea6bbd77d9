"""Two dimensions: tensor parallel inside a node, data parallel across; also a script.

Chapter 11 ("Beyond data parallelism: tensor and pipeline parallelism") arranges ``N``
ranks as a 2-D device mesh of ``N / t`` data-parallel replicas by ``t`` tensor-parallel
ranks (``init_device_mesh("cpu", (N / t, t), mesh_dim_names=("dp", "tp"))``).
Consecutive ranks form a tensor-parallel group, and torchrun numbers the ranks of a node
consecutively: the all-reduces of every block
(:mod:`course_lib.parallel.tensor_parallel`) stay inside a node, on its fast links, and
only the gradient all-reduce of data parallelism (``DistributedDataParallel`` over the
mesh's ``dp`` group) crosses nodes, once per step.

Each replica reads its rows of the global batch
(:func:`course_lib.parallel.ddp.local_batches`); every rank of a replica reads the same
rows. The course's one training loop (:func:`course_lib.text.training.train`) trains the
model; its gradient clipping would see only a rank's shards, so the loop's own clipping
is turned off and :class:`TensorParallelAdamW` clips by the norm of the whole gradient
(:func:`course_lib.parallel.tensor_parallel_communications.grad_norm`) before each step,
as Megatron-LM does. :func:`train_mesh` runs inside each rank (start it with
:func:`course_lib.parallel.launch.launch`); the module is also the torchrun entry point,
and :func:`two_nodes` starts it as two torchrun "nodes" on this machine::

    torchrun --nnodes=2 --node-rank=0 --nproc-per-node=2 --rdzv-backend=c10d \\
        --rdzv-endpoint=127.0.0.1:29500 --rdzv-conf=join_timeout=60 \\
        -m course_lib.parallel.mesh --tp 2 --check
    (and the same with --node-rank=1)

With the c10d rendezvous torchrun numbers the nodes in the order they join (it says that
it ignores ``--node-rank``); either way a node's ranks are consecutive, so a
tensor-parallel group never spans two nodes. A port that is taken would leave torchrun
waiting for its rendezvous: :func:`two_nodes` refuses it before starting anything. A node
whose partner never comes waits ``join_timeout`` seconds (torchrun's default is 600), then
stops: :func:`two_nodes` then names the node that is missing, in one message.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from course_lib.numbers import memory
from course_lib.parallel import ddp, launch, tensor_parallel
from course_lib.parallel.collectives import Collectives
from course_lib.parallel.tensor_parallel_communications import (
    collective_counts,
    grad_norm,
)
from course_lib.text import course_model, data, training

__all__ = ["MeshRank", "TensorParallelAdamW", "TwoNodeRun", "check_flags", "check_mesh",
           "main", "run_many", "train_mesh", "two_nodes"]


def check_mesh(world_size: int, tp: int, hidden: int, heads: int,
               global_batch: int) -> int:
    """The data-parallel replicas for ``tp``-way tensor parallelism; else say what fits.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    tensor_parallel.check_tensor_degree(tp, hidden, heads, world_size)
    replicas = world_size // tp
    if global_batch % replicas:
        raise ValueError(f"a global batch of {global_batch} rows does not split across "
                         f"the {replicas} data-parallel replicas ({world_size} ranks / "
                         f"tensor degree {tp}); use a multiple of {replicas}.")
    return replicas


class TensorParallelAdamW(torch.optim.AdamW):
    """AdamW that first clips the gradient by the norm over all tensor-parallel shards.

    ``group`` is the tensor-parallel group, ``clip`` the largest norm (the recipe's).

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    def __init__(self, params: Any, group: Any = None, clip: float = 1.0,
                 **options: Any) -> None:
        super().__init__(params, **options)
        self.group, self.clip = group, clip

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        """Clip as ``clip_grad_norm_`` would on the whole model, then take AdamW's step.
        """
        params = [p for group in self.param_groups for p in group["params"]]
        norm = grad_norm(params, self.group)
        scale = torch.clamp(self.clip / (norm + 1e-6), max=1.0)
        for p in params:
            if p.grad is not None:
                p.grad.mul_(scale.to(p.grad.dtype))
        return super().step(closure)


@dataclass(frozen=True)
class MeshRank:
    """What one rank of :func:`train_mesh` measured.

    Its rank, the group's size, its node (torchrun's ``GROUP_RANK``), its place in the
    mesh (replica ``dp_rank`` of ``dp``, tensor rank ``tp_rank`` of ``tp``) and the
    global ranks of its two groups; the loss of every step; the bytes of parameters,
    gradients and optimizer states it held; the tensor-parallel collectives of one step
    (by kind; DDP's all-reduce runs in C++, out of sight); and, with ``check``, the
    largest difference of its parameters from one process trained on the global batch,
    and that process's losses; last, with ``check``, how the first step's gradient
    shards (after the backward pass, before clipping) differ from that process's: the
    largest difference on any rank, and the ratio of the norms over all ranks.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    rank: int
    world_size: int
    node: int
    dp: int
    tp: int
    dp_rank: int
    tp_rank: int
    dp_group: tuple[int, ...]
    tp_group: tuple[int, ...]
    history: tuple[float, ...]
    state_bytes: dict[str, int]
    collectives: dict[str, int]
    parameter_gap: float
    reference_history: tuple[float, ...]
    gradient_gap: ddp.GradientGap | None = None


def _set_gradients(module: torch.nn.Module, flat: torch.Tensor) -> None:
    """Give each parameter of ``module`` its part of the flat gradient ``flat``."""
    offset = 0
    for p in module.parameters():
        p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
        offset += p.numel()


def _reference_gaps(model: torch.nn.Module, gradients: dict[str, torch.Tensor],
                    reference: torch.nn.Module, args: dict[str, Any], rank: int,
                    dtype: str) -> tuple[float, ddp.GradientGap, tuple[float, ...]]:
    """Rank 0 trains one process and sends its parameters and first gradient: every
    rank's largest gaps from its shards of them, and the ratio of the gradients' norms."""
    device = next(model.parameters()).device  # NCCL sends only what is on the GPU
    flat = ddp.flat_parameters(reference).to(device)
    grad = torch.zeros_like(flat)
    history = torch.zeros(args["steps"], dtype=torch.float64, device=device)
    if rank == 0:
        single = ddp.train_single(**args, dtype=dtype)
        flat, grad = single.parameters.to(device), single.gradient.to(device)
        history = torch.tensor(single.history, dtype=torch.float64, device=device)
    for tensor in (flat, grad, history):
        dist.broadcast(tensor, 0)
    torch.nn.utils.vector_to_parameters(flat.cpu(), reference.parameters())
    _set_gradients(reference, grad.cpu())
    expected = tensor_parallel.reference_shards(model, reference)
    expected_grads = tensor_parallel.reference_shards(model, reference, grads=True)
    mine = {n: g.detach().cpu().double() for n, g in gradients.items()}
    theirs = {n: g.double() for n, g in expected_grads.items()}
    gaps = torch.tensor([max(float((p.detach().cpu() - expected[n]).abs().max())
                             for n, p in model.named_parameters()),
                         max(float((mine[n] - theirs[n]).abs().max()) for n in mine)],
                        dtype=torch.float64, device=device)
    squares = torch.tensor([sum(float(g.square().sum()) for g in mine.values()),
                            sum(float(theirs[n].square().sum()) for n in mine)],
                           dtype=torch.float64, device=device)  # replicas count alike
    dist.all_reduce(gaps, op=dist.ReduceOp.MAX)
    dist.all_reduce(squares)
    ratio = math.sqrt(float(squares[0]) / float(squares[1]))
    return (float(gaps[0]), ddp.GradientGap(float(gaps[1]), ratio),
            tuple(history.tolist()))


def train_mesh(tp: int = 2, steps: int = 3, global_batch: int = 4, seq_len: int = 32,
               lr: float = 3e-3, seed: int = 0, dtype: str = "float32",
               check: bool = True) -> MeshRank:
    """Worker: train the course's GPT-2 on a (dp, tp) mesh of all ranks; a MeshRank.

    ``check``: rank 0 also trains one process on the global batch, and every rank
    compares its parameters, and its first gradient before clipping, with its share of
    that process's.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    from torch.distributed.device_mesh import init_device_mesh

    worker = launch.init_worker()
    tokenizer = ddp.rank_tokenizer(worker)
    config = course_model.course_model_config(tokenizer)
    dp = check_mesh(worker.world_size, tp, config.n_embd, config.n_head, global_batch)
    mesh = init_device_mesh(worker.device.type, (dp, tp), mesh_dim_names=("dp", "tp"))
    tp_group, dp_group = mesh["tp"].get_group(), mesh["dp"].get_group()
    model = ddp.fresh_model(tokenizer, seed, dtype, worker.device)
    reference = copy.deepcopy(model).cpu() if check else None  # for the comparison
    tensor_parallel.parallelize_model(model, tp_group)
    gpu = [worker.device] if worker.device.type == "cuda" else None
    replica = DistributedDataParallel(model, device_ids=gpu, process_group=dp_group)
    recipe = ddp.recipe_for(steps, global_batch, seq_len, lr, seed, str(worker.device))
    clipped = functools.partial(TensorParallelAdamW, group=tp_group, clip=recipe.clip)
    states: dict[str, int] = {}
    gradients: dict[str, torch.Tensor] = {}

    def reduced(step: int) -> None:  # before the optimizer clips them
        if step == 0 and check:
            gradients.update({n: p.grad.detach().clone()
                              for n, p in model.named_parameters()})

    def observe(step: int, loss: float, optimizer: torch.optim.Optimizer) -> None:
        calls.mark()
        if step == 0:
            states.update(memory.model_state_bytes(model, optimizer))

    dp_rank = mesh.get_local_rank("dp")
    with Collectives() as calls:
        # the loop's own clipping is off (an infinite norm clips nothing): the optimizer
        # clips, by the norm over all shards
        history = training.train(replica, "gpt2", tokenizer,
                                 dataclasses.replace(recipe, clip=math.inf),
                                 batches=ddp.local_batches(tokenizer, recipe, dp,
                                                           dp_rank),
                                 optimizer=clipped, on_step=observe,
                                 on_backward=reduced, progress=False)
    gap, gradient_gap, reference_losses = math.nan, None, ()
    if check:
        args = {"steps": steps, "global_batch": global_batch, "seq_len": seq_len,
                "lr": lr, "seed": seed}
        gap, gradient_gap, reference_losses = _reference_gaps(
            model, gradients, reference, args, worker.rank, dtype)
    node = int(os.environ.get("GROUP_RANK", worker.rank // int(
        os.environ.get("LOCAL_WORLD_SIZE", worker.world_size))))
    last_step = calls.per_step()[-1]
    return MeshRank(worker.rank, worker.world_size, node, dp, tp, dp_rank,
                    mesh.get_local_rank("tp"),
                    tuple(dist.get_process_group_ranks(dp_group)),
                    tuple(dist.get_process_group_ranks(tp_group)), tuple(history),
                    states, collective_counts(r.kind for r in last_step), gap,
                    reference_losses, gradient_gap)


def run_many(runs: Sequence[dict[str, Any]]) -> list[Any]:
    """Worker: several of the chapter's rank functions in one process group.

    Each run names its function, ``"run"``: ``"mesh"`` (:func:`train_mesh`),
    ``"pipeline"`` (:func:`course_lib.parallel.pipeline.pipeline_step`) or ``"tensor"``
    (:func:`course_lib.parallel.tensor_parallel.tp_block_check`); the other keys are its
    arguments. Starting the ranks costs seconds; one launch runs them all.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    from course_lib.parallel import pipeline

    workers = {"mesh": train_mesh, "pipeline": pipeline.pipeline_step,
               "tensor": tensor_parallel.tp_block_check}
    results = []
    for run in runs:
        options = dict(run)
        name = options.pop("run", None)
        if name not in workers:
            raise ValueError(f"each run names its function as run=, one of "
                             f"{', '.join(workers)}; got {name!r}.")
        results.append(workers[name](**options))
    return results


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse a tensor degree or a batch that does not fit the ranks, naming the flags.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    if args.seq_len > ddp.context_length():
        raise ValueError(f"--seq-len {args.seq_len} is longer than the model's "
                         f"context: use --seq-len {ddp.context_length()} or less.")
    config = course_model.course_model_config(data.course_tokenizer())
    try:
        check_mesh(world_size, args.tp, config.n_embd, config.n_head, args.global_batch)
    except ValueError as err:
        raise ValueError(f"--tp {args.tp}, --global-batch {args.global_batch} on "
                         f"{world_size} ranks: {err}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: train on a (dp, tp) mesh; each rank's place; a check.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.mesh",
        description="Train the course's GPT-2 with tensor parallelism inside groups "
                    "of --tp ranks and data parallelism across them (gloo or NCCL).")
    parser.add_argument("--tp", type=launch.whole_number(1), default=2,
                        help="tensor-parallel degree: consecutive ranks, one node's")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    ddp.add_run_arguments(parser, steps=3)
    parser.set_defaults(global_batch=4, seq_len=32)
    args = ddp.parse_run_arguments(parser, argv, check_flags)
    r = train_mesh(args.tp, args.steps, args.global_batch, args.seq_len, args.lr,
                   args.seed, args.dtype, args.check)
    launch.say(f"rank {r.rank}/{r.world_size} (node {r.node}, replica "
               f"{r.dp_rank}/{r.dp}, tensor rank {r.tp_rank}/{r.tp}, tp group "
               f"{list(r.tp_group)}, dp group {list(r.dp_group)}): final loss "
               f"{r.history[-1]:.4f}, {r.collectives.get('all-reduce', 0)} "
               "tensor-parallel all-reduces a step")
    passed = True
    if args.check:  # every rank knows the gaps; rank 0 says them
        g, tolerance = r.gradient_gap, ddp.CHECK_TOLERANCE[args.dtype]
        passed = r.parameter_gap <= tolerance and g.within(tolerance)
        if r.rank == 0:
            launch.say(f"one process on the global batch: max |difference| of the "
                       f"parameters {r.parameter_gap:.2e} and of the first gradient "
                       f"{g.max_difference:.2e}; gradient norm ratio {g.norm_ratio:.6f}"
                       + ("" if passed else f"; check failed: a gap is over {tolerance:g}"))
    launch.shutdown()
    return 0 if passed else 1


@dataclass(frozen=True)
class TwoNodeRun:
    """What :func:`two_nodes` got back: each node's exit status and output; the port.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """

    returncodes: tuple[int, ...]
    outputs: tuple[str, ...]
    port: int


def _node_count(nproc_per_node: Any) -> int:
    if (isinstance(nproc_per_node, bool) or not isinstance(nproc_per_node, int)
            or nproc_per_node < 1):
        raise ValueError(f"nproc_per_node must be a whole number >= 1 (the ranks each node "
                         f"starts, torchrun's --nproc-per-node), got {nproc_per_node!r}.")
    return nproc_per_node


def _collect(stream: Any, lines: list[str]) -> None:
    """Append each line of a node's output as it comes (a thread per node)."""
    with stream:
        for line in stream:
            lines.append(line)


def _missing_node(started: dict[int, subprocess.Popen], outputs: dict[int, list[str]],
                  where: str, join_timeout: int) -> str | None:
    """The message when the nodes did not meet: which node is missing, and why; else None."""
    waited = [n for n in started if any("RendezvousTimeoutError" in line for line in outputs[n])]
    if not waited:
        return None
    missing = [n for n in (0, 1) if n not in waited]
    if not missing:
        return (f"the two nodes did not meet at {where} within {join_timeout} s (each waited "
                "for the other): is the port the same for both, and reachable? Pass a larger "
                "join_timeout= if the machine is busy.")
    node, other = missing[0], waited[0]
    head = f"node {node} did not join the rendezvous at {where} within {join_timeout} s"
    if node not in started:
        return (f"{head}: only node {other} was started here, and it stopped waiting. Start "
                f"node {node} too (the same torchrun command with --node-rank={node}, in "
                f"another shell or on the other machine) within {join_timeout} s of node "
                f"{other}, or pass a larger join_timeout=.")
    code = started[node].poll()
    if code is None:
        return (f"{head}: it was still starting when node {other} stopped waiting. Pass a "
                "larger join_timeout= (the machine may be busy).")
    last = " / ".join(line.strip() for line in outputs[node][-3:] if line.strip())
    return (f"{head}: it ended first (exit code {code}), and node {other} stopped waiting "
            f"for it. Its last lines: {last or '(none)'}")


def two_nodes(args: Sequence[str] = (), nproc_per_node: int = 2,
              port: int | None = None, timeout: float = 300.0,
              module: str = "course_lib.parallel.mesh", nodes: Sequence[int] = (0, 1),
              join_timeout: float = 60.0) -> TwoNodeRun:
    """Run ``module`` as two torchrun "nodes" on this machine, meeting on ``port``.

    Each node is a ``torchrun --nnodes=2 --node-rank=K`` process with ``nproc_per_node``
    ranks of one thread each. Both are stopped, with their workers, after ``timeout``
    seconds (:class:`~course_lib.parallel.launch.LaunchError`) or if this call is
    interrupted; a busy ``port`` is refused before anything starts. ``nodes`` are the nodes
    started here (``(0,)``: node 1 starts elsewhere). A node that waits more than
    ``join_timeout`` seconds (whole seconds, torchrun's ``--rdzv-conf join_timeout``) for the
    other stops, and so does this call, within a few seconds more, with one LaunchError
    that names the node that is missing and why.

    Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
    """
    _node_count(nproc_per_node)
    if not (isinstance(timeout, (int, float)) and 0 < timeout < math.inf):
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    if not (isinstance(join_timeout, (int, float)) and 0 < join_timeout < math.inf):
        raise ValueError(f"join_timeout must be a positive number of seconds, got "
                         f"{join_timeout!r}.")
    chosen = tuple(nodes) if isinstance(nodes, (tuple, list)) else ()
    if not chosen or len(set(chosen)) != len(chosen) or not set(chosen) <= {0, 1}:
        raise ValueError(f"nodes must name the nodes to start here, 0 and/or 1, each once, "
                         f"e.g. (0, 1) or (0,); got {nodes!r}.")
    port = launch.free_port() if port is None else launch.check_port(port)
    launch.check_world_size(2 * nproc_per_node)
    wait = max(1, math.ceil(join_timeout))
    where = f"{launch.HOST}:{port}"
    environ = dict(os.environ, OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    started: dict[int, subprocess.Popen] = {}
    outputs: dict[int, list[str]] = {node: [] for node in chosen}
    pumps = []
    try:
        for node in chosen:
            command = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2",
                       f"--node-rank={node}", f"--nproc-per-node={nproc_per_node}",
                       "--rdzv-backend=c10d", f"--rdzv-endpoint={where}",
                       f"--rdzv-conf=join_timeout={wait}", "-m", module, *args]
            started[node] = subprocess.Popen(
                command, env=environ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, start_new_session=True)
            pumps.append(threading.Thread(target=_collect, daemon=True,
                                          args=(started[node].stdout, outputs[node])))
            pumps[-1].start()
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in started.values()):
            if time.monotonic() > deadline:
                raise launch.LaunchError(
                    f"the torchrun node(s) did not finish within {timeout:g} s and were "
                    "stopped. Pass a larger timeout=, or fewer --steps.")
            ended = any(p.poll() is not None for p in started.values())
            missing = ended and _missing_node(started, outputs, where, wait)
            if missing:  # a node stopped waiting for the other: the rest would wait too
                raise launch.LaunchError(missing)
            time.sleep(0.1)
        for pump in pumps:
            pump.join(timeout=10)
        missing = _missing_node(started, outputs, where, wait)
        if missing:
            raise launch.LaunchError(missing)
    finally:
        launch.stop_processes(list(started.values()), grace=10.0)  # torchrun stops its workers
        for pump in pumps:
            pump.join(timeout=5)
    return TwoNodeRun(tuple(p.returncode for p in started.values()),
                      tuple("".join(outputs[n]) for n in chosen), port)


if __name__ == "__main__":
    raise SystemExit(main())
