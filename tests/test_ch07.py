"""Chapter 7's tables and plots: the published rows as transcribed, byte counts that add up, readable figures."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib.chapters import ch07
from course_lib.compression import quant  # noqa: E402
from course_lib.numbers import memory


def test_the_paper_table_shows_the_published_rows_and_their_changes():
    text = str(ch07.paper_table())
    for name in ("OPT-125M", "OPT-350M", "OPT-175B"):
        assert name in text
    assert "37.28 (+34.8%)" in text and "31.12 (+12.5%)" in text  # OPT-125M, RTN and GPTQ at 4 bits
    assert "1.3e3" in text and "7.3e3" in text  # 3-bit RTN, as the paper prints it
    assert "8.370 (+0.4%)" in text  # OPT-175B, GPTQ 4-bit
    course = dict(zip(ch07.PAPER_COLUMNS, (2.6, 2.65, 2.62, 2.8, 2.7)))
    row = str(ch07.paper_table(course, ["OPT-125M"], course_label="toy")).splitlines()[-1]
    assert row.startswith("toy") and "2.650 (+1.9%)" in row and "2.800 (+7.7%)" in row
    with pytest.raises(ValueError, match="no published row"):
        ch07.paper_table(models=["OPT-66B"])
    with pytest.raises(ValueError, match="missing"):
        ch07.paper_table({"FP16": 2.6})


def test_the_device_table_adds_up_for_a_small_shape():
    shape = memory.shape_for_params(7e9)
    h = shape.hidden
    per_layer = [(3 * h, h), (h, h), (4 * h, h), (h, 4 * h)]
    n_blocks = shape.n_layers * sum(a * b for a, b in per_layer)
    config = quant.get_config("int4-g128")
    by_hand = shape.n_layers * sum(sum(quant.storage_bytes(m, config).values()) for m in per_layer)
    by_hand += 2 * (shape.n_params - n_blocks)  # embedding, positions, biases, norms in FP16
    rows = ch07.devices_table((7e9,)).rows
    gptq4 = next(r for r in rows if r[1] == "GPTQ INT4 g128")
    assert gptq4[3] == f"{memory.gb(by_hand):.1f}"
    fp16 = next(r for r in rows if r[1] == "FP16")
    assert fp16[3] == f"{memory.gb(2 * shape.n_params):.1f}" and fp16[4:] == ["no", "yes"]
    assert [r[4] for r in rows] == ["no", "yes", "yes", "yes"]  # an 8 GB phone: weights only
    assert all(r[5] == "no" for r in ch07.devices_table((70e9,)).rows)  # 70B never fits 24 GB


def test_the_plots_are_labelled():
    fig = ch07.plot_calibration([1, 4, 16], {"GPTQ 3-bit": [2.7, 2.66, 2.65]},
                                     {"RTN 3-bit": 2.72, "FP32": 2.62})
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert {t.get_text() for t in ax.get_legend().get_texts()} == {"GPTQ 3-bit", "RTN 3-bit", "FP32"}
    plt.close(fig)
    fig = ch07.plot_bits([3, 4, 6, 8], [2.72, 2.64, 2.623, 2.62], [2.65, 2.63, 2.62, 2.62], 2.62)
    assert len(fig.axes) == 2 and all(a.get_xlabel() and a.get_ylabel() for a in fig.axes)
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == list(ch07.PAPER_OPT_WIKITEXT2)
    plt.close(fig)
    with pytest.raises(ValueError, match="3 calibration sizes"):
        ch07.plot_calibration([1, 4, 16], {"GPTQ": [2.7]}, {})
    with pytest.raises(ValueError, match="one perplexity per bit width"):
        ch07.plot_bits([3, 4], [2.7], [2.6, 2.6], 2.6)
