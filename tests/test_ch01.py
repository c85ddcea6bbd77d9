"""Tests for chapter 1's plots (course_lib.chapters.ch01) that need no trained model."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from course_lib.chapters import ch01  # noqa: E402
from course_lib.text.training import Recipe, TrainedModel  # noqa: E402


def _run(kind: str, losses: list[float]) -> TrainedModel:
    return TrainedModel(kind=kind, model=None, tokenizer=None, recipe=Recipe(steps=len(losses)),
                        history=losses, seconds=1.0)


def test_loss_curves_draw_each_objective_s_own_baseline():
    runs = [_run("gpt2", [8.0, 6.0, 4.0]), _run("t5", [8.0, 6.0, 5.0])]
    fig = ch01.plot_loss_curves(runs, smooth=2, baseline={"gpt2": 5.79, "t5": 5.09})
    ax = fig.axes[0]
    flat = [line for line in ax.get_lines() if len(set(line.get_ydata())) == 1]
    assert sorted(round(float(line.get_ydata()[0]), 2) for line in flat) == [5.09, 5.79]
    colours = {line.get_color() for line in flat}
    assert len(colours) == 2  # each in its model's colour, not one black line
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("T5ForConditionalGeneration: context-free loss 5.09" in t for t in labels)
    plt.close(fig)


def test_loss_curves_one_baseline_is_one_black_line():
    fig = ch01.plot_loss_curves([_run("gpt2", [8.0, 6.0, 4.0])], baseline=5.79)
    flat = [line for line in fig.axes[0].get_lines() if len(set(line.get_ydata())) == 1]
    assert len(flat) == 1 and flat[0].get_color() == "black"
    plt.close(fig)
