"""The course's diagrams (course_lib.base.diagrams and each chapter's diagram
functions) and chapter 5's two fixed plots: each builds, is titled and labelled, draws
the numbers the library computes, and reads at the book's column width (no two texts
overlap, no font below 9 points as a reader sees it)."""

from __future__ import annotations

import math

import matplotlib
import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure
from matplotlib.text import Text
from torch import nn

from course_lib.base import diagrams
from course_lib.chapters import ch03, ch05, ch08, ch09, ch09_diagrams, ch10
from course_lib.compression import ptq, quant
from course_lib.hardware import roofline
from course_lib.numbers import format_specs, formats, memory
from course_lib.parallel import cost_model, ring
from course_lib.text import course_model

DIAGRAMS = {
    "float_fields": ch03.float_fields_diagram,
    "absmax_zeropoint": ch05.absmax_zeropoint_diagram,
    "ring_allreduce": ch08.ring_allreduce_diagram,
    "zero_stages": ch09.zero_stages_diagram,
    "fsdp_layer": ch09.fsdp_layer_diagram,
    "roofline": ch10.roofline_diagram,
}

#: Chapter 5's PTQ table as the notebook measured it: method, bits, model kB, file kB,
#: perplexity (the points of its size-against-perplexity plot).
PTQ_ROWS = [
    ("FP32", 32.0, 5336.1, 5341.2, 2.6220),
    ("FP16", 16.0, 2668.0, 2673.1, 2.6220),
    ("BF16", 16.0, 2668.0, 2673.2, 2.6220),
    ("INT8 absmax per channel", 8.106, 1421.3, 1428.4, 2.6225),
    ("INT4 zero-point g128", 4.156, 774.1, 782.9, 2.6772),
    ("INT4 zero-point g64", 4.312, 799.7, 808.5, 2.6590),
    ("INT4 zero-point g32", 4.625, 850.9, 859.7, 2.6492),
    ("NF4", 4.5, 830.5, 837.5, 2.6714),
    ("NF4 + DQ", 4.127, 769.4, 779.9, 2.6722),
    ("INT3 zero-point g128", 3.148, 609.0, 617.8, 2.8853),
]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text().strip()]


def by_gid(fig: Figure, kind: type, prefix: str) -> dict[str, object]:
    return {
        a.get_gid(): a
        for a in fig.findobj(kind)
        if (a.get_gid() or "").startswith(prefix)
    }


def assert_readable(fig: Figure) -> None:
    assert diagrams.overlapping_texts(fig) == []
    size, text = diagrams.smallest_font(fig)
    assert size >= 9, f"{text!r} is {size:.1f} pt at the book's column width"


@pytest.mark.parametrize("name", DIAGRAMS)
def test_every_diagram_builds_titled_and_readable_at_the_column_width(name):
    fig = DIAGRAMS[name]()
    assert isinstance(fig, Figure)
    titles = [ax.get_title() for ax in fig.axes] + texts(fig)
    assert any(len(t) > 20 for t in titles), "a diagram says what it shows"
    assert_readable(fig)
    fig.canvas.draw()
    width = (
        fig.get_tightbbox().width + 2 * plt.rcParams["savefig.pad_inches"]
    ) * fig.dpi
    assert 600 <= width <= diagrams.COLUMN_PIXELS  # fills the column, never shrunk


def test_float_fields_draw_pi_in_each_format_with_the_formats_widths():
    fig = ch03.float_fields_diagram()
    shown = texts(fig)
    for name in ("fp32", "fp16", "bf16", "e4m3", "e5m2"):
        fmt = format_specs.get_format(name)
        cells = by_gid(fig, Text, f"{name}-bit")
        assert len(cells) == fmt.total_bits == 1 + fmt.exponent_bits + fmt.mantissa_bits
        bits = formats.encode(math.pi, fmt)
        drawn = "".join(
            cells[f"{name}-bit{i}"].get_text() for i in range(fmt.total_bits)
        )
        assert drawn == formats.bit_string(bits, fmt, sep="")
        assert f"{name.upper()}: {fmt.total_bits} bits" in shown
        assert any(
            t.startswith(f"π → {formats.decode(bits, fmt):.9g}\n") for t in shown
        )
    for width in (1, 8, 23, 5, 10, 7, 4, 3, 2):
        assert f"{width} bit{'s' * (width != 1)}" in shown


def test_float_fields_refuse_an_integer_format():
    with pytest.raises(ValueError, match="float formats"):
        ch03.float_fields_diagram(names=("fp16", "int8"))


