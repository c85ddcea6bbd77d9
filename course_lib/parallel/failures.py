"""What a failing rank tells its launcher: one block, its traceback cut to what matters.

A rank that :func:`course_lib.parallel.launch.launch` started and that raises does not
print its traceback line by line (each line would reach a notebook as an output of its
own, behind ``[rank r]``): it writes it to ``rank<r>.traceback`` in the launch folder,
trimmed to the frames of the learner's code and the course's (not the launcher's own
frame, not torch's or Python's), with no machine path in it. The launcher raises one
:class:`~course_lib.parallel.launch.LaunchError` that shows it, its lines at most
:data:`WIDTH` characters where they can be (code lines are kept whole). Chapter 8 shows
such a failure; chapters 8 and 9 launch their ranks through it.
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import sys
import sysconfig
import textwrap
import traceback
from pathlib import Path
from typing import Any

import torch

__all__ = ["WIDTH", "failure_report", "killed_report", "refuse", "send", "trimmed_traceback",
           "write_traceback"]

#: The width of a report's lines: the book cuts longer lines.
WIDTH = 88
#: The folder that holds ``course_lib/``: the course's files are shown relative to it.
COURSE_ROOT = Path(__file__).resolve().parents[2]
_LAUNCHER = Path(__file__).resolve().with_name("launch.py")
#: gloo's "[/path/file.cc:78] " in front of its messages.
_GLOO_PATH = re.compile(r"\[[^\]\s]*\.(?:cc|cpp|h):\d+\] ")


def _library_roots() -> list[str]:
    """Where Python's own modules and the installed packages (torch among them) live."""
    paths = sysconfig.get_paths()
    keys = ("stdlib", "platstdlib", "purelib", "platlib")
    found = {paths.get(key, "") for key in keys}
    found |= {sys.prefix, sys.base_prefix, sys.exec_prefix}
    return sorted({str(Path(p).resolve()) + os.sep for p in found if p})


def _shown_path(filename: str) -> str | None:
    """How a frame's file is shown (no machine path); None for a library's."""
    if filename.startswith("<"):  # "<string>", "<lab cell 3>": a name, not a path
        return filename
    path = Path(filename).resolve()
    if path.is_relative_to(COURSE_ROOT / "course_lib"):
        return path.relative_to(COURSE_ROOT).as_posix()
    if any(str(path).startswith(root) for root in _library_roots()):
        return None
    for base in (COURSE_ROOT, Path.cwd()):
        if path.is_relative_to(base):
            return path.relative_to(base).as_posix()
    return path.name


def _clean(text: str) -> str:
    """``text`` without gloo's source paths and this machine's folders."""
    text = _GLOO_PATH.sub("", text)
    for prefix, short in ((str(COURSE_ROOT) + os.sep, ""),
                          (sys.prefix + os.sep, "<python>" + os.sep)):
        text = text.replace(prefix, short)
    return text


def _wrapped(text: str, indent: str = "  ") -> list[str]:
    """Each line of ``text`` wrapped at :data:`WIDTH`, continuation lines indented."""
    lines = []
    for line in text.splitlines() or [""]:
        lines += textwrap.wrap(line, WIDTH, subsequent_indent=indent,
                               break_long_words=False, break_on_hyphens=False) or [""]
    return lines


def trimmed_traceback(err: BaseException) -> str:
    """``err``'s traceback as a learner needs it: their lines, the course's, the error.

    The frames of Python, of installed libraries (torch) and the launcher's own frame
    are left out; a course file is shown as ``course_lib/...``, any other by its name.

    Used by the library's other modules.
    """
    lines = []
    for frame in traceback.extract_tb(err.__traceback__):
        shown = _shown_path(frame.filename)
        launcher = frame.name == "_worker_main" and frame.filename.endswith("launch.py")
        if shown is None or (launcher and Path(frame.filename).resolve() == _LAUNCHER):
            continue
        lines.append(f'  File "{shown}", line {frame.lineno}, in {frame.name}')
        if frame.line:
            lines.append(f"    {frame.line.strip()}")
    error = "".join(traceback.format_exception_only(type(err), err)).strip()
    return "\n".join(lines + _wrapped(_clean(error)))


def write_traceback(folder: Path, rank: int, err: BaseException) -> bool:
    """Write ``err``'s trimmed traceback to ``rank<r>.traceback``; False if it cannot.

    Used by the library's other modules.
    """
    try:
        (folder / f"rank{rank}.traceback").write_text(trimmed_traceback(err))
    except (OSError, RecursionError):
        return False
    return True


