"""The chapters' plots as a reader meets them (issue 42): their texts at least 9 pt at the
book's column width, none overlapping (chapter 10's figure of the planner against published
runs had labels of about 5 px; a figure 12 inches wide with two panels side by side shrinks
its 10 pt to about 7), and chapter 11's collectives written as its tables write them, never
as a printed dict. Each plot is built from small made-up inputs shaped as its notebook's."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib.base import diagrams  # noqa: E402
from course_lib.chapters import (  # noqa: E402
    ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch09, ch10, ch11,
)
from course_lib.compression import ptq, quant  # noqa: E402
from course_lib.hardware import roofline  # noqa: E402
from course_lib.hardware.matmul import ProductResult  # noqa: E402
from course_lib.numbers import bit_explorer, memory, precision  # noqa: E402
from course_lib.parallel import fsdp, pipeline  # noqa: E402
from course_lib.planner import validation  # noqa: E402
from course_lib.text.scaling import ScalingPoint  # noqa: E402
from course_lib.text.training import TrainedModel  # noqa: E402


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


def test_the_memory_per_rank_is_readable_at_the_column_width():
    fig = ch09.plot_memory(_memory_runs())
    assert_readable(fig)
    assert len(fig.axes[0].get_xticklabels()) == 8  # every run named under its bar
    plt.close(fig)


def _memory_runs() -> list[list[fsdp.ShardedRank]]:
    """Chapter 9's eight runs as plot_memory gets them (2 and 4 ranks), with made-up bytes."""
    units, runs = (540_928, 198_272, 198_272, 198_272, 198_272), []
    psi = 4 * sum(units)
    for world in (2, 4):
        for strategy in ("ddp", "zero1", "zero2", "zero3"):
            shards = 1 if strategy == "ddp" else world
            states = {"parameters": psi // (shards if strategy != "zero1" else 1),
                      "gradients": psi // (shards if strategy != "zero1" else 1),
                      "optimizer states": 2 * psi // shards}
            runs.append([fsdp.ShardedRank(
                rank, world, "gloo", strategy, 1 if strategy in ("ddp", "zero1") else world,
                False, False, (8.0,), states, states["parameters"] + psi // 4, (), units, (),
                None) for rank in range(world)])
    return runs


def _one_f_one_b(stages: int, micro_batches: int, rank: int) -> list[tuple[str, int]]:
    """A rank's order of forwards and backwards under 1F1B."""
    warm = min(stages - 1 - rank, micro_batches)
    order, f = [("F", k) for k in range(warm)], warm
    for b in range(micro_batches):
        if f < micro_batches:
            order, f = [*order, ("F", f)], f + 1
        order.append(("B", b))
    return order


def test_the_pipeline_timeline_is_readable_at_the_column_width():
    ranks = [pipeline.PipelineRank(
        r, 4, "1f1b", 8, (r,), 1, None, 0.0, 0.0,
        (tuple(pipeline.Event(kind, k, 0.0, 1.0) for kind, k in _one_f_one_b(4, 8, r)),),
        1, 1) for r in range(4)]
    fig = ch11.plot_pipeline(ch11.replayed_ranks(ranks))
    assert_readable(fig)
    plt.close(fig)


def _falling(steps: int, start: float, end: float, seed: int) -> list[float]:
    """A noisy loss curve from ``start`` down towards ``end``."""
    noise = np.random.default_rng(seed).normal(0, 0.1, steps)
    return list(end + (start - end) * np.exp(-np.arange(steps) / (steps / 4)) + noise)


def test_chapter_1_s_plots_are_readable_at_the_column_width():
    own = {"bert": 5.77, "gpt2": 5.79, "t5": 5.09}  # each objective's context-free loss
    tiny = [TrainedModel(kind, None, None, None, _falling(160, 8.4, loss - 1, i), 0.0)
            for i, (kind, loss) in enumerate(own.items())]
    points = [ScalingPoint(hidden, layers, 100_000 + 12 * layers * hidden**2,
                           12 * layers * hidden**2, 81_920, loss, 1.0)
              for hidden, layers, loss in ((32, 1, 6.85), (64, 1, 6.1), (96, 2, 5.83),
                                           (128, 2, 5.69))]
    for fig in (ch01.plot_loss_curves(tiny, baseline=own), ch01.plot_scaling_law(points)):
        assert_readable(fig)
        plt.close(fig)


def test_chapter_2_s_memory_bars_are_readable_at_the_column_width():
    sizes = {"1B": 1e9, "7B": 7e9, "50B": 50e9, "175B": 175e9}
    singles = {label: memory.training_memory(n, "bf16-mixed", "adam", batch=1, seq_len=2048)
               for label, n in sizes.items()}
    fig = ch02.memory_bars(list(singles.values()), list(singles))
    assert_readable(fig)
    plt.close(fig)


def test_chapter_3_s_plots_are_readable_at_the_column_width():
    runs = {mode: precision.TrainingRun(mode, _falling(60, 2.3, 0.1 if mode != "fp16" else 1.5, i),
                                        [0.9 if mode == "fp16" else 0.0] * 60)
            for i, mode in enumerate(("fp32", "fp16", "fp16-scaled", "bf16"))}
    for fig in (ch03.plot_relative_error(["fp16", "bf16"]), ch03.plot_training(runs),
                ch03.float_fields_diagram()):
        assert_readable(fig)
        plt.close(fig)


def test_chapter_4_s_number_lines_are_readable_at_the_column_width():
    plain = bit_explorer.compare_formats("pi")
    scaled = bit_explorer.store("pi", "int8", scale=4.357579 / 127, block_size=8,
                                label="int8 x absmax scale")
    fig = ch04.number_lines(plain.rows[:6] + [scaled] + plain.rows[6:])
    assert_readable(fig)
    assert len(fig.axes) == len(plain.rows) + 1  # one line per stored value
    plt.close(fig)


def _weights() -> torch.Tensor:
    return torch.randn(64, 256, generator=torch.Generator().manual_seed(0)) * 0.02


def _int4_families() -> dict[str, list[quant.QuantConfig]]:
    """Absmax and zero-point INT4 per tensor, per channel and in groups, as chapter 5 plots them."""
    return {name: [quant.QuantConfig(4, scheme, per) for per in ("tensor", "channel")]
            + [quant.QuantConfig(4, scheme, "group", size) for size in (128, 64, 32)]
            for name, scheme in (("absmax", "absmax"), ("zero-point", "zeropoint"))}


def _ptq_results() -> list[ptq.PTQResult]:
    """Chapter 5's PTQ table with made-up bytes and perplexities: fewer bits, higher perplexity."""
    bits = (32, 16, 16, 8.1, 4.25, 4.5, 5, 4.25, 4.13, 3.25)
    return [ptq.PTQResult(ptq.describe(method), b, int(1.3e6 * b / 8), 0,
                          30 + 8 / b + 0.01 * i, 0.1)
            for i, (method, b) in enumerate(zip(ptq.PTQ_METHODS, bits))]


@pytest.mark.parametrize("plot", [
    lambda: ch05.plot_error_vs_bits(_weights(), _int4_families()),
    lambda: ch05.plot_number_line(torch.randn(12, generator=torch.Generator().manual_seed(0)),
                                  quant.QuantConfig(4, "absmax", "tensor")),
    lambda: ch05.plot_nf4_levels(_weights()),
    ch05.absmax_zeropoint_diagram,
    lambda: ch05.plot_size_vs_perplexity(_ptq_results()),
    lambda: ch05.plot_weight_histograms(torch.nn.Sequential(torch.nn.Linear(128, 32)), "0",
                                        ["int8-channel", "int4-g128", "nf4", "int3-g128"]),
], ids=["error vs bits", "number line", "nf4 levels", "absmax and zero-point",
        "size vs perplexity", "weight histograms"])
def test_chapter_5_s_plots_are_readable_at_the_column_width(plot):
    fig = plot()
    assert_readable(fig)
    plt.close(fig)


def test_chapter_6_s_plots_are_readable_at_the_column_width():
    masks = {f"transformer.h.{i}.{m}.weight": torch.rand(8, 8) > 0.5
             for i in range(4) for m in ("attn.c_attn", "mlp.c_fc")}
    sweep = {scope: {s: (30 * (1 + 3 * s**3), 30 * (1 + s**3)) for s in (0.3, 0.5, 0.7, 0.9)}
             for scope in ("layer", "global")}
    for fig in (ch06.plot_layer_sparsity(masks, "One global threshold at 70 % sparsity: "
                                                "what each matrix loses"),
                ch06.plot_sparsity_sweep(sweep, 30.0)):
        assert_readable(fig)
        plt.close(fig)


def test_chapter_7_s_plots_are_readable_at_the_column_width():
    references = {"RTN 4-bit per channel": 31.0, "RTN 3-bit per channel": 34.0, "FP32": 30.0}
    calibration = ch07.plot_calibration((1, 4, 16, 64),
                                        {"GPTQ 3-bit per channel": [33.5, 32.6, 31.9, 31.6]},
                                        references)
    bits = ch07.plot_bits((3, 4, 6, 8), [31.0, 30.24, 30.01, 30.0], [30.35, 30.08, 30.003, 30.0],
                          30.0)
    for fig in (calibration, bits):
        assert_readable(fig)
        plt.close(fig)
