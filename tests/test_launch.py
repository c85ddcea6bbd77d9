"""The notebook launcher of chapter 8 (course_lib.parallel.launch): its argument checks say what to do
(bad nprocs, ports, backends, targets, kwargs, a worker started outside torchrun) without starting
anything, and the torchrun scripts' parser reports a bad flag once; and, marked slow, real runs of
two ranks: results come back in rank order with rank-prefixed output, a failing rank or a hanging
one raises LaunchError, leaves no process behind, and prints no absolute path of the repository; a
rank that returns what cannot be sent back, or ends without returning, gets its own message; and
when the launching process (a notebook's kernel) is killed, no rank, no process a rank started and
no launch folder remains. A failing rank's traceback arrives as one block, the
LaunchError's message: cut to the learner's and the course's lines and the error, no
process id, no machine path, lines of at most 88 characters; lines that come together
print in one write."""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import os
import pickle
import queue
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from course_lib.parallel import failures, launch
from course_lib.parallel.launch import LaunchError
from conftest import ranks_import_from

ROOT = Path(__file__).resolve().parents[1]
HELLO = "course_lib.parallel.launch:hello"
CORES = os.cpu_count() or 1


# --- checks that start no process ------------------------------------------------------------------

@pytest.mark.parametrize("nprocs", [0, -1, True, 2.0, "2"])
def test_bad_nprocs_is_refused(nprocs):
    with pytest.raises(ValueError, match="nprocs must be a whole number >= 1"):
        launch.launch(HELLO, nprocs)


