"""Warm ranks: start a rank by forking a process that has already imported torch.

Chapter 8 ("Data parallelism with DDP") starts ranks with :func:`course_lib.parallel.launch.
launch`, and chapters 8, 9 and 11 launch about ten times each. A new Python process pays its
start-up and ``import torch`` (about 2 s on a laptop core) before the rank does any work, and
a lab's checker launches again for every answer. So :func:`launch` asks a *warm server*, one
per launching process (a notebook's kernel, a test run), to start its ranks: the server has
imported torch, ``torch.distributed`` and the course's modules once, computed nothing, and
forks a rank on request (for a target that builds the course's models, it imports
transformers' GPT-2 class first, once). The rank is what ``launch`` starts cold, in every
way it can see: a process group and session of its own, the environment ``launch`` gives it
(``PYTHONPATH`` included), its own stdout pipe, ``OMP_NUM_THREADS`` applied, the random
states of a new process, and the same ``_worker_main``; it watches its launcher as a cold
rank does.

What makes the fork safe is that the server never computes: no OpenMP pool, no thread (it
checks that it has none before each fork, and says "cold" instead if it does). It ends when
its launcher ends (SIGKILL included: the kernel's parent-death signal and a look every 0.2 s),
and a server started under other environment variables is replaced. ``launch`` starts ranks
cold when the server cannot help (not Linux, ``COURSE_LIB_WARM_RANKS=0``, a server that
failed), so this is a speed-up and never a requirement.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import functools
import importlib
import importlib.util
import io
import json
import os
import queue
import runpy
import select
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from course_lib.parallel import lifetime

__all__ = ["PER_LAUNCH", "WarmProcess", "enabled", "server", "start", "stop_server"]

#: Variables that ``launch`` sets for each rank: a server is reused whatever their values.
PER_LAUNCH = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
              "MASTER_PORT", "COURSE_LIB_BACKEND", "OMP_NUM_THREADS", "PYTHONUNBUFFERED",
              "COURSE_LIB_LAUNCHER", "OMP_WAIT_POLICY", "GLOO_SOCKET_IFNAME",
              "PYTHONPATH", "TMPDIR", "TEMP", "TMP",  # these four: applied in the rank
              "PYTEST_CURRENT_TEST", "COURSE_LIB_WARM_RANKS")
#: What every server imports before it forks its first rank.
PRELOAD = ("torch", "torch.distributed", "course_lib.parallel.launch")
#: What a rank imports to build the course's GPT-2 (transformers' model class pulls in about
#: 1,300 modules: 3.5 s on one core). The server imports it before it forks the ranks of a
#: target whose module uses the course's models (``course_lib.text.models``), once, rather than
#: have each rank import it and then learn it before the next launch.
MODEL_IMPORTS = ("transformers.models.gpt2.modeling_gpt2",)
#: Where installed packages live: they do not change between launches.
_INSTALLED = tuple({sysconfig.get_paths()[k] for k in ("purelib", "platlib")})
_MESSAGE = 1 << 20  # bytes: the largest request (a launch's payload travels on the command line)


def enabled() -> bool:
    """Whether ``launch`` starts its ranks from a warm server: Linux, and not switched off.

    Used by the library's other modules.
    """
    return (sys.platform.startswith("linux") and hasattr(socket, "send_fds")
            and os.environ.get("COURSE_LIB_WARM_RANKS", "1") != "0")


def _identity(env: dict[str, str]) -> tuple:
    return (sys.executable, os.getcwd(),
            tuple(sorted((k, v) for k, v in env.items()
                         if k not in PER_LAUNCH and not _written_by_torch(k, v))))


def _written_by_torch(name: str, value: str) -> bool:
    """Whether ``TORCHINDUCTOR_CACHE_DIR`` holds the default that ``import torch._dynamo``
    writes into its process's environment wherever it is unset (transformers imports it with
    a model's code). A kernel may get it that way after its first launch, or inherit it from
    its parent (the book build's Sphinx process imports it with chapter 6's quiz). The answer
    must not change when the kernel imports torch._dynamo itself: the server would be
    replaced, and the next launch's ranks would import everything again. Any other value is
    the user's, and starts a new server. The default comes from torch's private
    ``cache_dir_utils`` (tests/test_warm_ranks.py pins it); a torch without it gets a new
    server, as before."""
    if name != "TORCHINDUCTOR_CACHE_DIR":
        return False
    default = _torch_default_cache_dir()
    return default is not None and value == os.path.abspath(default())


@functools.lru_cache(maxsize=1)
def _torch_default_cache_dir() -> Callable[[], str] | None:
    """``default_cache_dir`` of torch's ``cache_dir_utils``, loaded from its file whether or not
    torch has imported it: importing it by name would import torch._inductor and torch._dynamo
    (about 2 s) and write the variable. The module needs nothing of torch but the small
    ``torch._environment``."""
    try:
        torch_init = Path(importlib.util.find_spec("torch").origin)
        path = torch_init.parent / "_inductor" / "runtime" / "cache_dir_utils.py"
        spec = importlib.util.spec_from_file_location("_course_lib_cache_dir_utils", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.default_cache_dir
    except Exception:  # noqa: BLE001 - another torch: no default known, a new server
        return None


class WarmProcess:
    """A rank the warm server forked, seen as ``subprocess.Popen`` shows a process to ``launch``.

    Used by the library's other modules.
    """

    def __init__(self, pid: int, stdout: io.TextIOBase, owner: _Server) -> None:
        self.pid, self.stdout, self._owner = pid, stdout, owner
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the rank has ended (minus the signal that ended it), else None."""
        if self.returncode is None:
            self.returncode = self._owner.exit_code(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the rank to end; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"rank {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode


class _Server:
    """The launcher's side of one warm server: start ranks, learn their exit codes."""

    def __init__(self, env: dict[str, str]) -> None:
        self.identity = _identity(env)
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for end in (mine, theirs):
            end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, _MESSAGE)
        self.sock, self.lock = mine, threading.Lock()
        self.replies: queue.Queue = queue.Queue()
        self.codes: dict[int, int] = {}
        self.alive = True
        # One OpenMP thread, whatever the first launch gives its ranks (each rank sets its
        # own): with more, importing torch starts a second thread, and a server with two
        # threads must not fork, so every rank of a server that a one-rank launch (all the
        # cores to its rank) had started was started cold.
        server_env = dict(env, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
        server_env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        server_env.setdefault("GLOO_SOCKET_IFNAME", "lo")
        self.process = subprocess.Popen(
            [sys.executable, "-m", __name__, str(os.getpid()), str(theirs.fileno())],
            env=server_env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        theirs.close()
        threading.Thread(target=self._read, name="warm-ranks", daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(_MESSAGE)
            except OSError:
                data = b""
            if not data:
                self.alive = False
                self.replies.put(None)
                return
            message = json.loads(data)
            if "exit" in message:
                self.codes[message["exit"]] = message["code"]
            else:
                self.replies.put(message)

    def exit_code(self, pid: int) -> int | None:
        code = self.codes.get(pid)
        if code is None and not self.alive:  # no one reaps it now: it died with the server
            code = None if lifetime.alive(pid) else -signal.SIGTERM
        return code

    def start(self, env: dict[str, str], argv: list[str], threads: int,
              timeout: float = 60.0) -> WarmProcess | None:
        """Fork one rank; None when the server cannot (it has died, or says "cold")."""
        with self.lock:
            if not self.alive:
                return None
            read, write = os.pipe()
            request = json.dumps({"env": env, "argv": argv, "threads": threads,
                                  "cwd": os.getcwd()}).encode()
            try:
                socket.send_fds(self.sock, [request], [write])
                reply = self.replies.get(timeout=timeout)
            except (OSError, queue.Empty):
                reply = None
            finally:
                os.close(write)
            if not reply or "pid" not in reply:
                os.close(read)
                return None
            stdout = io.open(read, "r", encoding="utf-8", errors="replace")
            return WarmProcess(reply["pid"], stdout, self)

    def stop(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.process.terminate()
            self.process.wait(timeout=5)


_current: _Server | None = None
_guard = threading.Lock()


def server(env: dict[str, str]) -> _Server | None:
    """This process's warm server for ranks with environment ``env`` (started, or replaced when
    ``env`` differs beyond :data:`PER_LAUNCH`); None when warm ranks are off.

    Used by the library's other modules.
    """
    global _current
    if not enabled():
        return None
    with _guard:
        if _current is not None and (not _current.alive
                                     or _current.identity != _identity(env)):
            _current.stop()
            _current = None
        if _current is None:
            try:
                _current = _Server(env)
            except OSError:
                return None
        return _current


def start(env: dict[str, str], argv: list[str], threads: int) -> WarmProcess | None:
    """Start one rank from the warm server, or None: ``argv`` is what follows ``python`` on
    the command line of a cold start (``-m module args...``), ``env`` its environment.

    Used by the library's other modules.
    """
    found = server(env)
    return None if found is None else found.start(env, argv, threads)


@atexit.register
def stop_server() -> None:
    """Stop this process's warm server (at exit; a killed process's server stops by itself).

    Used by the library's other modules.
    """
    global _current
    with _guard:
        if _current is not None:
            _current.stop()
            _current = None


# --- the server's side -----------------------------------------------------------------------------

def _threads() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def _python_path() -> list[str]:
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _become_rank(request: dict[str, Any], pipe: int, sock: socket.socket,
                 base: list[str], learn: str) -> None:
    """In the forked child: become the rank ``launch`` would have started, run it, exit;
    then leave in ``learn`` the modules it imported, for the server to import next."""
    code, known = 1, set(sys.modules)
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sock.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(pipe, 1)
        os.dup2(pipe, 2)
        os.close(null)
        os.close(pipe)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        sys.path[:] = [request["cwd"], *_python_path(), *base]  # as a new interpreter's
        tempfile.tempdir = None  # found again from TMPDIR
        for name in ("stdout", "stderr"):
            stream = io.TextIOWrapper(io.FileIO(1 if name == "stdout" else 2, "w",
                                                closefd=False),
                                      encoding="utf-8", errors="backslashreplace",
                                      write_through=True)
            setattr(sys, name, stream)
            setattr(sys, f"__{name}__", stream)
        import random

        import torch

        random.seed()  # a new process's random states, not the server's: torch too seeds
        torch.seed()  # its generator afresh in each new process
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        torch.set_num_threads(request["threads"])
        flag, module, *args = request["argv"]  # what follows "python" on a cold start
        if flag != "-m":
            raise ValueError(f"warm ranks run 'python -m module ...', not {flag!r}")
        sys.argv = [module, *args]
        # runpy warns that the server imported the module already: the same code, run afresh
        warnings.filterwarnings("ignore", f"'{module}' found in sys.modules", RuntimeWarning)
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            code = stop.code if isinstance(stop.code, int) else (stop.code is not None)
        with contextlib.suppress(Exception):
            atexit._run_exitfuncs()
        tops = {name.partition(".")[0] for name in known}
        with contextlib.suppress(OSError), open(f"{learn}/{os.getpid()}", "w") as out:
            out.write("\n".join(name for name in list(sys.modules) if name not in known
                                and _learnable(name, tops)))
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _learnable(name: str, tops: set[str]) -> bool:
    """Whether the server may import a module a rank imported: a part of a package it has
    already, or an installed one (transformers, say: a second or so per rank otherwise).
    A module of the working folder is left out, since a learner may edit it between launches."""
    top = name.partition(".")[0]
    path = getattr(sys.modules.get(top), "__file__", None) or ""
    return top in tops or path.startswith(_INSTALLED)


def _preload(names: list[str]) -> None:
    """Import these modules here, before forking, those that import without an error."""
    for name in names:
        if name not in sys.modules and not name.startswith("__"):
            with contextlib.suppress(Exception):
                importlib.import_module(name)


def _target(argv: list[str]) -> list[str]:
    """The target's module, if it is one of the course's (``-m launch target ...``)."""
    module = argv[2].partition(":")[0] if len(argv) > 2 else ""
    return [module] if module.startswith("course_lib.") else []


def serve(launcher: int, fd: int) -> None:
    """The server's loop: fork a rank per request, report each rank's exit, end with the
    launcher (or when it closes the socket).

    Used by the library's other modules.
    """
    lifetime.end_with_parent()  # so that "finally" cleans up
    sock = socket.socket(fileno=fd)
    learn = tempfile.mkdtemp(prefix="course-warm-")
    try:
        _serve(launcher, sock, learn)
    finally:
        shutil.rmtree(learn, ignore_errors=True)


def _serve(launcher: int, sock: socket.socket, learn: str) -> None:
    _preload(list(PRELOAD))
    children: set[int] = set()
    pending: list[str] = []  # what the last ranks imported: imported here once they are done
    base = [p for p in sys.path[1:] if p not in _python_path()]  # without PYTHONPATH's
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    while lifetime.alive(launcher):
        ready, _, _ = select.select([sock, wake_read], [], [], 0.2)
        if wake_read in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_read, 4096)
        while True:  # every rank that ended: its exit code, as Popen would give it
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            sock.send(json.dumps({"exit": pid,
                                  "code": os.waitstatus_to_exitcode(status)}).encode())
            children.discard(pid)
            with contextlib.suppress(OSError):
                with open(f"{learn}/{pid}") as found:
                    pending += found.read().split()
                os.remove(f"{learn}/{pid}")
        if pending and not children:  # the launch is over: learn what its ranks imported
            _preload(pending)
            pending.clear()
        if sock not in ready:
            continue
        fds = array.array("i")
        data, ancillary, _, _ = sock.recvmsg(_MESSAGE, socket.CMSG_LEN(fds.itemsize))
        if not data:
            return
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(payload[:len(payload) - len(payload) % fds.itemsize])
        request = json.loads(data)
        _preload(pending + _target(request["argv"]))
        pending.clear()
        if "course_lib.text.models" in sys.modules:  # its ranks build a transformers model
            _preload(list(MODEL_IMPORTS))
        if _threads() > 1 or not fds:  # a fork now could deadlock: let launch start it cold
            sock.send(json.dumps({"cold": _threads()}).encode())
            for extra in fds:
                os.close(extra)
            continue
        pid = os.fork()
        if pid == 0:
            _become_rank(request, fds[0], sock, base, learn)
        children.add(pid)
        for extra in fds:
            os.close(extra)
        sock.send(json.dumps({"pid": pid}).encode())


if __name__ == "__main__":
    serve(int(sys.argv[1]), int(sys.argv[2]))
