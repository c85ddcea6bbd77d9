"""Chapter 4, *Quantizing π*: the chapter's number lines of the values around π, and its exercises.

The values stored and their neighbours come from :mod:`course_lib.numbers.bit_explorer`
(:func:`~course_lib.numbers.bit_explorer.store`, :func:`~course_lib.numbers.bit_explorer.neighbours`).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from course_lib.exercises.questions import Question
from course_lib.numbers import bit_explorer, format_specs, formats

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "What value does FP8 E5M2 store for π (round to nearest, ties to even)?",
        lambda: formats.round_to_format(math.pi, "e5m2"),
        rel_tol=0,
        hint="E5M2 keeps 2 mantissa bits: between 2 and 4 its values are 2, 2.5, 3 and 3.5; pick the nearest to π.",
    ),
    q2=Question(
        "How far apart are neighbouring BF16 numbers between 2 and 4 (the ULP of π in BF16)?",
        lambda: formats.ulp(math.pi, "bf16"),
        rel_tol=0,
        hint="between 2 and 4 the exponent is 1, and BF16 has 7 mantissa bits: the spacing is 2**(1 - 7).",
    ),
    q3=Question(
        "A block of weights has absolute maximum 5.0. With symmetric INT8 (scale = 5.0 / 127, code = round(x / scale)), "
        "what value does π come back as after dequantizing (code x scale)?",
        lambda: formats.decode(formats.encode(math.pi / (5.0 / 127), "int8"), "int8") * (5.0 / 127),
        rel_tol=1e-4,
        hint="π / (5/127) = 79.8 rounds to the code 80; multiply it back by the scale.",
    ),
    q4=Question(
        "How many bits per value does INT4 with one FP16 scale per block of 128 values cost?",
        lambda: format_specs.INT4.total_bits + format_specs.FP16.total_bits / 128,
        unit="bits",
        rel_tol=0,
        hint="4 bits per code plus the 16 bits of the block's scale shared by its 128 values.",
    ),
)


def number_lines(rows: Sequence[bit_explorer.Stored], count: int = 4) -> Figure:
    """Draw, for each stored value, the representable numbers around it on its own zoomed number line.

    Long tick labels (3.134765625) are written under every other number, counting from the
    stored value, so that they stay apart at the book's column width.

    Chapter 4, *Quantizing π*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base import diagrams
    from course_lib.base.plots import use_course_style

    if not rows:
        raise ValueError("number_lines() needs at least one stored value; use store(value, fmt)")
    use_course_style()
    fig, axes = plt.subplots(len(rows), 1, figsize=(8.4, 1.15 * len(rows) + 0.8), squeeze=False)
    for ax, row in zip(axes[:, 0], rows):
        grid = bit_explorer.neighbours(row, count)
        x = row.typed.value
        ax.vlines(grid, 0, 1, color="#7f7f7f", lw=1.5)
        ax.vlines([row.value], 0, 1, color="#1f6fb2", lw=4, label="stored value")
        ax.axvline(x, color="#c0392b", ls="--", lw=1.5, label=row.typed.label)
        span = grid.max() - grid.min() if grid.size > 1 else 1.0
        ax.set_xlim(grid.min() - 0.05 * span, grid.max() + 0.05 * span)
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.grid(False)
        ax.spines["left"].set_visible(False)
        ax.set_ylabel(row.label, rotation=0, ha="right", va="center")
        ax.text(1.01, 0.5, f"ULP {_spacing(row):.3g}\nerror {row.abs_error:.3g}", transform=ax.transAxes,
                va="center", fontsize=diagrams.SMALL)  # fmt: skip
        labels = _tick_labels(grid)
        labelled = _labelled_ticks(grid, labels, row.value)
        ax.set_xticks(grid[labelled], [labels[i] for i in labelled])
        ax.set_xticks(np.delete(grid, labelled), minor=True)
        ax.tick_params(axis="x", labelsize=diagrams.SMALL)
    axes[0, 0].set_title(f"Representable numbers around {rows[0].typed.label},\n"
                         "each line zoomed to its own spacing")
    axes[-1, 0].set_xlabel("value")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.tight_layout(rect=(0, 0.035, 1, 1))
    fig.legend(handles, labels, loc="lower center", ncol=2, frameon=False, fontsize=9)
    return fig


def _tick_labels(grid: np.ndarray) -> list[str]:
    """Exact labels when they are short (3.25, 3.138671875), else the fewest digits that tell them apart."""
    exact = [np.format_float_positional(float(v), trim="-") for v in grid]
    if max(len(label) for label in exact) <= 11:
        return exact
    for digits in range(2, 18):
        labels = [f"{v:.{digits}g}" for v in grid]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(float(v)) for v in grid]


def _labelled_ticks(grid: np.ndarray, labels: Sequence[str], stored: float) -> list[int]:
    """The ticks that carry a label: all of them when the labels are short, else every other
    one, the stored value's among them."""
    if max(len(label) for label in labels) <= 6:
        return list(range(len(grid)))
    first = int(np.argmin(np.abs(grid - stored))) % 2
    return list(range(first, len(grid), 2))


def _spacing(row: bit_explorer.Stored) -> float:
    """The gap between the stored value and its neighbours in its binade (the ULP), times the scale."""
    if isinstance(row.format, format_specs.IntFormat):
        return row.scale or 1.0
    return formats.ulp(float(row.code), row.format) * (row.scale or 1.0)
