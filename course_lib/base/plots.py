"""Shared matplotlib styling, used by every plot of the course from chapter 1 on."""

from __future__ import annotations

import matplotlib.pyplot as plt

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
