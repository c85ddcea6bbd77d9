"""Shared matplotlib styling and the course's recurring plots, used from chapter 1 on."""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import matplotlib.pyplot as plt

from course_lib import memory

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: One colour per memory component, the same in every plot of the course.
COMPONENT_COLOURS = {
    "weights": "#4C72B0",
    "gradients": "#55A868",
    "master_weights": "#8172B2",
    "optimizer_states": "#C44E52",
    "activations": "#DD8452",
    "temporaries": "#937860",
}


def use_course_style() -> None:
    """Readable defaults: larger fonts, light grid, no top/right spines, fixed figure size.

    Chapter 5, *Quantization*.
    """
    plt.rcParams.update(
        {
            "figure.figsize": (9, 4.5),
            "figure.dpi": 90,
            "font.size": 11,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "svg.hashsalt": "course",  # reproducible SVG ids
        }
    )


def memory_bars(
    breakdowns: Sequence[memory.Breakdown], labels: Sequence[str], rule_of_thumb: bool = True
) -> Figure:
    """Two panels: bytes per parameter stacked by component, and total GB per GPU on a log axis against GPU sizes.

    Chapter 2, *The memory wall*.
    """
    use_course_style()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.4))
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
    ax1.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=3, frameon=False)

    totals = [memory.gb(b.total) for b in breakdowns]
    ax2.bar(x, totals, color="#4C72B0")
    for gpu, style in zip(memory.GPUS, (":", "-.", "--")):
        ax2.axhline(memory.gb(gpu.capacity), color="grey", ls=style, lw=1.2, label=gpu.name)
    ax2.set_yscale("log")
    ax2.set_xticks(list(x), labels)
    ax2.set_ylabel("GB on one GPU (log scale)")
    ax2.set_title("Total against single-GPU memory")
    ax2.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    fig.tight_layout()
    return fig
