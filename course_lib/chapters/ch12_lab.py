"""Chapter 12, *Long sequences and many experts*: the chapter's lab, two code exercises and a prediction.

The notebook imports this module as ``lab``; each exercise's stub cell calls ``lab.<name>(fn)``.
The merge of two partial attention results is checked against the library's
:func:`course_lib.parallel.context_parallel.merge` (which its ring uses), the all-to-all's split
sizes against :func:`course_lib.parallel.experts.split_sizes` (which its expert-parallel layer
uses), and the prediction against the bytes rank 0 hands to its sends in the pass-KV ring on 2
ranks, forward and backward (:func:`launch_cp`: the chapter's own launch carries its run).
"""

from __future__ import annotations

from typing import Any

import torch

from course_lib.exercises.checker import Case, Exercise, Misconception
from course_lib.exercises.predictions import Prediction
from course_lib.parallel import context_parallel, experts

# -- Exercise 1: the online-softmax merge of two partial attention results ---------------------


def _merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
           lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference: the library's merge, which the pass-KV ring calls at every step."""
    return context_parallel.merge(out_a, lse_a, out_b, lse_b)


def _halves(n_q: int, n_k: int, seed: int, scale: float = 1.0,
            causal: bool = False) -> tuple[torch.Tensor, ...]:
    """Two partial results of one block of queries on two halves of the keys, float64."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(1, 2, n_q, 4, generator=g, dtype=torch.float64) * scale
    k = torch.randn(1, 2, n_k, 4, generator=g, dtype=torch.float64) * scale
    v = torch.randn(1, 2, n_k, 4, generator=g, dtype=torch.float64)
    half = n_k // 2
    q_pos = torch.arange(n_q) if causal else None
    parts = []
    for keys in (slice(0, half), slice(half, n_k)):
        k_pos = torch.arange(n_k)[keys] if causal else None
        parts += context_parallel.attention_block(q, k[:, :, keys], v[:, :, keys], q_pos, k_pos)
    return tuple(parts)


def _merge_cases() -> list[Case]:
    return [Case(_halves(3, 6, 1), "random, two halves of the keys"),
            Case(_halves(5, 4, 2), "random, more queries than keys"),
            Case(_halves(1, 10, 3), "one query row"),
            Case(_halves(4, 8, 4, causal=True),
                 "causal: the first rows see no key of the second half (lse -inf)"),
            Case(_halves(3, 6, 5, scale=30.0),
                 "large scores: exp(lse) overflows float64")]


def _averaged(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
              lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return (out_a + out_b) / 2, torch.logaddexp(lse_a, lse_b)


def _lse_summed(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
                lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    out, _ = context_parallel.merge(out_a, lse_a, out_b, lse_b)
    return out, lse_a + lse_b


def _exp_unshifted(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor,
                   lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = torch.exp(lse_a), torch.exp(lse_b)
    return (a[..., None] * out_a + b[..., None] * out_b) / (a + b)[..., None], torch.log(a + b)


merge = Exercise(
    "merge",
    "Two partial attention results over disjoint sets of keys, each an output (b, h, n, d) and "
    "its log-sum-exp (b, h, n), merged into the result over all the keys: (out, lse).",
    _merge, _merge_cases,
    misconceptions=(
        Misconception("the two outputs averaged",
                      "average the two outputs: each is normalised by its own denominator, so "
                      "each must be weighted by its share exp(lse_x - lse) of the joint one",
                      _averaged),
        Misconception("log-sum-exps added",
                      "add the two log-sum-exps: that multiplies the denominators; the joint "
                      "denominator is their sum, lse = log(exp(lse_a) + exp(lse_b))",
                      _lse_summed),
        Misconception("exp of the log-sum-exps without shifting",
                      "take exp(lse_a) and exp(lse_b) as they are: for large scores they "
                      "overflow to inf and the result is NaN; shift by the larger one first "
                      "(torch.logaddexp does)", _exp_unshifted),
    ),
)


# -- Exercise 2: the all-to-all's split sizes from the router's assignments ---------------------


def _split_sizes(assignments: torch.Tensor, experts_: int, ep: int) -> list[int]:
    """The reference: the library's split sizes, which its expert-parallel layer dispatches by."""
    return experts.split_sizes(assignments, experts_, ep)


def _assignments(n: int, experts_: int, seed: int) -> torch.Tensor:
    return torch.randint(0, experts_, (n,), generator=torch.Generator().manual_seed(seed))


