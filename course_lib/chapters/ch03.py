"""Chapter 3, *Number formats*: the chapter's tables and plots of casts and training runs, and its exercises.

The algorithms they show (:func:`~course_lib.numbers.precision.cast`,
:func:`~course_lib.numbers.precision.relative_error_curve`,
:func:`~course_lib.numbers.precision.compare_modes`) live in :mod:`course_lib.numbers.precision`.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import TYPE_CHECKING, Sequence

import numpy as np

from course_lib.base.tables import Table
from course_lib.exercises.questions import Question
from course_lib.numbers import format_specs, formats, precision

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def _smallest_scale_exponent(gradient: float, fmt: format_specs.FloatFormat) -> int:
    k = 0
    while gradient * 2.0**k < fmt.min_normal:
        k += 1
    return k


#: The chapter's numeric questions, each checked against the library.
quiz = SimpleNamespace(
    q1=Question(
        "What is the smallest positive number FP16 can store (its smallest subnormal)?",
        lambda: format_specs.FP16.min_subnormal,
        rel_tol=1e-3,
        hint="2**(emin - mantissa_bits): FP16's emin is 1 - 15 = -14 and it stores 10 mantissa bits.",
    ),
    q2=Question(
        "What is the gap between 256 and the next larger number BF16 can store?",
        lambda: formats.ulp(256.0, format_specs.BF16),
        rel_tol=1e-9,
        hint="256 = 2**8 and BF16 keeps 7 mantissa bits, so neighbours in [256, 512) are 2**(8 - 7) apart.",
    ),
    q3=Question(
        "What is the largest finite value of the OCP FP8 format E4M3 (E4M3FN: bias 7, no infinity)?",
        lambda: format_specs.E4M3.max,
        rel_tol=0,
        hint="the all-ones exponent still holds numbers (only S.1111.111 is NaN), so the max is 1.110 x 2**(15 - 7).",
    ),
    q4=Question(
        "A gradient of 1e-9 is multiplied by a loss scale of 2**k before it is stored in FP16. What is the "
        "smallest k that makes it a normal FP16 number (at least the smallest normal, 2**-14)?",
        lambda: _smallest_scale_exponent(1e-9, format_specs.FP16),
        rel_tol=0,
        hint="1e-9 x 2**k >= 2**-14 = 6.1e-5 means 2**k >= 61,035; compare with GradScaler's start scale.",
    ),
)


#: A colour per training mode of :func:`plot_training`.
_MODE_COLOURS = {"fp32": "#4C72B0", "fp16": "#C44E52", "fp16-scaled": "#55A868", "bf16": "#DD8452"}


def _describe(x: float, y: float, fmt: format_specs.FloatFormat) -> tuple[str, str]:
    if math.isnan(y):
        return "nan", "overflow (NaN)"
    if math.isinf(y):
        return ("inf" if y > 0 else "-inf"), "overflow"
    if y == 0 and x != 0:
        return "0", "underflow"
    err = abs(y - x) / abs(x) if x else 0.0
    note = " (subnormal)" if y != 0 and abs(y) < fmt.min_normal else ""
    return f"{y:.7g}", f"{err:.1e}{note}"


def cast_table(values: Sequence[float], names: Sequence[str] = ("fp16", "bf16"), title: str | None = None) -> Table:
    """A table of values and what each format stores for them, with the relative error or what went wrong.

    Chapter 3, *Number formats*.
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
        raise ValueError(f"values must be a non-empty list of numbers, got {values!r}")
    fmts = [format_specs.get_format(n) for n in names]
    x = precision.cast(list(values), "fp32")
    headers, cols = ["value (fp32)"], []
    for name, fmt in zip(names, fmts):
        headers += [f"{name} stores", f"{name} rel. error"]
        cols.append((precision.cast(x, name), fmt))
    rows = []
    for i, v in enumerate(x.tolist()):
        row = [f"{v:.7g}"]
        for y, fmt in cols:
            row += _describe(v, y[i].item(), fmt)
        rows.append(row)
    return Table(headers, rows, title=title)


