"""Activation checkpointing in the planner: what a layer keeps for backward, and what it
does again.

The planner (:mod:`course_lib.planner.model`) takes one of four settings
(:data:`~course_lib.planner.inputs.CHECKPOINTING`):

* ``none``: every layer saves chapter 2's activations.
* ``attention``: Megatron-LM's selective recomputation (Korthikanti et al. 2022): a
  layer saves all but attention's core (the scores, their softmax and its dropout mask,
  chapter 2's ``5 a s / h`` term), and backward runs the score and value products and
  that elementwise work again (its scores written once more). Nothing else is redone.
  Fused attention keeps no scores and recomputes them inside its kernel anyway: with it,
  ``attention`` is ``none``.
* ``full``: every layer keeps its input and runs its forward pass again in backward:
  ``2 N`` FLOPs per token more, attention's products, the memory-bound work (every saved
  activation written once more) and tensor parallelism's collectives (six all-reduces per
  layer instead of four).
* ``selective``: torchtitan's op-level policy
  (:mod:`course_lib.parallel.selective_checkpointing` cites it). A layer keeps its input
  and the outputs of every second matrix product of the block (Llama's wq, wv, w1 and w2,
  whose output is whole on every tensor-parallel GPU before its reduction; GPT's fused
  query-key-value product and the MLP's first), fused attention's output and sequence
  parallelism's two reduce-scatters; SDPA's log-sum-exp is left out, as chapter 2 leaves
  it out. In backward it recomputes the other products (Llama's wk, wo and w3: ``(r + 1 +
  m) / (2 + 2 r + 3 m)`` of a layer's products, ``r`` the key-value heads per head and
  ``m`` the MLP's width over ``h``; GPT's output projection and second MLP product, ``5 /
  (10 + 2 r)``), the norms and the elementwise work (the activations it does not keep
  are written once more), but not fused attention, whose output it keeps; unfused, the
  scores' products are recomputed. Of tensor parallelism's collectives it redoes one
  all-reduce's worth per layer: with sequence parallelism the two all-gathers before
  attention and the MLP (each half an all-reduce; the reduce-scatters are kept), without
  it the all-reduce after attention (torch's non-reentrant checkpoint stops recomputing
  at the MLP's last product, the last whose inputs backward needs, before its
  all-reduce). Context parallelism's gathers of K and V and expert parallelism's
  all-to-alls are redone as with full checkpointing. A mixture's layers are counted as a
  dense layer's, as their activations are.

:data:`COLLECTIVE_PASSES` says once, for every setting, how many of each collective a
layer runs per micro-batch; the JavaScript twin reads the same table.

The bytes are checked against a measurement: Hugging Face's Llama and GPT-2 on fake
ranks with the policy applied per layer (``tests/test_planner_checkpointing.py``).

Chapter 11, *Beyond data parallelism: tensor and pipeline parallelism*.
"""

from __future__ import annotations

from course_lib.numbers import memory
from course_lib.planner.inputs import Setup

__all__ = ["COLLECTIVE_PASSES", "collective_passes", "kept_per_layer", "recomputed_share",
           "recomputed_writes", "recomputes_attention", "saved_per_layer",
           "selective_widths"]

#: Collectives per layer and micro-batch, by checkpointing setting: tensor parallelism's
#: all-reduces (or their all-gathers and reduce-scatters), context parallelism's
#: all-gathers of K and V with the reduce-scatter of their gradients, and expert
#: parallelism's all-to-alls (two forward, two backward). A recomputed forward pass
#: repeats the forward's.
COLLECTIVE_PASSES: dict[str, dict[str, int]] = {
    "tp": {"none": 4, "attention": 4, "full": 6, "selective": 5},
    "cp": {"none": 2, "attention": 3, "full": 3, "selective": 3},
    "ep": {"none": 4, "attention": 4, "full": 6, "selective": 6},
}


def collective_passes(s: Setup, group: str) -> int:
    """How many of ``group``'s collectives ("tp", "cp" or "ep") a layer runs per
    micro-batch under ``s``'s checkpointing (:data:`COLLECTIVE_PASSES`).

    Used by the library's other modules.
    """
    return COLLECTIVE_PASSES[group][s.checkpointing]


