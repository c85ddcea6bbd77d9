"""Drawing primitives for the course's diagrams, shared by chapters 3, 5, 8, 9 and 10.

A diagram is drawn on a :func:`canvas` whose coordinates are inches, so that every box,
cell and label has the size it will have on the page: the book's column is about 800
pixels, 8.6 inches and the image's margins at the course style's 90 dpi. The primitives
draw labelled boxes, arrows, rows of bit cells and span labels in the course's colours
(:data:`course_lib.base.plots.COMPONENT_COLOURS`), and place labels next to points so
that none overlaps another (:func:`place_labels`). Two checks look at a figure as a
reader meets it: :func:`overlapping_texts` and :func:`smallest_font`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.colors import to_hex, to_rgb
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch, Rectangle
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from course_lib.base.plots import COMPONENT_COLOURS, use_course_style

__all__ = [
    "COLOURS",
    "COLUMN_INCHES",
    "COLUMN_PIXELS",
    "FONT",
    "SMALL",
    "TITLE",
    "arrow",
    "bit_cells",
    "box",
    "canvas",
    "ink",
    "legend_patches",
    "overlapping_texts",
    "place_labels",
    "smallest_font",
    "span_label",
    "tint",
    "use_course_style",
]

#: The book's column in pixels, and the width in inches that fills it at 90 dpi.
COLUMN_PIXELS = 800
COLUMN_INCHES = 8.6
#: Font sizes (points) of the diagrams: nothing a reader must read is below ``SMALL``.
TITLE, FONT, SMALL = 12, 10, 9

#: The diagrams' colours: the course's palette, one meaning each.
COLOURS: dict[str, str] = {
    "sign": COMPONENT_COLOURS["optimizer_states"],
    "exponent": COMPONENT_COLOURS["weights"],
    "mantissa": COMPONENT_COLOURS["gradients"],
    "parameters": COMPONENT_COLOURS["weights"],
    "gradients": COMPONENT_COLOURS["gradients"],
    "optimizer states": COMPONENT_COLOURS["optimizer_states"],
    "communication": COMPONENT_COLOURS["activations"],
    "compute": COMPONENT_COLOURS["master_weights"],
    "free": COMPONENT_COLOURS["temporaries"],
    "wasted": "#BBBBBB",
    "line": "#444444",
    "text": "#222222",
}


def ink(background: str) -> str:
    """Black or white, whichever reads better on ``background``.

    Used by the library's other modules.
    """
    r, g, b = to_rgb(background)
    return "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5 else COLOURS["text"]


def tint(colour: str, amount: float) -> str:
    """``colour`` mixed with white: ``amount`` 1 is the colour itself, 0 is white.

    Used by the library's other modules.
    """
    return to_hex(tuple(1 - amount * (1 - c) for c in to_rgb(colour)))


def canvas(
    width: float, height: float, title: str | None = None
) -> tuple[Figure, Axes]:
    """A blank figure of ``width`` x ``height`` inches; its axes measure inches from the
    bottom left.

    Used by the library's other modules.
    """
    use_course_style()
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    if title:
        ax.text(
            width / 2,
            height - 0.08,
            title,
            ha="center",
            va="top",
            fontsize=TITLE,
            color=COLOURS["text"],
            fontweight="bold",
        )
    return fig, ax


def box(
    ax: Axes,
    x: float,
    y: float,
    width: float,
    height: float,
    text: str = "",
    colour: str = "white",
    *,
    edge: str | None = None,
    fontsize: float = FONT,
    rounded: bool = False,
    linestyle: str = "-",
    gid: str | None = None,
    **text_kw: Any,
) -> Rectangle | FancyBboxPatch:
    """A box from (``x``, ``y``) at its bottom left, in ``colour``, ``text`` centred;
    ``gid`` names both.

    Used by the library's other modules.
    """
    edge = COLOURS["line"] if edge is None else edge
    style = {"facecolor": colour, "edgecolor": edge, "lw": 1.0, "linestyle": linestyle}
    if rounded:
        pad = min(width, height) * 0.15
        patch = FancyBboxPatch(
            (x + pad, y + pad),
            width - 2 * pad,
            height - 2 * pad,
            boxstyle=f"round,pad={pad}",
            **style,
        )
    else:
        patch = Rectangle((x, y), width, height, **style)
    patch.set_gid(gid)
    ax.add_patch(patch)
    if text:
        kw = {
            "ha": "center",
            "va": "center",
            "fontsize": fontsize,
            "color": ink(colour),
            "gid": gid,  # the text and its box are found by the same name
            **text_kw,
        }
        ax.text(x + width / 2, y + height / 2, text, **kw)
    return patch


def arrow(
    ax: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    text: str = "",
    *,
    colour: str | None = None,
    fontsize: float = FONT,
    side: str = "above",
    **text_kw: Any,
) -> Text | None:
    """An arrow from ``start`` to ``end``, ``text`` beside its middle: above, below,
    left or right.

    Used by the library's other modules.
    """
    colour = COLOURS["line"] if colour is None else colour
    ax.annotate(
        "",
        end,
        start,
        arrowprops={
            "arrowstyle": "-|>",
            "color": colour,
            "lw": 1.5,
            "shrinkA": 0,
            "shrinkB": 0,
            "mutation_scale": 12,
        },
    )
    if not text:
        return None
    gap = 0.07
    dx, dy, ha, va = {
        "above": (0, gap, "center", "bottom"),
        "below": (0, -gap, "center", "top"),
        "left": (-gap, 0, "right", "center"),
        "right": (gap, 0, "left", "center"),
    }[side]
    mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
    kw = {"ha": ha, "va": va, "fontsize": fontsize, "color": colour, **text_kw}
    return ax.text(mx + dx, my + dy, text, **kw)


def bit_cells(
    ax: Axes,
    x: float,
    y: float,
    bits: str,
    colours: Sequence[str],
    cell: float,
    height: float,
    fontsize: float = FONT,
    gid: str | None = None,
) -> list[Rectangle]:
    """A row of cells from (``x``, ``y``), one per character of ``bits``, each in its
    colour; cell ``i`` is named ``{gid}-bit{i}``.

    Used by the library's other modules.
    """
    if len(colours) != len(bits):
        raise ValueError(
            f"one colour per bit: {len(bits)} bits, {len(colours)} colours"
        )
    return [
        box(
            ax,
            x + i * cell,
            y,
            cell,
            height,
            b,
            c,
            fontsize=fontsize,
            edge="white",
            family="monospace",
            gid=None if gid is None else f"{gid}-bit{i}",
        )
        for i, (b, c) in enumerate(zip(bits, colours))
    ]


def span_label(
    ax: Axes, x0: float, x1: float, y: float, text: str, *, fontsize: float = SMALL
) -> Text:
    """A bracket from ``x0`` to ``x1`` at height ``y``, ``text`` under its middle.

    Used by the library's other modules.
    """
    ax.plot([x0, x0, x1, x1], [y + 0.05, y, y, y + 0.05], color=COLOURS["line"], lw=1)
    return ax.text(
        (x0 + x1) / 2,
        y - 0.04,
        text,
        ha="center",
        va="top",
        fontsize=fontsize,
        color=COLOURS["line"],
    )


def legend_patches(ax: Axes, entries: dict[str, str], **legend_kw: Any) -> Any:
    """A legend of coloured squares, one per ``label: colour`` entry.

    Used by the library's other modules.
    """
    handles = [
        Rectangle((0, 0), 1, 1, facecolor=c, edgecolor=COLOURS["line"], lw=0.5)
        for c in entries.values()
    ]
    return ax.legend(
        handles, list(entries), **{"fontsize": FONT, "frameon": False, **legend_kw}
    )


def _renderer(fig: Figure) -> Any:
    fig.canvas.draw()
    return fig.canvas.get_renderer()


def _texts(fig: Figure) -> list[Text]:
    """The texts of ``fig`` a reader sees: of the tick labels, those of drawn ticks."""
    labels, drawn = set(), []
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                labels |= {tick.label1, tick.label2}
            if ax.axison and ax.get_visible() and axis.get_visible():
                drawn += [
                    t
                    for tick in axis._update_ticks()
                    for t in (tick.label1, tick.label2)
                ]
    return [
        t
        for t in fig.findobj(Text)
        if (t not in labels or t in drawn) and t.get_visible() and t.get_text().strip()
    ]


def overlapping_texts(fig: Figure) -> list[tuple[str, str]]:
    """Every pair of visible texts of ``fig`` whose boxes overlap (arrows left out).

    Used by the library's other modules.
    """
    renderer = _renderer(fig)
    boxes = [(t.get_text(), Text.get_window_extent(t, renderer)) for t in _texts(fig)]
    return [
        (a, b)
        for i, (a, box_a) in enumerate(boxes)
        for b, box_b in boxes[i + 1 :]
        if box_a.overlaps(box_b)
    ]


def smallest_font(fig: Figure, column_pixels: int = COLUMN_PIXELS) -> tuple[float, str]:
    """The smallest font of ``fig`` in points as a reader sees it in the book's column,
    and its text.

    A figure whose saved image (tight, at its dpi) is wider than the column is shrunk to
    fit it, and its fonts with it.

    Used by the library's other modules.
    """
    renderer = _renderer(fig)
    pad = plt.rcParams["savefig.pad_inches"]  # the margin a tight image keeps
    width = (fig.get_tightbbox(renderer).width + 2 * pad) * fig.dpi
    scale = min(1.0, column_pixels / width)
    return min((float(t.get_fontsize()) * scale, t.get_text()) for t in _texts(fig))


#: Where :func:`place_labels` tries a label, in steps of ``distance``: (dx, dy, ha, va).
_PLACES = [
    (1, 1, "left", "bottom"),
    (1, -1, "left", "top"),
    (-1, 1, "right", "bottom"),
    (-1, -1, "right", "top"),
    (0, 1.4, "center", "bottom"),
    (0, -1.4, "center", "top"),
    (1.4, 0, "left", "center"),
    (-1.4, 0, "right", "center"),
]


def place_labels(
    ax: Axes,
    points: Sequence[tuple[float, float]],
    labels: Sequence[str],
    *,
    fontsize: float = FONT,
    avoid: Sequence[Any] = (),
    distance: float = 6.0,
) -> list[Text]:
    """Write each label next to its point where it overlaps no other label, no point
    and nothing in ``avoid`` (texts, legends) and stays inside the axes; a label with no
    free place nearby moves further out, with a line to its point.

    Call it once the figure's layout is final: the places are measured on the page.

    Used by the library's other modules.
    """
    renderer = _renderer(ax.figure)
    inside = ax.get_window_extent(renderer)
    r = 5 * ax.figure.dpi / 72  # a point's marker, in pixels
    taken = [a.get_window_extent(renderer) for a in avoid]
    taken += [
        Bbox.from_extents(x - r, y - r, x + r, y + r)
        for x, y in (ax.transData.transform(p) for p in points)
    ]
    placed = []
    for point, label in zip(points, labels):
        chosen = None
        for reach in (1, 2.5, 4, 6):
            for dx, dy, ha, va in _PLACES:
                text = ax.annotate(
                    label,
                    point,
                    textcoords="offset points",
                    ha=ha,
                    va=va,
                    xytext=(dx * distance * reach, dy * distance * reach),
                    fontsize=fontsize,
                    color=COLOURS["text"],
                )
                text.update_positions(
                    renderer
                )  # where the offset puts it, then measure
                extent = Text.get_window_extent(text, renderer)
                if (
                    inside.containsx(extent.x0)
                    and inside.containsx(extent.x1)
                    and inside.containsy(extent.y0)
                    and inside.containsy(extent.y1)
                    and not any(extent.overlaps(t) for t in taken)
                ):
                    chosen = text
                    break
                text.remove()
            if chosen is not None:
                if reach > 1:  # far from its point: a line shows whose label it is
                    ax.annotate(
                        "",
                        point,
                        chosen.xyann,
                        textcoords="offset points",
                        arrowprops={"arrowstyle": "-", "color": "grey", "lw": 0.6},
                    )
                break
        if (
            chosen is None
        ):  # nowhere free: the first place, so that it is shown at least
            dx, dy, ha, va = _PLACES[0]
            chosen = ax.annotate(
                label,
                point,
                textcoords="offset points",
                ha=ha,
                va=va,
                xytext=(dx * distance, dy * distance),
                fontsize=fontsize,
                color=COLOURS["text"],
            )
            chosen.update_positions(renderer)
        taken.append(Text.get_window_extent(chosen, renderer))
        placed.append(chosen)
    return placed
