"""Sharding of chapter 9 (course_lib.parallel.fsdp, .collectives, course_lib.chapters.ch09): the strategy
and sharding-factor checks, the communication formulas, the ZeRO arithmetic against the paper's worked
example; and, marked slow, real runs on 2 and 4 gloo processes: per-rank bytes equal to the ZeRO
formulas, every strategy (FSDP full, ZeRO-2-like, hybrid, offload) equal to one process, its first
gradient too (gathered from the shards; a summed one would be flagged), mixed precision within its
stated bound, every collective's bytes equal to the formula; and the torchrun
entry point, whose bad flags (and flags that do not go together) are refused once, naming the flag."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_lib.chapters import ch09
from course_lib.chapters.ch09 import quiz
from course_lib.numbers import memory
from course_lib.parallel import collectives, cost_model, ddp, fsdp, launch, wire
from course_lib.text import models

from conftest import ranks_import_from, refusal

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
UNITS = [540928, 198272, 198272, 198272, 198272]  # the course GPT-2: root, then 4 blocks
PSI = sum(UNITS)


# --- checks of the input ---------------------------------------------------------------------------

def test_unknown_strategy_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown strategy 'zero4'; use one of: ddp, zero1, zero2, zero3, hsdp"):
        fsdp.check_strategy("zero4", 2)


@pytest.mark.parametrize("factor", [3, 5])
def test_sharding_factor_that_does_not_divide_the_ranks_lists_the_divisors(factor):
    with pytest.raises(ValueError, match=rf"shard_factor={factor} does not divide the 4 ranks.*\[1, 2, 4\]"):
        fsdp.check_strategy("hsdp", 4, factor)


@pytest.mark.parametrize("factor", [None, 0, True, 2.0])
def test_hybrid_sharding_needs_a_whole_factor(factor):
    with pytest.raises(ValueError, match="needs shard_factor, a whole number >= 1"):
        fsdp.check_strategy("hsdp", 4, factor)


def test_sharding_factor_with_another_strategy_is_refused():
    with pytest.raises(ValueError, match="only applies to strategy 'hsdp'"):
        fsdp.check_strategy("zero3", 4, 2)
    assert fsdp.check_strategy("zero3", 4, 4) == 4  # the factor zero3 has anyway
    assert [fsdp.check_strategy(s, 4) for s in ("ddp", "zero1", "zero2", "zero3")] == [1, 1, 4, 4]


# --- the torchrun entry point's flags -------------------------------------------------------------

@pytest.fixture
def two_ranks(monkeypatch):
    """torchrun's WORLD_SIZE for 2 ranks and none of its other variables: flags are checked first."""
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WORLD_SIZE", "2")


@pytest.mark.parametrize(("argv", "message"), [
    (["--strategy", "zero4"], "argument --strategy: invalid choice: 'zero4'"),
    (["--strategy", "hsdp"], "--strategy hsdp needs --shard-factor, the number of ranks that share "
                             "one copy of the model: one of 1, 2 for 2 rank(s)."),
    (["--strategy", "hsdp", "--shard-factor", "3"], "--shard-factor 3 does not divide the 2 rank(s) "
                                                    "into equal groups; use one of 1, 2."),
    (["--strategy", "zero3", "--shard-factor", "1"], "--shard-factor only applies to --strategy "
                                                     "hsdp (--strategy zero3 fixes it)"),
    (["--strategy", "zero3", "--shard-factor", "2"], "--shard-factor only applies to --strategy "
                                                     "hsdp (--strategy zero3 fixes it)"),
    (["--strategy", "ddp", "--offload"], "--offload and --mixed-precision are FSDP options, not "
                                         "ddp's: use them with --strategy zero2, zero3 or hsdp."),
    (["--strategy", "zero1", "--mixed-precision"], "FSDP options, not zero1's"),
    (["--shard-factor", "0"], "argument --shard-factor: must be a whole number >= 1, got '0'"),
    (["--steps", "0"], "argument --steps: must be a whole number >= 1, got '0'"),
    (["--seq-len", "1000"], "--seq-len 1000 is longer than the model's context"),
    (["--global-batch", "3"], "--global-batch 3 does not split evenly across 2 rank(s); use a "
                              "multiple of 2"),
    (["--lr", "-1"], "argument --lr: must be a positive number, got '-1'"),
])
def test_a_bad_flag_is_refused_once_naming_the_flag(two_ranks, capsys, argv, message):
    err = refusal(fsdp.main, argv, capsys)
    assert err.count(message) == 1, err
    assert "Traceback" not in err and "shard_factor" not in err and "Recipe." not in err


