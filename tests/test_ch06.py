"""Chapter 6's own plots and tables (course_lib.chapters.ch06): labelled, and showing the numbers they are given."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import copy  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from conftest import tiny_gpt2  # noqa: E402

from course_lib.chapters import ch06  # noqa: E402
from course_lib.compression import prune  # noqa: E402

SWEEP = {"layer": {0.0: (2.6, 2.6), 0.5: (3.0, 2.7)}, "global": {0.0: (2.6, 2.6), 0.5: (3.2, 2.8)}}


def test_sweep_plot_has_one_line_per_scope_and_stage_and_the_dense_reference():
    fig = ch06.plot_sparsity_sweep(SWEEP, dense=2.6)
    ax = fig.axes[0]
    labels = [line.get_label() for line in ax.get_lines()]
    assert labels.count("dense model (2.60)") == 1 and len(labels) == 5
    assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title() and ax.get_yscale() == "log"
    ys = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert ys["global threshold, pruned + fine-tuned"] == [2.6, 2.8]
    plt.close(fig)


def test_layer_sparsity_bars_are_the_pruned_share_of_each_matrix():
    masks = {"transformer.h.0.attn.c_attn.weight": torch.tensor([[True, False], [False, False]]),
             "transformer.h.1.mlp.c_fc.weight": torch.tensor([[True, True], [True, False]])}
    fig = ch06.plot_layer_sparsity(masks, "demo")
    ax = fig.axes[0]
    assert [round(p.get_height()) for p in ax.patches] == [75, 25]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["block 0 attn.c_attn", "block 1 mlp.c_fc"]
    assert ax.get_lines()[0].get_ydata()[0] == 50  # 4 of the 8 weights pruned in all
    plt.close(fig)


def test_sweep_table_lists_every_sparsity_and_both_stages():
    text = str(ch06.sweep_table(SWEEP, 2.6))
    assert "Test perplexity (dense model: 2.60)" in text
    assert "layer: pruned" in text and "global: fine-tuned" in text
    assert "50%" in text and "3.20" in text and "2.80" in text


def test_sparsity_table_counts_zeros():
    model = tiny_gpt2(hidden=16, vocab=40, layers=2, positions=32, seed=3)
    pruned = prune.apply_masks(copy.deepcopy(model), prune.magnitude_masks(model, 0.5))
    table = ch06.sparsity_table(pruned)
    text = str(table)
    assert "attn.c_attn" in text and "all prunable weights" in text and "50.0%" in text
    assert "<table" in table._repr_html_()