def test_nprocs_is_checked_before_the_backend_counts_gpus_for_it():
    with pytest.raises(ValueError, match="nprocs must be a whole number >= 1"):
        launch.launch(HELLO, 0, backend="nccl")
    with pytest.raises(ValueError, match="nprocs must be a whole number >= 1"):
        launch.resolve_backend("auto", 0)


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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's port range")
def test_free_port_keeps_out_of_the_ports_connections_take(monkeypatch):
    """Below the ephemeral range, where no outgoing connection takes it; else the system's."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {launch.free_port() for _ in range(5)}
    assert all(20000 <= p < low for p in ports) and len(ports) > 1  # random, not fixed
    with contextlib.ExitStack() as stack:  # every candidate busy: the system chooses
        held = []
        for _ in range(20):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((launch.HOST, 0))
            held.append(s.getsockname()[1])
        monkeypatch.setattr(launch.random, "Random", lambda: type(
            "Busy", (), {"sample": lambda self, population, k: held})())
        port = launch.free_port()
        assert port not in held and launch.check_port(port) == port


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


# --- the torchrun scripts' command line -----------------------------------------------------------

def script_parser() -> launch.RankArgumentParser:
    parser = launch.RankArgumentParser(prog="torchrun --nproc-per-node=N -m some.script")
    parser.add_argument("--steps", type=launch.whole_number(1), default=3)
    parser.add_argument("--warmup", type=launch.whole_number(0), default=0)
    parser.add_argument("--lr", type=launch.positive_number, default=1e-3)
    return parser


@pytest.mark.parametrize(("argv", "message"), [
    (["--steps", "0"], "argument --steps: must be a whole number >= 1, got '0'"),
    (["--steps", "2.5"], "argument --steps: must be a whole number >= 1, got '2.5'"),
    (["--warmup", "-1"], "argument --warmup: must be a whole number >= 0, got '-1'"),
    (["--lr", "-1"], "argument --lr: must be a positive number, got '-1'"),
    (["--lr", "inf"], "argument --lr: must be a positive number, got 'inf'"),
    (["--lr", "x"], "argument --lr: must be a positive number, got 'x'"),
])
@pytest.mark.parametrize("rank", [None, "0", "1"])
def test_a_bad_flag_is_reported_by_rank_0_only_and_every_rank_exits_2(argv, message, rank,
                                                                       monkeypatch, capsys):
    monkeypatch.setattr(launch, "RANK_ZERO_WAIT", 0.0)
    if rank is None:
        monkeypatch.delenv("RANK", raising=False)
    else:
        monkeypatch.setenv("RANK", rank)
    with pytest.raises(SystemExit) as info:
        script_parser().parse_args(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    if rank == "1":
        assert captured.err == ""
    else:
        assert captured.err.count(message) == 1 and "usage:" in captured.err


def test_the_other_ranks_give_rank_0_time_to_report(monkeypatch, capsys):
    """torchrun stops every rank when the first one exits: rank 0 must not be the one stopped."""
    monkeypatch.setattr(launch, "RANK_ZERO_WAIT", 0.5)
    monkeypatch.setenv("RANK", "1")
    start = time.monotonic()
    with pytest.raises(SystemExit):
        script_parser().parse_args(["--steps", "0"])
    assert time.monotonic() - start >= 0.5
    monkeypatch.setenv("RANK", "0")
    start = time.monotonic()
    with pytest.raises(SystemExit):
        script_parser().parse_args(["--steps", "0"])
    assert time.monotonic() - start < 0.5


def test_good_flags_parse_to_numbers():
    args = script_parser().parse_args(["--steps", "4", "--warmup", "0", "--lr", "3e-3"])
    assert (args.steps, args.warmup, args.lr) == (4, 0, 3e-3)
    with pytest.raises(argparse.ArgumentTypeError, match=">= 2"):
        launch.whole_number(2)("1")


# --- real processes --------------------------------------------------------------------------------

def printed_pids(text: str) -> list[int]:
    """The process ids the hello workers printed ("rank r of N: process NNNN, ...")."""
    return [int(pid) for pid in re.findall(r"rank \d+ of \d+: process (\d+)", text)]


def _zombie(pid: int) -> bool:
    """Ended, but not yet reaped by its parent (an orphan's new parent may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except (OSError, IndexError):
        return False


def assert_all_gone(pids: list[int], wait: float = 5.0) -> None:
    deadline = time.monotonic() + wait
    for pid in pids:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            if _zombie(pid):
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
@pytest.mark.parametrize("echo", [True, False])
def test_failing_rank_raises_one_block_with_its_trimmed_traceback(capsys, echo):
    """The rank's traceback comes as one LaunchError, not printed line by line."""
    with pytest.raises(LaunchError, match="rank 1 failed") as info:
        launch.launch(HELLO, 2, {"fail_on": 1}, timeout=120, echo=echo)
    out, message = capsys.readouterr().out, str(info.value)
    lines = message.splitlines()
    assert lines[-1] == "ValueError: rank 1 fails on purpose, after the all-reduce"
    frame = r'  File "course_lib/parallel/launch\.py", line \d+, in hello'
    assert re.fullmatch(frame, lines[1])
    assert lines[2].strip().startswith("raise ValueError(")
    assert len(lines) == 4, message  # the launcher's own frame is left out
    assert "Traceback" not in out and "ValueError" not in out  # none of it printed
    assert "process" not in message  # no process id
    assert all(len(line) <= 88 - len("LaunchError: ") for line in lines[:1])
    assert all(len(line) <= 88 for line in lines)
    assert_no_repository_path(out + message)
    if echo:
        pids = printed_pids(out)
        assert len(pids) == 2
        assert_all_gone(pids)
    else:
        assert out == ""


def test_a_process_that_outlasts_sigterm_is_killed_after_the_grace():
    """A rank blocked in C++ runs its SIGTERM handler only when the call returns: as here, where
    SIGTERM is ignored, it is killed STOP_GRACE seconds later, its group with it."""
    code = ("import signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            "print(child.pid, flush=True); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        child = int(proc.stdout.readline())
        start = time.monotonic()
        launch.stop_processes([proc])
        took = time.monotonic() - start
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert launch.STOP_GRACE <= took < launch.STOP_GRACE + 2
    assert_all_gone([child])  # the sleeping child went with it, its group killed


@pytest.mark.slow
def test_hanging_rank_times_out_and_leaves_no_process(capsys):
    start = time.monotonic()
    with pytest.raises(LaunchError, match=r"did not finish within 10 s.*timeout="):
        launch.launch(HELLO, 2, {"hang_on": 1}, timeout=10)
    assert time.monotonic() - start < 10 + 20  # stopped: SIGTERM, then SIGKILL (launch.STOP_GRACE)
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


# --- what a rank sends back ------------------------------------------------------------------------

RANK_FUNCTIONS = """
import os, subprocess, sys, time

RANK = int(os.environ.get("RANK", "0"))


class OnlyTheRanksKnowIt:
    \"\"\"A class of a module on the ranks' path only: the launcher cannot unpickle it.\"\"\"


def sleep_with_a_child():
    child = subprocess.Popen(["sleep", "120"])
    print(f"ready {os.getpid()} {child.pid}", flush=True)
    time.sleep(120)


def leave_a_child_running():
    child = subprocess.Popen(["sleep", "300"])
    return child.pid


def return_a_lambda():
    return (lambda: 0) if RANK == 1 else 0


def return_an_open_file():
    return open(__file__) if RANK == 1 else 0


def exit_zero():
    if RANK == 1:
        sys.exit(0)
    return 0


def os_exit_zero():
    if RANK == 1:
        os._exit(0)
    return 0


def return_an_unknown_class():
    return OnlyTheRanksKnowIt()


def all_reduce_without_a_group():
    import torch
    import torch.distributed as dist
    if RANK == 1:
        dist.all_reduce(torch.zeros(1))  # no process group joined: torch raises
    return 0
"""


@dataclasses.dataclass(frozen=True)
class _Sent:
    """A result as the chapters' ranks return them: a frozen dataclass with tensors inside."""

    history: tuple[float, ...]
    parameters: torch.Tensor
    shard: torch.Tensor
    states: dict[str, int]


def test_a_result_comes_back_whole_with_its_tensors_views_kept(tmp_path):
    parameters = torch.randn(1000, dtype=torch.float64)
    result = _Sent((2.5, 2.25), parameters, parameters[250:500], {"parameters": 8000})
    failures.send(result, tmp_path / "rank0.pkl")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank0.pkl"]  # no partial file left
    back = launch._result(tmp_path, 0)
    assert back.history == result.history and back.states == result.states
    assert torch.equal(back.parameters, parameters) and back.parameters.dtype == torch.float64
    back.shard.zero_()  # one storage, as on the rank: the view writes into the whole
    assert back.parameters[250:500].abs().sum() == 0 and back.parameters[:250].abs().sum() > 0


@pytest.mark.parametrize(("result", "error"), [((lambda: 0), (pickle.PicklingError,
                                                               AttributeError)),
                                               (threading.Lock(), TypeError),
                                               ((x for x in ()), TypeError)])
def test_a_result_that_does_not_pickle_raises_what_pickle_raises_and_leaves_no_file(
        tmp_path, result, error):
    with pytest.raises(error):
        pickle.dumps(result)
    with pytest.raises(error):
        failures.send(result, tmp_path / "rank0.pkl")
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def rank_functions(tmp_path, monkeypatch):
    """A module of rank functions that the ranks import (through PYTHONPATH) and this process cannot."""
    folder = tmp_path / "functions"
    folder.mkdir()
    (folder / "rank_functions.py").write_text(RANK_FUNCTIONS)
    ranks_import_from(monkeypatch, folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize(("function", "kind"), [("return_a_lambda", "function"),
                                                ("return_an_open_file", "TextIOWrapper")])
def test_a_result_that_cannot_be_sent_back_names_the_rank_and_what_to_return(rank_functions,
                                                                              function, kind):
    with pytest.raises(LaunchError) as info:
        launch.launch(f"rank_functions:{function}", 2, timeout=60, echo=False)
    message = str(info.value)
    assert message.startswith(f"rank 1 returned a {kind}, which cannot be sent back"), message
    assert "Return what pickles" in message and "not a lambda, an open file" in message


@pytest.mark.slow
def test_sys_exit_in_a_rank_says_to_return_instead(rank_functions):
    with pytest.raises(LaunchError, match=r"^rank 1 called sys.exit\(0\) in rank_functions:exit_zero "
                       r"instead of returning a result\. Let the function return its result"):
        launch.launch("rank_functions:exit_zero", 2, timeout=60, echo=False)


@pytest.mark.slow
def test_a_rank_that_ends_with_code_0_and_no_result_is_named(rank_functions):
    with pytest.raises(LaunchError, match=r"^rank 1 exited with code 0 but sent back no result.*"
                       r"Let the function return its result"):
        launch.launch("rank_functions:os_exit_zero", 2, timeout=60, echo=False)


@pytest.mark.slow
def test_a_result_this_process_cannot_unpickle_names_the_rank_and_the_fix(rank_functions):
    with pytest.raises(LaunchError, match=r"^rank 0's result cannot be read back here "
                       r"\(ModuleNotFoundError: No module named 'rank_functions'\)\. Return "):
        launch.launch("rank_functions:return_an_unknown_class", 2, timeout=60, echo=False)


@pytest.mark.slow
def test_an_error_raised_in_torch_shows_the_learners_line_not_torchs(rank_functions):
    target = "rank_functions:all_reduce_without_a_group"
    with pytest.raises(LaunchError) as info:
        launch.launch(target, 2, timeout=60, echo=False)
    lines = str(info.value).splitlines()
    call = "dist.all_reduce(torch.zeros(1))  # no process group joined: torch raises"
    number = [line.strip() for line in RANK_FUNCTIONS.splitlines()].index(call) + 1
    assert lines[0].startswith("rank 1 failed")
    assert lines[1] == (f'  File "rank_functions.py", line {number}, in '
                        "all_reduce_without_a_group")
    assert lines[2] == "    " + call
    assert lines[3].startswith("ValueError: Default process group has not been")
    message = str(info.value)
    assert "torch/" not in message and str(rank_functions) not in message


# --- what the launcher prints and raises, without processes ---------------------------

def test_lines_that_come_together_are_printed_in_one_write_in_rank_order(monkeypatch):
    writes: list[str] = []
    monkeypatch.setattr(sys, "stdout", type("Out", (), {"write": writes.append,
                                                        "flush": lambda self: None})())
    lines: queue.Queue = queue.Queue()
    for item in [(1, "one b"), (0, "zero a"), (1, "one c"), (0, "zero d")]:
        lines.put(item)
    tails = {0: collections.deque(maxlen=20), 1: collections.deque(maxlen=20)}
    launch._drain(lines, echo=True, wait=0.05, tails=tails)
    one_write = "[rank 0] zero a\n[rank 0] zero d\n[rank 1] one b\n[rank 1] one c\n"
    assert writes == [one_write]
    assert list(tails[1]) == ["one b", "one c"]


def raise_through_json() -> None:
    json.loads("[")  # raised in Python's json module, whose frames are left out


def test_a_trimmed_traceback_keeps_the_course_and_test_lines_only():
    try:
        raise_through_json()
    except ValueError as err:
        text = failures.trimmed_traceback(err)
    lines = text.splitlines()
    assert lines[0].startswith('  File "tests/test_launch.py", line ')
    assert lines[-3].endswith(", in raise_through_json")
    assert lines[-2].startswith('    json.loads("[")  # raised in Python')
    assert lines[-1].startswith("json.decoder.JSONDecodeError: Expecting value")
    assert "json/decoder.py" not in text and str(ROOT) not in text


def test_the_report_names_the_first_rank_to_fail_and_the_others_in_a_line(tmp_path):
    (tmp_path / "rank1.traceback").write_text('  File "a.py", line 3, in f\n    g()\n'
                                              "ValueError: the cause")
    time.sleep(0.01)
    for rank in (3, 0, 2):
        (tmp_path / f"rank{rank}.traceback").write_text(
            "  File ...\nRuntimeError: Connection closed by peer")
    (tmp_path / "rank4.traceback").write_text("ValueError: another")
    report = failures.failure_report(tmp_path, 0, 1, echo=True, tail=[])
    assert report.splitlines() == [
        "rank 1 failed, and the other ranks were stopped. Where it failed:",
        '  File "a.py", line 3, in f', "    g()", "ValueError: the cause",
        "(ranks 0, 2, 3 failed too: RuntimeError: Connection closed by peer)",
        "(rank 4 failed too: ValueError: another)"]


def test_a_rank_that_dies_without_a_traceback_gets_its_code_and_last_lines(tmp_path):
    shown = failures.failure_report(tmp_path, 1, -11, echo=True, tail=["a", "b"])
    said = " ".join(shown.split())
    assert said == ("rank 1 failed (exit code -11) and the other ranks were stopped; "
                    "its last lines are printed above")
    assert all(len(line) <= 88 for line in shown.splitlines())
    kept = failures.failure_report(tmp_path, 1, -11, echo=False, tail=["a", "b"])
    assert kept.splitlines()[-2:] == ["a", "b"]


# --- a killed launcher ----------------------------------------------------------------------------

KERNEL = textwrap.dedent("""
    from course_lib.parallel import launch
    launch.launch("rank_functions:sleep_with_a_child", 2, timeout=120)
""")


def ready_processes(kernel: subprocess.Popen, n: int, timeout: float) -> list[int]:
    """The process ids of the ``n`` ranks and of the child each started, as the ranks print them."""
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in kernel.stdout], daemon=True).start()
    pids, seen, deadline = [], [], time.monotonic() + timeout
    while len(pids) < 2 * n:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            pytest.fail(f"the ranks did not start within {timeout:g} s: {seen}")
        seen.append(line)
        found = re.search(r"\] ready (\d+) (\d+)$", line.strip())
        if found:
            pids += [int(found.group(1)), int(found.group(2))]
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_launcher_leaves_no_rank_no_child_and_no_folder(rank_functions, tmp_path, sig):
    psutil = pytest.importorskip("psutil")
    temp = tmp_path / "tmp"  # the launch folder goes here: this test's own TMPDIR
    temp.mkdir()
    env = dict(os.environ, TMPDIR=str(temp))
    kernel = subprocess.Popen([sys.executable, "-c", KERNEL], env=env, cwd=tmp_path, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    processes = []
    try:
        processes = [psutil.Process(pid) for pid in ready_processes(kernel, 2, timeout=120)]
        assert len(list(temp.glob("course-launch-*"))) == 1  # there while the ranks run

        kernel.send_signal(sig)
        kernel.wait(timeout=10)

        def left() -> list:
            alive = []
            for p in processes:
                try:
                    if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                        alive.append(p.pid)
                except psutil.NoSuchProcess:
                    pass
            return alive + list(temp.glob("course-launch-*"))

        deadline = time.monotonic() + 10
        while left() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not left(), f"10 s after {sig.name} to the launcher, still there: {left()}"
    finally:
        kernel.kill()
        kernel.wait(timeout=10)
        kernel.stdout.close()
        for p in processes:  # psutil checks that a pid still names the same process
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass


@pytest.mark.slow
def test_a_child_a_rank_left_running_ends_with_the_rank(rank_functions):
    pids = launch.launch("rank_functions:leave_a_child_running", 2, timeout=60, echo=False)
    assert_all_gone(pids)


TORCHRUN_RANK = """import os, time
from course_lib.parallel import launch
launch.init_worker()
os.write(1, f"ready {os.getpid()}\\n".encode())  # one write: two ranks share the pipe
time.sleep(120)
"""


@pytest.mark.slow
def test_torchrun_killed_with_sigkill_leaves_no_rank_running(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(TORCHRUN_RANK)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    env.pop("COURSE_LIB_LAUNCHER", None)
    torchrun = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2",
         f"--master-port={launch.free_port()}", str(script)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        start_new_session=True)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + 60
        while len(pids) < 2 and time.monotonic() < deadline:
            line = torchrun.stdout.readline()  # torchrun may prefix or interleave lines
            pids += [int(pid) for pid in re.findall(r"ready (\d+)", line)]
        assert len(pids) == 2, "torchrun's ranks did not start"
        torchrun.kill()  # SIGKILL: the agent cannot stop its ranks itself
        torchrun.wait(timeout=10)
        assert_all_gone(pids)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(torchrun.pid, signal.SIGKILL)


# --- a rank killed from outside, a port taken (issue 40) -------------------------------------------

KILLED_RANK = """
import os, signal, time
import torch
import torch.distributed as dist
from course_lib.parallel import launch


def die_mid_run(sig):
    worker = launch.init_worker()
    total = torch.ones(1000)
    for step in range(500):
        dist.all_reduce(total)
        if worker.rank == 1 and step == 5:
            os.kill(os.getpid(), getattr(signal, sig))  # as `kill` from another shell would
        time.sleep(0.01)
    return 0
"""


@pytest.fixture
def killed_rank(tmp_path, monkeypatch):
    folder = tmp_path / "functions"
    folder.mkdir()
    (folder / "killed_rank.py").write_text(KILLED_RANK)
    ranks_import_from(monkeypatch, folder)


@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
@pytest.mark.parametrize("echo", [True, False])
def test_a_rank_killed_mid_run_is_named_with_its_signal(killed_rank, capsys, sig, echo):
    """Not only the survivors' gloo errors: the rank that died, and the signal it got."""
    start = time.monotonic()
    with pytest.raises(LaunchError) as info:
        launch.launch("killed_rank:die_mid_run", 2, {"sig": sig}, timeout=120, echo=echo)
    assert time.monotonic() - start < 60
    message = str(info.value)
    number = getattr(signal, sig).value
    assert message.startswith(f"rank 1 was killed by {sig} (signal {number}), not by the "
                              "launcher"), message
    assert "rank 0 failed," not in message and "Traceback" not in message
    assert all(len(line) <= 88 for line in message.splitlines())
    assert "Traceback" not in capsys.readouterr().out


class _Exiting:
    """A Popen stand-in whose poll() gives None until its code is due (seconds from now)."""

    def __init__(self, code, after=0.0):
        self.code, self.due = code, time.monotonic() + after

    def poll(self):
        return self.code if time.monotonic() >= self.due else None


@pytest.mark.parametrize("codes, expected", [
    ([(-13, 0), (-15, 0.2)], (1, -15)),  # the SIGPIPE is seen before its cause is reaped
    ([(-13, 0), (-9, 0)], (1, -9)),
    ([(1, 0), (-9, 0.2)], (1, -9)),  # the survivor's gloo error first, the killed rank later
    ([(None, 0), (1, 0), (1, 0.1)], (1, 1)),  # ranks that raise after the first are effects
    ([(-13, 0), (None, 0)], (0, -13)),  # a SIGPIPE alone is still named
])
def test_the_watch_names_the_cause_not_its_effects(codes, expected):
    processes = [_Exiting(code, after) for code, after in codes]
    tails = collections.defaultdict(lambda: collections.deque(maxlen=5))
    assert launch._watch(processes, queue.Queue(), 60, False, tails) == expected


def test_a_busy_port_given_to_launch_is_refused_before_anything_starts():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((launch.HOST, 0))
        held.listen()
        port = held.getsockname()[1]
        start = time.monotonic()
        with pytest.raises(LaunchError, match=rf"^port {port} on {launch.HOST} is busy"):
            launch.launch(HELLO, 2, port=port, timeout=60)
        assert time.monotonic() - start < 1


@pytest.mark.slow
def test_a_picked_port_taken_before_rank_0_is_replaced(monkeypatch, capsys):
    """The launcher picked the port and another program took it: it picks another, once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((launch.HOST, 0))
        held.listen()
        ports = [held.getsockname()[1], launch.free_port()]
        monkeypatch.setattr(launch, "free_port", lambda host=launch.HOST: ports.pop(0))
        ranks = launch.launch(HELLO, 2, timeout=120)
    assert [r.rank for r in ranks] == [0, 1] and ports == []
    assert_all_gone(printed_pids(capsys.readouterr().out))


@pytest.mark.slow
@pytest.mark.parametrize("given", [True, False], ids=["port given", "port picked"])
def test_a_port_taken_between_the_check_and_rank_0_is_named(monkeypatch, capsys, given):
    """Another program listens on the port by the time rank 0 opens it (the check passed)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as held:
        held.bind((launch.HOST, 0))
        held.listen()
        port = held.getsockname()[1]
        picked = []
        monkeypatch.setattr(launch, "check_port", lambda p, host=launch.HOST: p)
        monkeypatch.setattr(launch, "free_port",
                            lambda host=launch.HOST: picked.append(port) or port)
        start = time.monotonic()
        with pytest.raises(LaunchError) as info:
            launch.launch(HELLO, 2, port=port if given else None, timeout=120)
        assert time.monotonic() - start < 60
    assert len(picked) == (0 if given else launch.PORT_TRIES)  # a picked port: tried again
    message = str(info.value)
    fix = "Pass port=None to pick a free one" if given else "Run it again"
    assert message == (f"port {port} on {launch.HOST} is busy: another program took it before "
                       "rank 0 could listen on it, and the ranks were stopped. "
                       f"{fix}, or stop that program.")
    assert_all_gone(printed_pids(capsys.readouterr().out))