def test_only_rank_0_reports_a_bad_flag_and_every_rank_exits_2(two_ranks, monkeypatch, capsys):
    bad = ["--strategy", "hsdp", "--shard-factor", "3"]
    monkeypatch.setattr(launch, "RANK_ZERO_WAIT", 0.0)  # no torchrun here to stop this rank
    monkeypatch.setenv("RANK", "1")
    assert refusal(fsdp.main, bad, capsys) == ""
    monkeypatch.setenv("RANK", "0")
    assert refusal(fsdp.main, bad, capsys).count("--shard-factor 3 does not divide") == 1


def test_good_flags_outside_torchrun_say_how_to_start_it(two_ranks, capsys):
    err = refusal(fsdp.main, ["--strategy", "hsdp", "--shard-factor", "2"], capsys)
    assert "run it as torchrun --nproc-per-node=2 -m course_lib.parallel.fsdp" in err


def test_the_script_refuses_a_bad_flag_without_a_traceback():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    command = [sys.executable, "-m", "course_lib.parallel.fsdp", "--strategy", "hsdp"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.count("--strategy hsdp needs --shard-factor") == 1
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_offload_larger_than_the_free_host_memory_is_refused():
    with pytest.raises(MemoryError, match="CPU offload would put .* GB free. Use more ranks"):
        fsdp.check_offload(1e18)
    fsdp.check_offload(1e6)


def test_offload_and_mixed_precision_are_refused_for_ddp():
    model = torch.nn.Linear(2, 2)
    with pytest.raises(ValueError, match="FSDP options"):
        fsdp.shard_model(model, "zero1", 1, offload=True)


def test_blocks_finds_gpt2_blocks_and_refuses_other_models():
    model = models.build_model(models.tiny_config("gpt2"), seed=0)
    assert models.blocks(model) is model.transformer.h
    assert fsdp.units(model)[1:] == list(model.transformer.h)
    with pytest.raises(ValueError, match="no transformer blocks"):
        models.blocks(torch.nn.Sequential(torch.nn.Linear(2, 2)))


# --- formulas --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("strategy", "world", "factor", "expected"), [
    ("ddp", 4, None, {"all-reduce": 2 * PSI}),
    ("zero1", 4, None, {"all-reduce": 2 * PSI, "broadcast": PSI}),
    ("zero2", 4, None, {"all-gather": PSI, "reduce-scatter": PSI}),
    ("zero3", 4, None, {"all-gather": 2 * PSI, "reduce-scatter": PSI}),
    ("hsdp", 4, 2, {"all-gather": 2 * PSI, "reduce-scatter": PSI, "all-reduce": PSI}),
    ("hsdp", 4, 1, {"all-reduce": 2 * PSI}),
    ("hsdp", 4, 4, {"all-gather": 2 * PSI, "reduce-scatter": PSI}),
])
def test_expected_volume_is_the_zero_papers_2_and_3_psi(strategy, world, factor, expected):
    got = fsdp.expected_volume(UNITS, strategy, world, factor, param_bytes=1, reduce_bytes=1)
    assert got == expected


@pytest.mark.parametrize("function", [fsdp.shard_model, fsdp.expected_volume])
def test_functions_shown_whole_on_the_page_fit_the_books_column(function):
    assert max(map(len, inspect.getsource(function).splitlines())) <= 88


def test_mixed_precision_halves_the_all_gathers_only():
    got = fsdp.expected_volume(UNITS, "zero3", 2, param_bytes=2, reduce_bytes=4)
    assert got == {"all-gather": 2 * PSI * 2, "reduce-scatter": PSI * 4}


def test_collective_records_count_volume_and_ring_bytes():
    records = [collectives.CollectiveRecord("all-reduce", 100, 4, "float32"),
               collectives.CollectiveRecord("all-gather", 40, 4, "bfloat16"),
               collectives.CollectiveRecord("all-gather", 60, 2, "bfloat16")]
    assert [r.volume for r in records] == [200, 40, 60]
    assert [r.sent_per_rank for r in records] == [150, 30, 30]
    assert collectives.volume(records) == {"all-reduce": 200, "all-gather": 100}


