"""Data parallelism of chapter 8 (course_lib.parallel.ddp and the extended training.train): the batch
checks and DistributedSampler's shards, each rank's micro-batches cut from the seeded global batch,
gradient accumulation in one process; and, marked slow, real DDP runs on 2 gloo processes: the same
training and the same first gradient as one process on the global batch (float64 and float32), a
gradient summed where the mean belongs caught by the gradient check (not by the parameters after
AdamW), bit-identical ranks, no_sync's
halved all-reduces, the course's ring hook and its bytes, the memory of the model states, DDP's
buckets; and the torchrun entry point, whose bad flags are refused once, naming the flag, before any
rank joins the group. Also the typed results and chapter 8's scaling plot."""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import inspect
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

from course_lib.chapters import ch08
from course_lib.numbers import memory
from course_lib.parallel import cost_model, ddp, launch, links, ring
from course_lib.parallel.traffic import BucketRecord
from course_lib.text import course_model, models, training

from conftest import refusal

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]


# --- batches and shards ----------------------------------------------------------------------------

def test_batch_that_does_not_split_across_ranks_suggests_multiples():
    with pytest.raises(ValueError, match=r"7 rows .* 2 rank\(s\) x 1 micro-batch.*multiple of 2, e.g. 2, 4, 6"):
        ddp.check_batch(7, 2)


def test_batch_that_does_not_split_into_micro_batches_suggests_multiples():
    with pytest.raises(ValueError, match=r"2 rank\(s\) x 3 micro-batch\(es\); use a multiple of 6, e.g. 6, 12, 18"):
        ddp.check_batch(8, 2, accumulate=3)
    ddp.check_batch(12, 2, accumulate=3)
    ddp.check_batch(8, 2, accumulate=2)


@pytest.mark.parametrize("accumulate", [0, -1, 2.0])
def test_accumulate_that_is_not_a_positive_whole_number_is_refused(accumulate):
    with pytest.raises(ValueError, match=rf"accumulate must be a whole number >= 1, got {accumulate}"):
        ddp.check_batch(8, 2, accumulate)


def test_a_recipe_longer_than_the_models_context_is_refused():
    assert ddp.context_length() == course_model.course_model_config().n_positions == 128
    assert ddp.recipe_for(steps=2, global_batch=8, seq_len=128, lr=3e-3, seed=0).seq_len == 128
    with pytest.raises(ValueError, match=r"seq_len=1000 is longer than the model's context: .* "
                                         r"at most 128 tokens; use seq_len <= 128"):
        ddp.recipe_for(steps=2, global_batch=8, seq_len=1000, lr=3e-3, seed=0)


@pytest.mark.parametrize("rows", [0, -8, True, 8.0])
def test_batch_that_is_not_a_positive_whole_number_is_refused(rows):
    with pytest.raises(ValueError, match="whole number >= 1"):
        ddp.check_batch(rows, 2)


