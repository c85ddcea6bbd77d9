"""The all-reduce sweep of chapter 10 (course_lib.hardware.allreduce_bench): default sizes, the
nccl-tests bandwidth arithmetic on a made-up sweep, the table (with and without the fitted model),
argument checks that start no process, the worker and the script's torchrun branch on a one-rank
group in this process (the worker's result pickles, as the launcher needs); the script's bad flags,
refused once and before any rank starts; and, marked slow, a real sweep on 2 gloo ranks and the
script starting its own ranks."""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from course_lib.hardware import allreduce_bench as cb
from course_lib.hardware.allreduce_bench import AllReduceSweep
from course_lib.parallel import cost_model as cm
from course_lib.parallel import launch

from conftest import refusal

KIB, MIB = 2**10, 2**20
ROOT = Path(__file__).resolve().parents[1]


def made_up() -> AllReduceSweep:
    # 4 ranks: bus factor 2 * 3 / 4 = 1.5.
    return AllReduceSweep(sizes=(1000, 10**6), times=((3e-3, 1e-3, 2e-3), (4e-2, 1e-2)),
                          world_size=4, backend="gloo")


# --- sizes and arithmetic ------------------------------------------------------------------------

def test_default_sizes_are_powers_of_four_from_4_kib():
    gloo = cb._default_sizes("gloo")
    assert gloo == [4 * KIB * 4**k for k in range(7)] and gloo[-1] == 16 * MIB
    nccl = cb._default_sizes("nccl")
    assert nccl[:7] == gloo and nccl[-1] == 256 * MIB


def test_bus_factor_follows_nccl_tests():
    factors = [AllReduceSweep((8,), ((1.0,),), n, "gloo").bus_factor for n in (1, 2, 8)]
    assert factors == [0, 1, pytest.approx(1.75)]


def test_seconds_and_bandwidths_of_a_made_up_sweep():
    s = made_up()
    assert s.repeats == 2
    assert s.seconds == (1e-3, 1e-2)
    assert s.median_seconds == (2e-3, pytest.approx(2.5e-2))
    # algbw = S / t: 1000 B in 1 ms is 1 MB/s = 0.001 GB/s; 1 MB in 10 ms is 0.1 GB/s.
    assert s.algbw == pytest.approx((1e-3, 0.1))
    assert s.busbw == pytest.approx((1.5e-3, 0.15))
    assert s.median_busbw == pytest.approx((1000 / 2e-3 / 1e9 * 1.5, 1e6 / 2.5e-2 / 1e9 * 1.5))


def test_fit_uses_the_fastest_runs():
    s = made_up()
    link = s.fit()
    assert link == cm.fit_alpha_beta(s.sizes, s.seconds, 4, name="measured (gloo, 4 ranks)")
    assert s.fit(name="mine").name == "mine"


def test_a_sweep_needs_times_for_every_size():
    with pytest.raises(ValueError, match="one non-empty list of times per size"):
        AllReduceSweep((1024, 2048), ((1e-3,),), 2, "gloo")
    with pytest.raises(ValueError, match="one non-empty list of times per size"):
        AllReduceSweep((1024,), ((),), 2, "gloo")


# --- the table -----------------------------------------------------------------------------------

def test_table_has_one_row_per_size():
    table = cb.sweep_table(made_up())
    assert table.headers == ["message", "fastest ms", "median ms", "algbw GB/s", "busbw GB/s"]
    assert table.rows[0] == ["1000 B", "1.00", "2.00", "0.00100", "0.00150"]
    assert table.rows[1] == ["977 KiB", "10.0", "25.0", "0.100", "0.150"]
    assert "4 ranks (gloo)" in table.title and "2 interleaved runs" in table.title
    assert "algbw x 1.5" in table.title


def test_table_with_a_model_column():
    link = cm.LINKS["PCIe 4.0 x16"]
    sweep = AllReduceSweep((4 * KIB, 16 * MIB), ((1e-4,), (1e-3,)), 2, "nccl", "bf16")
    table = cb.sweep_table(sweep, link)
    assert table.headers[-1] == "model ms"
    assert [row[0] for row in table.rows] == ["4 KiB", "16 MiB"]
    expected = cm.ring_allreduce_time(16 * MIB, 2, link) * 1e3
    assert float(table.rows[1][-1]) == pytest.approx(expected, rel=0.01)
    assert "PCIe 4.0 x16" in table.title and "bf16" in table.title


def test_table_refuses_other_things():
    with pytest.raises(ValueError, match="needs an AllReduceSweep"):
        cb.sweep_table({"sizes": [1]})


