"""Chapter 2's memory estimate next to what one rank of a large run measured on a fake
process group (:mod:`course_lib.parallel.at_scale`), category by category, with the ratio
and why they differ.

Chapter 9 sets them side by side for rank 0 of 64 (``benchmarks/at_scale.py`` prints a grid).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from course_lib.numbers import memory
from course_lib.parallel.at_scale import ZERO_STAGE, Layout, RankMemory

__all__ = ["GAPS", "Comparison", "compare"]


@dataclass(frozen=True)
class Comparison:
    """One category of one measurement: chapter 2's estimate, what was measured, their ratio.

    Model states (``parameters``, ``gradients``, ``optimizer states``) are compared at the end
    of the step, ``activations`` when forward ends, ``temporaries`` (the gathered parameters
    with them) and ``total`` at the peak; ``agrees`` is the
    ratio within ``tolerance`` of 1, ``note`` why a known gap is there.

    Used by the library's other modules.
    """

    model: str
    layout: Layout
    category: str
    estimate: float
    measured: float
    tolerance: float
    note: str = ""

    @property
    def ratio(self) -> float:
        """Measured over estimated (inf when the estimate is 0 and something was measured)."""
        if self.estimate == 0:
            return 1.0 if self.measured == 0 else math.inf
        return self.measured / self.estimate

    @property
    def agrees(self) -> bool:
        """Whether the measurement is within the tolerance of the estimate."""
        return abs(self.ratio - 1) <= self.tolerance


#: Why the measurement and chapter 2's estimate differ, by category.
GAPS = {
    "parameters": "FSDP keeps FP32 shards (the master weights); the BF16 copies are gathered "
                  "per unit and freed, so the estimate's 2 + 4 bytes read as 4 at rest",
    "gradients": "with mixed precision FSDP reduces and keeps the sharded gradients in FP32 "
                 "(reduce_dtype), 4 bytes where the estimate counts 2",
    "optimizer states": "AdamW's two FP32 states, 8 bytes per parameter over the sharding ranks",
    "activations": "the estimate counts GPT-2 with dropout and s x s scores; fused attention "
                   "keeps none, Llama's SwiGLU keeps more, and the FP32 logits of the loss",
    "temporaries": "the gathered root unit (embeddings and head, kept whole through forward and "
                   "backward), a gathered block, all-gather and reduce-scatter buffers, and "
                   "gradients of activations in backward; the estimate counts two blocks",
    "total": "the peak: in backward, with the states of the step before and the root gathered",
}


def _estimate(result: RankMemory, estimator: Callable[..., memory.Breakdown]) -> memory.Breakdown:
    layout, s = result.layout, result.shape
    shape = memory.ModelShape(layout.layers or s.n_layers, s.hidden, s.n_heads, s.vocab, 0)
    return estimator(result.n_params, "bf16-mixed" if layout.mixed_precision else "fp32", "adam",
                     batch=layout.micro_batch, seq_len=layout.seq_len, gpus=layout.dp,
                     zero_stage=ZERO_STAGE[layout.strategy], shape=shape,
                     activation_checkpointing=layout.checkpointing)


def compare(results: Sequence[RankMemory], tolerance: float = 0.05,
            estimator: Callable[..., memory.Breakdown] = memory.training_memory) -> list[Comparison]:
    """Chapter 2's estimate next to each measurement, per category, with the ratio.

    ``estimator`` is called as :func:`course_lib.numbers.memory.training_memory` is (the
    parameters measured, ``bf16-mixed`` or ``fp32``, Adam, the micro-batch and sequence, the
    data-parallel ranks as ``gpus``, the strategy's ZeRO stage, the stage's shape); pass another
    to check it. With tensor parallelism the estimate's model states are divided by ``tp`` too
    (Megatron's split; GPT-2's position embedding, kept whole by it, makes the measurement
    higher).
    :data:`GAPS` says why each category differs.

    Used by the library's other modules.
    """
    rows = []
    for r in results:
        b, tp = _estimate(r, estimator), r.layout.tp
        estimates = {"parameters": (b.weights + b.master_weights) / tp,
                     "gradients": b.gradients / tp, "optimizer states": b.optimizer_states / tp,
                     "activations": b.activations, "temporaries": b.temporaries}
        measured = {**{k: r.end[k] for k in list(estimates)[:3]},
                    "activations": r.after_forward["activations"],
                    "temporaries": r.peak["temporaries"] + r.peak["gathered parameters"]}
        estimates["total"], measured["total"] = sum(estimates.values()), r.peak_total
        rows += [Comparison(r.model, r.layout, cat, estimates[cat], measured[cat], tolerance,
                            GAPS[cat]) for cat in estimates]
    return rows
