"""A rank's lifetime: it ends with whatever started it, and ends what it started.

Chapter 8 ("Data parallelism with DDP") starts ranks with :func:`course_lib.parallel.launch.launch`
or torchrun. No rank may outlive its launcher (:func:`die_with_parent`, even when the launcher is
killed with SIGKILL) or torchrun's agent (:func:`watch_torchrun_agent`), and none may leave behind
what it started, subprocesses or DataLoader workers (:func:`end_own_group`); a rank that returns
waits for its peers before it closes its sockets (:func:`wait_for_peers`), so that no peer's count
of the bytes on the wire loses a connection.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, NoReturn

import torch.distributed as dist

__all__ = ["WATCH_INTERVAL", "alive", "die_with_parent", "end_own_group", "end_with_parent",
           "group_members", "leave", "sigterm_when_parent_dies", "wait_for_peers",
           "watch_torchrun_agent"]

#: Seconds between two looks at the parent by a rank's watching thread.
WATCH_INTERVAL = 0.2
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>: the signal a process gets when its parent dies


def sigterm_when_parent_dies() -> None:
    """On Linux, have the kernel send this process SIGTERM when its parent dies (prctl).

    Used by the library's other modules.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def end_with_parent(code: int = 0) -> None:
    """SIGTERM when the parent dies (:func:`sigterm_when_parent_dies`), and a SIGTERM, from it
    or from anyone, ends this process as ``sys.exit(code)`` does: ``finally`` blocks and exit
    handlers run (temporary folders removed, semaphores given back).

    Used by the library's other modules.
    """
    sigterm_when_parent_dies()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(code))


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, dead but not yet reaped, does not).

    Used by the library's other modules.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (macOS): the signal test is all there is
        return True
    return stat.rpartition(")")[2].split()[0] != "Z"


def leave(results: Path, orphaned: bool) -> NoReturn:
    """End this rank and everything it started; remove the launch folder if no launcher will.

    Used by the library's other modules.
    """
    if orphaned:
        shutil.rmtree(results, ignore_errors=True)
    if os.getpgrp() == os.getpid():  # the leader of its own group, as launch() starts it
        os.killpg(os.getpid(), signal.SIGKILL)  # it, its subprocesses, its DataLoader workers
    os._exit(128 + signal.SIGTERM)


def die_with_parent(launcher: int, results: Path, rank: int | None = None) -> None:
    """Make this rank end with its launcher, however the launcher ends (SIGKILL included).

    On Linux the kernel sends the rank SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG);
    the parent is checked right after, should it have died before. A thread also watches the
    parent (the only way on macOS, and in force while the main thread is busy in C code).
    A SIGTERM while the launcher lives is noted in ``rank<r>.signal`` first: the rank ends
    its group with SIGKILL, and the launcher names the signal the rank got, not that one.

    Used by the library's other modules.
    """
    sigterm_when_parent_dies()  # else the watching thread still notices
    me, parent = os.getpid(), os.getppid()

    def orphaned() -> bool:
        return os.getppid() != parent or not alive(launcher)

    def on_sigterm(signum: int, frame: Any) -> None:
        if os.getpid() != me:  # a forked child (a DataLoader worker) inherits this handler
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        gone = orphaned()
        if not gone and rank is not None:
            with contextlib.suppress(OSError):
                (results / f"rank{rank}.signal").write_text(signal.Signals(signum).name
                                                            + f" (signal {signum})")
        leave(results, gone)

    def watch() -> None:
        while not orphaned():
            time.sleep(WATCH_INTERVAL)
        leave(results, True)

    signal.signal(signal.SIGTERM, on_sigterm)
    if orphaned():
        leave(results, True)
    threading.Thread(target=watch, name="watch-launcher", daemon=True).start()


def end_own_group() -> None:
    """Stop every process this rank started (its process group's other members) as it ends.

    ``launch`` starts each rank as the leader of a process group of its own: a subprocess the
    rank's function started and left running (``sleep 300``, a server) would otherwise outlive
    it. They get SIGTERM, then SIGKILL whatever is still there a moment later (Linux: found by
    their group in ``/proc``).

    Used by the library's other modules.
    """
    me = os.getpid()
    if os.getpgrp() != me:
        return
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)  # not this rank itself
    try:
        os.killpg(me, signal.SIGTERM)
    except OSError:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    deadline = time.monotonic() + 1.0
    while (left := group_members(me)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def group_members(group: int) -> list[int]:
    """The live processes of process group ``group`` other than this one (Linux's /proc).

    Used by the library's other modules.
    """
    found = []
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        pid = int(entry.parent.name)
        if int(fields[2]) == group and pid != os.getpid() and fields[0] != "Z":
            found.append(pid)
    return found


def watch_torchrun_agent() -> None:
    """Under torchrun, end this rank when torchrun's agent (its parent) dies, SIGKILL included.

    ``launch`` watches its ranks itself; ranks that torchrun started get the same guard from
    :func:`course_lib.parallel.launch.init_worker`: the kernel's parent-death signal on Linux, and a thread that checks
    the parent, so that no rank is left running, holding a port and a core, after torchrun
    was killed.

    Used by the library's other modules.
    """
    sigterm_when_parent_dies()
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_INTERVAL)
        os._exit(128 + signal.SIGTERM)

    if parent == 1:  # already orphaned
        os._exit(128 + signal.SIGTERM)
    threading.Thread(target=watch, name="watch-torchrun", daemon=True).start()


def wait_for_peers() -> None:
    """Wait until every rank has returned before this one closes its sockets.

    A rank that leaves the group early closes its TCP connections; a peer still reading
    its byte counters (:func:`course_lib.parallel.wire.wire_snapshot`) would then lose that
    connection's bytes. A barrier that fails (a peer died) is the peer's failure to report.

    Used by the library's other modules.
    """
    if dist.is_initialized():
        try:
            dist.barrier()
        except Exception:  # noqa: BLE001 - the launcher reports the rank that failed
            pass