def test_estimator_reproduces_the_zero_papers_example():
    table = ch09.zero_paper_table()
    assert [row[1] for row in table.rows] == [row[2].rstrip("0").rstrip(".") for row in table.rows]
    assert [row[2] for row in table.rows] == ["120.0", "31.4", "16.6", "1.9"]
    assert [row[3] for row in table.rows] == ["-", "-", "17.1", "2.1"]  # 18 bytes: DeepSpeed
    # before DeepSpeed's 2024 fix, stage 2 was 4 psi + 16 psi / N; stage 3 unchanged
    assert [row[4] for row in table.rows] == ["-", "-", "31.9", "2.1"]


@pytest.mark.parametrize(("stage", "limit"), [(1, 4), (2, 8)])
def test_stages_1_and_2_tend_to_4x_and_8x(stage, limit):
    base = memory.training_memory(1e9, "bf16-mixed").model_states
    ratios = [base / memory.training_memory(1e9, "bf16-mixed", gpus=g, zero_stage=stage).model_states
              for g in (2, 64, 2**20)]
    assert ratios == sorted(ratios) and ratios[-1] < limit and ratios[-1] > limit * 0.999


def test_offload_copies_twelve_bytes_per_parameter_of_the_shard():
    seconds = cost_model.offload_transfer_time(8e9, 8, "PCIe 4.0 x16")
    assert seconds == pytest.approx(12e9 / 32e9)
    with pytest.raises(ValueError, match="unknown link"):
        cost_model.offload_transfer_time(8e9, 8, "PCIe 9")


def test_exercises_worked_by_hand():
    assert quiz.q1.feedback(3)[0]  # stage 2 needs 48.75 GB, stage 3 26 GB
    assert not quiz.q1.feedback(2)[0]
    assert quiz.q2.feedback(6)[0]
    assert quiz.q3.feedback(14)[0]


# --- real runs on gloo processes -------------------------------------------------------------------

RUNS_2 = [{"strategy": s} for s in ("ddp", "zero1", "zero2", "zero3")] + [
    {"strategy": "zero3", "offload": True}, {"strategy": "zero3", "mixed_precision": True}]
RUNS_4 = [{"strategy": s} for s in ("zero1", "zero2", "zero3")] + [
    {"strategy": "hsdp", "shard_factor": f} for f in (1, 2)]


LINK = {"node": "NVLink 4 (H100)", "network": "Ethernet 100G", "ranks_per_node": 2, "scale": 100}
BUDGET = 12 * PSI  # 3/4 of DDP's 16 bytes per parameter
#: The runs of the later tests: prefetch modes and a memory budget on 2 ranks; whole-number
#: reshard and links on 4.
EXTRA_2 = [*[{"strategy": "zero3", "prefetch": p} for p in fsdp.PREFETCH],
           {"strategy": "ddp", "memory_budget": BUDGET},
           {"strategy": "zero3", "memory_budget": BUDGET}]
EXTRA_4 = [{"strategy": "zero3", "reshard_after_forward": 2},
           {"strategy": "zero3", "emulate": LINK},
           {"strategy": "hsdp", "shard_factor": 2, "emulate": LINK}]


@pytest.fixture(scope="module")
def launched():
    """Every run of this file's slow tests, by world size: one launch of each, its ranks
    started once (as chapter 9 runs them), the plain runs first."""
    return {n: ch09.by_run(launch.launch(fsdp.__name__ + ":train_many", n,
                                         {"runs": plain + extra}, timeout=400, echo=False))
            for n, plain, extra in ((2, RUNS_2, EXTRA_2), (4, RUNS_4, EXTRA_4))}


@pytest.fixture(scope="module")
def runs(launched):
    """Every plain run the slow tests check, by label, and the one-process reference."""
    out = {}
    for n, plain in ((2, RUNS_2), (4, RUNS_4)):
        for run in launched[n][:len(plain)]:
            out[ch09.label(run)] = run
    out["single"] = ddp.train_single(steps=3, global_batch=8, seq_len=64, lr=3e-3, seed=0)
    out["initial"] = fsdp.initial_parameters(0)
    return out


def sharded(runs):
    return {k: v for k, v in runs.items() if k not in ("single", "initial")}


