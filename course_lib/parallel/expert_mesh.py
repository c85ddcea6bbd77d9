"""Expert parallelism inside data parallelism: a 2-D mesh of replicas by expert ranks; a script.

Chapter 12, *Long sequences and many experts*, spreads a mixture-of-experts layer
(:mod:`course_lib.parallel.experts`) over ``ep`` ranks; real runs also replicate it, as
DeepSeek-V3 does with 64-way expert parallelism inside data parallelism. Here ``N`` ranks form
a 2-D device mesh of ``dp`` replicas by ``ep`` expert ranks
(``init_device_mesh("cpu", (dp, ep), mesh_dim_names=("dp", "ep"))``): consecutive ranks form
an expert-parallel (EP) group, the ranks at the same place of every replica a data-parallel
(DP) group. Every rank holds the whole router and ``E / ep`` experts; each replica holds all
``E`` experts, split over its EP group; every rank routes its own tokens.

* Tokens cross only the EP group: :func:`course_lib.parallel.experts.expert_parallel_moe`
  with ``group=`` the EP group dispatches and combines them by all-to-all inside it.
* An expert's gradient, after the all-to-all's backward, already holds the contributions of
  every token of its replica's EP group; the other replicas' tokens are on the same expert of
  their replicas, so it is **summed over the DP group**.
* The router is on every rank and each rank's tokens give a part of its gradient: it is
  **summed over all N ranks**.

Each rank backpropagates its loss divided by ``N``, its share of one process's loss, the mean
of the ``N`` ranks' losses (data parallelism's average, the ``1/N`` in the loss); the sums
above then give one process's gradients exactly. Averaging the experts' gradient over the DP
group instead (dividing by ``dp`` as well) would give ``1/dp`` of it: the check catches it.

:func:`ep_mesh_check` runs inside each rank (start it with :func:`launch_ep_mesh_check`, which
checks the degrees before any rank starts) and compares, in float64, the output, the auxiliary
loss and the gradients of the input, the router and the rank's experts with one process on all
ranks' tokens. :func:`run_many` also runs the chapter's measurement of activation memory
(:mod:`course_lib.parallel.context_memory`) in the same process group, so that the chapter's
four-rank runs take one launch. The module is also the torchrun entry point (NCCL on GPUs)::

    torchrun --nproc-per-node=4 -m course_lib.parallel.expert_mesh --dp 2 --check
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

from course_lib.parallel import context_memory, ddp, launch
from course_lib.parallel.context_parallel import add_check_arguments, finish_check
from course_lib.numbers import memory
from course_lib.parallel.experts import (EPTraffic, add_layer_arguments, check_moe,
                                         expert_parallel_moe, gaps_to_one_process,
                                         rank_copies, seeded_layer)

__all__ = ["WORKERS", "EPMeshCheck", "check_ep_mesh", "check_flags", "check_runs",
           "ep_mesh_check", "launch_ep_mesh_check", "main", "run_many"]


def check_ep_mesh(world_size: int, dp: int, experts: int, k: int = 2,
                  capacity_factor: float = 1.0) -> int:
    """The expert-parallel degree of ``dp`` replicas on ``world_size`` ranks; else say why not.

    Chapter 12, *Long sequences and many experts*.
    """
    if isinstance(dp, bool) or not isinstance(dp, int) or dp < 1 or world_size % dp:
        raise ValueError(f"{dp!r} data-parallel replicas do not split {world_size} ranks; "
                         f"use a whole number of replicas that divides {world_size}.")
    ep = world_size // dp
    try:
        check_moe(experts, k, capacity_factor, ep)
    except ValueError as err:
        raise ValueError(f"{world_size} ranks as {dp} replicas x {ep} expert-parallel "
                         f"ranks: {err}") from None
    return ep


@dataclass(frozen=True)
class EPMeshCheck:
    """One rank of :func:`ep_mesh_check`: its place in the mesh, what it sent, its gaps.

    ``dp_rank`` and ``ep_rank`` place it in the mesh; ``dp_group`` and ``ep_group`` are the
    global ranks of its two groups, ``experts_held`` its experts. ``traffic`` is its
    dispatch and combine inside the EP group; ``expert_grad_bytes`` what it all-reduced
    over the DP group (its experts' gradients), ``router_grad_bytes`` over all ranks.
    ``gaps``: the largest absolute differences from one process of the output, the
    auxiliary loss and the gradients of the input, the router, ``w_in`` and ``w_out``.

    Chapter 12, *Long sequences and many experts*.
    """

    rank: int
    dp: int
    ep: int
    dp_rank: int
    ep_rank: int
    dp_group: tuple[int, ...]
    ep_group: tuple[int, ...]
    experts_held: tuple[int, ...]
    traffic: EPTraffic
    expert_grad_bytes: int
    router_grad_bytes: int
    gaps: dict[str, float]

    @property
    def max_gap(self) -> float:
        """The largest gap, output, loss or gradient."""
        return max(self.gaps.values())


def ep_mesh_check(dp: int = 2, tokens: int = 16, hidden: int = 8, ffn: int = 16,
                  experts: int = 4, k: int = 2, capacity_factor: float = 1.0,
                  skew: float = 0.0, aux_weight: float = 0.01, seed: int = 0,
                  dtype: str = "float64") -> EPMeshCheck:
    """Worker: the layer on a ``dp`` x ``ep`` mesh against one process on all ranks' tokens.

    Every rank builds the same seeded :class:`~course_lib.parallel.experts.MixtureOfExperts`
    and draws the same ``N * tokens`` tokens and loss weights; one process runs them as ``N``
    groups (one per rank, each with its own capacity) with the loss
    ``(sum(w * y) + aux_weight * sum(aux)) / N``. This rank runs its ``tokens`` with its
    replica's experts over its EP group, backpropagates
    ``(sum(w * y) + aux_weight * aux) / N``, then sums its experts' gradients over the DP
    group and the router's over all ranks.

    Chapter 12, *Long sequences and many experts*.
    """
    from torch.distributed.device_mesh import init_device_mesh

    worker = launch.init_worker()
    world, rank = worker.world_size, worker.rank
    ep = check_ep_mesh(world, dp, experts, k, capacity_factor)
    mesh = init_device_mesh(worker.device.type, (dp, ep), mesh_dim_names=("dp", "ep"))
    dp_group, ep_group = mesh["dp"].get_group(), mesh["ep"].get_group()
    layer, x, w = seeded_layer(worker.device, world * tokens, hidden, ffn, experts, k,
                               capacity_factor, skew, 1, None, seed, dtype)
    x_all = x.clone().requires_grad_()
    single = layer(x_all, groups=world)
    ((single.output * w).sum() + aux_weight * single.aux_loss.sum()).div(world).backward()

    dp_rank, ep_rank, local = mesh.get_local_rank("dp"), mesh.get_local_rank("ep"), experts // ep
    part, mine = slice(rank * tokens, (rank + 1) * tokens), slice(ep_rank * local,
                                                                 (ep_rank + 1) * local)
    copies = rank_copies(layer, x, part, mine)
    x_mine, router, w_in, w_out = copies
    traffic = EPTraffic()
    y, aux = expert_parallel_moe(x_mine, router, w_in, w_out, k, capacity_factor, layer.bias,
                                 group=ep_group, traffic=traffic)
    ((y * w[part]).sum() + aux_weight * aux).div(world).backward()  # this rank's share
    for grad in (w_in.grad, w_out.grad):
        dist.all_reduce(grad, group=dp_group)  # the other replicas' tokens, same experts
    dist.all_reduce(router.grad)  # every rank's tokens used the router
    gaps = gaps_to_one_process(single, layer, x_all, part, mine, rank, y, aux, copies)
    return EPMeshCheck(rank, dp, ep, dp_rank, ep_rank,
                       tuple(dist.get_process_group_ranks(dp_group)),
                       tuple(dist.get_process_group_ranks(ep_group)),
                       tuple(range(mine.start, mine.stop)), traffic,
                       memory.tensor_bytes([w_in.grad, w_out.grad]),
                       memory.tensor_bytes([router.grad]), gaps)


#: The rank functions :func:`run_many` runs, by the name a run gives as ``"run"``.
WORKERS = {"mesh": ep_mesh_check, "cp memory": context_memory.cp_activation_memory}


def run_many(runs: Sequence[dict[str, Any]]) -> list[Any]:
    """Worker: several of the chapter's 4-rank runs in one process group.

    Each run names its function as ``"run"``: ``"mesh"`` (:func:`ep_mesh_check`, the
    default) or ``"cp memory"``
    (:func:`course_lib.parallel.context_memory.cp_activation_memory`); the other keys are
    its arguments. Starting the ranks costs seconds; one launch runs them all.

    Chapter 12, *Long sequences and many experts*.
    """
    results = []
    for run in runs:
        options = dict(run)
        results.append(WORKERS[options.pop("run", "mesh")](**options))
    return results


def check_runs(nprocs: int, runs: Sequence[dict[str, Any]]) -> None:
    """Refuse any run that does not fit ``nprocs`` ranks, before they start.

    Chapter 12, *Long sequences and many experts*.
    """
    for run in runs:
        name = run.get("run", "mesh")
        if name not in WORKERS:
            raise ValueError(f"each run names its function as run=, one of "
                             f"{', '.join(WORKERS)}; got {name!r}.")
        if name == "mesh":
            check_ep_mesh(nprocs, run.get("dp", 2), run.get("experts", 4), run.get("k", 2),
                          run.get("capacity_factor", 1.0))
        else:
            context_memory.check_memory_run(nprocs, run.get("seq_len", 128),
                                            run.get("degrees", (1, 2, 4)),
                                            run.get("heads", 8), run.get("kv_heads", 2))


def launch_ep_mesh_check(nprocs: int = 4, runs: Sequence[dict[str, Any]] | None = None,
                         timeout: float = 120.0, echo: bool = False) -> list[list[Any]]:
    """Check every run, then run them all on ``nprocs`` ranks; results by rank, then run.

    Each run is a dictionary of :func:`ep_mesh_check`'s arguments (or, with
    ``"run": "cp memory"``, of the activation measurement's); replicas that do not divide
    the ranks, experts that do not split across an EP group, or context-parallel degrees
    that do not divide the ranks are refused here, before any rank starts.

    Chapter 12, *Long sequences and many experts*.
    """
    runs = list(runs) if runs is not None else [{}]
    check_runs(nprocs, runs)
    return launch.launch(f"{__name__}:run_many", nprocs, {"runs": runs}, timeout=timeout,
                         echo=echo)


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse a mesh that does not fit torchrun's ranks, naming the flags.

    Chapter 12, *Long sequences and many experts*.
    """
    try:
        check_ep_mesh(world_size, args.dp, args.experts, args.top_k, args.capacity_factor)
    except ValueError as err:
        raise ValueError(f"--dp {args.dp}, --experts {args.experts}, --top-k {args.top_k}: "
                         f"{err}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: the layer on a dp x ep mesh; each rank prints a line.

    Chapter 12, *Long sequences and many experts*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.expert_mesh",
        description="A mixture-of-experts layer on a 2-D mesh (data-parallel replicas x "
                    "expert-parallel ranks), checked against one process.")
    parser.add_argument("--dp", type=launch.whole_number(1), default=2,
                        help="data-parallel replicas; the ranks / dp are expert-parallel")
    add_layer_arguments(parser)
    add_check_arguments(parser)
    args = ddp.parse_run_arguments(parser, argv, check_flags)
    r = ep_mesh_check(args.dp, args.tokens, args.hidden, args.ffn, args.experts, args.top_k,
                      args.capacity_factor, args.skew, seed=args.seed, dtype=args.dtype)
    launch.say(f"rank {r.rank} (replica {r.dp_rank} of {r.dp}, expert rank {r.ep_rank} of "
               f"{r.ep}, experts {list(r.experts_held)}): max |difference| from one "
               f"process {r.max_gap:.1e}; dispatch {r.traffic.dispatch_bytes:,} bytes in EP "
               f"group {list(r.ep_group)}, expert gradients {r.expert_grad_bytes:,} bytes "
               f"over DP group {list(r.dp_group)}, router gradient "
               f"{r.router_grad_bytes:,} over all ranks")
    return finish_check(r.rank, r.max_gap, args)


if __name__ == "__main__":
    raise SystemExit(main())
