"""Chapters 9, 10 and 11 as a reader meets their output (issue 42): the plots' texts at least
9 pt at the book's column width (chapter 10's figure of the planner against published runs
had labels of about 5 px), and chapter 11's collectives written as its tables write them,
never as a printed dict."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib.base import diagrams  # noqa: E402
from course_lib.chapters import ch09, ch10, ch11  # noqa: E402
from course_lib.hardware import roofline  # noqa: E402
from course_lib.hardware.matmul import ProductResult  # noqa: E402
from course_lib.planner import validation  # noqa: E402


def assert_readable(fig) -> None:
    size, text = diagrams.smallest_font(fig)
    assert size >= diagrams.SMALL, f"{text!r} is {size:.1f} pt at the book's column width"
    assert diagrams.overlapping_texts(fig) == []


def test_the_planner_against_published_runs_is_readable_at_the_column_width():
    ax = validation.plot_ratios(validation.validate())
    assert_readable(ax.figure)
    plt.close(ax.figure)


def test_the_rooflines_are_readable_at_the_column_width():
    roofs = [roofline.roof_of(name) for name in ("A100 SXM 80GB", "H100 SXM", "L40S")]
    operations = roofline.block_operations()[:3]
    measured = [ProductResult(roofline.matmul_operation(m, 768, 3072, "fp32", f"{m} tokens"),
                              "cpu", (m * 1e-5,), 1) for m in (1, 64)]
    fig = ch10.plot_roofline(roofs, operations, measured)
    assert_readable(fig)
    plt.close(fig)


def test_zero_s_savings_are_readable_at_the_column_width():
    fig = ch09.plot_reduction()
    assert_readable(fig)
    assert "reduction" in fig.axes[0].get_ylabel()  # the caption speaks of a reduction too
    plt.close(fig)


@pytest.mark.parametrize("counts, text", [
    ({"all-reduce": 2}, "2 all-reduce"),
    ({"reduce-scatter": 2, "all-gather": 4}, "4 all-gather, 2 reduce-scatter"),
    ({}, "-"),
])
def test_collectives_read_as_words(counts, text):
    assert ch11.collectives_text(counts) == text
    assert "{" not in ch11.collectives_text(counts)
