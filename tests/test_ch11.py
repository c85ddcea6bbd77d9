"""Chapter 11's tables and plots (course_lib.chapters.ch11): the equal-stage replay gives the
bubble formula exactly, the uneven one more; the published layouts count their papers' sizes from
their shapes and multiply out to their GPUs; tensor parallelism's all-reduces are cheap on NVLink
and dear across the network."""

from __future__ import annotations

import matplotlib
import pytest

from course_lib.chapters import ch11
from course_lib.parallel import pipeline
from course_lib.parallel.pipeline import Event, PipelineRank

from conftest import schedule_order

matplotlib.use("Agg")


def ranks(stages: int, micro_batches: int, kind: str) -> list[PipelineRank]:
    """Each stage's work in GPipe's or torch's 1F1B order, with arbitrary durations."""
    out = []
    for i, order in enumerate(schedule_order(stages, micro_batches, kind)):
        events = [Event(k, m, 0.0, 0.3 + i if k == "F" else 0.7 * (i + 1), 10)
                  for k, m in order]
        out.append(PipelineRank(i, stages, kind, micro_batches, (i,), 0, None, 0.0, 0.0,
                                (tuple(pipeline.replay([events])[0]) if stages == 1
                                 else tuple(events),), 1, 10))
    return out


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("micro_batches", [2, 4, 8])
@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
def test_equal_stages_replay_to_the_formula_and_uneven_ones_above(stages, micro_batches,
                                                                  kind):
    given = ranks(stages, micro_batches, kind)
    theory = pipeline.theoretical_bubble(stages, micro_batches)
    assert pipeline.bubble(ch11.replayed_ranks(given)).measured == pytest.approx(theory,
                                                                                 abs=1e-12)
    uneven = [(1.0, 2.0)] * (stages - 1) + [(2.5, 5.0)]  # a heavy last stage
    assert pipeline.bubble(ch11.replayed_ranks(given, uneven)).measured > theory + 0.05
    with pytest.raises(ValueError, match="one \\(forward, backward\\) pair per stage"):
        ch11.replayed_ranks(given, [(1.0, 2.0)])


def test_bubble_and_held_tables_and_the_timeline():
    runs = [ch11.replayed_ranks(ranks(2, m, k)) for k in ("gpipe", "1f1b") for m in (4, 8)]
    table = ch11.bubble_table(runs)
    assert [row[-1] for row in table.rows] == ["0.200", "0.111", "0.200", "0.111"]
    assert [row[-2] for row in table.rows] == ["0.200", "0.111", "0.200", "0.111"]
    assert len(ch11.held_table(runs).rows) == 8
    fig = ch11.plot_pipeline(runs[2])
    assert len(fig.axes) == 2


def test_the_layouts_count_their_papers_sizes_and_fill_their_gpus():
    for run in ch11.LAYOUTS:
        assert run.counted == pytest.approx(run.params, rel=0.01)
        assert run.tp * run.pp * run.dp == run.gpus
    rows = {row[0]: row for row in ch11.layout_table().rows}
    assert rows["Llama 3 405B"][3:6] == ["8", "16", "128 FSDP (grads, Adam)"]
    assert rows["Megatron-LM GPT, 1T"][3:6] == ["8", "64", "6 replicated"]
    assert float(rows["Llama 3 405B"][-2]) < 80 < float(rows["Llama 3 405B"][-3])


def test_as_run_the_states_are_sharded_the_way_each_paper_says():
    """Megatron-LM replicates a replica's states; Llama 3's FSDP shards gradients and
    Adam's 12 bytes over the 128 replicas and keeps the BF16 weights whole."""
    megatron, llama = ch11.LAYOUTS
    share = llama.counted / (llama.tp * llama.pp)
    assert llama.states_per_gpu() == pytest.approx(2 * share + 14 * share / 128)
    assert 6e9 < llama.states_per_gpu() < 7e9
    mine = megatron.counted / (megatron.tp * megatron.pp)
    assert megatron.states_per_gpu() == pytest.approx(16 * mine)
    assert llama.network == "RoCE 400G" and megatron.network == "InfiniBand HDR"


def test_llama3s_table_adds_up_as_its_paper_prints_it():
    for run in ch11.LLAMA3_TABLE4:
        assert run.tp * run.cp * run.pp * run.dp == run.gpus
        assert run.dp * run.batch_per_dp * run.seq_len == 16 * 2**20  # "16M"
    table = ch11.llama3_table()
    assert table.headers[:5] == ["GPUs", "TP", "CP", "PP", "DP"]
    assert table.rows[2][:6] == ["16,384", "8", "16", "16", "8", "131,072"]


def test_tensor_parallel_all_reduces_fit_nvlink_not_the_network():
    table = ch11.tp_link_table()
    share = {(row[0], row[1]): float(row[-1].rstrip("%")) / 100 for row in table.rows}
    for run in ch11.LAYOUTS:
        assert share[run.name, run.node] < 0.15 < 0.5 < share[run.name, run.network]
