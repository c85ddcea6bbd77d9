"""Start N worker processes the way ``torchrun`` does, from a notebook, and join them in a group.

Chapter 8 ("Data parallelism with DDP") runs real ``torch.distributed`` code on several processes.
:func:`launch` is a small ``torchrun`` for one machine: it picks a free port, starts ``nprocs``
Python processes with the environment variables ``torchrun`` sets (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``, ``MASTER_PORT``), prints every line they write with its rank in
front, stops them all when one fails or the time is up, and returns what each rank's function
returned. On Linux the ranks are forked from a warm server that has imported torch once
(:mod:`course_lib.parallel.warm_ranks`; ``COURSE_LIB_WARM_RANKS=0`` starts each cold).
Inside a worker, :func:`init_worker` reads those variables and joins the process group, so
the same function runs unchanged under ``torchrun`` (NCCL, one GPU per local rank) and under
:func:`launch` (gloo on CPU processes).

No orphans: each rank leads its own process group, so that stopping it stops what it started
(subprocesses, DataLoader workers), and it watches the launcher: when the launcher dies, even by
SIGKILL, the rank ends its group and removes the launch folder (:mod:`course_lib.parallel.
lifetime`). :class:`RankArgumentParser` gives
the torchrun scripts one message for a bad flag, printed by rank 0, instead of one per rank.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import importlib
import json
import math
import os
import pickle
import queue
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NoReturn

import torch
import torch.distributed as dist

from course_lib.parallel import failures, lifetime, warm_ranks

__all__ = [
    "Hello",
    "LaunchError",
    "RankArgumentParser",
    "Worker",
    "check_port",
    "check_world_size",
    "free_port",
    "hello",
    "init_worker",
    "is_rank_zero",
    "launch",
    "positive_number",
    "resolve_backend",
    "shutdown",
    "stop_processes",
    "whole_number",
]

HOST = "127.0.0.1"
#: At most this many CPU processes per core, and never more than this many in all (gloo on CPU).
MAX_CPU_RANKS = 8
#: How long (seconds) the launcher waits after a line for the other ranks' lines.
GATHER = 0.02
#: How long (seconds) the launcher waits after a rank fails for the rank that made it fail.
SETTLE = 0.5
#: How many ports :func:`launch` tries when it picks the port and another program takes it.
PORT_TRIES = 3
#: On a bad flag, the seconds the other ranks wait for rank 0 to report it: torchrun stops the
#: whole group as soon as one rank exits, and rank 0 must not be stopped before it has spoken.
RANK_ZERO_WAIT = 30.0
#: How long (seconds) a stopped rank has between SIGTERM and SIGKILL. A rank blocked in C++ (a
#: collective waiting for a peer that failed, the store waiting for rank 0) runs its SIGTERM
#: handler only when that call returns (at its timeout, a minute by default): it waits.
#: The handler only notes the signal and kills the rank's group, as SIGKILL of the group does.
STOP_GRACE = 1.0


class LaunchError(RuntimeError):
    """A worker failed, timed out or could not be started; the message says which and what to do.

    Chapter 8, *Data parallelism with DDP*.
    """


@dataclass(frozen=True)
class Worker:
    """Where this process stands in the group: its rank, the group's size, its device and backend.

    Chapter 8, *Data parallelism with DDP*.
    """

    rank: int
    world_size: int
    local_rank: int
    backend: str
    device: torch.device


def say(line: str) -> None:
    """Print one line in a single write, so that the lines of ranks sharing one terminal or pipe never interleave.

    ``print`` writes the text and its newline separately when output is unbuffered (as under
    torchrun), and two ranks' halves can then mix; one write of under 4 KiB to a pipe is atomic.

    Chapter 8, *Data parallelism with DDP*.
    """
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def is_rank_zero() -> bool:
    """Whether this process speaks for its group: rank 0 of torchrun or launch, or no rank at all.

    Chapter 8, *Data parallelism with DDP*.
    """
    return os.environ.get("RANK", "0").strip() in ("", "0")


class RankArgumentParser(argparse.ArgumentParser):
    """The argument parser of a script that every torchrun rank runs: one message for a bad flag.

    Under torchrun each rank parses the same command line, and a bad flag would be reported once
    per rank, each with its traceback. Here only rank 0 prints the usage and the message, which
    names the flag as typed, and every rank exits with status 2 (before joining a process group);
    the others first wait up to :data:`RANK_ZERO_WAIT` seconds, until torchrun stops them.

    Options are never abbreviated (``--micro`` is not taken for ``--micro-batches``): a
    prefix of one option could silently set another.

    Chapter 8, *Data parallelism with DDP*.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """Print the usage and ``message`` on rank 0 only; exit with status 2 on every rank."""
        if is_rank_zero():
            self.print_usage(sys.stderr)
            sys.stderr.write(f"{self.prog}: error: {message}\n")
            sys.stderr.flush()
        else:
            time.sleep(RANK_ZERO_WAIT)
        raise SystemExit(2)


