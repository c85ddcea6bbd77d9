"""Expert parallelism: a mixture-of-experts layer, and the same layer spread over ranks; a script.

Chapter 12, *Long sequences and many experts*, writes out a mixture-of-experts (MoE) layer
(Shazeer et al. 2017; GShard, Lepikhin et al. 2020; Switch, Fedus et al. 2021):

* a **router** ``x @ W_r`` gives each token a softmax over the ``E`` experts; each token goes to
  its ``k`` most probable experts (:func:`route`), its output the sum of their outputs weighted
  by those probabilities (the gates);
* each expert takes at most its **capacity** ``ceil(capacity_factor * T * k / E)`` of a group's
  ``T`` tokens (:func:`expert_capacity`); first choices are served before second choices, and
  within a choice earlier tokens first (GShard's order); the rest are **dropped** (their output
  from that expert is zero; the residual connection around the layer carries them on);
* the **load-balancing loss** ``E * sum_e f_e * P_e`` (Switch's, :func:`load_balancing_loss`),
  ``f_e`` the share of assignments routed to expert ``e`` and ``P_e`` its mean router
  probability, is 1 for a uniform router and grows with the skew; and
* **node-limited routing** (DeepSeek-V3, 2024): experts live on ``nodes`` nodes, each token
  goes to at most ``node_limit`` of them (those whose best experts score highest), which bounds
  the copies of a token that cross the slow links between nodes (:func:`node_traffic`).

With expert parallelism the ``E`` experts are spread over ``ep`` ranks (``E / ep`` each), each
rank routing its own tokens. A token row travels to its expert's rank and back by two
``all_to_all_single`` calls, **dispatch** and **combine**, whose uneven split sizes come from the
routing (:func:`split_sizes`); a rank sends at most ``k * h * e`` bytes per token in each.
:class:`MixtureOfExperts` is the one-process layer, :func:`expert_parallel_moe` the distributed
one; :func:`ep_moe_check` runs inside each rank (start it with :func:`launch_ep_check`, which
checks the degrees before any rank starts) and compares them, float64, forward and gradients,
dropped tokens included. The module is also the torchrun entry point (NCCL on GPUs)::

    torchrun --nproc-per-node=4 -m course_lib.parallel.experts --experts 8 --top-k 2 --check
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_lib.parallel import cost_model, ddp, launch
from course_lib.parallel.context_parallel import (add_check_arguments, finish_check,
                                                  load_imbalance)

__all__ = ["AllToAll", "EPCheck", "EPTraffic", "MixtureOfExperts", "MoEOutput", "NodeTraffic",
           "add_layer_arguments", "gaps_to_one_process", "rank_copies", "seeded_layer",
           "check_moe", "ep_moe_check", "expert_capacity", "expert_ffn", "expert_parallel_moe",
           "keep_within_capacity", "launch_ep_check", "load_balancing_loss", "main",
           "node_traffic", "route", "run_many", "split_sizes"]

Group = Any  # a torch.distributed ProcessGroup, or None for the whole world


def check_moe(experts: int, k: int, capacity_factor: float, ep: int = 1, nodes: int = 1,
              node_limit: int | None = None) -> None:
    """Refuse a layer or a spread that cannot work, with what to do instead.

    Chapter 12, *Long sequences and many experts*.
    """
    for name, value in (("experts", experts), ("top-k", k), ("ep", ep), ("nodes", nodes)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {value!r}.")
    if k > experts:
        raise ValueError(f"top-k {k} is larger than the {experts} experts: a token cannot "
                         f"go to more experts than there are; use top-k <= {experts}.")
    if not (isinstance(capacity_factor, (int, float)) and math.isfinite(capacity_factor)
            and capacity_factor > 0):
        raise ValueError(f"the capacity factor must be a positive number (1.0: room for an "
                         f"even share, 1.25 as Switch used), got {capacity_factor!r}.")
    if experts % ep:
        raise ValueError(f"{experts} experts do not split across {ep} expert-parallel ranks; "
                         f"use a number of experts that is a multiple of {ep}, or an EP "
                         f"degree that divides {experts}.")
    if experts % nodes:
        raise ValueError(f"{experts} experts do not split across {nodes} nodes; use a number "
                         f"of nodes that divides {experts}.")
    if node_limit is not None:
        if isinstance(node_limit, bool) or not isinstance(node_limit, int) \
                or not 1 <= node_limit <= nodes:
            raise ValueError(f"node_limit must be a whole number from 1 to the {nodes} nodes, "
                             f"or None for no limit; got {node_limit!r}.")
        if k > node_limit * (experts // nodes):
            raise ValueError(f"top-k {k} is more than the {node_limit * (experts // nodes)} "
                             f"experts on {node_limit} node(s); raise node_limit or lower k.")


def route(logits: torch.Tensor, k: int, bias: torch.Tensor | None = None, nodes: int = 1,
          node_limit: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The router's softmax ``(T, E)``, each token's top-``k`` experts ``(T, k)`` and gates.

    ``bias`` (one number per expert) is added to the probabilities for the choice only, not
    for the gates: DeepSeek-V3's balancing bias, and here the way to skew a router. With
    ``node_limit`` the experts are ``nodes`` contiguous groups, a node's score is the sum of
    its ``k // node_limit`` best scores, and only experts on a token's best ``node_limit``
    nodes can be chosen (DeepSeek-V3's node-limited routing).

    Chapter 12, *Long sequences and many experts*.
    """
    probs = logits.softmax(dim=-1)  # (T, E)
    scores = probs.detach() if bias is None else probs.detach() + bias
    if node_limit is not None and node_limit < nodes:
        per_node = scores.view(scores.shape[0], nodes, -1)  # (T, nodes, E / nodes)
        best = per_node.topk(max(1, k // node_limit), dim=-1).values.sum(-1)  # (T, nodes)
        allowed = torch.zeros_like(best, dtype=torch.bool)
        allowed.scatter_(1, best.topk(node_limit, dim=-1).indices, True)
        scores = scores.masked_fill(~allowed.repeat_interleave(per_node.shape[2], 1),
                                    -math.inf)
    chosen = scores.topk(k, dim=-1).indices  # (T, k), best first
    return probs, chosen, probs.gather(1, chosen)


def expert_capacity(tokens: int, experts: int, k: int, capacity_factor: float) -> int:
    """Token slots each expert has for a group: ``ceil(capacity_factor * tokens * k / experts)``.

    Chapter 12, *Long sequences and many experts*.
    """
    return math.ceil(capacity_factor * tokens * k / experts)


def keep_within_capacity(chosen: torch.Tensor, experts: int, capacity: int) -> torch.Tensor:
    """Which assignments ``(T, k)`` an expert of ``capacity`` slots takes; the others are dropped.

    All tokens' first choices queue before any second choice; within a choice, in token order.

    Chapter 12, *Long sequences and many experts*.
    """
    queue = chosen.t().reshape(-1)  # choice-major: (k * T,)
    place = F.one_hot(queue, experts).cumsum(0).gather(1, queue[:, None]).squeeze(1) - 1
    return (place < capacity).view(chosen.shape[1], chosen.shape[0]).t()


def load_balancing_loss(probs: torch.Tensor, chosen: torch.Tensor, experts: int) -> torch.Tensor:
    """Switch's auxiliary loss ``E * sum_e f_e * P_e``: 1 for a uniform router, more when skewed.

    ``f_e`` is the share of the ``T * k`` assignments that chose expert ``e`` (before any
    drop; for ``k = 1`` Switch's fraction of tokens), ``P_e`` the mean router probability of
    ``e``. Only ``P`` carries a gradient.

    Chapter 12, *Long sequences and many experts*.
    """
    f = torch.bincount(chosen.reshape(-1), minlength=experts).to(probs.dtype) / chosen.numel()
    return experts * (f * probs.mean(0)).sum()


def expert_ffn(x: torch.Tensor, w_in: torch.Tensor, w_out: torch.Tensor) -> torch.Tensor:
    """One expert: a two-layer feed-forward network, ``gelu(x W_in) W_out``.

    Chapter 12, *Long sequences and many experts*.
    """
    return F.gelu(x @ w_in) @ w_out


def split_sizes(assignments: torch.Tensor, experts: int, ep: int) -> list[int]:
    """Rows this rank sends to each of the ``ep`` ranks: the all-to-all's input split sizes.

    ``assignments`` holds the expert of every row to send (kept assignments only); experts
    are laid out contiguously, ``E / ep`` per rank, so expert ``e`` lives on rank
    ``e // (E / ep)``.

    Chapter 12, *Long sequences and many experts*.
    """
    check_moe(experts, 1, 1.0, ep)
    owner = torch.div(assignments.reshape(-1), experts // ep, rounding_mode="floor")
    return torch.bincount(owner, minlength=ep).tolist()


@dataclass(frozen=True)
class MoEOutput:
    """What a mixture-of-experts layer returns: the output, the auxiliary loss, the routing.

    ``output`` ``(T, h)``; ``aux_loss`` one :func:`load_balancing_loss` per group; ``chosen``
    and ``kept`` ``(T, k)``: each token's experts and whether each took it.

    Chapter 12, *Long sequences and many experts*.
    """

    output: torch.Tensor
    aux_loss: torch.Tensor
    chosen: torch.Tensor
    kept: torch.Tensor


class MixtureOfExperts(nn.Module):
    """A mixture-of-experts layer in one process: router, top-k, capacity, the auxiliary loss.

    ``router`` ``(h, E)``, ``w_in`` ``(E, h, f)``, ``w_out`` ``(E, f, h)``, seeded. The tokens
    ``(T, h)`` are cut into ``groups`` equal groups, each routed with its own capacity (as
    GShard's groups; one group per expert-parallel rank makes it equal to
    :func:`expert_parallel_moe`).

    Chapter 12, *Long sequences and many experts*.
    """

    def __init__(self, hidden: int, ffn: int, experts: int, k: int = 2,
                 capacity_factor: float = 1.25, nodes: int = 1, node_limit: int | None = None,
                 seed: int = 0) -> None:
        check_moe(experts, k, capacity_factor, 1, nodes, node_limit)
        super().__init__()
        draw = torch.Generator().manual_seed(seed)
        self.router = nn.Parameter(torch.randn(hidden, experts, generator=draw) / hidden**0.5)
        self.w_in = nn.Parameter(torch.randn(experts, hidden, ffn, generator=draw) / hidden**0.5)
        self.w_out = nn.Parameter(torch.randn(experts, ffn, hidden, generator=draw) / ffn**0.5)
        self.register_buffer("bias", torch.zeros(experts))
        self.experts, self.k, self.capacity_factor = experts, k, capacity_factor
        self.nodes, self.node_limit = nodes, node_limit

    def forward(self, x: torch.Tensor, groups: int = 1) -> MoEOutput:
        """Each group routed, its assignments capped, every expert run on the tokens it took."""
        if x.shape[0] % groups:
            raise ValueError(f"{x.shape[0]} tokens do not cut into {groups} equal groups.")
        outputs, losses, chosen_all, kept_all = [], [], [], []
        for xg in x.chunk(groups):
            probs, chosen, gates = route(xg @ self.router, self.k, self.bias, self.nodes,
                                         self.node_limit)
            capacity = expert_capacity(xg.shape[0], self.experts, self.k, self.capacity_factor)
            kept = keep_within_capacity(chosen, self.experts, capacity)
            y = torch.zeros_like(xg)
            for e in range(self.experts):
                token, slot = ((chosen == e) & kept).nonzero(as_tuple=True)
                out = expert_ffn(xg[token], self.w_in[e], self.w_out[e])
                y = y.index_add(0, token, gates[token, slot, None] * out)
            outputs.append(y)
            losses.append(load_balancing_loss(probs, chosen, self.experts))
            chosen_all.append(chosen)
            kept_all.append(kept)
        return MoEOutput(torch.cat(outputs), torch.stack(losses), torch.cat(chosen_all),
                         torch.cat(kept_all))


class AllToAll(torch.autograd.Function):
    """``all_to_all_single`` with uneven splits; its gradient goes back by the reverse one.

    Chapter 12, *Long sequences and many experts*.
    """

    @staticmethod
    def forward(ctx: Any, rows: torch.Tensor, send: list[int], receive: list[int],
                group: Group = None) -> torch.Tensor:
        """``send[r]`` rows go to rank r; ``receive[r]`` rows come from it, in rank order."""
        ctx.send, ctx.receive, ctx.group = send, receive, group
        out = rows.new_empty((sum(receive), *rows.shape[1:]))
        dist.all_to_all_single(out, rows.contiguous(), receive, send, group=group)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        """Each row's gradient back to the rank that sent the row."""
        out = grad.new_empty((sum(ctx.send), *grad.shape[1:]))
        dist.all_to_all_single(out, grad.contiguous(), ctx.send, ctx.receive, group=ctx.group)
        return out, None, None, None


@dataclass
class EPTraffic:
    """What one rank sent and computed in :func:`expert_parallel_moe`.

    Bytes it sent in dispatch (its tokens' rows of ``h`` elements; in all and to other
    ranks) and in combine (its experts' outputs going back); rows its experts received (its
    load); assignments it dropped. Dispatch is at most ``k * h * e`` per token; combine sends
    back what the rank received, so over the group it equals dispatch, while one rank's can
    exceed its own bound when the router favours its experts (up to its capacity).

    Chapter 12, *Long sequences and many experts*.
    """

    dispatch_bytes: int = 0
    dispatch_bytes_to_others: int = 0
    combine_bytes: int = 0
    rows_received: int = 0
    dropped: int = 0
    assignments: int = 0


def expert_parallel_moe(x: torch.Tensor, router: torch.Tensor, w_in: torch.Tensor,
                        w_out: torch.Tensor, k: int, capacity_factor: float,
                        bias: torch.Tensor | None = None, nodes: int = 1,
                        node_limit: int | None = None, group: Group = None,
                        traffic: EPTraffic | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's tokens through experts spread over the group: the output and aux loss.

    ``router`` is whole on every rank; ``w_in`` and ``w_out`` hold this rank's ``E / ep``
    experts. Route and cap as one process would, sort the kept assignments by expert, tell
    every rank how many rows of each of its experts to expect, dispatch the rows
    (:class:`AllToAll`), run the local experts, combine the results back, and add them up
    weighted by the gates.

    Chapter 12, *Long sequences and many experts*.
    """
    ep, local = dist.get_world_size(group), w_in.shape[0]
    experts = ep * local
    probs, chosen, gates = route(x @ router, k, bias, nodes, node_limit)
    kept = keep_within_capacity(chosen, experts, expert_capacity(x.shape[0], experts, k,
                                                                 capacity_factor))
    token, slot = kept.nonzero(as_tuple=True)
    expert = chosen[token, slot]
    order = torch.argsort(expert, stable=True)  # rows grouped by expert, so by rank
    token, slot, expert = token[order], slot[order], expert[order]
    send = split_sizes(expert, experts, ep)
    counts = torch.bincount(expert, minlength=experts)  # rows for each expert, from here
    theirs = torch.empty_like(counts)  # rows for each of my experts, from each rank
    dist.all_to_all_single(theirs, counts, group=group)
    theirs = theirs.view(ep, local)
    receive = theirs.sum(1).tolist()
    rows = AllToAll.apply(x[token], send, receive, group)  # dispatch
    owner = torch.arange(local, device=x.device).repeat(ep).repeat_interleave(theirs.reshape(-1))
    done = torch.zeros_like(rows)
    for e in range(local):
        mine = (owner == e).nonzero().squeeze(1)
        done = done.index_copy(0, mine, expert_ffn(rows[mine], w_in[e], w_out[e]))
    back = AllToAll.apply(done, receive, send, group)  # combine
    y = torch.zeros_like(x).index_add(0, token, gates[token, slot, None] * back)
    if traffic is not None:
        row, me = x.shape[1] * x.element_size(), dist.get_rank(group)
        traffic.dispatch_bytes += sum(send) * row
        traffic.dispatch_bytes_to_others += (sum(send) - send[me]) * row
        traffic.combine_bytes += sum(receive) * row
        traffic.rows_received += sum(receive)
        traffic.dropped += int((~kept).sum())
        traffic.assignments += kept.numel()
    return y, load_balancing_loss(probs, chosen, experts)


@dataclass(frozen=True)
class EPCheck:
    """One rank's check of :func:`expert_parallel_moe` against :class:`MixtureOfExperts`.

    ``gaps``: the largest absolute differences of the output, the auxiliary loss and the
    gradients of the input, the router and this rank's experts; ``dropped_reference``: the
    assignments one process dropped in this rank's group; ``bytes_bound``: ``T * k * h * e``,
    the most a rank can send in dispatch (and in combine).

    Chapter 12, *Long sequences and many experts*.
    """

    rank: int
    ep: int
    gaps: dict[str, float]
    traffic: EPTraffic
    dropped_reference: int
    bytes_bound: int

    @property
    def max_gap(self) -> float:
        """The largest gap, output, loss or gradient."""
        return max(self.gaps.values())


def seeded_layer(device: torch.device, tokens: int, hidden: int, ffn: int, experts: int,
                 k: int, capacity_factor: float, skew: float, nodes: int,
                 node_limit: int | None, seed: int, dtype: str
                 ) -> tuple[MixtureOfExperts, torch.Tensor, torch.Tensor]:
    """The layer every rank builds alike, its router biased by ``skew`` towards the first
    experts (``skew * (1 - e / E)``), and ``tokens`` seeded tokens and loss weights.

    Chapter 12, *Long sequences and many experts*.
    """
    kind = {"float64": torch.float64, "float32": torch.float32}[dtype]
    layer = MixtureOfExperts(hidden, ffn, experts, k, capacity_factor, nodes, node_limit, seed)
    layer = layer.to(device, kind)
    layer.bias.copy_(skew * (1 - torch.arange(experts) / experts))
    draw = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(tokens, hidden, generator=draw).to(device, kind)
    w = torch.randn(tokens, hidden, generator=draw).to(device, kind)
    return layer, x, w


def rank_copies(layer: MixtureOfExperts, x: torch.Tensor, part: slice,
                mine: slice) -> tuple[torch.Tensor, ...]:
    """This rank's tokens (``x[part]``), the router and its experts (``mine``), copied from
    one process's layer as leaves of their own, whose gradients this rank computes.

    Chapter 12, *Long sequences and many experts*.
    """
    return tuple(t.detach()[s].clone().requires_grad_() for t, s in
                 ((x, part), (layer.router, slice(None)), (layer.w_in, mine),
                  (layer.w_out, mine)))


def gaps_to_one_process(single: MoEOutput, layer: MixtureOfExperts, x_all: torch.Tensor,
                        part: slice, mine: slice, rank: int, y: torch.Tensor,
                        aux: torch.Tensor, copies: Sequence[torch.Tensor]) -> dict[str, float]:
    """The largest absolute difference of this rank's output, auxiliary loss and gradients
    (of its :func:`rank_copies`) from one process's (``single``, on ``x_all``, with
    ``layer``).

    Chapter 12, *Long sequences and many experts*.
    """
    x_mine, router, w_in, w_out = copies
    pairs = {"output": (y, single.output[part]), "aux loss": (aux, single.aux_loss[rank]),
             "grad x": (x_mine.grad, x_all.grad[part]),
             "grad router": (router.grad, layer.router.grad),
             "grad w_in": (w_in.grad, layer.w_in.grad[mine]),
             "grad w_out": (w_out.grad, layer.w_out.grad[mine])}
    return {name: float((a.detach() - b.detach()).abs().max()) for name, (a, b) in pairs.items()}


def ep_moe_check(tokens: int = 16, hidden: int = 8, ffn: int = 16, experts: int = 4, k: int = 2,
                 capacity_factor: float = 1.0, skew: float = 0.0, nodes: int = 1,
                 node_limit: int | None = None, aux_weight: float = 0.01, seed: int = 0,
                 dtype: str = "float64") -> EPCheck:
    """Worker: the layer spread over the ranks against one process on all ranks' tokens.

    Every rank builds the same seeded :class:`MixtureOfExperts` and draws the same ``ep *
    tokens`` tokens and loss weights; one process runs them as ``ep`` groups, the loss
    ``sum(w * y) + aux_weight * mean(aux)``. This rank runs its ``tokens`` with its experts
    and the loss ``sum(w * y) + aux_weight * aux / ep``; the router's gradient is summed over
    the ranks. ``skew`` biases the router's choice towards the first experts
    (``skew * (1 - e / E)``), so the first rank receives more rows.

    Chapter 12, *Long sequences and many experts*.
    """
    worker = launch.init_worker()
    ep, rank = worker.world_size, worker.rank
    check_moe(experts, k, capacity_factor, ep, nodes, node_limit)
    layer, x, w = seeded_layer(worker.device, ep * tokens, hidden, ffn, experts, k,
                               capacity_factor, skew, nodes, node_limit, seed, dtype)
    x_all = x.clone().requires_grad_()
    single = layer(x_all, groups=ep)
    ((single.output * w).sum() + aux_weight * single.aux_loss.mean()).backward()
    part, local = slice(rank * tokens, (rank + 1) * tokens), experts // ep
    mine = slice(rank * local, (rank + 1) * local)
    copies = rank_copies(layer, x, part, mine)
    x_mine, router, w_in, w_out = copies
    traffic = EPTraffic()
    y, aux = expert_parallel_moe(x_mine, router, w_in, w_out, k, capacity_factor, layer.bias,
                                 nodes, node_limit, traffic=traffic)
    ((y * w[part]).sum() + aux_weight * aux / ep).backward()
    dist.all_reduce(router.grad)  # each rank's tokens gave a part of it
    gaps = gaps_to_one_process(single, layer, x_all, part, mine, rank, y, aux, copies)
    dropped = int((~single.kept[part]).sum())
    return EPCheck(rank, ep, gaps, traffic, dropped, tokens * k * hidden * x.element_size())


def run_many(runs: list[dict[str, Any]]) -> list[EPCheck]:
    """Worker: several :func:`ep_moe_check` runs in one process group.

    Chapter 12, *Long sequences and many experts*.
    """
    return [ep_moe_check(**run) for run in runs]


def launch_ep_check(nprocs: int = 2, runs: list[dict[str, Any]] | None = None,
                    timeout: float = 120.0, echo: bool = False) -> list[list[EPCheck]]:
    """Check every run's degrees, then run them all on ``nprocs`` ranks; results by rank, run.

    Each run is a dictionary of :func:`ep_moe_check`'s arguments; experts that do not split
    across the ranks, a top-k over the experts, a capacity factor <= 0 are refused here,
    before any rank starts.

    Chapter 12, *Long sequences and many experts*.
    """
    runs = runs if runs is not None else [{}]
    for run in runs:
        check_moe(run.get("experts", 4), run.get("k", 2), run.get("capacity_factor", 1.0),
                  nprocs, run.get("nodes", 1), run.get("node_limit"))
    return launch.launch(f"{__name__}:run_many", nprocs, {"runs": runs}, timeout=timeout,
                         echo=echo)


@dataclass(frozen=True)
class NodeTraffic:
    """Bytes and seconds one GPU's tokens put on the links between nodes, per MoE dispatch.

    Without and with node-limited routing: the mean number of other nodes a token is sent
    to (once per node, then forwarded inside it over NVLink, as DeepSeek-V3 does), the bytes,
    and the seconds on ``link`` by the alpha-beta model.

    Chapter 12, *Long sequences and many experts*.
    """

    link: str
    nodes_per_token: tuple[float, float]
    bytes: tuple[int, int]
    seconds: tuple[float, float]


def node_traffic(tokens: int = 4096, hidden: int = 7168, experts: int = 256, k: int = 8,
                 nodes: int = 8, node_limit: int = 4, element: int = 1,
                 link: str = "InfiniBand NDR", seed: int = 0) -> NodeTraffic:
    """What node-limited routing saves on the slow links, for a random router on random tokens.

    The tokens sit on a GPU of node 0; a token chosen by experts on ``n`` other nodes crosses
    the network ``n`` times. The defaults are DeepSeek-V3's: 256 routed experts, 8 chosen, 8
    nodes, at most 4 of them, FP8 dispatch (1 byte), hidden size 7,168. The seconds are
    :func:`course_lib.parallel.cost_model.ring_time` of an all-gather whose rank sends the
    same bytes: an all-to-all by pairwise exchange also takes ``nodes - 1`` steps.

    Chapter 12, *Long sequences and many experts*.
    """
    check_moe(experts, k, 1.0, 1, nodes, node_limit)
    draw = torch.Generator().manual_seed(seed)
    logits = torch.randn(tokens, experts, generator=draw)
    per_token, sent, seconds = [], [], []
    for limit in (None, node_limit):
        _, chosen, _ = route(logits, k, nodes=nodes, node_limit=limit)
        node = torch.div(chosen, experts // nodes, rounding_mode="floor")
        hit = torch.zeros(tokens, nodes, dtype=torch.bool).scatter_(1, node, True)
        remote = hit[:, 1:].sum(1)  # other nodes each token reaches
        n_bytes = int(remote.sum()) * hidden * element
        per_token.append(float(remote.double().mean()))
        sent.append(n_bytes)
        seconds.append(cost_model.ring_time("all-gather", n_bytes * nodes / (nodes - 1), nodes,
                                            link) if nodes > 1 else 0.0)
    return NodeTraffic(link, tuple(per_token), tuple(sent), tuple(seconds))


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse a layer that does not spread over torchrun's ranks, naming the flags.

    Chapter 12, *Long sequences and many experts*.
    """
    try:
        check_moe(args.experts, args.top_k, args.capacity_factor, world_size)
    except ValueError as err:
        raise ValueError(f"--experts {args.experts}, --top-k {args.top_k}, "
                         f"--capacity-factor {args.capacity_factor} on {world_size} ranks: "
                         f"{err}") from None


def add_layer_arguments(parser: argparse.ArgumentParser) -> None:
    """The layer's options (tokens per rank, sizes, experts, top-k, capacity, skew), for
    this script and :mod:`course_lib.parallel.expert_mesh`'s.

    Chapter 12, *Long sequences and many experts*.
    """
    parser.add_argument("--tokens", type=launch.whole_number(1), default=64,
                        help="tokens per rank")
    parser.add_argument("--hidden", type=launch.whole_number(1), default=16)
    parser.add_argument("--ffn", type=launch.whole_number(1), default=32)
    parser.add_argument("--experts", type=launch.whole_number(1), default=8)
    parser.add_argument("--top-k", type=launch.whole_number(1), default=2)
    parser.add_argument("--capacity-factor", type=float, default=1.0)
    parser.add_argument("--skew", type=float, default=0.0,
                        help="bias the router towards the first experts")


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: the layer spread over the ranks; each rank prints a line.

    Chapter 12, *Long sequences and many experts*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.experts",
        description="A mixture-of-experts layer with its experts spread over the ranks "
                    "(all-to-all dispatch and combine), checked against one process.")
    add_layer_arguments(parser)
    add_check_arguments(parser)
    args = ddp.parse_run_arguments(parser, argv, check_flags)
    r = ep_moe_check(args.tokens, args.hidden, args.ffn, args.experts, args.top_k,
                     args.capacity_factor, args.skew, seed=args.seed, dtype=args.dtype)
    t = r.traffic
    loads = [0] * r.ep
    loads[r.rank] = t.rows_received
    counted = torch.tensor(loads, device="cuda" if dist.get_backend() == "nccl" else "cpu")
    dist.all_reduce(counted)
    launch.say(f"rank {r.rank}/{r.ep}: max |difference| from one process {r.max_gap:.1e}; "
               f"dispatch {t.dispatch_bytes:,} bytes ({t.dispatch_bytes_to_others:,} to "
               f"other ranks; at most {r.bytes_bound:,}), combine {t.combine_bytes:,}; "
               f"{t.dropped} of {t.assignments} assignments dropped; rows received "
               f"{t.rows_received} (imbalance {load_imbalance(counted.tolist()):.2f})")
    return finish_check(r.rank, r.max_gap, args)


if __name__ == "__main__":
    raise SystemExit(main())
