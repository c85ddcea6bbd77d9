"""The notebook launcher of chapter 8 (course_lib.parallel.launch): its argument checks say what to do
(bad nprocs, ports, backends, targets, kwargs, a worker started outside torchrun) without starting
anything; and, marked slow, real runs of two gloo ranks: results come back in rank order with
rank-prefixed output, a failing rank or a hanging one raises LaunchError, leaves no process behind,
and prints no absolute path of the repository."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from course_lib.parallel import launch
from course_lib.parallel.launch import LaunchError

ROOT = Path(__file__).resolve().parents[1]
HELLO = "course_lib.parallel.launch:hello"
CORES = os.cpu_count() or 1


# --- checks that start no process ------------------------------------------------------------------

@pytest.mark.parametrize("nprocs", [0, -1, True, 2.0, "2"])
def test_bad_nprocs_is_refused(nprocs):
    with pytest.raises(ValueError, match="nprocs must be a whole number >= 1"):
        launch.launch(HELLO, nprocs)


def test_too_many_cpu_ranks_names_the_core_count():
    too_many = launch.MAX_CPU_RANKS + 1  # above the limit on any machine
    with pytest.raises(ValueError, match=rf"has {CORES} core\(s\)"):
        launch.check_world_size(too_many, "gloo")
    with pytest.raises(ValueError, match=rf"has {CORES} core\(s\)"):
        launch.launch(HELLO, too_many, backend="gloo")


def test_a_sensible_world_size_is_accepted():
    assert launch.check_world_size(2, "gloo") == 2


@pytest.mark.parametrize("port", [80, 1023, 65536, 70000, "x", True, None, 8080.0])
def test_invalid_port_is_refused(port):
    with pytest.raises(ValueError, match="port=None"):
        launch.check_port(port)


def test_busy_port_says_busy_and_suggests_port_none():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((launch.HOST, 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(LaunchError, match="busy") as info:
            launch.check_port(port)
    assert "port=None" in str(info.value)


def test_free_port_passes_the_port_check():
    port = launch.free_port()
    assert 1024 <= port <= 65535
    assert launch.check_port(port) == port


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU, so NCCL may work")
def test_nccl_without_gpus_suggests_gloo():
    with pytest.raises(LaunchError, match="gloo"):
        launch.resolve_backend("nccl", 2)
    with pytest.raises(LaunchError, match="gloo"):
        launch.launch(HELLO, 2, backend="nccl")


@pytest.mark.skipif(torch.cuda.is_available(), reason="'auto' picks NCCL where there are GPUs")
def test_auto_backend_is_gloo_without_gpus():
    assert launch.resolve_backend("auto", 2) == "gloo"
    assert launch.resolve_backend("gloo", 2) == "gloo"


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match="'auto', 'gloo' or 'nccl'"):
        launch.resolve_backend("mpi", 2)


def test_target_without_colon_is_refused():
    with pytest.raises(ValueError, match="module:function"):
        launch.launch("course_lib.parallel.launch.hello", 2)


def test_kwargs_that_are_not_json_are_refused():
    with pytest.raises(ValueError, match="JSON"):
        launch.launch(HELLO, 2, {"tensor": torch.zeros(2)})


def test_non_positive_timeout_is_refused():
    with pytest.raises(ValueError, match="timeout"):
        launch.launch(HELLO, 2, timeout=0)


def test_init_worker_outside_torchrun_says_how_to_start_it(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LaunchError, match="torchrun"):
        launch.init_worker()


# --- real processes --------------------------------------------------------------------------------

def printed_pids(text: str) -> list[int]:
    """The process ids the hello workers printed ("rank r of N: process NNNN, ...")."""
    return [int(pid) for pid in re.findall(r"rank \d+ of \d+: process (\d+)", text)]


def assert_all_gone(pids: list[int], wait: float = 5.0) -> None:
    deadline = time.monotonic() + wait
    for pid in pids:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"worker process {pid} is still alive after the launcher returned")
            time.sleep(0.1)


def assert_no_repository_path(text: str) -> None:
    assert str(ROOT) not in text
    assert "/work/" not in text


@pytest.mark.slow
def test_hello_on_two_ranks_returns_results_in_rank_order(capsys):
    results = launch.launch(HELLO, 2, timeout=120)
    out = capsys.readouterr().out
    assert results == [launch.Hello(r, 2, results[r].pid, 1.0) for r in (0, 1)]
    assert results[0].pid != results[1].pid
    assert re.search(r"^\[rank 0\] rank 0 of 2: process \d+", out, re.MULTILINE)
    assert re.search(r"^\[rank 1\] rank 1 of 2: process \d+", out, re.MULTILINE)
    assert sorted(printed_pids(out)) == sorted(r.pid for r in results)


@pytest.mark.slow
def test_failing_rank_raises_prints_its_traceback_and_leaves_no_process(capsys):
    with pytest.raises(LaunchError, match="rank 1 failed"):
        launch.launch(HELLO, 2, {"fail_on": 1}, timeout=120)
    out = capsys.readouterr().out
    assert re.search(r"^\[rank 1\] ValueError: rank 1 fails on purpose", out, re.MULTILINE)
    assert re.search(r"^\[rank 1\] Traceback \(most recent call last\):", out, re.MULTILINE)
    assert_no_repository_path(out)
    pids = printed_pids(out)
    assert len(pids) == 2
    assert_all_gone(pids)


@pytest.mark.slow
def test_hanging_rank_times_out_and_leaves_no_process(capsys):
    start = time.monotonic()
    with pytest.raises(LaunchError, match=r"did not finish within 10 s.*timeout="):
        launch.launch(HELLO, 2, {"hang_on": 1}, timeout=10)
    assert time.monotonic() - start < 10 + 20  # stopped: SIGTERM, then SIGKILL after 5 s at most
    out = capsys.readouterr().out
    assert_no_repository_path(out)
    pids = printed_pids(out)
    assert len(pids) == 2, "both ranks should have started within the 10 s"
    assert_all_gone(pids)


# --- two processes writing to one pipe, as torchrun's ranks do -------------------------------------

WRITER = """
import sys
from course_lib.parallel.launch import say
for i in range(3000):
    say(f"rank {sys.argv[1]} line {i:04d} " + "x" * 80)
"""


def test_say_keeps_the_lines_of_two_processes_whole_on_one_unbuffered_pipe():
    read_end, write_end = os.pipe()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(rank)], stdout=write_end, env=env)
               for rank in (0, 1)]
    os.close(write_end)
    try:
        with os.fdopen(read_end) as pipe:
            lines = pipe.read().splitlines()
        assert [w.wait(timeout=60) for w in writers] == [0, 0]
    finally:
        for w in writers:
            w.kill()
    whole = re.compile(r"rank [01] line \d{4} x{80}")
    assert len(lines) == 6000 and all(whole.fullmatch(line) for line in lines), \
        [line for line in lines if not whole.fullmatch(line)][:3]
