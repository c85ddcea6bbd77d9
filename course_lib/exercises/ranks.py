"""Distributed exercises of chapters 8 and 9: the learner's function, sent as source to real ranks.

A function defined in a notebook cell cannot be pickled to another process, but its source can be
read (``inspect.getsource``) and run there. :class:`RankExercise` starts the ranks once for all
hidden cases (:func:`course_lib.parallel.launch.launch`, with its timeout, which leaves no process
behind); each rank joins a gloo group, builds its own inputs of every case, and runs the library's
reference, each known misconception and, last, the learner's function (:func:`run_programs`).
An exception in the learner's code comes back as one line of feedback at the learner's own line
(from the rank where it happened first), a hang as a clear stop.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
import textwrap
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch
import torch.distributed as dist

from course_lib.exercises.checker import (PHRASES, Case, Exercise, Feedback, function_name,
                                          is_stub_raise, is_stub_source, summarize)
from course_lib.parallel import launch

__all__ = ["RankExercise", "learner_source", "run_programs"]

TEXTS = {
    "en": {"no_source": "The source of {name} cannot be read ({error}), and the ranks need it: "
                        "define the function with def in a notebook cell (or a file), then run "
                        "this cell again.",
           "hang": "Stopped after {seconds:g} s: the {n} ranks running {name} did not finish the "
                   "hidden cases and were stopped. A rank that waits for a message no rank sends "
                   "waits forever: give every send its receive on the other rank, and do not let "
                   "every rank receive before it sends.",
           "failed": "The ranks running {name} failed outside your code: {error}",
           "on_rank": " (rank {rank})",
           "alone": "\n  The function travels to the ranks alone, without the notebook's other "
                    "names: define the helpers and imports it uses inside it.",
           "sizes": "The ranks running {name} stopped on the case {label!r}: the sizes of a send "
                    "and its receive differ ({sent} bytes were sent to a receive that holds "
                    "{room}). Give each receive a tensor of the size and dtype its send has.",
           "worlds": "{labels}; on {sizes} ranks", "and": " and ",
           "world": "{label}, {n} ranks"},
    "nl": {"no_source": "De broncode van {name} is niet te lezen ({error}), en de ranks hebben "
                        "die nodig: definieer de functie met def in een notebookcel (of een "
                        "bestand) en voer deze cel opnieuw uit.",
           "hang": "Gestopt na {seconds:g} s: de {n} ranks die {name} uitvoeren werden niet klaar "
                   "met de verborgen gevallen en zijn gestopt. Een rank die wacht op een bericht "
                   "dat niemand stuurt, wacht eeuwig: geef elke send zijn receive op de andere "
                   "rank, en laat niet elke rank eerst ontvangen.",
           "failed": "De ranks die {name} uitvoeren faalden buiten je code: {error}",
           "on_rank": " (rank {rank})",
           "alone": "\n  De functie reist alleen naar de ranks, zonder de andere namen van het "
                    "notebook: definieer de hulpfuncties en imports die ze gebruikt erin.",
           "sizes": "De ranks die {name} uitvoeren stopten in het geval {label!r}: de groottes "
                    "van een send en zijn receive verschillen ({sent} bytes gestuurd naar een "
                    "receive die er {room} bevat). Geef elke receive een tensor met de grootte "
                    "en het dtype van zijn send.",
           "worlds": "{labels}; op {sizes} ranks", "and": " en ",
           "world": "{label}, {n} ranks"},
}

_GLOO_PATH = re.compile(r"\[[^\]\s]*\.(?:cc|cpp|h):\d+\] ")  # gloo's "[/path/file.cc:78] "
#: What a rank prints before each case, so that a rank gloo aborts still says where it was.
_CASE_MARK = "[course_lib case] "
#: Gloo's abort when more bytes arrive than a receive holds: "... 16 vs 12. Received data size ...".
_SIZES = re.compile(r"(\d+) vs (\d+)\.\s+Received data size doesn't match")


def learner_source(fn: Callable[..., Any]) -> tuple[str, str, int]:
    """The source of ``fn`` (dedented), its file name and first line; a clear ValueError if unreadable.

    Used by the library's other modules.
    """
    code = getattr(fn, "__code__", None)
    if code is None or not inspect.isfunction(fn) or fn.__name__ == "<lambda>":
        raise ValueError(f"{function_name(fn)} is not a function written with def, whose source "
                         "can be sent to the ranks")
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as err:
        raise ValueError(str(err)) from None
    return textwrap.dedent("".join(lines)), code.co_filename, max(first, 1)


def _program(fn: Callable[..., Any]) -> dict[str, Any]:
    """How a rank finds ``fn``: by import for the library's own functions, else by its source."""
    module, qualname = getattr(fn, "__module__", None) or "", getattr(fn, "__qualname__", "")
    if module.startswith("course_lib.") and "<locals>" not in qualname:
        return {"target": f"{module}:{qualname}"}
    source, file, line = learner_source(fn)
    return {"name": fn.__name__, "source": source, "file": file, "line": line}