def whole_number(minimum: int = 1) -> Callable[[str], int]:
    """An argparse ``type=``: the flag's text as a whole number >= ``minimum``, or its message.

    Chapter 8, *Data parallelism with DDP*.
    """
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be a whole number >= {minimum}, got {text!r}")
        return value

    parse.__name__ = f"whole number >= {minimum}"
    return parse


def positive_number(text: str) -> float:
    """An argparse ``type=``: the flag's text as a positive finite number, or its message.

    Chapter 8, *Data parallelism with DDP*.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def free_port(host: str = HOST) -> int:
    """A TCP port that nothing uses right now, below the system's ephemeral ports if it can.

    The system gives every outgoing connection a local port from its ephemeral range (Linux:
    ``/proc/sys/net/ipv4/ip_local_port_range``), the range it picks from when asked for any
    port. A port from there can be taken by some connection before rank 0 listens on it, so
    this tries random ports below the range first (torchrun's 29500 is one of them), then lets
    the system choose.

    Chapter 8, *Data parallelism with DDP*.
    """
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 0
    # A generator of its own: a notebook seeds the shared one, and two would pick alike.
    for port in random.Random().sample(range(20000, low), 20) if low > 20020 else []:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s, \
                contextlib.suppress(OSError):
            s.bind((host, port))
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port(port: int, host: str = HOST) -> int:
    """Return ``port`` if it is a valid TCP port that is free on ``host``; otherwise say what to do.

    Chapter 8, *Data parallelism with DDP*.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
        raise ValueError(f"port must be a whole number from 1024 to 65535, got {port!r}; "
                         "or pass port=None to let the launcher pick a free one.")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError as err:
            raise LaunchError(f"port {port} on {host} is busy ({err.strerror}): another program "
                              "(or a process group still running) uses it. Pass port=None to "
                              "pick a free port, or stop that program.") from None
    return port


def resolve_backend(backend: str, nprocs: int) -> str:
    """The process-group backend to use: "gloo" (CPU) or "nccl" (one GPU per rank); "auto" picks.

    Chapter 8, *Data parallelism with DDP*.
    """
    _check_count(nprocs)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if backend == "auto":
        return "nccl" if gpus >= nprocs and dist.is_nccl_available() else "gloo"
    if backend == "nccl":
        if gpus == 0 or not dist.is_nccl_available():
            raise LaunchError("backend='nccl' needs NVIDIA GPUs and a CUDA build of torch, and this "
                              "machine has none. Use backend='gloo' (CPU processes) or 'auto'.")
        if gpus < nprocs:
            raise LaunchError(f"backend='nccl' runs one rank per GPU: {nprocs} ranks asked for, "
                              f"{gpus} GPU(s) here. Use nprocs <= {gpus}, or backend='gloo'.")
        return backend
    if backend == "gloo":
        return backend
    raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', got {backend!r}.")


def _check_count(nprocs: Any) -> None:
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise ValueError(f"nprocs must be a whole number >= 1 (the number of ranks), got {nprocs!r}.")


def check_world_size(nprocs: int, backend: str = "gloo") -> int:
    """Return ``nprocs`` if this machine can sensibly run that many ranks; otherwise say why not.

    Chapter 8, *Data parallelism with DDP*.
    """
    _check_count(nprocs)
    cores = os.cpu_count() or 1
    limit = min(MAX_CPU_RANKS, max(4, 2 * cores))
    if backend == "gloo" and nprocs > limit:
        raise ValueError(f"{nprocs} CPU ranks is more than this machine can run sensibly: it has "
                         f"{cores} core(s), so use at most {limit} (every rank holds a full copy "
                         "of the model and needs a share of the cores).")
    return nprocs


def _environment(rank: int, nprocs: int, port: int, backend: str, threads: int) -> dict[str, str]:
    environ = dict(os.environ)
    environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs),
                   LOCAL_WORLD_SIZE=str(nprocs), MASTER_ADDR=HOST, MASTER_PORT=str(port),
                   COURSE_LIB_BACKEND=backend, OMP_NUM_THREADS=str(threads),
                   PYTHONUNBUFFERED="1", COURSE_LIB_LAUNCHER=str(os.getpid()))
    # Idle OpenMP threads sleep instead of spinning: ranks that share cores slow each other less.
    environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # one machine: the loopback interface
    return environ