def saved_per_layer(s: Setup, scores: bool | None = None) -> float:
    """Bytes one layer saves for backward per micro-batch on one GPU without
    checkpointing (chapter 2's estimate for the model's key-value heads and MLP, split by
    tensor parallelism: all of it with sequence parallelism, else all but the norms' and
    projections' inputs and dropout's masks); ``scores`` False leaves attention's core out
    (None: unless attention is fused).

    Used by the library's other modules.
    """
    e = memory.PRECISIONS[s.precision].activation_bytes
    scores = not s.flash_attention if scores is None else scores
    # Context parallelism: s / c positions, whose queries score all s keys (s^2 / c).
    return memory.activation_bytes_per_tp_rank(
        s.seq_len, s.micro_batch, s.hidden, s.heads, s.tp, s.sequence_parallel, e, 1,
        s.dropout, scores, kv_heads=s.kv_heads, mlp=s.mlp) / s.cp


def selective_widths(s: Setup) -> tuple[float, float]:
    """What torchtitan's policy keeps per token of a layer on one GPU, in elements of
    ``e`` bytes: the part a layer saves without checkpointing too (its input, the kept
    products' outputs, fused attention's output) and the part it keeps beyond (Llama's
    last product, whole before its reduction; sequence parallelism's reduce-scatters).

    Used by the library's other modules.
    """
    h, t = s.hidden, s.tp
    r = s.kv_heads / s.heads
    if s.mlp:  # Llama: wq, wv and w1 split t ways; w2 whole
        products, beyond = h + h * r + s.mlp, float(h)
    else:  # GPT: the fused query-key-value product and the 4h-wide first MLP product
        products, beyond = h * (1 + 2 * r) + 4 * h, 0.0
    attention = h if s.flash_attention else 0
    if s.sequence_parallel and t > 1:
        beyond += 2 * h / t
    split = t if s.sequence_parallel else 1  # the input, as chapter 2's norms' inputs
    return h / split + (products + attention) / t, beyond


def _bytes(s: Setup, width: float) -> float:
    """Bytes of ``width`` elements per token of a micro-batch on one GPU."""
    e = memory.PRECISIONS[s.precision].activation_bytes
    return s.seq_len * s.micro_batch * width * e / s.cp


def kept_per_layer(s: Setup) -> float:
    """Bytes a layer keeps for backward per micro-batch on one GPU: all it saves (none),
    all but attention's core (attention), its input, split by tensor parallelism only
    with sequence parallelism (full), or all that torchtitan's policy keeps (selective).

    Used by the library's other modules.
    """
    if s.checkpointing in ("none", "attention"):
        return saved_per_layer(s, s.checkpointing == "none" and not s.flash_attention)
    if s.checkpointing == "full":
        return _bytes(s, s.hidden / (s.tp if s.sequence_parallel else 1))
    return _bytes(s, sum(selective_widths(s)))


def recomputed_writes(s: Setup) -> float:
    """Bytes per layer and micro-batch that a recomputed forward pass writes to HBM once
    more: none (none), attention's core (attention), every saved activation (full), those
    torchtitan's policy saves without keeping them here (selective).

    Used by the library's other modules.
    """
    if s.checkpointing in ("none", "attention"):
        return saved_per_layer(s) - kept_per_layer(s)
    if s.checkpointing == "full":
        return saved_per_layer(s)
    return saved_per_layer(s) - _bytes(s, selective_widths(s)[0])


def recomputed_share(s: Setup) -> float:
    """The share of a layer's matrix products that backward runs again: 0, 1 (full) or
    the products torchtitan's policy does not keep (selective).

    Used by the library's other modules.
    """
    if s.checkpointing != "selective":
        return 1.0 if s.checkpointing == "full" else 0.0
    r = s.kv_heads / s.heads
    if s.mlp:  # wk, wo and w3 of wq, wk, wv, wo, w1, w3 and w2
        m = s.mlp / s.hidden
        return (r + 1 + m) / (2 + 2 * r + 3 * m)
    return 5 / (10 + 2 * r)  # the output projection and the MLP's second product


def recomputes_attention(s: Setup) -> bool:
    """Whether backward runs attention's products again: with full checkpointing, and
    with attention or selective unless attention is fused (its kernel recomputes the
    scores itself; selective keeps its output).

    Used by the library's other modules.
    """
    return s.checkpointing == "full" or (s.checkpointing in ("attention", "selective")
                                         and not s.flash_attention)
