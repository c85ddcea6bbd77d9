"""Pipeline parallelism of chapter 11 (course_lib.parallel.pipeline): the checks of
stages and micro-batches and their messages, the stages chained in one process equal to
the whole GPT-2, the bubble and the activations held replayed from unit-time schedules
(exactly (p - 1) / (m + p - 1); GPipe holds m micro-batches, 1F1B at most p - i); and,
marked slow, GPipe and 1F1B on 2 gloo ranks with PyTorch's schedules: loss and
gradients equal to one process in float64, every micro-batch timed, the activations held
per stage. The 4-stage runs are in tests/test_mesh.py, which starts 4 ranks once."""

from __future__ import annotations

import pytest
import torch

from course_lib.chapters import ch11_lab
from course_lib.parallel import checkpointing, launch, pipeline
from course_lib.parallel.pipeline import Event
from course_lib.text import course_model, models

from conftest import refusal, schedule_order

pytestmark = pytest.mark.usefixtures("one_torch_thread")



# --- stages and micro-batches ---------------------------------------------------------

def test_more_stages_than_blocks_names_the_limit():
    with pytest.raises(ValueError, match=r"5 pipeline stages for a model of 4 "
                                         r"transformer blocks: .* at most 4 stages"):
        pipeline.check_stages(5, 4)
    with pytest.raises(ValueError, match="at least 2 stages"):
        pipeline.check_stages(1, 4)


def test_micro_batches_must_split_the_batch_and_suit_1f1b():
    with pytest.raises(ValueError, match=r"a batch of 8 rows does not split into 3 "
                                         r"equal micro-batches; use one of 1, 2, 4, 8"):
        pipeline.check_micro_batches(8, 3, 2)
    with pytest.raises(ValueError, match=r"1F1B needs at least as many micro-batches "
                                         r"as stages .*: 2 < 4; use 4 or more"):
        pipeline.check_micro_batches(8, 2, 4, "1f1b")
    assert pipeline.check_micro_batches(8, 2, 4, "gpipe") == 2
    with pytest.raises(ValueError, match="unknown schedule 'zb'"):
        pipeline.check_micro_batches(8, 2, 2, "zb")


def test_blocks_are_cut_into_consecutive_runs():
    assert pipeline.split_layers(4, 2) == [range(0, 2), range(2, 4)]
    assert pipeline.split_layers(5, 3) == [range(0, 2), range(2, 4), range(4, 5)]
    assert pipeline.split_layers(4, 4) == [range(i, i + 1) for i in range(4)]


@pytest.mark.parametrize("stages", [2, 4])
def test_stages_chained_compute_the_whole_model(tokenizer, stages):
    config = course_model.course_model_config(tokenizer)
    model = models.build_model(config, seed=0).double()
    ids = torch.randint(0, 4096, (2, 16), generator=torch.Generator().manual_seed(0))
    x = ids
    for stage in range(stages):
        x = pipeline.GPT2Stage(model, stage, stages)(x)
    whole = model(ids, use_cache=False).logits
    assert torch.allclose(x, whole, rtol=0, atol=1e-12)
    with torch.no_grad():
        loss = pipeline.causal_loss(whole.float(), ids)
        theirs = model.float()(ids, labels=ids).loss  # transformers' loss, in float32
    assert float(loss) == pytest.approx(float(theirs), rel=1e-6)


def test_a_stage_needs_the_fused_attention(tokenizer):
    config = models.tiny_config("gpt2", tokenizer, attention="eager")
    with pytest.raises(ValueError, match="attn_implementation 'sdpa'.*uses 'eager'"):
        pipeline.GPT2Stage(models.build_model(config), 0, 2)


# --- schedules in unit time: the bubble and what a stage holds -----------------------

def schedule(stages: int, micro_batches: int, kind: str) -> list[list[Event]]:
    """Each stage's work in GPipe's or torch's 1F1B order: forward 1 long, backward 2.

    A forward keeps 10 bytes.
    """
    return [[Event(k, m, 0.0, 1.0 if k == "F" else 2.0, 10) for k, m in order]
            for order in schedule_order(stages, micro_batches, kind)]


@pytest.mark.parametrize("stages", [2, 4])
@pytest.mark.parametrize("micro_batches", [1, 2, 4, 8])
@pytest.mark.parametrize("kind", ["gpipe", "1f1b"])
def test_a_replayed_schedule_idles_as_the_formula_says(stages, micro_batches, kind):
    timelines = pipeline.replay(schedule(stages, micro_batches, kind))
    ranks = [pipeline.PipelineRank(i, stages, kind, micro_batches, (i,), 0, None, 0.0,
                                   0.0, (tuple(t),), *pipeline.held(t))
             for i, t in enumerate(timelines)]
    theory = pipeline.theoretical_bubble(stages, micro_batches)
    result = pipeline.bubble(ranks)
    assert result.measured == pytest.approx(theory, abs=1e-12)
    assert result.replayed == pytest.approx(theory, abs=1e-12)
    peaks = [r.peak_held for r in ranks]
    if kind == "gpipe":
        assert peaks == [micro_batches] * stages
    else:
        assert peaks == [min(micro_batches, stages - i) for i in range(stages)]
    assert [r.peak_bytes for r in ranks] == [10 * p for p in peaks]


def test_the_bubble_needs_every_rank_and_a_complete_step():
    timelines = schedule(2, 2, "gpipe")
    ranks = [pipeline.PipelineRank(i, 2, "gpipe", 2, (i,), 0, None, 0.0, 0.0,
                                   (tuple(t),), 0, 0) for i, t in enumerate(timelines)]
    with pytest.raises(ValueError, match="all 2 ranks of one run in rank order"):
        pipeline.bubble(ranks[:1])
    with pytest.raises(ValueError, match="wait for a micro-batch that never comes"):
        pipeline.replay([timelines[0], timelines[1][:1] + timelines[1][2:]])