def _pump(rank: int, stream: Any, lines: queue.Queue) -> None:
    for line in iter(stream.readline, ""):
        lines.put((rank, line.rstrip("\n")))
    stream.close()


def stop_processes(processes: list[subprocess.Popen], grace: float = STOP_GRACE) -> None:
    """Stop every process that still runs, with its process group: SIGTERM, then SIGKILL
    ``grace`` seconds later.

    Chapter 8, *Data parallelism with DDP*.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in processes if p.poll() is None]
        for p in alive:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        for p in alive:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass


def launch(target: str, nprocs: int = 2, kwargs: dict[str, Any] | None = None, *,
           backend: str = "auto", timeout: float = 120.0, port: int | None = None,
           threads: int | None = None, echo: bool = True) -> list[Any]:
    """Run ``target`` ("module:function") on ``nprocs`` new processes; return each rank's result.

    Every rank calls ``function(**kwargs)`` (``kwargs`` must be JSON: numbers, strings, lists,
    dictionaries); what it returns (tensors, numbers, lists, dictionaries, dataclasses: anything
    that pickles) comes back in rank order.
    Lines the workers print appear here as ``[rank r] ...``, those that come together in
    one block. If a rank fails, the other ranks are stopped and :class:`LaunchError` is
    raised, its message the rank's traceback cut to the learner's and the course's
    lines; the same after ``timeout`` seconds, and when a rank returns what cannot be
    sent back or ends without returning.
    ``threads`` is each rank's ``OMP_NUM_THREADS`` (default: the cores shared out). Should this
    process die, the ranks end too, with what they started, and remove the launch folder.
    A busy ``port`` is refused before anything starts; one taken in the meantime is named as
    soon as rank 0 cannot listen on it. A rank killed from outside is named with its signal.

    Chapter 8, *Data parallelism with DDP*.
    """
    backend = resolve_backend(backend, nprocs)
    check_world_size(nprocs, backend)
    if ":" not in target:
        raise ValueError(f"target must look like 'package.module:function', got {target!r}.")
    try:
        payload = json.dumps(kwargs or {})
    except TypeError as err:
        raise ValueError(f"kwargs must be JSON (numbers, strings, lists, dicts): {err}") from None
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
    chosen = port is not None
    port = free_port() if port is None else check_port(port)
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                or threads < 1):
        raise ValueError(f"threads must be a whole number >= 1 (per rank), got {threads!r}.")
    threads = threads or max(1, (os.cpu_count() or 1) // nprocs)
    tries = 1 if chosen else PORT_TRIES
    while True:
        try:
            return _run(target, payload, nprocs, port, backend, threads, timeout, echo)
        except _PortTaken:
            tries -= 1
            if not tries:
                again = "Pass port=None to pick a free one" if chosen else "Run it again"
                raise LaunchError(f"port {port} on {HOST} is busy: another program took it "
                                  "before rank 0 could listen on it, and the ranks were "
                                  f"stopped. {again}, or stop that program.") from None
            port = free_port()  # a port the launcher picked: it picks another


class _PortTaken(Exception):
    """Rank 0 could not listen on the launch's port: something took it after the check."""


