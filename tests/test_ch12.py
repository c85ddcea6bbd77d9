"""Chapter 12's tables and plots (course_lib.chapters.ch12): the published layouts multiply out
to their GPUs and their papers' figures, the formula's K/V bytes of Llama 3's 128K stage, and
the causal-work figure's staircase against its balanced bars."""

from __future__ import annotations

import matplotlib
import pytest

from course_lib.chapters import ch11, ch12
from course_lib.parallel import context_parallel, experts

matplotlib.use("Agg")


def test_llama3s_long_context_stage_is_chapter_11s_table_4_row():
    run, row = ch12.LLAMA3_128K, ch11.LLAMA3_TABLE4[2]
    assert (run.tp, run.cp, run.pp, run.dp, run.seq_len) == (row.tp, row.cp, row.pp, row.dp,
                                                             row.seq_len)
    assert run.tflops == row.tflops * 1e12
    assert run.block_params * 126 == pytest.approx(405e9, rel=0.01)


def test_the_kv_bytes_are_the_formula_on_a_tensor_parallel_share():
    run = ch12.LLAMA3_128K
    assert run.kv_bytes() == 15 * 2 * 8192 * 1 * 128 * 2
    assert run.kv_held_bytes() * 8 == run.q_bytes()  # GQA: 16 of 128 heads, K and V
    assert 0.03 < run.allgather_seconds() / (run.attention_seconds()
                                              + run.matmul_seconds()) < 0.07
    rows = dict(ch12.llama3_cp_table().rows)
    assert rows["K/V sent (the formula)"] == "62.9 MB"


def test_deepseek_v3s_layout_multiplies_out():
    v3 = ch12.DEEPSEEK_V3
    assert v3.pp * v3.dp == 2048 and v3.ep_nodes == 8 and v3.experts_per_gpu == 4
    assert v3.node_limit * v3.nvlink_bandwidth / v3.ib_bandwidth == pytest.approx(12.8)


def test_the_deepseek_table_reads_the_traffic():
    traffic = experts.node_traffic(tokens=256)
    table = ch12.deepseek_table(traffic)
    assert [row[0] for row in table.rows] == ["any of the 8 nodes", "at most 4 nodes"]
    assert float(table.rows[1][1]) <= 4 < float(table.rows[0][1])
    assert "256 tokens" in table.headers[3]


def test_the_causal_work_plot_has_a_staircase_and_flat_bars():
    fig = ch12.plot_causal_work(64, 4)
    bars = [p.get_height() for p in fig.axes[0].patches]
    plain, balanced = bars[:4], bars[4:]
    assert plain == sorted(plain) and plain[-1] == 1.0
    assert len(set(balanced)) == 1
    assert context_parallel.load_imbalance(plain) == pytest.approx(8 / 5)