# --- the torchrun entry point's flags ------------------------------------------------

@pytest.mark.parametrize(("world", "argv", "message"), [
    (5, [], "5 pipeline stages (one per rank) for the course's GPT-2 of 4 blocks: "
            "every stage needs at least one block; use --nproc-per-node 4 or fewer."),
    (2, ["--micro-batches", "3"], "--global-batch 8, --micro-batches 3: a batch of 8 "
                                  "rows does not split into 3 equal micro-batches"),
    (4, ["--schedule", "1f1b", "--micro-batches", "2"], "1F1B needs at least as many "
                                                        "micro-batches as stages"),
    (2, ["--seq-len", "500"], "--seq-len 500 is longer than the model's context"),
    (2, ["--schedule", "zb"], "argument --schedule: invalid choice: 'zb'"),
])
def test_a_pipeline_that_does_not_fit_is_refused_once(ranks, capsys, world, argv,
                                                      message):
    ranks(world)
    err = refusal(pipeline.main, argv, capsys)
    assert err.count(message) == 1, err
    assert "Traceback" not in err


# --- GPipe and 1F1B on two gloo ranks ------------------------------------------------

RUNS = {(kind, m): {"run": "pipeline", "schedule": kind, "micro_batches": m,
                    "global_batch": 8, "seq_len": 16, "dtype": "float64", "steps": 1}
        for kind in ("gpipe", "1f1b") for m in (2, 4)}


@pytest.fixture(scope="module")
def runs():
    """Every run on 2 ranks, in one launch: (schedule, m) -> (stage 0's, stage 1's)."""
    per_rank = launch.launch("course_lib.parallel.mesh:run_many", 2,
                             {"runs": list(RUNS.values())}, timeout=300, echo=False)
    return dict(zip(RUNS, zip(*per_rank)))


@pytest.mark.slow
def test_a_pipelined_step_computes_one_process_loss_and_gradients(runs):
    """Measured: gradients 1.1e-16 apart, the loss 1.8e-15."""
    for first, last in runs.values():
        assert first.layers == (0, 1) and last.layers == (2, 3)
        assert first.loss is None
        assert last.loss == pytest.approx(last.reference_loss, rel=1e-12)
        assert max(first.grad_gap, last.grad_gap) < 1e-12


@pytest.mark.slow
def test_every_micro_batch_runs_forward_then_backward_once_per_stage(runs):
    for (kind, m), stages in runs.items():
        for r in stages:
            events = r.steps[-1]
            assert sorted((e.kind, e.micro_batch) for e in events) == sorted(
                [("B", i) for i in range(m)] + [("F", i) for i in range(m)])
            assert all(e.end >= e.start for e in events)
            if kind == "gpipe":  # every forward before the first backward
                assert [e.kind for e in events] == ["F"] * m + ["B"] * m
            else:  # the order chapter 11's exercise asks for, as torch's Schedule1F1B ran it
                ran = [f"{e.kind}{e.micro_batch}" for e in events]
                assert ran == ch11_lab._one_f_one_b(r.rank, 2, m), (r.rank, m, ran)


@pytest.mark.slow
def test_gpipe_holds_every_micro_batch_and_1f1b_at_most_p_minus_i(runs):
    """GPipe's peak: the whole batch's activations whatever m; 1F1B's shrinks."""
    for (kind, m), (first, last) in runs.items():
        expected = [m, m] if kind == "gpipe" else [min(m, 2), min(m, 1)]
        assert [first.peak_held, last.peak_held] == expected
    gpipe, one_f = runs[("gpipe", 4)][0], runs[("1f1b", 4)][0]
    assert gpipe.peak_bytes == pytest.approx(runs[("gpipe", 2)][0].peak_bytes, rel=0.01)
    assert one_f.peak_bytes == pytest.approx(gpipe.peak_bytes / 2, rel=0.01)


@pytest.mark.slow
def test_the_measured_bubble_is_a_share_of_the_step(runs):
    """Wall-clock bubbles on a shared CPU are noisy: only their range is checked."""
    for stages in runs.values():
        b = pipeline.bubble(stages)
        assert 0 < b.measured < 1 and 0 <= b.replayed < 1
        assert b.theory == pipeline.theoretical_bubble(2, stages[0].micro_batches)


# --- activation checkpointing, the other way to fit activations ----------------------

def test_checkpointing_keeps_chapter_2s_estimate_and_pays_a_forward_of_the_blocks():
    """Measured at batch 8 x 128 tokens: 51.5 MB kept without, 19.9 MB with
    checkpointing (the estimates 51.4 and 19.9 MB), a step 1.25 times as long (FLOPs:
    1.21)."""
    cost = checkpointing.checkpointing_cost(batch=2, seq_len=32, repeats=1)
    assert 1 <= cost.saved_bytes / cost.estimate < 1.02
    assert 1 <= cost.checkpointed_bytes / cost.checkpointed_estimate < 1.02
    assert cost.checkpointed_block_forwards == 2 * cost.block_forwards == 8
    assert 0.5 < cost.memory_saved < 1
    h, s = 128, 32
    assert cost.block_flops == 2 * 4 * (12 * h * h + 2 * s * h)
    assert cost.expected_time_ratio == pytest.approx(1 + cost.block_flops
                                                     / (3 * cost.model_flops))
    assert cost.seconds > 0 and cost.checkpointed_seconds > 0
    with pytest.raises(ValueError, match="seq_len=500 is longer than the model's"):
        checkpointing.checkpointing_cost(seq_len=500)
