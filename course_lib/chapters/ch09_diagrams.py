"""Chapter 9's diagrams, *Sharding with ZeRO and FSDP*: what each ZeRO stage shards, and
what FSDP does around one unit in the forward and the backward pass.

The bytes they show are computed: the model states per rank by chapter 2's estimator,
:func:`course_lib.numbers.memory.training_memory`, and the size of a unit from the
course model's own block (:func:`course_lib.text.course_model.course_model_config`).
:mod:`course_lib.chapters.ch09` offers both diagrams under its own name, as the notebook
calls them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from course_lib.base.dtypes import BYTES
from course_lib.numbers import memory
from course_lib.text import course_model, models

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["STATES", "fsdp_layer_diagram", "zero_stages_diagram"]

#: The three model states ZeRO shards, and the parts of chapter 2's estimator in each.
STATES = {
    "parameters": ("weights",),
    "gradients": ("gradients",),
    "optimizer states": ("master_weights", "optimizer_states"),
}
_STAGE_NAMES = {
    0: "stage 0 · DDP: every rank holds everything",
    1: "stage 1 · the optimizer states sharded",
    2: "stage 2 · the gradients sharded too",
    3: "stage 3 · the parameters sharded too (FSDP's full sharding)",
}


def _state_bytes(n_params: float, world_size: int, stage: int) -> dict[str, float]:
    """Bytes per rank of each model state under a ZeRO stage (BF16 mixed, Adam)."""
    b = memory.training_memory(
        n_params, "bf16-mixed", gpus=world_size, zero_stage=stage
    )
    return {
        state: sum(getattr(b, part) for part in parts)
        for state, parts in STATES.items()
    }


def _psi(n: float) -> str:
    return f"{n:g}Ψ"


def _check_ranks(world_size: int, most: int) -> None:
    if (
        isinstance(world_size, bool)
        or not isinstance(world_size, int)
        or not (2 <= world_size <= most)
    ):
        raise ValueError(
            f"world_size must be a whole number from 2 to {most}, got {world_size!r}"
        )


def zero_stages_diagram(world_size: int = 4, n_params: float = 7.5e9) -> Figure:
    """What each of ``world_size`` ranks holds of the parameters, gradients and
    optimizer states under DDP and ZeRO stages 1 to 3, in bytes per parameter.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    from course_lib.base import diagrams

    _check_ranks(world_size, 8)
    whole = _state_bytes(n_params, 1, 0)
    per_param = {state: b / n_params for state, b in whole.items()}
    row, header, gap = 0.24, 0.34, 0.16
    height = 1.3 + len(_STAGE_NAMES) * (header + world_size * row + gap)
    fig, ax = diagrams.canvas(
        diagrams.COLUMN_INCHES,
        height,
        f"ZeRO on {world_size} ranks: what each rank holds of the model states",
    )
    colours = {s: diagrams.COLOURS[s] for s in STATES}
    diagrams.legend_patches(
        ax,
        {f"{s} ({per_param[s]:g} bytes per parameter)": c for s, c in colours.items()},
        loc="upper center",
        ncol=3,
        bbox_to_anchor=(0.5, 1 - 0.38 / height),
        fontsize=diagrams.SMALL,
        handlelength=1.2,
        columnspacing=1.2,
    )
    ax.text(
        diagrams.COLUMN_INCHES / 2,
        height - 0.92,
        "BF16 mixed precision with Adam: the "
        "optimizer states are the FP32 master weights and two moments, "
        f"K = {per_param['optimizer states']:g}",
        ha="center",
        va="center",
        fontsize=diagrams.SMALL,
    )
    left, unit = 0.85, 5.7 / sum(per_param.values())  # inches per byte per parameter
    y = height - 1.2
    for stage, name in _STAGE_NAMES.items():
        held = _state_bytes(n_params, world_size, stage)
        ax.text(
            0.05,
            y - header / 2,
            name,
            ha="left",
            va="center",
            fontsize=diagrams.FONT,
            fontweight="bold",
        )
        y -= header
        for rank in range(world_size):
            x = left
            for state, colour in colours.items():
                full, fraction = per_param[state] * unit, held[state] / whole[state]
                start = x + (rank * fraction * full if fraction < 1 else 0)
                gid = f"zero-stage{stage}-rank{rank}-{state}"
                diagrams.box(
                    ax,
                    x,
                    y - row + 0.03,
                    full,
                    row - 0.06,
                    colour=diagrams.tint(colour, 0.18),
                    edge="white",
                    gid=f"{gid}-whole",
                )
                diagrams.box(
                    ax,
                    start,
                    y - row + 0.03,
                    fraction * full,
                    row - 0.06,
                    colour=colour,
                    edge="white",
                    gid=gid,
                )
                x += full
            ax.text(
                left - 0.08,
                y - row / 2,
                f"rank {rank}",
                ha="right",
                va="center",
                fontsize=diagrams.SMALL,
            )
            y -= row
        formula = " + ".join(
            _psi(per_param[s]) + f"/{world_size}" * (held[s] < whole[s]) for s in STATES
        )
        total = sum(held.values())
        ax.text(
            left + 5.85,
            y + world_size * row / 2,
            f"{formula}\n= {_psi(total / n_params)} per rank\n"
            f"= {memory.gb(total):,.3g} GB at Ψ = {n_params / 1e9:g}B",
            ha="left",
            va="center",
            fontsize=diagrams.SMALL,
            linespacing=1.35,
        )
        y -= gap
    return fig


