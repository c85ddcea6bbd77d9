"""Chapter 2, *The memory wall*: the chapter's table of measured against estimated bytes, its plot of
memory per parameter, and its exercises."""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING, Sequence

import matplotlib.pyplot as plt

from course_lib.base import diagrams
from course_lib.base.plots import COMPONENT_COLOURS, use_course_style
from course_lib.exercises.questions import Question
from course_lib.numbers import memory, memory_meter

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _min_gpus_zero3_model_states(n_params: float, capacity: float) -> float:
    n = 1
    while memory.training_memory(n_params, "bf16-mixed", "adam", gpus=n, zero_stage=3).model_states > capacity:
        n += 1
    return n


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "How many GB (10^9 bytes) do the weights of a 13B-parameter model take in bf16?",
        lambda: memory.gb(memory.weight_memory(13e9, "bf16")),
        unit="GB",
        hint="parameters x bytes per parameter; bf16 takes 2 bytes.",
    ),
    q2=Question(
        "With mixed-precision Adam (bf16-mixed), how many bytes per parameter do the model states take "
        "(weights, gradients, master weights, optimizer states) on one GPU?",
        lambda: memory.training_memory(1e9, "bf16-mixed", "adam").model_states / 1e9,
        unit="bytes/param",
        rel_tol=1e-9,
        hint="2 (bf16 weights) + 2 (bf16 gradients) + 4 (fp32 master) + 4 + 4 (two fp32 Adam states).",
    ),
    q3=Question(
        "Under ZeRO stage 3 with mixed-precision Adam, what is the smallest number of 80 GiB GPUs whose memory "
        "holds the model states of a 70B model (ignore activations and temporaries)?",
        lambda: _min_gpus_zero3_model_states(70e9, 80 * memory.GIB),
        unit="GPUs",
        rel_tol=0,
        hint="stage 3 puts (4 + 12) x parameters / N bytes on each GPU; find the smallest N that fits 80 x 2^30 bytes.",
    ),
    q4=Question(
        "How many GB of activations does one layer of a 16-bit transformer with hidden size 4096 and 32 heads "
        "save for backward at batch 1 and sequence length 4096 (Korthikanti et al.'s formula, with dropout)?",
        lambda: memory.gb(memory.activation_bytes_per_layer(4096, 1, 4096, 32, 2, 1)),
        unit="GB",
        hint="s*b*h*(34 + 5*a*s/h) bytes; note the term that grows with the square of the sequence length.",
    ),
)


def memory_bars(
    breakdowns: Sequence[memory.Breakdown], labels: Sequence[str], rule_of_thumb: bool = True
) -> Figure:
    """Two panels, one above the other: bytes per parameter stacked by component, and total GB
    per GPU on a log axis against GPU sizes.

    Chapter 2, *The memory wall*.
    """
    use_course_style()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 9))
    x = range(len(breakdowns))
    bottom = [0.0] * len(breakdowns)
    for name in memory.Breakdown.COMPONENTS:
        heights = [b.bytes_per_param()[name] for b in breakdowns]
        if not any(heights):
            continue
        ax1.bar(x, heights, bottom=bottom, color=COMPONENT_COLOURS[name], label=name.replace("_", " "))
        bottom = [a + h for a, h in zip(bottom, heights)]
    if rule_of_thumb:
        ax1.axhline(memory.RULE_OF_THUMB_BYTES_PER_PARAM, color="black", ls="--", lw=1, label="rule of thumb (24 B)")
    ax1.set_xticks(list(x), labels)
    ax1.set_ylabel("bytes per parameter")
    ax1.set_title("Training memory per parameter, by component")
    ax1.legend(fontsize=diagrams.SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3,
               frameon=False)

    totals = [memory.gb(b.total) for b in breakdowns]
    ax2.bar(x, totals, color="#4C72B0")
    for gpu, style in zip(memory.GPUS, (":", "-.", "--")):
        ax2.axhline(memory.gb(gpu.capacity), color="grey", ls=style, lw=1.2, label=gpu.name)
    ax2.set_yscale("log")
    ax2.set_xticks(list(x), labels)
    ax2.set_ylabel("GB on one GPU (log scale)")
    ax2.set_title("Total against single-GPU memory")
    ax2.legend(fontsize=diagrams.SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3,
               frameon=False)
    fig.tight_layout()
    return fig


def comparison_rows(
    measured: memory_meter.Measurement, estimate: memory.Breakdown, activation_estimates: dict[str, float]
) -> list[list[str]]:
    """Rows of measured against estimated bytes per component, with the difference, for a table.

    Chapter 2, *The memory wall*.
    """

    def row(name: str, got: int, expected: float) -> list[str]:
        return [name, f"{got:,}", f"{int(expected):,}", f"{got - int(expected):+,}"]

    rows = [
        row("weights", measured.weights, estimate.weights),
        row("gradients", measured.gradients, estimate.gradients),
        row("Adam states", measured.optimizer_states, estimate.optimizer_states),
    ]
    rows += [row(f"activations, {label}", measured.activations, value) for label, value in activation_estimates.items()]
    return rows
