"""DDP's buckets watched: runs over an emulated link, their prediction, and the reducer's facts."""

from __future__ import annotations

import pytest
import torch

from course_lib.parallel import buckets, cost_model, launch, links

GLOO = cost_model.Link("toy gloo", bandwidth=1e9, latency=1e-4, source="")


def _transfer(start: float, n_bytes: int = 1000) -> links.Transfer:
    return links.Transfer("all-reduce", n_bytes, 2, start, start, start, 0.0, "")


def _run(rank: int, starts: list[float], backward: float = 0.0, scale: float = 10.0,
         link: str = "Ethernet 100G") -> buckets.LinkRun:
    marks = buckets.StepMarks(backward - 0.01, backward, backward + 10.0, backward + 10.1)
    return buckets.LinkRun(rank, link, scale, 2, None, (marks,),
                           tuple(_transfer(s) for s in starts), 2000)


def test_layer_stack_is_seeded_and_checks_its_sizes():
    a, b = buckets.layer_stack(8, 3, seed=1), buckets.layer_stack(8, 3, seed=1)
    assert len(a) == 6 and all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    with pytest.raises(ValueError, match="depth must be a whole number >= 1"):
        buckets.layer_stack(8, 0)


def test_prediction_waits_for_the_slower_rank_and_queues_the_buckets():
    fast, slow = _run(0, [0.1, 0.2]), _run(1, [0.15, 0.5])
    each = (cost_model.ring_allreduce_time(1000, 2, GLOO)
            + 10 * cost_model.ring_time("all-reduce", 1000, 2, "Ethernet 100G"))
    first_end = 0.15 + each
    expected = max(first_end, 0.5) + each
    assert buckets.predicted_backward([fast, slow], 0, GLOO) == pytest.approx([expected] * 2)
    # a wrong model that ignored the other rank would predict 0.2 + each for rank 0
    assert buckets.predicted_backward([fast], 0, GLOO)[0] < expected


def test_prediction_needs_the_same_buckets_on_every_rank():
    with pytest.raises(ValueError, match="same buckets"):
        buckets.predicted_backward([_run(0, [0.1]), _run(1, [0.1, 0.2])], 0, GLOO)
    with pytest.raises(ValueError, match="every rank"):
        buckets.predicted_backward([], 0, GLOO)
    with pytest.raises(ValueError, match="at least 2 steps"):
        buckets.backward_medians([_run(0, [0.1])], GLOO)


def test_a_run_over_the_link_overlaps_and_agrees_with_its_prediction():
    runs = [{"link": "Ethernet 100G", "scale": 300, "bucket_cap_mb": 0.015},
            {"link": "Ethernet 100G", "scale": 300}]
    per_rank = launch.launch("course_lib.parallel.buckets:train_over_link", 2,
                             {"runs": runs, "steps": 3, "width": 64, "depth": 4, "batch": 64},
                             echo=False, timeout=120)
    small, default = zip(*per_rank)
    assert len(small[0].step_transfers(0)) == 1  # DDP's first step: one bucket
    assert len(small[0].step_transfers(1)) == 4  # then one per layer (cap below a layer)
    assert len(default[0].step_transfers(1)) == 1
    for ranks in (small, default):
        for run in ranks:
            for step, marks in enumerate(run.steps):
                assert marks.forward <= marks.backward <= marks.backward_done <= marks.end
                assert marks.backward_done >= run.step_transfers(step)[-1].done
        measured, predicted = buckets.backward_medians(ranks, GLOO)
        assert 0.75 * predicted - 0.01 <= measured <= 1.6 * predicted + 0.01, (measured,
                                                                             predicted)


def test_the_reducer_facts():
    facts = launch.launch("course_lib.parallel.buckets:reducer_facts", 2, {"steps": 3},
                          echo=False, timeout=120)[0]
    assert [len(s) for s in facts.bucket_sizes] == [1, 4, 4]
    assert facts.logged["has_rebuilt_buckets"] == 1
    assert facts.unused["default"].startswith("Expected to have finished reduction")
    assert facts.unused["find_unused_parameters"] == facts.unused["static_graph"] == ""
    assert facts.unused_logged["find_unused_parameters"]["has_rebuilt_buckets"] == 0


def test_the_chapter_shows_a_run_over_the_link():
    import matplotlib.pyplot as plt

    from course_lib.chapters import ch08

    marks = buckets.StepMarks(0.0, 0.01, 0.2, 0.21)
    ranks = [buckets.LinkRun(r, "Ethernet 100G", 10.0, 2, 1.0, (marks, marks),
                             (_transfer(0.05), _transfer(0.15)), 2000) for r in (0, 1)]
    fig = ch08.plot_link_timeline(ranks, step=1)
    ax = fig.axes[0]
    assert ax.get_xlabel() and ax.get_title() and ax.get_legend() is not None
    assert [t.get_text() for t in ax.get_yticklabels()][:2] == ["rank 0: link", "rank 0: compute"]
    plt.close(fig)
    table = ch08.link_sweep_table([ranks], GLOO)
    assert table.rows[0][:3] == ["1", "10", "2"]