def _bar(
    ax: Axes, x: float, y: float, world: int, filled: str, colour: str, label: str
) -> None:
    """A tensor cut into ``world`` shards: ``filled`` is "own" (rank 0's shard only),
    "all" (every rank's shard, gathered) or "local" (computed whole on rank 0)."""
    from course_lib.base import diagrams

    cell = 0.3
    for i in range(world):
        at = (ax, x + i * cell, y, cell, cell)
        if filled == "local":
            diagrams.box(*at, colour=colour, edge="white")
        elif i == 0:
            diagrams.box(*at, "0", colour, edge="white", fontsize=diagrams.SMALL)
        elif filled == "all":
            diagrams.box(
                *at,
                str(i),
                diagrams.tint(colour, 0.5),
                edge="white",
                fontsize=diagrams.SMALL,
            )
        else:
            diagrams.box(*at, edge=diagrams.COLOURS["wasted"], linestyle="--")
    ax.text(
        x - 0.08, y + cell / 2, label, ha="right", va="center", fontsize=diagrams.FONT
    )


def _unit_parameters() -> int:
    """Parameters of one FSDP unit of chapter 9's runs: a block of the course model."""
    import torch

    with torch.device("meta"):  # shapes only: nothing is allocated or initialised
        model = models.build_model(course_model.course_model_config())
    return sum(p.numel() for p in models.blocks(model)[0].parameters())


def fsdp_layer_diagram(world_size: int = 4) -> Figure:
    """FSDP around one unit, on rank 0: all-gather, compute and free in the forward
    pass; all-gather, compute, reduce-scatter of the gradients and free in the backward.

    Chapter 9, *Sharding with ZeRO and FSDP*.
    """
    from course_lib.base import diagrams

    _check_ranks(world_size, 4)
    n = _unit_parameters()
    whole_kb = n * BYTES["fp32"] / 1e3
    shard_kb = whole_kb / world_size
    fig, ax = diagrams.canvas(
        diagrams.COLUMN_INCHES,
        5.6,
        "FSDP around one unit (a block "
        f"of the course model), on rank 0 of {world_size}",
    )
    ax.text(
        diagrams.COLUMN_INCHES / 2,
        5.18,
        f"the block: {n:,} parameters W, "
        f"{whole_kb:,.0f} kB whole in FP32, {shard_kb:,.0f} kB per shard; the numbers "
        "in the cells: whose shard",
        ha="center",
        va="center",
        fontsize=diagrams.SMALL,
    )
    w, g = diagrams.COLOURS["parameters"], diagrams.COLOURS["gradients"]
    comm, compute = diagrams.COLOURS["communication"], diagrams.COLOURS["compute"]
    xs = (0.75, 3.95, 7.1)  # the three states of each pass
    end = 0.3 * world_size
    small = {"ha": "center", "va": "top", "fontsize": diagrams.SMALL}

    def holds(x: float, y: float, kb: float) -> None:
        ax.text(x + end / 2, y, f"holds {kb:,.0f} kB", **small)

    def step(x: float, y: float, text: str) -> None:
        diagrams.box(
            ax,
            x - 0.05,
            y,
            end + 0.1,
            0.36,
            text,
            compute,
            rounded=True,
            fontsize=diagrams.SMALL,
        )

    for name, y in (("forward", 4.15), ("backward", 2.05)):
        ax.text(
            0.05,
            y + 0.62,
            name,
            ha="left",
            va="center",
            fontsize=diagrams.FONT + 1,
            fontweight="bold",
        )
        _bar(ax, xs[0], y, world_size, "own", w, "W")
        _bar(ax, xs[1], y, world_size, "all", w, "W")
        holds(xs[0], y - 0.12, shard_kb)
        diagrams.arrow(
            ax,
            (xs[0] + end + 0.15, y + 0.15),
            (xs[1] - 0.4, y + 0.15),
            f"all-gather:\nthe other {world_size - 1} shards arrive",
            colour=comm,
            fontsize=diagrams.SMALL,
        )
    step(xs[1], 3.6, "compute forward")
    holds(xs[1], 3.52, whole_kb)
    diagrams.arrow(
        ax,
        (xs[1] + end + 0.15, 4.3),
        (xs[2] - 0.4, 4.3),
        "free the gathered shards\n(reshard after forward)",
        colour=diagrams.COLOURS["free"],
        fontsize=diagrams.SMALL,
    )
    _bar(ax, xs[2], 4.15, world_size, "own", w, "W")
    holds(xs[2], 4.03, shard_kb)
    _bar(ax, xs[1], 1.6, world_size, "local", g, "∇W")
    step(xs[1], 1.1, "compute backward")
    holds(xs[1], 1.02, 2 * whole_kb)
    diagrams.arrow(
        ax,
        (xs[1] + end + 0.15, 1.95),
        (xs[2] - 0.4, 1.95),
        "reduce-scatter ∇W:\nrank 0 gets the mean\nof shard 0; free W, ∇W",
        colour=comm,
        fontsize=diagrams.SMALL,
    )
    _bar(ax, xs[2], 2.05, world_size, "own", w, "W")
    _bar(ax, xs[2], 1.6, world_size, "own", g, "∇W")
    step(xs[2], 1.1, "optimizer step")
    holds(xs[2], 1.02, 2 * shard_kb)
    ax.text(
        0.05,
        0.4,
        "∇W: the gradient of rank 0's own batch, whole; reduce-scatter sums "
        f"shard r over the {world_size} ranks on rank r.\nreshard_after_forward=False "
        "(ZeRO-2) keeps W whole from forward to backward: one all-gather less, "
        f"{whole_kb - shard_kb:,.0f} kB more held.",
        ha="left",
        va="center",
        fontsize=diagrams.SMALL,
        linespacing=1.4,
        color=diagrams.COLOURS["line"],
    )
    return fig
