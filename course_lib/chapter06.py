"""Chapter 6's own plots and tables ("Pruning lab"); the pruning itself lives in :mod:`course_lib.prune`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt

from course_lib.plots import use_course_style
from course_lib.tables import Table

if TYPE_CHECKING:
    import torch
    from matplotlib.figure import Figure

__all__ = ["plot_layer_sparsity", "plot_sparsity_sweep", "sweep_table"]

#: One colour per pruning scope, the same in every plot of the chapter.
SCOPE_COLOURS = {"layer": "#4C72B0", "global": "#C44E52"}


def plot_sparsity_sweep(sweep: Mapping[str, Mapping[float, tuple[float, float]]], dense: float) -> Figure:
    """Perplexity against sparsity, one colour per scope, dashed before and solid after fine-tuning.

    ``sweep[scope][sparsity] = (perplexity after pruning, perplexity after fine-tuning)``; the
    dense model is the grey reference line.

    Chapter 6, *Pruning lab*.
    """
    use_course_style()
    fig, ax = plt.subplots(figsize=(9, 4.8))
    for scope, points in sweep.items():
        xs = sorted(points)
        colour = SCOPE_COLOURS.get(scope)
        ax.plot([100 * x for x in xs], [points[x][0] for x in xs], ls="--", marker="o", color=colour,
                label=f"{scope} threshold, pruned")
        ax.plot([100 * x for x in xs], [points[x][1] for x in xs], ls="-", marker="s", color=colour,
                label=f"{scope} threshold, pruned + fine-tuned")
    ax.axhline(dense, color="grey", lw=1.2, label=f"dense model ({dense:.2f})")
    ax.set_yscale("log")
    ax.set_xlabel("sparsity of the block weights (%)")
    ax.set_ylabel("test perplexity (log scale)")
    ax.set_title("Magnitude pruning of the course model, before and after fine-tuning")
    ax.legend(fontsize=9, loc="upper left")
    fig.tight_layout()
    return fig


def plot_layer_sparsity(masks: Mapping[str, torch.Tensor], title: str) -> Figure:
    """One bar per weight matrix: the share of its weights that ``masks`` prune.

    Chapter 6, *Pruning lab*.
    """
    use_course_style()
    names = [n.removeprefix("transformer.h.").removesuffix(".weight").replace(".", " ", 1)
             for n in masks]  # "0.attn.c_attn" -> "block 0 attn.c_attn"
    names = [f"block {n}" if n[:1].isdigit() else n for n in names]
    shares = [100 * float((~m).float().mean()) for m in masks.values()]
    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.bar(range(len(shares)), shares, color="#C44E52")
    ax.set_xticks(range(len(names)), names, rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("weights pruned (%)")
    overall = 100 * sum(int((~m).sum()) for m in masks.values()) / sum(m.numel() for m in masks.values())
    ax.axhline(overall, color="grey", lw=1.2, ls="--", label=f"all matrices together ({overall:.0f} %)")
    ax.legend(fontsize=9, loc="lower right")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    fig.tight_layout()
    return fig


def sweep_table(sweep: Mapping[str, Mapping[float, tuple[float, float]]], dense: float,
                sparsities: Sequence[float] | None = None) -> Table:
    """The sweep as a table: perplexity after pruning and after fine-tuning, per scope and sparsity.

    Chapter 6, *Pruning lab*.
    """
    scopes = list(sweep)
    xs = sorted(sparsities if sparsities is not None else next(iter(sweep.values())))
    headers = ["sparsity"] + [f"{s}: {when}" for s in scopes for when in ("pruned", "fine-tuned")]
    rows = [[f"{x:.0%}"] + [f"{sweep[s][x][i]:.2f}" for s in scopes for i in (0, 1)] for x in xs]
    return Table(headers, rows, title=f"Test perplexity (dense model: {dense:.2f})")