def _function(program: dict[str, Any]) -> Callable[..., Any]:
    if "target" in program:
        module, _, name = program["target"].partition(":")
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
        return found
    namespace = {"torch": torch, "math": math, "np": np, "dist": dist, "__name__": "__learner__"}
    padded = "\n" * (program["line"] - 1) + program["source"]  # the learner's line numbers
    exec(compile(padded, program["file"], "exec"), namespace)
    return namespace[program["name"]]


def _copied(value: Any) -> Any:
    """``value`` with its tensors detached, contiguous copies (a view would send its whole storage)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_copied(v) for v in value)
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    return value


def _error(err: BaseException, program: dict[str, Any]) -> dict[str, Any]:
    """What went wrong, for the checker: the error, the learner's line and source, the time."""
    line = None
    tb = err.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == program.get("file"):
            number = tb.tb_lineno
            text = program["source"].splitlines()[number - program["line"]].strip()
            line = (number, text)
        tb = tb.tb_next
    message = _GLOO_PATH.sub("", str(err))
    return {"error": f"{type(err).__name__}: {textwrap.shorten(message, 240)}", "line": line,
            "not_done": isinstance(err, NotImplementedError) and line is not None
            and is_stub_raise(line[1]), "at": time.time()}


def run_programs(programs: list[dict[str, Any]], cases: list[dict[str, Any]], inputs: str,
                 collective_timeout: float = 10.0) -> list[list[dict[str, Any]]]:
    """Worker: run each program on each case's inputs for this rank; outcomes per program, per case.

    ``inputs`` ("module:function") builds this rank's arguments of a case,
    ``function(rank, world_size, *args, **kwargs)``. An outcome is ``{"value": ...}`` or an
    error with the line it came from. A program that raises stops there, and so do the programs
    after it: its messages may be left half-sent, so it leaves the process group, and a peer
    waiting for it raises at once. A collective that waits more than ``collective_timeout``
    seconds raises.

    Used by the library's other modules.
    """
    worker = launch.init_worker(timeout=collective_timeout)
    make = _function({"target": inputs})
    outcomes: list[list[dict[str, Any]]] = []
    for program in programs:
        mine: list[dict[str, Any]] = []
        outcomes.append(mine)
        try:
            fn = _function(program)
        except Exception as err:  # noqa: BLE001 - the learner's source itself failed
            mine.append(_error(err, program))
            return outcomes
        for index, case in enumerate(cases):
            print(f"{_CASE_MARK}{index}", flush=True)  # gloo may abort the process: say where
            args = make(worker.rank, worker.world_size, *case["args"], **case["kwargs"])
            try:
                mine.append({"value": _copied(fn(*args))})
            except Exception as err:  # noqa: BLE001 - reported at the learner's line
                mine.append(_error(err, program))
                # Close this rank's connections: a peer waiting in a collective for it fails
                # at once (its error comes after this one) instead of after the timeout.
                dist.destroy_process_group()
                return outcomes
    return outcomes


