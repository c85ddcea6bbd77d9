"""Chapter 12's tables and plots (course_lib.chapters.ch12): the published layouts multiply out
to their GPUs and their papers' figures, the formula's K/V bytes of Llama 3's 128K stage,
the causal-work figure's staircase against its balanced bars, the activation-memory figure
against 1/cp (readable at the book's column width) and its table, and the EP x DP mesh's
table."""

from __future__ import annotations

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from course_lib.chapters import ch11, ch12  # noqa: E402
from course_lib.parallel import (context_memory, context_parallel, expert_mesh,  # noqa: E402
                                 experts)
from test_figures_readable import assert_readable  # noqa: E402


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


def memory_records() -> list[context_memory.CPMemory]:
    """A rank's measurement as the library returns it: the ring on 1/cp, the all-gather not."""
    def saved(cp: int, kept: int) -> dict[str, context_memory.SavedTensors]:
        return {"all-gather": context_memory.SavedTensors([((128,), kept),
                                                           ((8, 128 // cp, 128), 4096 // cp)]),
                "ring": context_memory.SavedTensors([((8, 128 // cp, 24), 1024 // cp)])}
    return [context_memory.CPMemory(cp, 0, 128, 128 // cp, saved(cp, 1024)) for cp in (1, 2, 4)]


def test_the_memory_table_reads_the_shares_and_what_did_not_shrink():
    table = ch12.cp_memory_table(memory_records())
    assert [row[0] for row in table.rows] == ["1", "2", "4"]
    assert [row[6] for row in table.rows] == ["1.000", "0.500", "0.250"]  # the ring
    assert [row[4] for row in table.rows] == ["0", "1,024", "1,024"]
    assert table.rows[2][3] == f"{(1024 + 1024) / 5120:.3f}"


def test_the_memory_plot_draws_the_ring_on_one_over_cp_and_is_readable():
    fig = ch12.plot_cp_memory(memory_records())
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert list(lines["1/cp"].get_ydata()) == [1, 0.5, 0.25]
    assert list(lines["ring, measured"].get_ydata()) == [1, 0.5, 0.25]
    assert lines["all-gather, measured"].get_ydata()[-1] > 0.25
    assert "saved" in fig.axes[0].get_ylabel() and "cp" in fig.axes[0].get_xlabel()
    assert_readable(fig)
    plt.close(fig)


def test_the_mesh_table_says_what_each_rank_holds_and_where_it_sends():
    traffic = experts.EPTraffic(dispatch_bytes=960, dispatch_bytes_to_others=448)
    ranks = [expert_mesh.EPMeshCheck(r, 2, 2, r // 2, r % 2, (r % 2, r % 2 + 2),
                                     (r // 2 * 2, r // 2 * 2 + 1), (2 * (r % 2), 2 * (r % 2) + 1),
                                     traffic, 4096, 256, {"output": 0.0, "grad w_in": 1e-16})
             for r in range(4)]
    table = ch12.ep_mesh_table(ranks)
    assert "2 replicas x 2 expert ranks" in table.title
    assert table.rows[3][:6] == ["3", "1, 1", "2, 3", "2 3", "448", "1 3"]
    assert table.rows[3][-1] == "1.0e-16"


def test_the_planner_plans_the_published_layouts_with_the_chapters_formulas():
    """The planner's CP bytes are section 5's, its EP bytes the all-to-all's bound less the
    rank's own share; each row is the validation's, and the table prints both runs."""
    (long_row, long), (moe_row, moe) = ch12.planned_runs()
    assert (long.setup.cp, moe.setup.ep) == (16, 64)
    assert long.time.cp_bytes == ch12.LLAMA3_128K.kv_bytes() and long.time.ep == 0
    v3 = ch12.DEEPSEEK_V3
    assert moe.time.ep_bytes == (v3.ep - 1) / v3.ep * v3.k * 4096 * v3.hidden * 2
    assert moe.time.cp == 0 and long_row.run.name == ch12.PLANNED[0]
    assert long_row.ratio == pytest.approx(long_row.predicted / 380)
    text = str(ch12.planned_table([(long_row, long), (moe_row, moe)]))
    assert "CP 16" in text and "EP 64" in text and "62.9" in text and "462.4" in text