def plot_relative_error(
    names: Sequence[str] = ("fp16", "bf16"), low: float = 2.0**-30, high: float = 2.0**20
) -> Figure:
    """Plot the relative error of storing values of every magnitude in each format, with FP16's limits marked.

    Chapter 3, *Number formats*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base.plots import use_course_style

    use_course_style()
    fig, ax = plt.subplots()
    floor, ceiling = 1e-9, 3.0
    for i, name in enumerate(names):
        x, err = precision.relative_error_curve(name, low, high, seed=i)
        fmt = format_specs.get_format(name)
        shown = np.clip(np.where(np.isinf(err), ceiling, err), floor, ceiling)
        ax.scatter(x, shown, s=3, alpha=0.6, label=f"{name} (max {fmt.max:.3g})")
        ax.axhline(fmt.epsilon / 2, ls=":", lw=1, color=f"C{i}")
    fp16 = format_specs.FP16
    for value, text in [(fp16.min_subnormal, "fp16 smallest\nsubnormal"), (fp16.min_normal, "fp16 smallest\nnormal"),
                        (fp16.max, "fp16 max")]:
        ax.axvline(value, color="grey", ls="--", lw=1)
        ax.text(value, 2e-9, text, fontsize=9, ha="right", va="bottom", rotation=90)
    ax.text(low, 1.5, "stored as 0", fontsize=9, va="bottom")
    ax.text(high, ceiling / 1.6, "overflow: inf", fontsize=9, ha="right", va="top")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(floor / 2, ceiling * 2)
    ax.set_xlabel("magnitude of the stored value")
    ax.set_ylabel("relative error (1 = lost, top = overflow)")
    ax.set_title("Relative error of storing a value, by magnitude (dotted: half an epsilon)")
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=len(names), frameon=False,
              markerscale=4)
    fig.tight_layout()
    return fig


def training_table(runs: dict[str, precision.TrainingRun]) -> Table:
    """Loss, accuracy and zero-gradient fractions of each run, one row per mode.

    Chapter 3, *Number formats*.
    """
    if not runs:
        raise ValueError("training_table() needs at least one run (from compare_modes())")
    rows = [
        [run.label, f"{run.losses[0]:.3f}", f"{run.final_loss:.4f}", f"{run.accuracy:.1%}",
         f"{run.first_zero_fraction:.1%}", f"{run.mean_zero_fraction:.1%}", f"{run.mean_logit_zero_fraction:.1%}",
         run.skipped_steps]
        for run in runs.values()
    ]  # fmt: skip
    headers = ["mode", "first loss", "final loss", "accuracy", "zero grads, step 1", "zero grads, mean",
               "zero logit grads, mean", "skipped steps"]  # fmt: skip
    return Table(headers, rows)


def plot_training(runs: dict[str, precision.TrainingRun]) -> Figure:
    """Two panels, one above the other: the loss of every run (log scale), and the fraction of
    gradient entries that are exactly zero.

    Chapter 3, *Number formats*.
    """
    import matplotlib.pyplot as plt

    from course_lib.base import diagrams
    from course_lib.base.plots import use_course_style

    if not runs:
        raise ValueError("plot_training() needs at least one run (from compare_modes())")
    use_course_style()
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(8, 7.6), sharex=True)
    styles = {"fp32": "-", "fp16": "-", "fp16-scaled": "--", "bf16": ":"}
    for mode, run in runs.items():
        steps = np.arange(1, len(run.losses) + 1)
        kw = {"color": _MODE_COLOURS[mode], "ls": styles[mode], "lw": 2, "label": run.label}
        ax1.plot(steps, run.losses, **kw)
        ax2.plot(steps, run.zero_fractions, **kw)
    ax1.set_yscale("log")
    ax1.set_ylabel("cross-entropy per example\n(log scale)")
    ax1.set_title("Training loss")
    ax2.set_ylim(-0.02, 1.02)
    ax2.set_xlabel("step")
    ax2.set_ylabel("fraction of gradient\nentries = 0")
    ax2.set_title("Gradients that underflowed to zero")
    handles, labels = ax1.get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=diagrams.SMALL, loc="lower center", ncol=2,
               frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


#: The float formats of :func:`float_fields_diagram`, widest first.
_DIAGRAM_FORMATS = ("fp32", "fp16", "bf16", "e4m3", "e5m2")


def float_fields_diagram(value: float = math.pi,
                         names: Sequence[str] = _DIAGRAM_FORMATS,
                         symbol: str = "π") -> Figure:
    """The sign, exponent and mantissa bits of ``value`` in each format, a row of cells
    per format, with the value each row stores.

    Chapter 3, *Number formats*.
    """
    from course_lib.base import diagrams

    fmts = [format_specs.get_format(n) for n in names]
    if not fmts or not all(isinstance(f, format_specs.FloatFormat) for f in fmts):
        raise ValueError("names must be float formats such as "
                         f"{list(_DIAGRAM_FORMATS)}, got {names!r}")
    left, pitch = 2.1, 0.9
    cell = (diagrams.COLUMN_INCHES - left - 0.1) / max(f.total_bits for f in fmts)
    height = 1.25 + pitch * len(fmts)
    shown = [f.name.upper() for f in fmts]
    listed = ", ".join(shown[:-1]) + " and " * (len(shown) > 1) + shown[-1]
    fig, ax = diagrams.canvas(diagrams.COLUMN_INCHES, height,
                              f"{symbol} in {listed}: sign, exponent and mantissa bits")
    field_colours = {k: diagrams.COLOURS[k] for k in ("sign", "exponent", "mantissa")}
    diagrams.legend_patches(ax, field_colours, loc="upper center", ncol=3,
                            bbox_to_anchor=(0.5, 1 - 0.4 / height))
    for row, fmt in enumerate(fmts):
        y = height - 1.2 - row * pitch
        bits = formats.encode(value, fmt)
        stored = formats.decode(bits, fmt)
        widths = {"sign": 1, "exponent": fmt.exponent_bits,
                  "mantissa": fmt.mantissa_bits}
        colours = [field_colours[k] for k, w in widths.items() for _ in range(w)]
        pattern = formats.bit_string(bits, fmt, sep="")
        diagrams.bit_cells(ax, left, y, pattern, colours, cell, 0.34, gid=fmt.name)
        start = left
        for w in widths.values():
            if w:
                diagrams.span_label(ax, start + 0.02, start + w * cell - 0.02, y - 0.05,
                                    f"{w} bit{'s' * (w != 1)}")
            start += w * cell
        ax.text(0.05, y + 0.34, f"{fmt.name.upper()}: {fmt.total_bits} bits", ha="left",
                va="center", fontsize=diagrams.FONT + 1, fontweight="bold")
        error = abs(stored - value) / abs(value) if value else abs(stored)
        ax.text(0.05, y + 0.02, f"{symbol} → {stored:.9g}\nerror {error:.1e}",
                ha="left", va="center", fontsize=diagrams.SMALL, linespacing=1.3)
    ax.text(left, 0.2, r"value $= (-1)^{s} \times (1 + M / 2^{m}) \times "
            r"2^{E - \mathrm{bias}}$,  bias $= 2^{e-1} - 1$  ($m$ mantissa bits $M$, "
            r"$e$ exponent bits $E$)", ha="left", va="center", fontsize=diagrams.FONT)
    return fig