@dataclass
class RankExercise(Exercise):
    """A code exercise whose function runs on ``nprocs`` real ranks (gloo), all cases in one launch.

    ``nprocs`` may be a tuple of world sizes: the cases run on each, one launch per size, so that
    an answer that hard-codes the number of ranks fails on the other.

    Each :class:`Case` holds JSON arguments for ``inputs`` ("module:function"), which builds
    every rank's own arguments (see :func:`run_programs`); the reference and the misconceptions'
    wrong functions run on the ranks too. A case's answer is the list of what the ranks returned,
    in rank order.

    Used by the library's other modules.
    """

    inputs: str = ""
    nprocs: int | tuple[int, ...] = 2
    launch_timeout: float = 60.0
    collective_timeout: float = 10.0

    def check(self, fn: Callable[..., Any]) -> Feedback:
        """Run ``fn`` and the reference on every hidden case, on the ranks, and return the feedback."""
        return self.check_many([fn])[0]

    def world_sizes(self) -> tuple[int, ...]:
        """The numbers of ranks the hidden cases run on, each in a launch of its own."""
        return (self.nprocs,) if isinstance(self.nprocs, int) else tuple(self.nprocs)

    def check_many(self, fns: Sequence[Callable[..., Any]]) -> list[Feedback]:
        """The feedback :meth:`check` gives each of ``fns`` (a class's answers, a checker's own
        tests), with one launch per world size for all of them; a function that raises stops
        those after it on the ranks, so each of those is checked again in a launch of its own."""
        say, texts = PHRASES[self.language], TEXTS[self.language]
        out: dict[int, Feedback] = {}
        learners: dict[int, dict[str, Any]] = {}
        for i, fn in enumerate(fns):
            name = function_name(fn)
            try:
                learners[i] = _program(fn)
            except ValueError as err:
                out[i] = Feedback(self.name, False, texts["no_source"].format(name=name, error=err))
                continue
            if is_stub_source(learners[i].get("source", "")):
                out[i] = Feedback(self.name, False, say["not_done"].format(name=name))
                del learners[i]
        cases = self.cases() if callable(self.cases) else list(self.cases)
        sizes = self.world_sizes()
        for world in sizes:
            if not learners:
                break
            named = cases if len(sizes) == 1 else [  # a failing case says how many ranks ran it
                Case(c.args, texts["world"].format(label=c.label, n=world), c.kwargs)
                for c in cases]
            found = self._check_on(world, named, {i: fns[i] for i in learners}, learners)
            for i, feedback in found.items():
                if not feedback.passed:
                    out[i] = feedback
                    del learners[i]
        labels = ", ".join(dict.fromkeys(c.label for c in cases))
        if len(sizes) > 1:
            labels = texts["worlds"].format(labels=labels, sizes=", ".join(map(str, sizes[:-1]))
                                            + texts["and"] + str(sizes[-1]))
        for i in learners:
            out[i] = Feedback(self.name, True, say["passed"].format(
                name=self.name, n=len(cases) * len(sizes), labels=labels))
        return [out[i] for i in range(len(fns))]

    def _check_on(self, world: int, cases: list[Case], fns: dict[int, Callable[..., Any]],
                  learners: dict[int, dict[str, Any]]) -> dict[int, Feedback]:
        """The feedback on each of ``learners`` (their ``fns``) on ``world`` ranks, one launch."""
        texts = TEXTS[self.language]
        out: dict[int, Feedback] = {}
        own = [_program(self.reference), *(_program(m.wrong) for m in self.misconceptions)]
        payload = [{"args": list(c.args), "kwargs": dict(c.kwargs)} for c in cases]
        start = time.monotonic()
        try:
            ranks = launch.launch("course_lib.exercises.ranks:run_programs", world,
                                  {"programs": [*own, *learners.values()], "cases": payload,
                                   "inputs": self.inputs,
                                   "collective_timeout": self.collective_timeout},
                                  backend="gloo", timeout=self.launch_timeout, echo=False)
        except launch.LaunchError as err:
            timed_out = time.monotonic() - start >= self.launch_timeout
            if len(learners) > 1:  # find whose function failed: one launch each
                for i in learners:
                    out.update(self._check_on(world, cases, {i: fns[i]}, {i: learners[i]}))
                return out
            i = next(iter(learners))
            name = function_name(fns[i])
            if timed_out:
                return {i: Feedback(self.name, False, texts["hang"].format(
                    seconds=self.launch_timeout, n=world, name=name))}
            return {i: self._aborted(str(err), name, cases)}
        for number in range(len(own)):  # the course's own programs must not fail
            for index in range(len(cases)):
                failed = self._outcome(ranks, number, index)
                if isinstance(failed, dict):
                    raise RuntimeError(f"{self.name}: program {number} (0 is the reference, then "
                                       f"the misconceptions) failed on {world} ranks: {failed}")
        clean = True  # no function before this one raised on a rank or left one waiting
        for number, i in enumerate(learners, start=len(own)):
            if not clean:
                out.update(self._check_on(world, cases, {i: fns[i]}, {i: learners[i]}))
                continue
            out[i] = self._feedback(ranks, number, cases, function_name(fns[i]))
            clean = all(len(r) > number and len(r[number]) == len(cases)
                        and not any("error" in o for o in r[number]) for r in ranks)
        return out

    def _aborted(self, error: str, name: str, cases: list[Case]) -> Feedback:
        """The feedback when a rank died outside Python: a send larger than its receive (gloo
        aborts the process), on the case it last began; or the launcher's own message."""
        say, texts = PHRASES[self.language], TEXTS[self.language]
        begun = [int(m) for m in re.findall(re.escape(_CASE_MARK) + r"(\d+)", error)]
        sizes = _SIZES.search(" ".join(error.split()))  # the message may be wrapped
        if sizes is None:
            shown = "\n".join(line for line in error.splitlines() if _CASE_MARK not in line)
            return Feedback(self.name, False, texts["failed"].format(name=name, error=shown))
        case = cases[begun[-1]] if begun and begun[-1] < len(cases) else None
        text = texts["sizes"].format(name=name, sent=sizes[1], room=sizes[2],
                                     label=case.label if case else "?")
        if case is None:
            return Feedback(self.name, False, text)
        return Feedback(self.name, False, text + f"\n  {say['input']}: {self._inputs(case)}",
                        case.label)

    def _feedback(self, ranks: list[Any], number: int, cases: list[Case], name: str) -> Feedback:
        """The feedback on program ``number``'s outcomes: the first case it fails, or a pass."""
        for index, case in enumerate(cases):
            outcome = self._outcome(ranks, number, index)
            if isinstance(outcome, dict):  # the learner's code raised on a rank
                return self._raised_on(outcome, name, case)
            expected = self._outcome(ranks, 0, index)
            if not self.matches(expected, outcome):
                return self._wrong_on(ranks, case, index, expected, outcome)
        labels = ", ".join(dict.fromkeys(c.label for c in cases))
        return Feedback(self.name, True, PHRASES[self.language]["passed"].format(
            name=self.name, n=len(cases), labels=labels))

    @staticmethod
    def _outcome(ranks: list[Any], program: int, case: int) -> list[Any] | dict[str, Any]:
        """The values of one program on one case, in rank order; or its first error."""
        found = [r[program][case] for r in ranks if len(r) > program and len(r[program]) > case]
        errors = [dict(o, rank=rank) for rank, o in enumerate(found) if "error" in o]
        if errors:
            return min(errors, key=lambda e: e["at"])  # the first to fail; the others followed
        if len(found) < len(ranks):  # a rank stopped before this case (after an error)
            return {"error": "stopped", "line": None, "not_done": False, "rank": -1, "at": 0.0}
        return [o["value"] for o in found]

    def _raised_on(self, error: dict[str, Any], name: str, case: Case) -> Feedback:
        say, texts = PHRASES[self.language], TEXTS[self.language]
        if error["not_done"]:
            return Feedback(self.name, False, say["not_done"].format(name=name), case.label)
        text = say["raised"].format(error=error["error"], label=case.label)
        text += texts["on_rank"].format(rank=error["rank"])
        if error["error"].startswith("NameError"):  # a helper or import left in the notebook
            text += texts["alone"]
        if error["line"] is not None:
            text += "\n  " + say["at"].format(line=error["line"][0], function=name,
                                              source=error["line"][1])
        return Feedback(self.name, False, text + f"\n  {say['input']}: {self._inputs(case)}",
                        case.label)

    def _wrong_on(self, ranks: list[Any], case: Case, index: int, expected: list[Any],
                  got: list[Any]) -> Feedback:
        say = PHRASES[self.language]
        rank = next((r for r, (e, g) in enumerate(zip(expected, got))
                     if not self.matches(e, g)), 0)
        lines = [say["wrong"].format(name=self.name, label=case.label),
                 f"  {say['input']}: {self._inputs(case)}"]
        if len(got) != len(expected):
            lines += [f"  {say['expected']}: {summarize(expected, language=self.language)}",
                      f"  {say['got']}: {summarize(got, language=self.language)}"]
        else:
            lines += [f"  {say['expected']} (rank {rank}): {summarize(expected[rank], language=self.language)}",
                      f"  {say['got']} (rank {rank}): {summarize(got[rank], language=self.language)}"]
        for number, known in enumerate(self.misconceptions, start=1):
            wrong = self._outcome(ranks, number, index)
            if (not isinstance(wrong, dict) and self.matches(wrong, got)
                    and not self.matches(wrong, expected)):
                lines.append(say["misconception"].format(name=known.name, explain=known.explain))
                return Feedback(self.name, False, "\n".join(lines), case.label, known.name)
        return Feedback(self.name, False, "\n".join(lines), case.label)

    def _inputs(self, case: Case) -> str:
        shown = [summarize(a, language=self.language) for a in case.args] + [f"{k}={v!r}" for k, v in case.kwargs.items()]
        return ", ".join(shown) or "(none)"