@pytest.mark.parametrize(("n_rows", "world"), [(8, 1), (8, 2), (12, 3), (8, 4), (6, 6)])
def test_shards_are_disjoint_and_cover_the_batch(n_rows, world):
    shards = [ddp.shard(n_rows, world, rank) for rank in range(world)]
    assert all(len(s) == n_rows // world for s in shards)
    assert sorted(row for s in shards for row in s) == list(range(n_rows))
    assert shards[0] == list(range(0, n_rows, world))  # DistributedSampler without shuffle: strided


def test_shard_refuses_an_uneven_batch():
    with pytest.raises(ValueError, match="multiple of 3"):
        ddp.shard(8, 3, 0)


@pytest.mark.parametrize("accumulate", [1, 2])
def test_local_micro_batches_are_the_ranks_rows_of_the_global_batch(tokenizer, accumulate):
    recipe = ddp.recipe_for(steps=2, global_batch=8, seq_len=16, lr=3e-3, seed=3)
    world = 2
    global_batches = list(training.training_batches("gpt2", tokenizer, recipe))
    assert len(global_batches) == recipe.steps
    for rank in range(world):
        micro = list(ddp.local_batches(tokenizer, recipe, world, rank, accumulate))
        assert len(micro) == recipe.steps * accumulate
        rows = torch.tensor(ddp.shard(8, world, rank))
        for step, full in enumerate(global_batches):
            parts = micro[step * accumulate:(step + 1) * accumulate]
            assert all(p["input_ids"].shape == (8 // world // accumulate, 16) for p in parts)
            for key, value in full.items():
                assert torch.equal(torch.cat([p[key] for p in parts]), value[rows])


# --- gradient accumulation in one process ----------------------------------------------------------

def flat(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@pytest.mark.parametrize(("dtype", "atol"), [(torch.float64, 1e-12), (torch.float32, 1e-5)])
def test_two_micro_batches_of_four_train_like_one_batch_of_eight(tokenizer, dtype, atol):
    """In float32 the two runs differ by about 1.4e-6 after 2 steps: AdamW divides each gradient by
    its own root mean square, which turns the rounding of near-zero gradients into visible steps."""
    config = course_model.course_model_config(tokenizer)
    recipe = training.Recipe(steps=2, batch_size=8, seq_len=32, lr=3e-3, warmup_steps=2)
    whole = models.build_model(config, seed=0).to(dtype)
    whole_history = training.train(whole, "gpt2", tokenizer, recipe, progress=False)

    def halves():
        for batch in training.training_batches("gpt2", tokenizer, recipe):
            for part in range(2):
                yield {k: v.chunk(2)[part] for k, v in batch.items()}

    steps = []
    split = models.build_model(config, seed=0).to(dtype)
    split_history = training.train(split, "gpt2", tokenizer, recipe, progress=False, batches=halves(),
                                   accumulate=2, on_step=lambda step, loss, opt: steps.append(step))
    assert steps == [0, 1]
    assert torch.allclose(flat(whole), flat(split), rtol=0, atol=atol)
    assert split_history == pytest.approx(whole_history, rel=1e-6)  # the loss itself is float32


def test_train_refuses_accumulate_zero(tokenizer):
    model = models.build_model(course_model.course_model_config(tokenizer), seed=0)
    recipe = training.Recipe(steps=1, batch_size=2, seq_len=8)
    with pytest.raises(ValueError, match="accumulate must be a whole number >= 1"):
        training.train(model, "gpt2", tokenizer, recipe, accumulate=0, progress=False)


def test_train_says_when_the_batches_run_out(tokenizer):
    model = models.build_model(course_model.course_model_config(tokenizer), seed=0)
    recipe = training.Recipe(steps=2, batch_size=2, seq_len=8)
    one = list(training.training_batches("gpt2", tokenizer, recipe))[:1]
    with pytest.raises(ValueError, match=r"ran out at step 0: .* needs 4 batches"):
        training.train(model, "gpt2", tokenizer, recipe, batches=one, accumulate=2, progress=False)


# --- real DDP on two gloo processes ----------------------------------------------------------------

BASE = {"steps": 4, "global_batch": 8, "seq_len": 32, "lr": 3e-3, "seed": 0}
RUNS = {
    "float64": {"dtype": "float64"},
    "ring": {"dtype": "float64", "hook": "ring"},
    "float32": {"dtype": "float32"},
    "cap 1 MiB": {"dtype": "float32", "bucket_cap_mb": 1.0, "return_parameters": False},
    "no_sync": {"dtype": "float64", "accumulate": 2, "no_sync": True},
    "sync": {"dtype": "float64", "accumulate": 2, "no_sync": False},
    "sum": {"dtype": "float32", "hook": "sum"},  # broken on purpose: N x the mean gradient
}


@pytest.fixture(scope="module")
def runs():
    """Every DDP run the slow tests compare (2 ranks each), and the one-process references."""
    # One launch for all of them (ddp.train_many): starting two processes costs seconds each time.
    per_rank = launch.launch("course_lib.parallel.ddp:train_many", 2,
                             {"runs": [{**BASE, **extra} for extra in RUNS.values()]}, timeout=300)
    out = dict(zip(RUNS, zip(*per_rank)))  # name -> (rank 0's result, rank 1's result)
    for dtype in ("float64", "float32"):
        out[f"single {dtype}"] = ddp.train_single(**BASE, dtype=dtype)
    return out


def by_step(result: ddp.DDPRank) -> list[list[BucketRecord]]:
    """A rank's bucket records grouped by optimizer step: the step whose end follows the all-reduce."""
    steps: list[list[BucketRecord]] = [[] for _ in result.step_times]
    for record in result.buckets:
        steps[bisect.bisect_left(result.step_times, record.done)].append(record)
    return steps


def max_gap(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max())


@pytest.mark.slow
@pytest.mark.parametrize(("dtype", "bound"), [("float64", 1e-12), ("float32", 1e-4)])
def test_ddp_trains_like_one_process_on_the_global_batch(runs, dtype, bound):
    """Measured: 1.2e-14 in float64, 1.0e-5 in float32 (after 4 steps)."""
    rank0, rank1 = runs[dtype]
    single = runs[f"single {dtype}"]
    assert rank0.rows == (0, 2, 4, 6) and rank1.rows == (1, 3, 5, 7)
    assert rank0.parameters.dtype == getattr(torch, dtype)
    assert max_gap(rank0.parameters, single.parameters) < bound
    assert torch.equal(rank0.parameters, rank1.parameters)
    assert rank0.checksums == rank1.checksums and len(rank0.checksums) == BASE["steps"]
    mean = [(a + b) / 2 for a, b in zip(rank0.history, rank1.history)]
    # Not closer: transformers computes the loss in float32 even for a float64 model, and each rank
    # averages its own 4 rows' tokens in another order than one process averaging all 8.
    assert mean == pytest.approx(single.history, rel=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(("dtype", "bound"), [("float64", 1e-14), ("float32", 1e-6)])
def test_ddp_computes_the_gradient_of_one_process_on_the_global_batch(runs, dtype, bound):
    """The first step's gradient, before clipping. Measured: 8.3e-17 in float64, 6.0e-8 in
    float32, norm ratios 1 within 4e-9."""
    rank0, rank1 = runs[dtype]
    single = runs[f"single {dtype}"]
    assert rank0.gradient.dtype == getattr(torch, dtype)
    assert rank0.gradient.shape == rank0.parameters.shape
    gap = ddp.gradient_gap(rank0.gradient, single.gradient)
    assert gap.max_difference < bound and abs(gap.norm_ratio - 1) < bound, gap
    assert gap.within(ddp.CHECK_TOLERANCE[dtype])
    assert torch.equal(rank0.gradient, rank1.gradient)


@pytest.mark.slow
def test_a_summed_gradient_passes_the_parameter_check_and_fails_the_gradient_check(runs):
    """Measured (float32, 4 steps): the parameters 1.15e-5 from one process, as far as the correct
    run's; the first gradient 2.0000 times the norm of one process's, 0.37 off at most."""
    summed, right, single = runs["sum"][0], runs["float32"][0], runs["single float32"]
    tolerance = ddp.CHECK_TOLERANCE["float32"]
    assert max_gap(summed.parameters, single.parameters) < tolerance  # AdamW hides the factor
    assert max_gap(summed.parameters, single.parameters) < 2 * max_gap(right.parameters,
                                                                        single.parameters)
    gap = ddp.gradient_gap(summed.gradient, single.gradient)
    assert gap.norm_ratio == pytest.approx(2, rel=1e-6) and gap.max_difference > 0.1
    assert not gap.within(tolerance)
    assert torch.allclose(summed.gradient, 2 * right.gradient, rtol=1e-5, atol=1e-8)


def test_the_gradient_gap_flags_a_constant_factor_and_refuses_other_shapes():
    gradient = torch.linspace(-1, 1, 101)
    assert ddp.gradient_gap(gradient, gradient.clone()) == ddp.GradientGap(0.0, 1.0)
    for n in (2, 4):  # a reference summed over n ranks instead of averaged
        gap = ddp.gradient_gap(gradient, n * gradient)
        assert gap.norm_ratio == pytest.approx(1 / n) and gap.max_difference == pytest.approx(n - 1)
        assert not gap.within(1e-4)
    with pytest.raises(ValueError, match="101 and 100 elements"):
        ddp.gradient_gap(gradient, gradient[:100])


@pytest.mark.slow
def test_no_sync_all_reduces_once_per_step_and_trains_the_same(runs):
    quiet, chatty = runs["no_sync"][0], runs["sync"][0]
    assert torch.allclose(quiet.parameters, chatty.parameters, rtol=0, atol=1e-12)
    assert max_gap(quiet.parameters, runs["single float64"].parameters) < 1e-12
    for accumulated in (quiet, chatty):  # two micro-batches of 2 rows: the mean of all 8 rows
        gap = ddp.gradient_gap(accumulated.gradient, runs["single float64"].gradient)
        assert gap.within(1e-14), gap
    # A round of all-reduces starts with bucket 0; no_sync skips the round of the first micro-batch.
    assert [sum(r.index == 0 for r in step) for step in by_step(quiet)] == [1] * BASE["steps"]
    assert [sum(r.index == 0 for r in step) for step in by_step(chatty)] == [2] * BASE["steps"]
    # From step 1 on (DDP puts every gradient in one bucket at first, then rebuilds its buckets):
    quiet_steps, chatty_steps = by_step(quiet), by_step(chatty)
    for q, c in list(zip(quiet_steps, chatty_steps))[1:]:
        assert len(c) == 2 * len(q)
    # Step 0: the one-bucket round, and (without no_sync) a round in the rebuilt buckets.
    assert len(quiet_steps[0]) == 1
    assert len(chatty_steps[0]) == 1 + len(quiet_steps[1])


@pytest.mark.slow
def test_ring_hook_sends_what_the_cost_model_says_and_trains_like_all_reduce(runs):
    ring, counting = runs["ring"], runs["float64"]
    for rank in ring:
        for step in by_step(rank):
            tensor_bytes = sum(r.n_bytes for r in step)
            sent = sum(r.sent for r in step)
            assert abs(sent - cost_model.ring_allreduce_bytes(tensor_bytes, 2)) <= 8 * len(step)
        assert all(r.sent is None for r in counting[rank.rank].buckets)  # only the ring counts bytes
    assert max_gap(ring[0].parameters, counting[0].parameters) <= 1e-12
    assert ring[0].checksums == ring[1].checksums


@pytest.mark.slow
def test_model_states_take_the_bytes_of_the_memory_model(runs):
    result = runs["float32"][0]
    n = result.n_params
    states = result.state_bytes
    assert states["parameters"] == states["gradients"] == 4 * n
    assert states["optimizer states"] == 2 * states["parameters"]  # AdamW: exp_avg and exp_avg_sq
    assert runs["float32"][1].state_bytes == states
    predicted = memory.training_memory(n, "fp32", "adam", gpus=2)
    assert (predicted.weights, predicted.gradients, predicted.optimizer_states) == (
        states["parameters"], states["gradients"], states["optimizer states"])
    assert predicted.master_weights == 0


@pytest.mark.slow
def test_buckets_hold_every_gradient_and_a_smaller_cap_makes_more(runs):
    """Measured (float32, 1,334,016 parameters): step 0 one bucket of 5,336,064 bytes; then, by
    default, 1,056,768 + 4,279,296 bytes (DDP's first bucket of about 1 MiB, then up to 25 MiB) and
    with bucket_cap_mb=1.0, 1,056,768 + 1,057,280 + 1,058,304 + 2,163,712 (one tensor alone is 2 MB)."""
    default, small = runs["float32"][0], runs["cap 1 MiB"][0]
    gradient_bytes = 4 * default.n_params
    layouts = {}
    for name, result in (("default", default), ("small", small)):
        steps = by_step(result)
        assert all(sum(r.n_bytes for r in step) == gradient_bytes for step in steps)
        assert [r.index for r in steps[0]] == [0]  # the first step: one bucket of everything
        later = [[r.n_bytes for r in sorted(step, key=lambda r: r.index)] for step in steps[1:]]
        assert all(layout == later[0] for layout in later)  # rebuilt once, then fixed
        layouts[name] = later[0]
    assert len(layouts["small"]) > len(layouts["default"]) >= 2
    assert max(layouts["small"]) < max(layouts["default"])
    assert layouts["default"][0] == layouts["small"][0] <= 2**20 + 4 * 2**16  # first bucket: ~1 MiB


@pytest.mark.slow
def test_torchrun_entry_point_trains_and_checks_against_one_process():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
               "-m", "course_lib.parallel.ddp", "--steps", "3", "--global-batch", "4",
               "--seq-len", "32", "--check"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    for rank in (0, 1):
        assert re.search(rf"^rank {rank}/2 \((gloo|nccl)\): final loss \d+\.\d+, parameters [0-9a-f]{{12}}",
                         done.stdout, re.MULTILINE), text[-3000:]
    checksums = re.findall(r"parameters ([0-9a-f]{12}),", done.stdout)
    assert len(set(checksums)) == 1
    gap = re.search(r"max \|difference\| of the parameters (\S+) and of the first gradient (\S+); "
                    r"gradient norm ratio (\S+)", done.stdout)
    assert gap is not None, text[-3000:]
    assert float(gap.group(1)) < 1e-4 and float(gap.group(2)) < 1e-4
    assert abs(float(gap.group(3)) - 1) < 1e-4


def test_the_check_fails_when_a_gradient_is_off(monkeypatch, capsys):
    """--check's verdict, with a reference gradient twice as large (a sum of 2 ranks)."""
    reference = ddp.TrainingRun((), (), {}, torch.zeros(3), gradient=torch.ones(3))
    monkeypatch.setattr(ddp, "train_single", lambda *args: reference)
    args = argparse.Namespace(check=True, steps=1, global_batch=2, seq_len=8, lr=1e-3, seed=0)
    assert ddp.report_check(args, 0, "gloo", torch.zeros(3), torch.ones(3))
    assert not ddp.report_check(args, 0, "gloo", torch.zeros(3), 2 * torch.ones(3))
    out, err = capsys.readouterr()
    assert "gradient norm ratio 2.000000" in out and "check failed" in err
    assert ddp.report_check(args, 1, "gloo", torch.zeros(3), 2 * torch.ones(3))  # rank 0 checks


# --- the torchrun entry point's flags -------------------------------------------------------------

TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@pytest.fixture
def two_ranks(monkeypatch):
    """torchrun's WORLD_SIZE for 2 ranks and none of its other variables: flags are checked first."""
    for name in TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")


@pytest.mark.parametrize(("argv", "message"), [
    (["--seq-len", "1000"], "--seq-len 1000 is longer than the model's context: the course's GPT-2 "
                            "reads at most 128 tokens; use --seq-len 128 or less."),
    (["--seq-len", "1"], "argument --seq-len: must be a whole number >= 2, got '1'"),
    (["--accumulate", "0"], "argument --accumulate: must be a whole number >= 1, got '0'"),
    (["--bucket-cap-mb", "-1"], "argument --bucket-cap-mb: must be a positive number, got '-1'"),
    (["--bucket-cap-mb", "0"], "argument --bucket-cap-mb: must be a positive number, got '0'"),
    (["--steps", "0"], "argument --steps: must be a whole number >= 1, got '0'"),
    (["--steps", "ten"], "argument --steps: must be a whole number >= 1, got 'ten'"),
    (["--global-batch", "-2"], "argument --global-batch: must be a whole number >= 1, got '-2'"),
    (["--global-batch", "7"], "--global-batch 7 does not split evenly across 2 rank(s); use a "
                              "multiple of 2, e.g. --global-batch 2 or 4."),
    (["--global-batch", "8", "--accumulate", "3"], "--global-batch 8 does not split evenly across "
                                                   "2 rank(s) x --accumulate 3; use a multiple of 6"),
    (["--lr", "0"], "argument --lr: must be a positive number, got '0'"),
    (["--lr", "nan"], "argument --lr: must be a positive number, got 'nan'"),
    (["--seed", "-1"], "argument --seed: must be a whole number >= 0, got '-1'"),
    (["--stepz", "3"], "unrecognized arguments: --stepz 3"),
])
def test_a_bad_flag_is_refused_once_naming_the_flag(two_ranks, capsys, argv, message):
    err = refusal(ddp.main, argv, capsys)
    assert err.count(message) == 1, err
    assert "Traceback" not in err and "Recipe." not in err


def test_good_flags_outside_torchrun_say_how_to_start_it(two_ranks, capsys):
    err = refusal(ddp.main, ["--steps", "3"], capsys)
    assert "RANK, MASTER_ADDR, MASTER_PORT not set" in err
    assert "run it as torchrun --nproc-per-node=2 -m course_lib.parallel.ddp" in err


def test_only_rank_0_reports_a_bad_flag_and_every_rank_exits_2(two_ranks, monkeypatch, capsys):
    monkeypatch.setattr(launch, "RANK_ZERO_WAIT", 0.0)  # no torchrun here to stop this rank
    monkeypatch.setenv("RANK", "1")
    assert refusal(ddp.main, ["--accumulate", "0"], capsys) == ""
    monkeypatch.setenv("RANK", "0")
    assert refusal(ddp.main, ["--accumulate", "0"], capsys).count("argument --accumulate") == 1


def without_torchrun() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in TORCHRUN_VARIABLES}


def test_the_script_refuses_a_bad_flag_without_a_traceback():
    command = [sys.executable, "-m", "course_lib.parallel.ddp", "--accumulate", "0"]
    done = subprocess.run(command, cwd=ROOT, env=without_torchrun(), capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.count("argument --accumulate: must be a whole number >= 1") == 1
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.slow
def test_under_torchrun_a_bad_flag_is_reported_once_and_no_rank_prints_a_traceback():
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
               "-m", "course_lib.parallel.ddp", "--seq-len", "1000"]
    done = subprocess.run(command, cwd=ROOT, env=dict(os.environ, OMP_NUM_THREADS="1"),
                          capture_output=True, text=True, timeout=180)
    text = done.stdout + done.stderr
    assert done.returncode != 0
    assert text.count("--seq-len 1000 is longer than the model's context") == 1, text[-3000:]
    assert not re.search(r"course_lib[/\\]", text), text[-3000:]  # no frame of the course's code
    assert "[rank0]" not in text and "[rank1]" not in text, text[-3000:]
    # torchrun itself ends with its own ChildFailedError traceback whenever a rank exits non-zero
    assert text.count("Traceback (most recent call last)") <= 1
    assert "Traceback" not in text or "ChildFailedError" in text


def test_timings_leave_out_the_first_step_and_place_buckets_by_round():
    """Three steps, one all-reduce round each: only steps 2 and 3 are timed."""
    buckets = [BucketRecord(0, 0, 10, 0.5, 0.9), BucketRecord(1, 0, 10, 1.5, 1.75),
               BucketRecord(2, 0, 10, 3.0, 3.5), BucketRecord(2, 1, 5, 3.5, 3.75)]
    result = ddp.DDPRank(history=(), checksums=(), state_bytes={}, parameters=None, rank=0,
                         world_size=2, backend="gloo", rows=(), start=0.0,
                         step_times=(1.0, 2.0, 4.0), forwards=(), rounds=(1, 2, 3),
                         buckets=tuple(buckets), tokens=300, n_params=0, threads=1)
    assert pickle.loads(pickle.dumps(result)) == result  # the launcher sends it between processes
    assert result.gradient is None
    t = ddp.timings(result)
    assert t == ddp.Timings(seconds=3.0, tokens_per_second=200 / 3.0, step=1.5,
                            all_reduce=0.25 + 0.5 + 0.25, all_reduce_share=1.0 / 3.0,
                            bytes_per_step=15)
    with pytest.raises(ValueError, match="at least 2 steps"):
        ddp.timings(dataclasses.replace(result, step_times=(1.0,)))


@pytest.mark.parametrize("function", [ddp.train_ddp, ddp.wrap_ddp, ring.ring_all_reduce,
                                      links.allreduce_hook])
def test_functions_shown_whole_on_the_page_fit_the_books_column(function):
    assert max(map(len, inspect.getsource(function).splitlines())) <= 88


def test_the_scaling_plot_is_labelled():
    fig = ch08.plot_scaling(0.05, 1e9, [8, 1, 2, 4], ["PCIe 4.0 x16", "NVLink 4 (H100)"])
    speed, eff = fig.axes
    for ax in (speed, eff):
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_title()
    assert [t.get_text() for t in speed.get_legend().get_texts()] == \
        ["ideal", "one flat ring over PCIe 4.0 x16", "one flat ring over NVLink 4 (H100)"]
    assert list(speed.lines[0].get_xdata()) == [1, 2, 4, 8]
    assert max(eff.lines[0].get_ydata()) == pytest.approx(100)
    plt.close(fig)


def test_the_scaling_plot_needs_a_size_and_a_link():
    with pytest.raises(ValueError, match="at least one world size"):
        ch08.plot_scaling(0.1, 1e9, [], ["PCIe 4.0 x16"])


def test_the_scaling_plot_names_a_cluster():
    cluster = cost_model.Cluster("NVLink 3 (A100)", "InfiniBand HDR")
    fig = ch08.plot_scaling(0.5, 3e9, [8, 512], [cluster])
    assert fig.axes[0].get_legend().get_texts()[1].get_text() == cluster.name
    plt.close(fig)
    table = ch08.scaling_table(0.5, 3e9, [8, 512], cluster, "InfiniBand NDR")
    assert [row[:2] for row in table.rows] == [["8", "1"], ["512", "64"]]