def _run(target: str, payload: str, nprocs: int, port: int, backend: str, threads: int,
         timeout: float, echo: bool) -> list[Any]:
    """One try of :func:`launch`, its arguments checked; :class:`_PortTaken` if the port was."""
    lines: queue.Queue = queue.Queue()
    tails: dict[int, collections.deque] = {r: collections.deque(maxlen=20) for r in range(nprocs)}
    # The ranks remove the folder themselves should this process die (see lifetime.die_with_parent).
    with tempfile.TemporaryDirectory(prefix="course-launch-",
                                     ignore_cleanup_errors=True) as results:
        command = [sys.executable, "-m", __name__, target, payload, results]
        processes, pumps = [], []
        try:
            for rank in range(nprocs):
                env = _environment(rank, nprocs, port, backend, threads)
                p = warm_ranks.start(env, command[1:], threads)  # None: start it cold
                p = p or subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True,
                                          start_new_session=True)
                processes.append(p)
                pumps.append(threading.Thread(target=_pump, args=(rank, p.stdout, lines),
                                              daemon=True))
                pumps[-1].start()
            failed = _watch(processes, lines, timeout, echo, tails)
        finally:
            stop_processes(processes)
            for pump in pumps:  # the last lines
                pump.join(timeout=5)
            _drain(lines, echo, tails=tails)
        if failed is not None:
            rank, code = failed
            if code is None:
                raise LaunchError(f"the {nprocs} ranks did not finish within {timeout:g} s and "
                                  "were stopped. Pass a larger timeout=, or fewer steps.")
            note = Path(results) / f"rank{rank}.error"  # what the rank itself said went wrong
            if note.is_file():
                raise LaunchError(f"rank {rank} {note.read_text()} The other ranks were stopped.")
            if code < 0:  # a signal from outside: the launcher had stopped nothing yet
                raise LaunchError(failures.killed_report(Path(results), rank, code, echo,
                                                         list(tails[rank])))
            if any("EADDRINUSE" in p.read_text() for p in Path(results).glob("rank*.traceback")):
                raise _PortTaken
            raise LaunchError(failures.failure_report(Path(results), rank, code, echo,
                                                      list(tails[rank])))
        return [_result(Path(results), rank) for rank in range(nprocs)]


def _result(results: Path, rank: int) -> Any:
    """What ``rank`` returned, read back from the file it wrote; a LaunchError if there is none."""
    path = results / f"rank{rank}.pkl"
    if not path.is_file():
        raise LaunchError(f"rank {rank} exited with code 0 but sent back no result: something "
                          "in its function ended the process (os._exit, or a library that exits) "
                          "before the function returned. Let the function return its result, or "
                          "raise an exception to fail.")
    try:
        # The ranks this call started wrote this file into its own private folder
        # (failures.send): no one else's file is read. A result is any Python object that
        # pickles (a dataclass of the learner's, tensors inside), not weights, so it is a
        # pickle (torch.save's archive: each tensor's bytes beside it), as trusted as the
        # pickle.loads of the same file before; weights_only=True would refuse any class
        # torch does not know, and safetensors holds tensors only.
        return torch.load(path, weights_only=False)
    except Exception as err:  # noqa: BLE001 - whatever unpickling raises, the advice is the same
        raise LaunchError(f"rank {rank}'s result cannot be read back here ({type(err).__name__}: "
                          f"{err}). Return numbers, strings, lists, dicts, tensors, or classes of "
                          "a module that this process imports too (not one that only the ranks "
                          "find).") from None


def _watch(processes: list[subprocess.Popen], lines: queue.Queue, timeout: float,
           echo: bool, tails: dict[int, collections.deque]) -> tuple[int, int | None] | None:
    """Print lines as they come until every rank exits; return (rank, code) of a failure.

    A rank that a signal ended is returned before those that then failed without it, and
    SIGPIPE last among signals: a rank gets it writing to a peer that is gone. The first
    failure is given ``SETTLE`` seconds for the rank that caused it to be reaped too (its
    sockets close before its exit is seen); ranks that raised meanwhile are not counted, they
    failed because of the first.
    """
    deadline = time.monotonic() + timeout
    while True:
        _drain(lines, echo, wait=0.05, tails=tails)
        codes = [p.poll() for p in processes]
        failed = [(rank, code) for rank, code in enumerate(codes) if code not in (None, 0)]
        if failed:
            settle = time.monotonic() + SETTLE
            while time.monotonic() < settle and any(code is None for code in codes):
                time.sleep(0.02)
                codes = [p.poll() for p in processes]
            failed += [(rank, code) for rank, code in enumerate(codes)
                       if code is not None and code < 0 and (rank, code) not in failed]
            return min(failed, key=lambda item: (item[1] >= 0,
                                                 item[1] == -signal.SIGPIPE, item[0]))
        if all(code == 0 for code in codes):
            return None
        if time.monotonic() > deadline:
            return -1, None


def _drain(lines: queue.Queue, echo: bool, wait: float = 0.0,
           tails: dict[int, collections.deque] | None = None) -> None:
    """Take the lines that have come; print them, in rank order, in one write."""
    taken: list[tuple[int, str]] = []
    try:
        taken.append(lines.get(timeout=wait) if wait else lines.get_nowait())
        if wait:
            time.sleep(GATHER)  # the other ranks' lines of the same moment
        while True:
            taken.append(lines.get_nowait())
    except queue.Empty:
        pass
    if tails is not None:
        for rank, line in taken:
            tails[rank].append(line)
    if echo and taken:  # one write: a notebook shows it as one block, not one per line
        taken.sort(key=lambda item: item[0])  # stable: each rank's lines stay in order
        sys.stdout.write("".join(f"[rank {rank}] {line}\n" for rank, line in taken))
        sys.stdout.flush()


