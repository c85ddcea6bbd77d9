"""Context parallelism: attention over a sequence split across ranks, two ways; also a script.

Chapter 12, *Long sequences and many experts*, splits one long sequence across the ``cp`` ranks
of a context-parallel group: each rank holds the queries, keys and values of ``s / cp`` of the
positions, and everything but attention works on its own rows. Attention needs every key and
value for every query, and two schedules bring them:

* **all-gather of K and V** (:func:`allgather_attention`), what Llama 3 did for its 128K stage
  (Dubey et al. 2024, section 3.3.2): with grouped-query attention K and V have ``n_kv`` heads
  where Q has ``n_heads`` (8 against 128 in Llama 3 405B), so gathering them is cheap, and each
  rank then runs ordinary attention for its own queries. The gradient of the gathered K and V
  goes back by a reduce-scatter.
* **the pass-KV ring** (:func:`ring_attention`, Liu et al. 2023, "Ring Attention"): ``cp``
  steps; at each, a rank computes its queries against the K/V block it holds while it sends
  that block to its right-hand neighbour and receives the next from its left. The partial
  results of the blocks are merged by their log-sum-exp (:func:`merge`, the online softmax of
  Milakov and Gimelshein 2018), so the result is exact. The backward pass runs the ring
  again, the gradients of K and V travelling with their block until they are home.

Either way a rank sends ``(cp - 1) * 2 * (s / cp) * n_kv * d_head * e`` bytes per layer in the
forward pass (:func:`kv_bytes_per_rank`).

With a causal mask, the rank holding the first positions has almost nothing to compute and the
one holding the last does ``cp`` blocks. Load balancing (``balanced=True``) cuts the sequence
into ``2 cp`` chunks and gives rank ``r`` chunks ``r`` and ``2 cp - 1 - r``: every rank then
computes ``2 cp + 1`` score blocks of ``(s / 2cp)^2`` (:func:`causal_work`).

:func:`cp_attention_check` runs inside each rank (start it with :func:`launch_cp_check`, which
checks the degrees before any rank starts): both schedules, in float64, against one process's
``scaled_dot_product_attention``, forward and gradients. The module is also the torchrun entry
point (NCCL on GPUs)::

    torchrun --nproc-per-node=4 -m course_lib.parallel.context_parallel --seq-len 64 --check
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

from course_lib.parallel import ddp, launch, wire
from course_lib.parallel.tensor_parallel_communications import (all_gather_sequence,
                                                                 reduce_scatter_sequence)

__all__ = ["CPCheck", "CPTraffic", "GatherSequence", "RingAttention",
           "add_check_arguments", "allgather_attention", "attention_block",
           "attention_block_backward", "causal_work", "check_cp_degree",
           "cp_attention_check", "finish_check", "kv_bytes_per_rank", "launch_cp_check",
           "load_imbalance", "main", "merge", "rank_chunks", "rank_positions",
           "ring_attention", "run_many"]

Group = Any  # a torch.distributed ProcessGroup, or None for the whole world
#: The largest gap from one process that ``--check`` accepts, by dtype.
TOLERANCE = {"float64": 1e-10, "float32": 1e-4}


def check_cp_degree(seq_len: int, cp: int, balanced: bool) -> None:
    """Refuse a sequence that does not cut into ``cp`` (or ``2 cp`` balanced) equal chunks.

    Chapter 12, *Long sequences and many experts*.
    """
    if isinstance(cp, bool) or not isinstance(cp, int) or cp < 1:
        raise ValueError(f"the context-parallel degree must be a whole number >= 1, got {cp!r}.")
    chunks = 2 * cp if balanced else cp
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < chunks \
            or seq_len % chunks:
        how = f"2 x {cp} mirrored chunks (load balancing)" if balanced else f"{cp} chunks"
        raise ValueError(f"a sequence of {seq_len!r} tokens does not cut into {how}; use a "
                         f"sequence length that is a multiple of {chunks}"
                         + (", or balanced=False." if balanced else "."))


def rank_chunks(rank: int, cp: int, balanced: bool) -> list[int]:
    """The chunks of the sequence that ``rank`` holds: ``[r]``, or ``[r, 2 cp - 1 - r]`` balanced.

    Chapter 12, *Long sequences and many experts*.
    """
    return [rank, 2 * cp - 1 - rank] if balanced else [rank]


def rank_positions(rank: int, cp: int, seq_len: int, balanced: bool) -> torch.Tensor:
    """The positions (token indices) that ``rank`` holds, in its local order.

    Chapter 12, *Long sequences and many experts*.
    """
    check_cp_degree(seq_len, cp, balanced)
    size = seq_len // (2 * cp if balanced else cp)
    return torch.cat([torch.arange(i * size, (i + 1) * size)
                      for i in rank_chunks(rank, cp, balanced)])


def causal_work(seq_len: int, cp: int, causal: bool = True, balanced: bool = False) -> list[int]:
    """Attention scores each rank computes: the blocks a causal mask does not empty, in full.

    A block is one chunk of queries against one chunk of keys; a block on the diagonal is
    computed whole and then masked. Without load balancing rank ``r`` computes ``r + 1``
    blocks of ``(s / cp)^2``; with it every rank computes ``2 cp + 1`` of ``(s / 2cp)^2``.

    Chapter 12, *Long sequences and many experts*.
    """
    check_cp_degree(seq_len, cp, balanced)
    n = 2 * cp if balanced else cp
    size = seq_len // n
    work = []
    for rank in range(cp):
        blocks = sum(1 for i in rank_chunks(rank, cp, balanced) for j in range(n)
                     if not causal or j <= i)
        work.append(blocks * size * size)
    return work


def load_imbalance(loads: Sequence[float]) -> float:
    """The busiest rank's load over the mean: 1 when balanced, ``cp`` when one rank does all.

    Chapter 12, *Long sequences and many experts*.
    """
    if not loads or min(loads) < 0 or sum(loads) == 0:
        raise ValueError(f"loads must be numbers >= 0, not all zero; got {list(loads)!r}.")
    return max(loads) / (sum(loads) / len(loads))


def kv_bytes_per_rank(seq_len: int, cp: int, kv_heads: int, head_dim: int, element: int,
                      batch: int = 1) -> int:
    """Bytes a rank sends per layer, forward: ``(cp - 1) * 2 * (s / cp) * n_kv * d_head * e``.

    The same for the pass-KV ring (``cp - 1`` steps, each one K/V block) and for a ring
    all-gather of K and V; ``batch`` sequences send ``batch`` times as much.

    Chapter 12, *Long sequences and many experts*.
    """
    return (cp - 1) * 2 * (seq_len // cp) * kv_heads * head_dim * element * batch


def _expand(kv: torch.Tensor, heads: int) -> torch.Tensor:
    """Grouped-query attention: K or V heads repeated so that query head i reads i // group."""
    return kv.repeat_interleave(heads // kv.shape[1], dim=1)


def _fold(grad: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """The gradient of :func:`_expand`: each K/V head sums the query heads that read it."""
    b, h, n, d = grad.shape
    return grad.view(b, kv_heads, h // kv_heads, n, d).sum(2)


def _scores(q: torch.Tensor, k: torch.Tensor, q_pos: torch.Tensor | None,
            k_pos: torch.Tensor | None) -> torch.Tensor:
    s = q @ _expand(k, q.shape[1]).transpose(-2, -1) / math.sqrt(q.shape[-1])  # (b, h, nq, nk)
    if q_pos is not None:  # causal: a query sees the keys at its position and before
        s = s.masked_fill(k_pos[None, :] > q_pos[:, None], -math.inf)
    return s


def attention_block(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    q_pos: torch.Tensor | None = None,
                    k_pos: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention of a block of queries on a block of keys: the output and its log-sum-exp.

    ``q`` is ``(batch, heads, n_q, d)``, ``k`` and ``v`` ``(batch, kv_heads, n_k, d)``
    (grouped-query attention when ``kv_heads < heads``). With positions the mask is causal.
    ``lse`` ``(batch, heads, n_q)`` is the log of each row's softmax denominator: what
    :func:`merge` needs to combine this block's output with another's. A row that sees no key
    gets output 0 and log-sum-exp -inf.

    Chapter 12, *Long sequences and many experts*.
    """
    s = _scores(q, k, q_pos, k_pos)
    lse = torch.logsumexp(s, dim=-1)  # (b, h, n_q)
    finite = lse.masked_fill(torch.isinf(lse), 0.0)
    out = torch.exp(s - finite[..., None]) @ _expand(v, q.shape[1])
    return out, lse


def merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
          lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two partial attention results over disjoint keys merged into the result over all of them.

    Each output is a weighted mean of its values, normalised by its own denominator
    ``exp(lse)``; over both sets of keys the denominator is the sum, so each part is weighted
    by its share of it: ``lse = log(exp(lse_a) + exp(lse_b))``,
    ``out = exp(lse_a - lse) out_a + exp(lse_b - lse) out_b``. The online softmax.

    Chapter 12, *Long sequences and many experts*.
    """
    lse = torch.logaddexp(lse_a, lse_b)
    out = torch.exp(lse_a - lse)[..., None] * out_a + torch.exp(lse_b - lse)[..., None] * out_b
    return out, lse


def attention_block_backward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             out: torch.Tensor, lse: torch.Tensor, dout: torch.Tensor,
                             q_pos: torch.Tensor | None = None,
                             k_pos: torch.Tensor | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradients of one block, from the final output and log-sum-exp of its query rows.

    FlashAttention's backward (Dao et al. 2022): the block's probabilities are
    ``P = exp(S - lse)`` with the *final* ``lse``; ``dV = P^T dO``, ``dP = dO V^T``,
    ``dS = P * (dP - D)`` with ``D = rowsum(dO * O)``, ``dQ = dS K / sqrt(d)``,
    ``dK = dS^T Q / sqrt(d)``. Summed over the blocks of a row, this is the gradient of the
    whole attention, so a ring can compute it one block at a time.

    Chapter 12, *Long sequences and many experts*.
    """
    heads, kv_heads, scale = q.shape[1], k.shape[1], 1 / math.sqrt(q.shape[-1])
    p = torch.exp(_scores(q, k, q_pos, k_pos) - lse[..., None])  # (b, h, n_q, n_k)
    dv = p.transpose(-2, -1) @ dout
    dp = dout @ _expand(v, heads).transpose(-2, -1)
    ds = p * (dp - (dout * out).sum(-1, keepdim=True))
    dq = ds @ _expand(k, heads) * scale
    dk = ds.transpose(-2, -1) @ q * scale
    return dq, _fold(dk, kv_heads), _fold(dv, kv_heads)


@dataclass
class CPTraffic:
    """What one rank did in context-parallel attention: bytes it sent, scores it computed.

    ``forward_bytes`` and ``backward_bytes`` are what this rank sent (the ring: counted per
    send; the all-gather: what a ring collective sends, :func:`course_lib.parallel.wire.
    ring_sent`); ``score_elements`` the attention scores it computed in the forward pass.

    Chapter 12, *Long sequences and many experts*.
    """

    forward_bytes: int = 0
    backward_bytes: int = 0
    score_elements: int = 0


class GatherSequence(torch.autograd.Function):
    """All-gather along the sequence (dimension 3 of a stacked K/V) forward, reduce-scatter back.

    Chapter 12, *Long sequences and many experts*.
    """

    @staticmethod
    def forward(ctx: Any, kv: torch.Tensor, group: Group = None,
                traffic: CPTraffic | None = None) -> torch.Tensor:
        """Every rank's ``(2, b, kv_heads, s / cp, d)`` block, joined in rank order."""
        ctx.group, ctx.traffic = group, traffic
        cp = dist.get_world_size(group)
        if traffic is not None:
            traffic.forward_bytes += int(wire.ring_sent("all-gather", cp * _nbytes(kv), cp))
        return all_gather_sequence(kv.transpose(1, 3), group).transpose(1, 3)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        """This rank's block's gradient, summed over the ranks whose queries read it."""
        cp = dist.get_world_size(ctx.group)
        if ctx.traffic is not None:
            backend = dist.get_backend(ctx.group)
            ctx.traffic.backward_bytes += int(wire.ring_sent(
                "reduce-scatter", _nbytes(grad), cp, backend))
        return reduce_scatter_sequence(grad.transpose(1, 3), ctx.group).transpose(1, 3), \
            None, None


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _chunk(t: torch.Tensor, a: int, size: int) -> torch.Tensor:
    """Local chunk ``a`` of a ``(..., n, d)`` tensor (the sequence is the second last axis)."""
    return t[..., a * size:(a + 1) * size, :]


def _positions(chunk: int, size: int, causal: bool, device: torch.device) -> torch.Tensor | None:
    return torch.arange(chunk * size, (chunk + 1) * size, device=device) if causal else None


def allgather_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                        balanced: bool = False, group: Group = None,
                        traffic: CPTraffic | None = None) -> torch.Tensor:
    """Attention of this rank's queries after an all-gather of every rank's K and V (Llama 3).

    ``q`` ``(b, heads, s / cp, d)``, ``k`` and ``v`` ``(b, kv_heads, s / cp, d)``: this rank's
    rows, laid out by :func:`rank_positions`. Each of its query chunks reads the keys it may
    see (causal: those at or before its last position), in one softmax.

    Chapter 12, *Long sequences and many experts*.
    """
    cp, rank = dist.get_world_size(group), dist.get_rank(group)
    mine = rank_chunks(rank, cp, balanced)
    size = q.shape[2] // len(mine)
    full = GatherSequence.apply(torch.stack([k, v]), group, traffic)  # (2, b, n_kv, s, d)
    k_pos = torch.cat([rank_positions(r, cp, size * len(mine) * cp, balanced)
                       for r in range(cp)]).to(q.device)  # the gathered rows' positions
    outs = []
    for a, i in enumerate(mine):
        seen = (k_pos < (i + 1) * size) if causal else torch.ones_like(k_pos, dtype=torch.bool)
        keys = seen.nonzero().squeeze(1)
        out, _ = attention_block(_chunk(q, a, size), full[0].index_select(2, keys),
                                 full[1].index_select(2, keys),
                                 _positions(i, size, causal, q.device),
                                 k_pos[keys] if causal else None)
        outs.append(out)
        if traffic is not None:
            traffic.score_elements += out.shape[0] * out.shape[1] * size * len(keys)
    return torch.cat(outs, dim=2)


def _peer(group: Group, rank: int) -> int:
    return rank if group is None else dist.get_global_rank(group, rank)


def _pass_right(send: torch.Tensor, receive: torch.Tensor, group: Group) -> list[Any]:
    """Start sending ``send`` to the right-hand neighbour and receiving ``receive`` from the left."""
    cp, rank = dist.get_world_size(group), dist.get_rank(group)
    return dist.batch_isend_irecv([
        dist.P2POp(dist.isend, send, _peer(group, (rank + 1) % cp), group),
        dist.P2POp(dist.irecv, receive, _peer(group, (rank - 1) % cp), group)])


def _pairs(rank: int, source: int, cp: int, balanced: bool,
           causal: bool) -> list[tuple[int, int, int, int]]:
    """(my local chunk, my chunk, its local chunk, its chunk) of every block not masked out."""
    return [(a, i, b, j) for a, i in enumerate(rank_chunks(rank, cp, balanced))
            for b, j in enumerate(rank_chunks(source, cp, balanced)) if not causal or j <= i]


class RingAttention(torch.autograd.Function):
    """The pass-KV ring, forward and backward written out (see :func:`ring_attention`).

    Chapter 12, *Long sequences and many experts*.
    """

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool,
                balanced: bool, group: Group, traffic: CPTraffic | None) -> torch.Tensor:
        """``cp`` steps: merge this block's partial result while the next block arrives."""
        cp, rank = dist.get_world_size(group), dist.get_rank(group)
        traffic = traffic if traffic is not None else CPTraffic()
        size = q.shape[2] // len(rank_chunks(rank, cp, balanced))
        state: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}  # local chunk -> (out, lse)
        kv = torch.stack([k, v])  # one message a step: (2, b, n_kv, s / cp, d)
        for step in range(cp):
            source = (rank - step) % cp
            if step < cp - 1:  # the next block travels while this one is computed
                incoming = torch.empty_like(kv)
                requests = _pass_right(kv, incoming, group)
                traffic.forward_bytes += _nbytes(kv)
            for a, i, b, j in _pairs(rank, source, cp, balanced, causal):
                block = attention_block(_chunk(q, a, size), _chunk(kv[0], b, size),
                                        _chunk(kv[1], b, size),
                                        _positions(i, size, causal, q.device),
                                        _positions(j, size, causal, q.device))
                state[a] = merge(*state[a], *block) if a in state else block
                traffic.score_elements += q.shape[0] * q.shape[1] * size * size
            if step < cp - 1:
                for request in requests:
                    request.wait()
                kv = incoming
        out = torch.cat([state[a][0] for a in sorted(state)], dim=2)
        lse = torch.cat([state[a][1] for a in sorted(state)], dim=2)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.settings = (causal, balanced, group, traffic, size)
        return out

    @staticmethod
    def backward(ctx: Any, dout: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The ring again: each K/V block's gradient travels with it, then one step home."""
        q, k, v, out, lse = ctx.saved_tensors
        causal, balanced, group, traffic, size = ctx.settings
        cp, rank = dist.get_world_size(group), dist.get_rank(group)
        dout = dout.contiguous()
        dq = torch.zeros_like(q)
        kv = torch.stack([k, v])
        dkv, pending = None, []  # the gradient of the block this rank holds, on its way
        for step in range(cp):
            source = (rank - step) % cp
            if step < cp - 1:
                incoming = torch.empty_like(kv)
                kv_requests = _pass_right(kv, incoming, group)
                traffic.backward_bytes += _nbytes(kv)
            part = torch.zeros_like(kv)
            for a, i, b, j in _pairs(rank, source, cp, balanced, causal):
                qa, outa, lsea, douta = (_chunk(q, a, size), _chunk(out, a, size),
                                         lse[..., a * size:(a + 1) * size],
                                         _chunk(dout, a, size))
                dqa, dkb, dvb = attention_block_backward(
                    qa, _chunk(kv[0], b, size), _chunk(kv[1], b, size), outa, lsea, douta,
                    _positions(i, size, causal, q.device), _positions(j, size, causal, q.device))
                _chunk(dq, a, size).add_(dqa)
                _chunk(part[0], b, size).add_(dkb)
                _chunk(part[1], b, size).add_(dvb)
            for request in pending:  # the gradient that the left neighbour passed on
                request.wait()
            dkv = part if dkv is None else dkv + part
            if cp > 1:  # pass it on; after the last step it reaches the block's owner
                arriving = torch.empty_like(dkv)
                pending = _pass_right(dkv, arriving, group)
                traffic.backward_bytes += _nbytes(dkv)
            if step < cp - 1:
                for request in kv_requests:
                    request.wait()
                kv, dkv = incoming, arriving
        for request in pending:
            request.wait()
        if cp > 1:
            dkv = arriving
        return dq, dkv[0], dkv[1], None, None, None, None


def ring_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = True,
                   balanced: bool = False, group: Group = None,
                   traffic: CPTraffic | None = None) -> torch.Tensor:
    """Attention of this rank's queries by the pass-KV ring, merging blocks by log-sum-exp.

    Shapes as :func:`allgather_attention`. At step ``t`` a rank holds the K/V of rank
    ``r - t``, sends it on (``dist.batch_isend_irecv``) and, before waiting for the next,
    computes its query chunks against the chunks of that block a causal mask leaves, merging
    each into its running output (:func:`merge`). ``traffic`` (a :class:`CPTraffic`) counts
    the bytes sent and scores computed.

    Chapter 12, *Long sequences and many experts*.
    """
    return RingAttention.apply(q, k, v, causal, balanced, group, traffic)


@dataclass(frozen=True)
class CPCheck:
    """One rank's check of both schedules against one process (:func:`cp_attention_check`).

    ``gaps`` maps "all-gather" and "ring" to the largest absolute differences from
    ``scaled_dot_product_attention`` on the whole sequence, of the output and of the
    gradients of q, k and v (this rank's rows); ``traffic`` maps them to what the rank sent
    and computed (:class:`CPTraffic`). ``bytes_formula`` is :func:`kv_bytes_per_rank`,
    ``work_formula`` this rank's :func:`causal_work` (times batch and heads).
    ``activation_bytes`` is what this rank holds of q, k, v and an output-sized tensor,
    ``single_activation_bytes`` one process's: ``cp`` times as much.

    Chapter 12, *Long sequences and many experts*.
    """

    rank: int
    cp: int
    causal: bool
    balanced: bool
    gaps: dict[str, dict[str, float]]
    traffic: dict[str, CPTraffic]
    bytes_formula: int
    work_formula: int
    activation_bytes: int
    single_activation_bytes: int

    @property
    def max_gap(self) -> float:
        """The largest gap of any schedule, output or gradient."""
        return max(g for gaps in self.gaps.values() for g in gaps.values())


def cp_attention_check(seq_len: int = 32, heads: int = 4, kv_heads: int = 2, head_dim: int = 8,
                       batch: int = 1, causal: bool = True, balanced: bool = True,
                       seed: int = 0, dtype: str = "float64") -> CPCheck:
    """Worker: both schedules on this rank's part of a sequence, against one process.

    Every rank draws the same whole q, k, v and the weights ``w`` of the loss
    ``sum(w * attention)``, computes one process's attention and gradients with PyTorch's
    ``scaled_dot_product_attention`` (``enable_gqa``), then its own rows by
    :func:`allgather_attention` and by :func:`ring_attention`, and compares.

    Chapter 12, *Long sequences and many experts*.
    """
    worker = launch.init_worker()
    cp, rank = worker.world_size, worker.rank
    check_cp_degree(seq_len, cp, balanced)
    kind = {"float64": torch.float64, "float32": torch.float32}[dtype]
    draw = torch.Generator().manual_seed(seed)
    shapes = {"q": (batch, heads, seq_len, head_dim), "k": (batch, kv_heads, seq_len, head_dim),
              "v": (batch, kv_heads, seq_len, head_dim)}
    whole = {n: torch.randn(s, generator=draw).to(worker.device, kind) for n, s in shapes.items()}
    w = torch.randn(shapes["q"], generator=draw).to(worker.device, kind)
    leaves = {n: t.clone().requires_grad_() for n, t in whole.items()}
    single = F.scaled_dot_product_attention(*leaves.values(), is_causal=causal, enable_gqa=True)
    (single * w).sum().backward()
    rows = rank_positions(rank, cp, seq_len, balanced).to(worker.device)
    expected = {"output": single.detach()[:, :, rows]}
    expected.update({f"grad {n}": t.grad[:, :, rows] for n, t in leaves.items()})
    gaps, traffics = {}, {}
    for name, schedule in (("all-gather", allgather_attention), ("ring", ring_attention)):
        mine = {n: t[:, :, rows].clone().requires_grad_() for n, t in whole.items()}
        traffic = CPTraffic()
        out = schedule(*mine.values(), causal=causal, balanced=balanced, traffic=traffic)
        (out * w[:, :, rows]).sum().backward()
        got = {"output": out.detach(), **{f"grad {n}": t.grad for n, t in mine.items()}}
        gaps[name] = {n: float((got[n] - expected[n]).abs().max()) for n in expected}
        traffics[name] = traffic
    element = whole["q"].element_size()
    held = sum(_nbytes(t[:, :, rows]) for t in whole.values()) + _nbytes(w[:, :, rows])
    return CPCheck(rank, cp, causal, balanced, gaps, traffics,
                   kv_bytes_per_rank(seq_len, cp, kv_heads, head_dim, element, batch),
                   causal_work(seq_len, cp, causal, balanced)[rank] * batch * heads,
                   held, sum(_nbytes(t) for t in whole.values()) + _nbytes(w))


def run_many(runs: list[dict[str, Any]]) -> list[CPCheck]:
    """Worker: several :func:`cp_attention_check` runs in one process group.

    Chapter 12, *Long sequences and many experts*.
    """
    return [cp_attention_check(**run) for run in runs]


def launch_cp_check(nprocs: int = 2, runs: list[dict[str, Any]] | None = None,
                    timeout: float = 120.0, echo: bool = False) -> list[list[CPCheck]]:
    """Check every run's degrees, then run them all on ``nprocs`` ranks; results by rank, run.

    Each run is a dictionary of :func:`cp_attention_check`'s arguments; a sequence that does
    not cut into the ranks' chunks is refused here, before any rank starts.

    Chapter 12, *Long sequences and many experts*.
    """
    runs = runs if runs is not None else [{}]
    for run in runs:
        check_cp_degree(run.get("seq_len", 32), nprocs, run.get("balanced", True))
        heads, kv_heads = run.get("heads", 4), run.get("kv_heads", 2)
        if heads % kv_heads:
            raise ValueError(f"heads ({heads}) must be a multiple of kv_heads ({kv_heads}): "
                             "each K/V head serves a whole group of query heads.")
    return launch.launch(f"{__name__}:run_many", nprocs, {"runs": runs}, timeout=timeout,
                         echo=echo)


def check_flags(args: argparse.Namespace, world_size: int) -> None:
    """Refuse flags that do not split across torchrun's ranks, naming them.

    Chapter 12, *Long sequences and many experts*.
    """
    try:
        check_cp_degree(args.seq_len, world_size, not args.unbalanced)
    except ValueError as err:
        why = str(err).replace("balanced=False", "--unbalanced")
        raise ValueError(f"--seq-len {args.seq_len} on {world_size} ranks: {why}") from None
    if args.heads % args.kv_heads:
        raise ValueError(f"--heads {args.heads} is not a multiple of --kv-heads "
                         f"{args.kv_heads}; each K/V head serves a group of query heads.")


def main(argv: Sequence[str] | None = None) -> int:
    """The torchrun entry point: both schedules on the ranks; each rank prints a line.

    Chapter 12, *Long sequences and many experts*.
    """
    parser = launch.RankArgumentParser(
        prog="torchrun --nproc-per-node=N -m course_lib.parallel.context_parallel",
        description="Attention over a sequence split across the ranks (all-gather of K/V "
                    "and the pass-KV ring), checked against one process.")
    parser.add_argument("--seq-len", type=launch.whole_number(1), default=64)
    parser.add_argument("--heads", type=launch.whole_number(1), default=8)
    parser.add_argument("--kv-heads", type=launch.whole_number(1), default=2)
    parser.add_argument("--head-dim", type=launch.whole_number(1), default=16)
    parser.add_argument("--batch", type=launch.whole_number(1), default=1)
    parser.add_argument("--no-causal", action="store_true", help="attend to every position")
    parser.add_argument("--unbalanced", action="store_true",
                        help="one chunk per rank instead of two mirrored ones")
    add_check_arguments(parser)
    args = ddp.parse_run_arguments(parser, argv, check_flags)
    r = cp_attention_check(args.seq_len, args.heads, args.kv_heads, args.head_dim, args.batch,
                           not args.no_causal, not args.unbalanced, args.seed, args.dtype)
    ring, gather = r.traffic["ring"], r.traffic["all-gather"]
    launch.say(f"rank {r.rank}/{r.cp}: max |difference| from one process: all-gather "
               f"{max(r.gaps['all-gather'].values()):.1e}, ring "
               f"{max(r.gaps['ring'].values()):.1e}; ring sent {ring.forward_bytes:,} bytes "
               f"forward (formula {r.bytes_formula:,}), all-gather {gather.forward_bytes:,}; "
               f"{ring.score_elements:,} scores computed (formula {r.work_formula:,})")
    return finish_check(r.rank, r.max_gap, args)


def add_check_arguments(parser: argparse.ArgumentParser) -> None:
    """The options chapter 12's scripts share: ``--dtype``, ``--seed`` and ``--check``.

    Chapter 12, *Long sequences and many experts*.
    """
    parser.add_argument("--dtype", choices=tuple(TOLERANCE), default="float64")
    parser.add_argument("--seed", type=launch.whole_number(0), default=0)
    parser.add_argument("--check", action="store_true", help="exit 1 on a gap over tolerance")


def finish_check(rank: int, gap: float, args: argparse.Namespace) -> int:
    """Leave the group; exit code 1 (said) when ``--check`` finds ``gap`` over tolerance.

    Chapter 12, *Long sequences and many experts*.
    """
    passed = not args.check or gap <= TOLERANCE[args.dtype]
    if not passed:
        launch.say(f"rank {rank}: check failed, a gap is over {TOLERANCE[args.dtype]:g}")
    launch.shutdown()
    return 0 if passed else 1


if __name__ == "__main__":
    raise SystemExit(main())