# --- argument checks that start no process ------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"sizes": []}, "sizes must be a non-empty list"),
    ({"sizes": 4096}, "sizes must be a non-empty list"),
    ({"sizes": [0]}, "every size (bytes) must be a whole number >= 1"),
    ({"sizes": [1024, -4]}, "every size (bytes) must be a whole number >= 1"),
    ({"sizes": [1001]}, "not a whole number of 4-byte elements"),
    ({"sizes": [1001], "dtype": "bf16"}, "2-byte elements"),
    ({"nprocs": 1}, "an all-reduce needs at least 2 ranks"),
    ({"nprocs": 2.0}, "nprocs must be a whole number >= 2"),
    ({"repeats": 0}, "repeats must be a whole number >= 1"),
    ({"warmup": -1}, "warmup must be a whole number >= 0"),
    ({"dtype": "int8"}, "unknown dtype 'int8'"),
    ({"backend": "mpi"}, "'auto', 'gloo' or 'nccl'"),
])
def test_bad_arguments_say_what_to_pass(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        cb.measure_allreduce(**kwargs)


def test_the_worker_checks_before_joining_a_group():
    with pytest.raises(ValueError, match="4-byte elements"):
        cb.allreduce_sweep([3])
    with pytest.raises(ValueError, match="unknown backend"):
        cb._default_sizes("mpi")


@pytest.fixture
def one_rank(monkeypatch):
    """torchrun's environment for a one-rank gloo group in this very process."""
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("MASTER_ADDR", launch.HOST)
    monkeypatch.setenv("MASTER_PORT", str(launch.free_port()))
    monkeypatch.setenv("COURSE_LIB_BACKEND", "gloo")


def test_the_worker_returns_a_sweep_that_pickles(one_rank):
    sweep = cb.allreduce_sweep([1024, 4096], repeats=2, warmup=0, dtype="BF16")
    assert isinstance(sweep, AllReduceSweep) and pickle.loads(pickle.dumps(sweep)) == sweep
    assert (sweep.sizes, sweep.world_size, sweep.backend, sweep.dtype) == ((1024, 4096), 1, "gloo", "bf16")
    assert [len(t) for t in sweep.times] == [2, 2]
    assert not launch.dist.is_initialized()  # the worker left its group


def test_script_as_one_torchrun_rank(one_rank, capsys):
    """The torchrun branch of main()."""
    assert cb.main(["--sizes", "1024", "4096", "--repeats", "2", "--warmup", "1"]) == 0
    out = capsys.readouterr().out
    assert "over 1 ranks (gloo)" in out and "1 KiB" in out and "4 KiB" in out
    assert not launch.dist.is_initialized()  # the worker left its group


# --- the script's flags --------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["--sizes", "0"], "argument --sizes: must be a whole number >= 1, got '0'"),
    (["--sizes", "4096", "-4"], "argument --sizes: must be a whole number >= 1, got '-4'"),
    (["--sizes", "1001"], "--sizes 1001 is not a whole number of 4-byte fp32 elements; use a "
                          "multiple of 4 (e.g. 1000)."),
    (["--sizes", "1001", "--dtype", "bf16"], "--sizes 1001 is not a whole number of 2-byte bf16"),
    (["--repeats", "0"], "argument --repeats: must be a whole number >= 1, got '0'"),
    (["--warmup", "-1"], "argument --warmup: must be a whole number >= 0, got '-1'"),
    (["--nprocs", "1"], "argument --nprocs: must be a whole number >= 2, got '1'"),
    (["--nprocs", "64"], "--nprocs 64: 64 CPU ranks is more than this machine can run sensibly"),
    (["--dtype", "int8"], "argument --dtype: invalid choice: 'int8'"),
    (["--backend", "mpi"], "argument --backend: invalid choice: 'mpi'"),
])
def test_a_bad_flag_is_refused_before_any_rank_starts(monkeypatch, capsys, argv, message):
    monkeypatch.delenv("RANK", raising=False)
    err = refusal(cb.main, argv, capsys)
    assert err.count(message) == 1, err
    assert "Traceback" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU, so NCCL may work")
def test_nccl_without_gpus_is_refused_naming_the_flags(monkeypatch, capsys):
    monkeypatch.delenv("RANK", raising=False)
    err = refusal(cb.main, ["--backend", "nccl"], capsys)
    assert "--backend nccl runs one rank per GPU: --nprocs 2 asked for, 0 GPU(s) here; use " \
           "--backend gloo" in err


def test_under_torchrun_only_rank_0_reports_a_bad_flag(one_rank, monkeypatch, capsys):
    monkeypatch.setattr(launch, "RANK_ZERO_WAIT", 0.0)  # no torchrun here to stop this rank
    monkeypatch.setenv("RANK", "1")
    assert refusal(cb.main, ["--sizes", "1001"], capsys) == ""
    monkeypatch.setenv("RANK", "0")
    assert refusal(cb.main, ["--sizes", "1001"], capsys).count("--sizes 1001 is not") == 1


def test_the_script_refuses_a_bad_flag_without_a_traceback():
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    command = [sys.executable, "-m", "course_lib.hardware.allreduce_bench", "--repeats", "0"]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert done.stderr.count("argument --repeats: must be a whole number >= 1") == 1
    assert "Traceback" not in done.stderr and done.stdout == ""


# --- real processes -----------------------------------------------------------------------------

@pytest.mark.slow
def test_a_real_sweep_on_two_gloo_ranks():
    sweep = cb.measure_allreduce([1024, 65536], nprocs=2, repeats=2, backend="gloo", timeout=120)
    assert sweep.sizes == (1024, 65536)
    assert sweep.world_size == 2 and sweep.backend == "gloo" and sweep.dtype == "fp32"
    assert len(sweep.times) == 2 and all(len(t) == 2 for t in sweep.times)
    assert all(t > 0 for run in sweep.times for t in run)
    assert all(b > 0 for b in sweep.busbw)
    assert sweep.busbw == pytest.approx(sweep.algbw)  # 2 ranks: 2 (N - 1) / N = 1
    table = cb.sweep_table(sweep)
    assert [row[0] for row in table.rows] == ["1 KiB", "64 KiB"]


@pytest.mark.slow
def test_the_script_starts_its_own_ranks(capsys, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    # Sizes far apart (4 KiB, 16 MiB): on a busy machine the fit still sees the time grow.
    assert cb.main(["--sizes", "4096", "16777216", "--repeats", "3", "--backend", "gloo"]) == 0
    out = capsys.readouterr().out
    assert "over 2 ranks (gloo)" in out and "model ms" in out