def init_worker(backend: str | None = None, timeout: float = 60.0) -> Worker:
    """Join the process group described by torchrun's environment variables; pick this rank's device.

    ``backend`` defaults to what :func:`launch` chose, else "nccl" when this process has a GPU
    and "gloo" otherwise. With NCCL each rank uses GPU ``LOCAL_RANK``. A collective that waits more
    than ``timeout`` seconds raises instead of hanging.

    Chapter 8, *Data parallelism with DDP*.
    """
    missing = [k for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT") if k not in os.environ]
    if missing:
        raise LaunchError(f"{', '.join(missing)} not set: run this under torchrun "
                          "(torchrun --nproc-per-node=2 -m ...) or through "
                          "course_lib.parallel.launch.launch().")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    backend = backend or os.environ.get("COURSE_LIB_BACKEND") or (
        "nccl" if torch.cuda.is_available() else "gloo")
    if backend == "nccl":
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if "OMP_NUM_THREADS" in os.environ:
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    if "TORCHELASTIC_RUN_ID" in os.environ and "COURSE_LIB_LAUNCHER" not in os.environ:
        lifetime.watch_torchrun_agent()  # started by torchrun, not by launch(), which watches its own
    if not dist.is_initialized():
        dist.init_process_group(backend, rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout))
    return Worker(rank, world, local_rank, backend, device)


def shutdown() -> None:
    """Leave the process group if this process is in one.

    Chapter 8, *Data parallelism with DDP*.
    """
    if dist.is_initialized():
        dist.destroy_process_group()


@dataclass(frozen=True)
class Hello:
    """What :func:`hello` returns from a rank: who it is, its process id, the all-reduced sum.

    Chapter 8, *Data parallelism with DDP*.
    """

    rank: int
    world_size: int
    pid: int
    sum_of_ranks: float


def hello(fail_on: int = -1, hang_on: int = -1) -> Hello:
    """Worker: join the group, print this rank's process id, all-reduce the ranks and return them.

    ``fail_on`` makes that rank raise an error after the all-reduce, ``hang_on`` makes that rank
    sleep instead of joining it (so that the others wait): what the launcher does then is the
    point of the demonstration.

    Chapter 8, *Data parallelism with DDP*.
    """
    worker = init_worker()
    print(f"rank {worker.rank} of {worker.world_size}: process {os.getpid()}, backend "
          f"{worker.backend}, device {worker.device}", flush=True)
    if worker.rank == hang_on:
        time.sleep(3600)
    total = torch.tensor([float(worker.rank)], device=worker.device)
    dist.all_reduce(total)
    if worker.rank == fail_on:
        raise ValueError(f"rank {worker.rank} fails on purpose, after the all-reduce")
    return Hello(worker.rank, worker.world_size, os.getpid(), float(total))


def _worker_main(target: str, payload: str, results: str) -> int:
    """Run one rank: call the target, save its result as ``rank<r>.pkl``; 1 on failure."""
    rank, folder = int(os.environ["RANK"]), Path(results)
    lifetime.die_with_parent(int(os.environ.get("COURSE_LIB_LAUNCHER", os.getppid())), folder,
                             rank)
    module, _, name = target.partition(":")
    try:
        function = getattr(importlib.import_module(module), name)
        result = function(**json.loads(payload))
        try:
            failures.send(result, folder / f"rank{rank}.pkl")
        except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as err:
            return failures.refuse(
                folder, rank, f"returned a {type(result).__name__}, which cannot be "
                f"sent back to the launcher ({err}). Return what pickles: numbers, "
                "strings, lists, dicts, tensors, dataclasses of a module; not a "
                "lambda, an open file, a lock or a generator.")
        lifetime.wait_for_peers()
    except SystemExit as stop:
        return failures.refuse(
            folder, rank, f"called sys.exit({stop.code!r}) in {target} instead of "
            "returning a result. Let the function return its result, or raise an "
            "exception to fail.")
    except BaseException as err:  # noqa: BLE001 - the launcher shows it to the learner
        if not failures.write_traceback(folder, rank, err):  # then shown line by line
            print(failures.trimmed_traceback(err), flush=True)
        return 1
    finally:
        shutdown()
        lifetime.end_own_group()
    return 0


if __name__ == "__main__":
    sys.exit(_worker_main(*sys.argv[1:4]))