def test_absmax_zeropoint_shows_the_librarys_scales_zero_point_and_wasted_codes():
    values = [
        0.0,
        0.5,
        1.25,
        2.0,
        3.5,
    ]  # one-sided: absmax never uses its negative codes
    fig = ch05.absmax_zeropoint_diagram(values)
    shown = "\n".join(texts(fig) + [ax.get_title() for ax in fig.axes])
    x = torch.tensor(values)
    absmax = quant.quantize(
        x, quant.QuantConfig(4, "absmax", "tensor", scale_dtype="fp32")
    )
    zp = quant.quantize(
        x, quant.QuantConfig(4, "zeropoint", "tensor", scale_dtype="fp32")
    )
    assert f"scale = {float(absmax.scales().flatten()[0]):.4g}" in shown
    assert f"scale = {float(zp.scales().flatten()[0]):.4g}" in shown
    assert f"round(−min / scale) = {int(zp.unpack().zero.flatten()[0])}" in shown
    assert "7 of 15 codes wasted" in shown  # codes -7 .. -1
    assert_readable(fig)
    symmetric = ch05.absmax_zeropoint_diagram([-2.0, -1.0, 1.0, 2.0])
    assert not any("of 15 codes wasted" in t for t in texts(symmetric))  # absmax: none
    with pytest.raises(ValueError, match="at least 2"):
        ch05.absmax_zeropoint_diagram([0.0, 0.0])


def test_ring_panels_follow_the_librarys_schedule():
    world = 4
    fig = ch08.ring_allreduce_diagram()
    cells = {gid: int(t.get_text()) for gid, t in by_gid(fig, Text, "ring-").items()}
    assert (
        len(cells) == (2 * (world - 1) + 1) * world * world
    )  # 7 panels of 4 x 4 chunks

    def panel(i):
        return [
            [cells[f"ring-panel{i}-rank{r}-chunk{c}"] for c in range(world)]
            for r in range(world)
        ]

    assert panel(0) == [[1] * world] * world
    after_reduce_scatter = panel(world - 1)
    for rank, row in enumerate(
        after_reduce_scatter
    ):  # rank r holds chunk r + 1, summed
        assert [c for c, n in enumerate(row) if n == world] == [(rank + 1) % world]
    assert panel(2 * (world - 1)) == [[world] * world] * world
    arrows = [t for t in texts(fig) if t.startswith("chunk ")]
    sent = [f"chunk {chunk}" for _, _, _, chunk, _ in ring.ring_schedule(world)]
    assert sorted(arrows) == sorted(sent)
    factor = cost_model.ring_allreduce_bytes(1.0, world)
    assert any(f"= {factor:g} S." in t for t in texts(fig))


def test_zero_stages_draw_the_estimators_bytes():
    n, world = 7.5e9, 4
    fig = ch09.zero_stages_diagram(world, n)
    boxes = by_gid(fig, matplotlib.patches.Rectangle, "zero-stage")
    base = memory.training_memory(n, "bf16-mixed")
    whole = {
        "parameters": base.weights,
        "gradients": base.gradients,
        "optimizer states": base.master_weights + base.optimizer_states,
    }
    assert {k: v / n for k, v in whole.items()} == {
        "parameters": 2,
        "gradients": 2,
        "optimizer states": 12,
    }
    unit = boxes["zero-stage0-rank0-parameters-whole"].get_width() / 2
    for stage in range(4):
        b = memory.training_memory(n, "bf16-mixed", gpus=world, zero_stage=stage)
        held = {
            "parameters": b.weights,
            "gradients": b.gradients,
            "optimizer states": b.master_weights + b.optimizer_states,
        }
        for rank in range(world):
            for state in held:
                gid = f"zero-stage{stage}-rank{rank}-{state}"
                assert boxes[f"{gid}-whole"].get_width() == pytest.approx(
                    unit * whole[state] / n
                )
                assert boxes[gid].get_width() == pytest.approx(unit * held[state] / n)
        assert any(f"= {memory.gb(b.model_states):,.3g} GB" in t for t in texts(fig))
    assert ch09.zero_stages_diagram is ch09_diagrams.zero_stages_diagram
    with pytest.raises(ValueError, match="world_size"):
        ch09.zero_stages_diagram(1)