@pytest.mark.slow
def test_every_rank_holds_what_the_zero_formulas_say(runs):
    for name, run in sharded(runs).items():
        r, n = run[0], run[0].world_size
        states = [x.state_bytes for x in run]
        if r.strategy == "zero1":  # whole parameters and gradients, optimizer states shared out
            assert all(s["parameters"] == s["gradients"] == 4 * PSI for s in states), name
            assert sum(s["optimizer states"] for s in states) == 8 * PSI, name
            assert len({s["optimizer states"] for s in states}) > 1, name  # whole tensors: uneven
            continue
        copies = 1 if r.strategy == "ddp" else r.shard_factor
        expected = {"parameters": 4 * PSI // copies, "gradients": 4 * PSI // copies,
                    "optimizer states": 8 * PSI // copies}
        assert states == [expected] * n, name
        assert sum(expected.values()) == memory.training_memory(
            PSI, "fp32", gpus=copies, zero_stage=3 if copies > 1 else 0).model_states


@pytest.mark.slow
def test_peaks_show_what_gathering_costs(runs):
    peak = {name: run[0].peak_parameter_bytes for name, run in sharded(runs).items()}
    for n in (2, 4):
        assert peak[f"zero2, {n} ranks"] == 4 * PSI + 4 * PSI // n  # everything gathered, shards kept
        assert peak[f"zero3, {n} ranks"] == 4 * PSI // n + 4 * (UNITS[0] + UNITS[1])  # root + a block
    assert peak["ddp, 2 ranks"] == 4 * PSI
    assert peak["zero3, 2 ranks, bf16"] == 4 * PSI // 2 + 2 * (UNITS[0] + UNITS[1])


@pytest.mark.slow
def test_every_strategy_trains_what_one_process_trains(runs):
    single, initial = runs["single"], runs["initial"]
    update = (single.parameters - initial).norm()
    for name, run in sharded(runs).items():
        relative = float((run[0].parameters - single.parameters).norm() / update)
        if run[0].mixed_precision:
            assert 1e-3 < relative < 0.1, (name, relative)  # bf16 rounds visibly, within the bound
        else:
            assert relative < 1e-4, (name, relative)
        assert all(torch.equal(x.parameters, run[0].parameters) for x in run), name


@pytest.mark.slow
def test_every_strategy_computes_the_gradient_of_one_process(runs):
    """The first step's gradient after the backward pass, shards gathered. Measured: 6.0e-8 at
    most in float32 (norm ratio 1 + 1e-9); with bf16 parameters 2.1e-3 (ratio 1.0009)."""
    single = runs["single"]
    for name, run in sharded(runs).items():
        gap = ddp.gradient_gap(run[0].gradient, single.gradient)
        bound = 1e-2 if run[0].mixed_precision else 1e-6
        assert gap.within(bound), (name, gap)
        assert all(torch.equal(x.gradient, run[0].gradient) for x in run), name
        # the same gradient summed over the ranks instead of averaged: the check flags it
        summed = ddp.gradient_gap(run[0].world_size * run[0].gradient, single.gradient)
        assert summed.norm_ratio == pytest.approx(run[0].world_size, rel=1e-2), name
        assert not summed.within(ddp.CHECK_TOLERANCE["float32"]), name


@pytest.mark.slow
def test_every_collective_has_the_bytes_of_the_formula(runs):
    for name, run in sharded(runs).items():
        r = run[0]
        expected = fsdp.expected_volume(r.unit_numels, r.strategy, r.world_size, r.shard_factor,
                                        param_bytes=2 if r.mixed_precision else 4)
        for x in run:
            assert x.volume[1:] == (expected,) * (len(x.volume) - 1), name
    assert all(row[-1] == "yes" for row in ch09.volume_table(list(sharded(runs).values())).rows)


@pytest.mark.slow
def test_chapter_tables_lay_out_the_runs(runs):
    plain = [run for name, run in sharded(runs).items() if "bf16" not in name]
    table = ch09.memory_table(plain)
    row = next(r for r in table.rows if r[0] == "zero3, 4 ranks")
    assert row[4] == row[5] == f"{16 * PSI / 4 / 1e6:.2f}"
    factors = ch09.factor_table([runs["hsdp, 4 ranks, factor 1"], runs["hsdp, 4 ranks, factor 2"],
                                 runs["zero3, 4 ranks"]])
    assert [r[1] for r in factors.rows] == ["4", "2", "1"]
    equal = ch09.equality_table(plain, runs["single"], runs["initial"])
    assert len(equal.rows) == len(plain)
    # the first gradient's norm ratio: 1, where a sum over the ranks would show 2 or 4
    assert all(abs(float(row[-1]) - 1) < 1e-2 for row in equal.rows)


def _gathered_both_ways(strategy: str, shard_factor: int | None = None) -> list[bool]:
    """Worker: ddp.gathered against DTensor.full_tensor, tensor by tensor, on a sharded model
    and on tensors FSDP2 does not make: fewer rows than ranks, split by columns, not sharded."""
    from torch.distributed.tensor import Shard, distribute_tensor

    worker = launch.init_worker()
    model = ddp.fresh_model(ddp.rank_tokenizer(worker), 0, "float32")
    fsdp.shard_model(model, strategy, worker.world_size, shard_factor, False, False,
                     worker.device, "implicit", None)
    params = list(model.parameters())
    mesh = params[0].device_mesh
    odd = [distribute_tensor(torch.arange(10.0).view(2, 5), mesh, [Shard(0)] * mesh.ndim),
           distribute_tensor(torch.arange(12.0).view(2, 6), mesh, [Shard(1)] * mesh.ndim),
           torch.arange(3.0)]
    whole = [t.full_tensor() if hasattr(t, "full_tensor") else t for t in params + odd]
    return [torch.equal(ddp.gathered(tensors), torch.cat([t.flatten() for t in reference]))
            for tensors, reference in ((params, whole[:len(params)]), (params + odd, whole))]


@pytest.mark.slow
@pytest.mark.parametrize("nprocs, strategy, factor", [(3, "zero3", None), (4, "hsdp", 2)])
def test_gathered_shards_equal_each_tensor_gathered_alone(monkeypatch, nprocs, strategy, factor):
    """One all-gather per group and dtype: the same vector as ~300 full_tensor() calls,
    with uneven chunks (3 ranks), a replicated mesh dimension (hybrid) and other layouts."""
    ranks_import_from(monkeypatch, Path(__file__).parent)
    ranks = launch.launch("test_fsdp:_gathered_both_ways", nprocs,
                          {"strategy": strategy, "shard_factor": factor}, timeout=120, echo=False)
    assert ranks == [[True, True]] * nprocs


@pytest.mark.slow
def test_a_bad_strategy_in_a_rank_stops_the_launch_with_its_message():
    with pytest.raises(launch.LaunchError, match=r"rank \d failed") as info:
        launch.launch(fsdp.__name__ + ":train_sharded", 2, {"strategy": "hsdp", "shard_factor": 3},
                      timeout=120, echo=False)
    assert "does not divide the 2 ranks" in str(info.value)


@pytest.mark.slow
def test_torchrun_entry_point_trains_sharded_and_checks_against_one_process():
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0")
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
               "-m", "course_lib.parallel.fsdp", "--strategy", "zero3", "--steps", "3",
               "--global-batch", "4", "--seq-len", "32", "--check"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    text = done.stdout + done.stderr
    assert done.returncode == 0, text[-3000:]
    for rank in (0, 1):
        assert re.search(rf"^rank {rank}/2 \((gloo|nccl), zero3\): final loss \d+\.\d+; holds parameters "
                         rf"{4 * PSI / 2 / 1e6:.2f} MB", done.stdout, re.MULTILINE), text[-3000:]
    gap = re.search(r"max \|difference\| of the parameters (\S+) and of the first gradient (\S+); "
                    r"gradient norm ratio (\S+)", done.stdout)
    assert gap is not None, text[-3000:]
    assert float(gap.group(1)) < 1e-4 and float(gap.group(2)) < 1e-4
    assert abs(float(gap.group(3)) - 1) < 1e-4


# --- prefetching, whole-number resharding, memory budgets, emulated links -----------------------

@pytest.mark.parametrize(("strategy", "options", "message"), [
    ("zero1", {"prefetch": "explicit"}, "FSDP options"),
    ("ddp", {"reshard_after_forward": 2}, "FSDP options"),
    ("zero3", {"prefetch": "eager"}, r"prefetch must be one of \('implicit', 'explicit', 'async'\)"),
    ("zero3", {"reshard_after_forward": 2}, "none for so few ranks; use 4 or more"),
    ("zero2", {"reshard_after_forward": 2}, "applies to 'zero3' and 'hsdp', not 'zero2'"),
])
def test_fsdp_options_are_refused_before_any_group_is_needed(strategy, options, message):
    with pytest.raises(ValueError, match=message):
        fsdp.shard_model(torch.nn.Linear(2, 2), strategy, 2, **options)


def test_a_whole_number_reshard_must_divide_the_shard_group():
    with pytest.raises(ValueError, match=r"reshard_after_forward=3 must be a divisor of the 8 .*\[2, 4\]"):
        fsdp.shard_model(torch.nn.Linear(2, 2), "zero3", 8, reshard_after_forward=3)


def test_node_links_needs_a_model_sharded_by_shard_model():
    with pytest.raises(ValueError, match="sharded by shard_model"):
        fsdp.node_links(torch.nn.Linear(2, 2), "NVLink 4 (H100)", "Ethernet 100G", 2)
    with pytest.raises(ValueError, match="ranks_per_node must be a whole number"):
        fsdp.node_links(torch.nn.Linear(2, 2), "NVLink 4 (H100)", "Ethernet 100G", 0)


@pytest.fixture(scope="module")
def extra_runs(launched):
    """EXTRA_2's runs on 2 ranks and EXTRA_4's on 4, in their order."""
    return launched[2][len(RUNS_2):], launched[4][len(RUNS_4):]


@pytest.mark.slow
def test_prefetching_starts_every_unit_but_the_first_one_ahead(extra_runs):
    implicit, explicit, asynchronous = extra_runs[0][:3]
    for run, ahead in ((implicit, 0), (explicit, 4), (asynchronous, 4)):
        for rank in run:
            assert [e["ahead"] for e in rank.exposed] == [ahead] * 3
            assert [e["gathers"] for e in rank.exposed] == [5] * 3
            assert all(e["forward"] > 0 and e["backward"] > 0 for e in rank.exposed)
            # prefetching changes when, not what: the same bytes, the same training
            assert rank.volume[1] == implicit[0].volume[1]
            assert torch.equal(rank.parameters, implicit[0].parameters)
    assert [row[2] for row in ch09.prefetch_table([implicit, explicit, asynchronous]).rows] == \
        ["0", "4", "4"]


@pytest.mark.slow
def test_a_memory_budget_stops_ddp_with_a_message_and_lets_zero3_train(extra_runs):
    refused, trained = extra_runs[0][3:]
    assert all(isinstance(r, fsdp.BudgetRefusal) and r.strategy == "ddp" for r in refused)
    assert f"needs {16 * PSI / 1e6:.2f} MB" in refused[0].message
    assert f"{4 * PSI / 1e6:.2f} MB too many" in refused[0].message
    assert "Shard the states" in refused[0].message
    assert all(isinstance(r, fsdp.ShardedRank) and len(r.history) == 3 for r in trained)


@pytest.mark.slow
def test_zero3_sends_the_ring_formula_on_the_wire(extra_runs):
    for rank in extra_runs[0][0]:
        for step in (1, 2):
            formula = wire.step_ring_sent(rank.volume[step], 2, "gloo")
            assert 0 <= rank.wire[step].sent - formula <= 0.002 * formula


@pytest.mark.slow
def test_a_whole_number_reshard_keeps_blocks_over_pairs_and_gathers_them_there(extra_runs):
    blocks = 4 * sum(UNITS[1:])
    for rank in extra_runs[1][0]:
        assert rank.after_forward_bytes == 4 * PSI // 4 + blocks // 2
        assert rank.group_volume[1] == {"all-gather over 4": 4 * (PSI + UNITS[0]),
                                        "all-gather over 2": blocks,
                                        "reduce-scatter over 4": 4 * PSI}


@pytest.mark.slow
def test_emulated_links_charge_full_sharding_the_network_and_hybrid_mostly_nvlink(extra_runs):
    full, hybrid = extra_runs[1][1:]
    ethernet = cost_model.get_link("Ethernet 100G")
    # full sharding: each of a step's 15 collectives (5 units: 2 all-gathers, a reduce-scatter)
    # over 4 ranks on Ethernet, the alpha-beta ring model: 3 alpha + 3/4 of the tensor / beta
    volume = full[0].group_volume[1]
    seconds = 15 * 3 * ethernet.latency + sum(0.75 * v for v in volume.values()) / ethernet.bandwidth
    assert full[0].link_delays[1] == pytest.approx(100 * seconds, rel=1e-6)
    assert full[0].link_delays[1] > 3 * hybrid[0].link_delays[1] > 0
    assert len(set(full[0].link_delays)) == 1  # every step pays the same
    for run in (full, hybrid):  # each collective took its link time, plus gloo's own work
        assert all(m >= d > 0 for m, d in zip(run[0].link_seconds, run[0].link_delays))