def failure_report(folder: Path, rank: int, code: int, echo: bool,
                   tail: list[str]) -> str:
    """The launcher's message when ``rank`` exits with ``code``: the one block to show.

    The rank whose traceback was written first is named (the others often fail because
    it did), with its traceback; the other ranks that raised add their error's last
    line, once for each different error.

    Used by the library's other modules.
    """
    notes = sorted(folder.glob("rank*.traceback"), key=lambda p: p.stat().st_mtime_ns)
    if not notes:
        shown = ("its last lines are printed above" if echo else
                 "its last lines:\n" + "\n".join(tail))
        return "\n".join(_wrapped(f"rank {rank} failed (exit code {code}) and the "
                                  f"other ranks were stopped; {shown}"))
    first = int(notes[0].stem.removeprefix("rank"))
    lines = [f"rank {first} failed, and the other ranks were stopped. Where it failed:",
             notes[0].read_text().rstrip()]
    others: dict[str, list[int]] = {}  # the same error on several ranks: one line
    for note in notes[1:]:
        last = (note.read_text().rstrip().splitlines() or ["?"])[-1].strip()
        others.setdefault(last, []).append(int(note.stem.removeprefix("rank")))
    for last, ranks in others.items():
        named = ", ".join(map(str, sorted(ranks)))
        lines += _wrapped(f"(rank{'s' * (len(ranks) > 1)} {named} failed too: {last})")
    return "\n".join(lines)


def _signal_name(number: int) -> str:
    try:
        return f"{signal.Signals(number).name} (signal {number})"
    except ValueError:
        return f"signal {number}"


def _last_error(traceback_text: str) -> str:
    """The error line of a rank's trimmed traceback, cut to its first sentence."""
    lines = traceback_text.rstrip().splitlines() or ["?"]
    heads = [i for i, line in enumerate(lines) if not line.startswith(" ")]  # not a frame
    error = " ".join(line.strip() for line in lines[heads[-1] if heads else -1:])
    first = error.split(". ")[0].rstrip(".")
    return first if len(first) <= 100 else first[:97] + "..."


def killed_report(results: Path, rank: int, code: int, echo: bool, tail: list[str]) -> str:
    """The message when a signal from outside ended ``rank``: it names the rank and the signal.

    The other ranks then fail in their collectives ("Connection closed by peer"); they are
    the consequence, named after it in one line each. A rank that got SIGTERM ends its
    group with SIGKILL, so its own note (``rank<r>.signal``) names the signal it got.

    Used by the library's other modules.
    """
    note = results / f"rank{rank}.signal"
    name = note.read_text().strip() if note.is_file() else _signal_name(-code)
    sent = {"SIGKILL": "a kill command, a job scheduler, or the system when memory ran out",
            "SIGTERM": "a kill command or a job scheduler", "SIGINT": "an interrupt",
            "SIGHUP": "a closed terminal"}.get(name.split()[0])
    lines = [f"rank {rank} was killed by {name}, not by the launcher (by {sent}), and the "
             "other ranks were stopped." if sent else
             f"rank {rank} ended with {name}: it crashed in compiled code (torch or another "
             "C extension), and the other ranks were stopped."]
    errors: dict[str, list[int]] = {}
    for path in sorted(results.glob("rank*.traceback")):
        other = int(path.stem.removeprefix("rank"))
        if other != rank:
            errors.setdefault(_last_error(path.read_text()), []).append(other)
    for error, ranks in errors.items():
        named = ", ".join(map(str, sorted(ranks)))
        lines.append(f"(rank{'s' * (len(ranks) > 1)} {named} then failed without it: {error})")
    if not echo and tail:
        lines.append(f"Its last lines: {' / '.join(tail[-3:])}")
    return "\n".join(textwrap.fill(line, WIDTH, subsequent_indent="  ",
                                   break_long_words=False, break_on_hyphens=False)
                     for line in lines)


def refuse(folder: Path, rank: int, text: str) -> int:
    """Say why this rank sends back no result, here and to the launcher; return 1.

    The launcher reads it from ``rank<r>.error``.

    Used by the library's other modules.
    """
    sys.stdout.write(f"rank {rank} {text}\n")
    sys.stdout.flush()
    try:
        (folder / f"rank{rank}.error").write_text(text)
    except OSError:
        pass
    return 1


def send(result: Any, path: Path) -> None:
    """Write ``result`` to ``path`` whole or not at all (the launcher reads it last).

    ``torch.save`` pickles the objects as ``pickle`` does (the same protocol, the same
    errors) and writes each tensor's bytes from its own memory; ``pickle.dumps`` copies every
    tensor three times on the way (two ranks took 0.4 and 0.8 s to send 200 MB each, 0.2 and
    0.4 s this way), and :func:`course_lib.parallel.launch.launch` reads it back with one copy.

    Used by the library's other modules.
    """
    partial = path.with_suffix(".partial")
    try:
        torch.save(result, partial, pickle_protocol=pickle.DEFAULT_PROTOCOL)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