def _split_cases() -> list[Case]:
    return [Case((_assignments(12, 8, 1), 8, 2), "random: 8 experts on 2 ranks"),
            Case((_assignments(20, 8, 2), 8, 4), "8 experts on 4 ranks, 2 each"),
            Case((torch.tensor([0, 1, 1, 0, 2]), 8, 4),
                 "the last two ranks get no rows (a zero each)"),
            Case((_assignments(9, 6, 3), 6, 6), "one expert per rank"),
            Case((_assignments(7, 4, 4), 4, 1), "one rank: everything stays"),
            Case((_assignments(16, 16, 5).view(8, 2), 16, 4),
                 "two experts per token: (T, k) assignments")]


def _round_robin(assignments: torch.Tensor, experts_: int, ep: int) -> list[int]:
    return torch.bincount(assignments.reshape(-1) % ep, minlength=ep).tolist()


def _per_expert(assignments: torch.Tensor, experts_: int, ep: int) -> list[int]:
    return torch.bincount(assignments.reshape(-1), minlength=experts_).tolist()


def _empty_ranks_left_out(assignments: torch.Tensor, experts_: int, ep: int) -> list[int]:
    return torch.bincount(assignments.reshape(-1) // (experts_ // ep)).tolist()


split_sizes = Exercise(
    "split_sizes",
    "Rows this rank sends to each of the ep ranks in the all-to-all's dispatch: a list of ep "
    "whole numbers, from the experts of the rows (any shape), with E / ep contiguous experts "
    "per rank.",
    _split_sizes, _split_cases,
    misconceptions=(
        Misconception("experts dealt round-robin",
                      "send expert e to rank e % ep: the experts are laid out contiguously, "
                      "E / ep per rank, so expert e lives on rank e // (E / ep)", _round_robin),
        Misconception("counted per expert, not per rank",
                      "count the rows of each expert: the all-to-all takes one size per rank, "
                      "the sum over that rank's E / ep experts", _per_expert),
        Misconception("ranks that get nothing left out",
                      "count without minlength: a rank whose experts got no row still needs "
                      "its 0, or every later rank's rows go to the wrong rank",
                      _empty_ranks_left_out),
    ),
)


# -- Prediction: the bytes rank 0 sends in the pass-KV ring, forward and backward ---------------

#: The ring the prediction measures on 2 ranks: a causal, balanced sequence of 256 tokens,
#: 8 query heads and 2 key-value heads of 16 dimensions, float32.
RING_RUN: dict[str, Any] = {"seq_len": 256, "heads": 8, "kv_heads": 2, "head_dim": 16,
                            "dtype": "float32", "causal": True, "balanced": True}
_KEPT: dict[str, context_parallel.CPTraffic] = {}


def launch_cp(runs: list[dict[str, Any]], timeout: float = 120.0
              ) -> list[list[context_parallel.CPCheck]]:
    """The chapter's context-parallel runs on 2 ranks, and the prediction's in the same launch.

    :func:`course_lib.parallel.context_parallel.launch_cp_check` of ``runs`` and
    :data:`RING_RUN`; rank 0's traffic in the latter is kept for :data:`ring_bytes`, the rest
    returned (by rank, then run), so that the page launches once.

    Chapter 12, *Long sequences and many experts*.
    """
    per_rank = context_parallel.launch_cp_check(2, [*runs, RING_RUN], timeout=timeout)
    _KEPT["ring"] = per_rank[0][-1].traffic["ring"]
    return [checks[:-1] for checks in per_rank]


def _ring_bytes() -> dict[str, float]:
    if "ring" not in _KEPT:
        launch_cp([])
    traffic = _KEPT["ring"]
    return {"forward": float(traffic.forward_bytes), "backward": float(traffic.backward_bytes)}


ring_bytes = Prediction(
    "ring_bytes",
    "Bytes rank 0 of 2 hands to its sends in the pass-KV ring for one attention layer: "
    "256 tokens, 8 query heads and 2 key-value heads of 16 dimensions, float32; forward "
    "and backward.",
    _ring_bytes, unit="bytes", rel_tol=0.1, components=True,
    misconceptions=(
        (4.0, "send the blocks of all 8 query heads' K and V: grouped-query attention keeps "
              "2 key-value heads, and only they travel"),
        (0.5, "count the backward as the forward: it passes K and V on again and also "
              "their gradients, the same size, which travel one step more to get home"),
        (1.5, "count cp steps where the ring takes cp - 1: a rank's own block never travels "
              "(only the gradients' last step brings them home)"),
        (2.0, "send the K and V of the whole sequence at each step: a rank holds and passes "
              "on s / cp rows"),
        (8.0, "count bits instead of bytes"),
    ),
)