def test_fsdp_layer_shows_one_course_model_block():
    world = 4
    fig = ch09.fsdp_layer_diagram(world)
    d = course_model.course_model_config().n_embd
    block = 12 * d * d + 13 * d  # a GPT-2 block: attention, MLP, two layer norms
    shown = "\n".join(texts(fig))
    assert f"{block:,} parameters" in shown
    assert f"holds {block * 4 / 1e3:,.0f} kB" in shown  # gathered, FP32
    assert f"holds {block * 4 / 1e3 / world:,.0f} kB" in shown  # one shard
    for step in (
        "all-gather",
        "compute forward",
        "free the gathered shards",
        "compute backward",
        "reduce-scatter ∇W",
        "optimizer step",
    ):
        assert step in shown
    assert ch09.fsdp_layer_diagram is ch09_diagrams.fsdp_layer_diagram


def test_roofline_diagram_marks_the_datasheets_ridge_and_regions():
    fig = ch10.roofline_diagram("A100 SXM 80GB", "bf16")
    roof = roofline.roof_of("A100 SXM 80GB", "bf16")
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert "intensity" in ax.get_xlabel() and "FLOP/s" in ax.get_ylabel()
    shown = "\n".join(texts(fig))
    assert f"I = P / W = {roof.ridge:,.0f} FLOP/byte" in shown
    assert f"peak P = {roof.peak / 1e12:,.0f} TFLOP/s" in shown
    assert "memory-bound" in shown and "compute-bound" in shown
    xs, ys = ax.lines[0].get_data()
    assert max(ys) == pytest.approx(roof.peak / 1e12)
    assert ys[0] == pytest.approx(xs[0] * roof.bandwidth / 1e12)


def ptq_results() -> list[ptq.PTQResult]:
    return [
        ptq.PTQResult(m, b, int(kb * 1e3), int(f * 1e3), p, 0.1)
        for m, b, kb, f, p in PTQ_ROWS
    ]


def test_size_vs_perplexity_labels_every_point_and_none_overlaps():
    fig = ch05.plot_size_vs_perplexity(ptq_results())
    assert_readable(fig)
    shown = texts(fig)
    for method, *_ in PTQ_ROWS:
        if method not in ("FP16", "BF16"):
            assert method in shown
    assert "FP16 / BF16" in shown  # the same point, one label


def test_weight_histograms_fit_the_column_in_rows_of_three():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 256))
    configs = ["int8-channel", "int4-g128", "nf4", "int3-g128"]
    fig = ch05.plot_weight_histograms(model, "0", configs)
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 5
    assert len({round(ax.get_position().y0, 3) for ax in shown}) == 2  # two rows
    assert sum(ax.get_xlabel() == "weight value" for ax in shown) == 3
    assert_readable(fig)


def test_the_checks_see_an_overlap_and_a_shrunken_font():
    fig, ax = diagrams.canvas(4, 2, "a title")
    ax.text(1, 1, "one label")
    ax.text(1.05, 1, "another label")
    assert diagrams.overlapping_texts(fig) == [("one label", "another label")]
    wide = plt.figure(figsize=(20, 2))
    wide.text(0.01, 0.5, "tiny", fontsize=10)
    wide.text(0.95, 0.5, "far", fontsize=12)
    size, text = diagrams.smallest_font(wide)
    assert text == "tiny" and size < 5  # 20 inches shrunk into 800 pixels


def test_place_labels_keeps_crowded_labels_apart_and_inside():
    fig, ax = plt.subplots(figsize=(6, 4))
    points = [(1.0, 1.0), (1.05, 1.0), (1.1, 1.02), (2.0, 2.0), (1.0, 1.05)]
    ax.scatter(*zip(*points))
    ax.set_xlim(0, 3)
    ax.set_ylim(0, 3)
    fig.tight_layout()
    labels = diagrams.place_labels(ax, points, [f"label number {i}" for i in range(5)])
    assert len(labels) == 5
    assert diagrams.overlapping_texts(fig) == []
    inside = ax.get_window_extent()
    for label in labels:
        box = Text.get_window_extent(label)
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1


def test_colours_and_cells():
    assert diagrams.ink("#000000") == "white" and diagrams.ink("#FFFFFF") != "white"
    assert diagrams.tint("#4C72B0", 0) == "#ffffff"
    assert diagrams.tint("#4C72B0", 1) == "#4c72b0"
    fig, ax = diagrams.canvas(3, 1)
    with pytest.raises(ValueError, match="one colour per bit"):
        diagrams.bit_cells(ax, 0, 0, "101", ["red"], 0.2, 0.2)
    cells = diagrams.bit_cells(ax, 0, 0, "10", ["red", "blue"], 0.2, 0.2, gid="x")
    assert [c.get_gid() for c in cells] == ["x-bit0", "x-bit1"]
