"""Bad inputs and faults, each tried as a user would: handled, a traceback, or not handled.

Issue 40's sweep as a script: the command line (``memory``, ``plan``, ``grade``,
``learner-copies``, ``train-course-model``), the torchrun entry points, the launcher and the
library's functions, each given a bad input in a fresh process with a time limit. Each case is

* **handled** when it stops with a non-zero status and one "PROGRAM: error: ..." line, no
  traceback (under torchrun, the course's line once and then torchrun's own failure report,
  which no script it starts can suppress); a library function when it raises ``ValueError``,
  ``TypeError`` or the launcher's ``LaunchError``, whose message is what a notebook shows;
* **traceback** when a traceback reaches the user (a command), or a function raises another
  exception type;
* **torchrun's** when torchrun itself fails on its own argument before it starts any of the
  course's code (its traceback is PyTorch's, out of the course's reach);
* **unhandled** when it is accepted without a word (status 0, or no exception), or hangs past its
  limit.

It prints a table of every case and the three counts; exit status 1 when any case is not handled.

    .venv/bin/python benchmarks/bad_inputs.py            # about three minutes on 2 cores
    .venv/bin/python benchmarks/bad_inputs.py -k grade   # only the cases whose name has "grade"
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

from course_lib.base.tables import Table

PYTHON = sys.executable
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))  # beside this Python


@dataclass(frozen=True)
class Case:
    """One bad input: ``argv`` run as a command, or ``code`` (Python) that calls the library."""

    name: str
    argv: tuple[str, ...] = ()
    code: str = ""
    limit: float = 60.0


def _course(*args: str) -> tuple[str, ...]:
    return (PYTHON, "-m", "course_lib", *args)


def _call(expression: str) -> str:
    """Python that evaluates ``expression`` and reports how it ended, as one JSON line."""
    return textwrap.dedent(f"""
        import json, sys
        from course_lib.parallel.launch import LaunchError
        try:
            {expression}
        except (ValueError, TypeError, LaunchError) as err:
            print(json.dumps({{"raised": type(err).__name__, "message": str(err)}}))
        except BaseException as err:
            print(json.dumps({{"other": type(err).__name__, "message": str(err)}}))
        else:
            print(json.dumps({{"accepted": True}}))
    """)


def cases(work: Path) -> list[Case]:
    """The sweep, with the files it needs written under ``work``."""
    empty = work / "empty"
    empty.mkdir()
    (work / "corrupt.ipynb").write_text("{ this is not json")
    (work / "invalid.ipynb").write_text(json.dumps({"cells": "none", "nbformat": 4}))
    other = {"cells": [{"cell_type": "code", "source": "print(1)", "metadata": {},
                        "outputs": [], "execution_count": None}],
             "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (work / "other_course.ipynb").write_text(json.dumps(other))
    copies = work / "copies"
    copies.mkdir()
    (copies / "01_pretraining_objectives.ipynb").write_text("{ corrupted learner copy")
    user = work / "user_model"
    user.mkdir()
    (user / "README.md").write_text("the user's notes\n")
    hello = "'course_lib.parallel.launch:hello'"
    return [
        Case("memory --params -1", _course("memory", "--params", "-1")),
        Case("memory --params abc", _course("memory", "--params", "abc")),
        Case("memory --gpus 0", _course("memory", "--params", "7e9", "--gpus", "0")),
        Case("memory --zero 4", _course("memory", "--params", "7e9", "--zero", "4")),
        Case("memory --precision fp7", _course("memory", "--params", "7e9",
                                                 "--precision", "fp7")),
        Case("plan --preset nope", _course("plan", "--preset", "nope")),
        Case("plan --gpus (abbreviation)", _course("plan", "--preset", "llama2-7b",
                                                    "--gpus", "64")),
        Case("plan --gpu-memory without --gpu custom",
             _course("plan", "--preset", "llama2-7b", "--gpu-memory", "80")),
        Case("plan --node-alpha-us without --node-link custom",
             _course("plan", "--preset", "llama2-7b", "--node-alpha-us", "5")),
        Case("plan --gpu custom --gpu-memory 0.5",
             _course("plan", "--preset", "llama2-7b", "--gpu", "custom", "--gpu-memory",
                     "0.5")),
        Case("grade a missing notebook", _course("grade", str(work / "missing.ipynb"))),
        Case("grade --timeout -1", _course("grade", "--timeout", "-1",
                                           str(work / "other_course.ipynb"))),
        Case("grade --timeout 0", _course("grade", "--timeout", "0",
                                          str(work / "other_course.ipynb"))),
        Case("grade --timeout nan", _course("grade", "--timeout", "nan",
                                            str(work / "other_course.ipynb"))),
        Case("grade a notebook of another course", _course("grade",
                                                           str(work / "other_course.ipynb"))),
        Case("grade a schema-invalid notebook", _course("grade", str(work / "invalid.ipynb"))),
        Case("grade a corrupted notebook", _course("grade", str(work / "corrupt.ipynb"))),
        Case("learner-copies --source (no notebooks)",
             _course("learner-copies", "--source", str(empty), str(work / "out"))),
        Case("learner-copies into its own source",
             _course("learner-copies", "--source", "notebooks", ".")),
        Case("learner-copies over a corrupted copy",
             _course("learner-copies", str(copies))),
        Case("train-course-model over a user's folder",
             _course("train-course-model", "--output", str(user))),
        Case("train-course-model --overwrite over a user's folder",
             _course("train-course-model", "--output", str(user), "--overwrite")),
        Case("fsdp --shard-factor with zero3",
             (TORCHRUN, "--nproc-per-node=2", "-m", "course_lib.parallel.fsdp",
              "--strategy", "zero3", "--shard-factor", "2"), limit=120),
        Case("torchrun --nproc-per-node=0",
             (TORCHRUN, "--nproc-per-node=0", "-m", "course_lib.parallel.ddp")),
        Case("ddp --steps 0", (TORCHRUN, "--nproc-per-node=2", "-m",
                               "course_lib.parallel.ddp", "--steps", "0"), limit=120),
        Case("allreduce_bench --nprocs 1",
             (PYTHON, "-m", "course_lib.hardware.allreduce_bench", "--nprocs", "1")),
        Case("launch nprocs=0", code=_call(
            f"from course_lib.parallel import launch; launch.launch({hello}, nprocs=0)")),
        Case("launch port=80", code=_call(
            f"from course_lib.parallel import launch; launch.launch({hello}, 2, port=80)")),
        Case("launch a rank that fails", code=_call(
            f"from course_lib.parallel import launch; "
            f"launch.launch({hello}, 2, kwargs={{'fail_on': 1}}, echo=False)"), limit=120),
        Case("pack_bits of floats", code=_call(
            "import torch; from course_lib.compression import quant; "
            "quant.pack_bits(torch.tensor([0.7, 1.2]), 4)")),
        Case("pack_bits of a list", code=_call(
            "from course_lib.compression import quant; quant.pack_bits([1, 2], 4)")),
        Case("gb(-1)", code=_call("from course_lib.numbers import memory; memory.gb(-1)")),
        Case("memory.training_memory(params=0)", code=_call(
            "from course_lib.numbers import memory; memory.training_memory(0, 'fp32', 'adam')")),
    ]


def verdict(case: Case, cwd: Path) -> tuple[str, str]:
    """(handled | traceback | unhandled, what the user saw, shortened)."""
    argv = case.argv or (PYTHON, "-c", case.code)
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True,
                              timeout=case.limit, env=dict(os.environ, PYTHONHASHSEED="0"))
    except subprocess.TimeoutExpired:
        return "unhandled", f"still running after {case.limit:.0f} s"
    except FileNotFoundError as err:
        return "unhandled", f"could not start: {err}"
    text = (done.stdout + done.stderr).strip()
    if case.code:
        report = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
        if "raised" in report:
            return "handled", f"{report['raised']}: {report['message']}"
        if "other" in report:
            return "traceback", f"{report['other']}: {report['message']}"
        return "unhandled", "accepted" if report else text[-200:]
    errors = [line for line in text.splitlines() if ": error: " in line]
    if "Traceback (most recent call last)" in text:
        if case.argv[0] == TORCHRUN and len(errors) == 1 and "ChildFailedError" in text:
            # the course refused once, on rank 0; torchrun then reports the failed rank with
            # a traceback of its own, which no script it starts can suppress
            return "handled", errors[0] + " (then torchrun's own failure report)"
        if case.argv[0] == TORCHRUN and "course_lib" not in text.split("Traceback")[-1]:
            # torchrun refused its own argument before starting any rank of the course
            return "torchrun's", "torchrun's own traceback: " + text.splitlines()[-1]
        return "traceback", text.splitlines()[-1]
    if done.returncode == 0:
        return "unhandled", "exit status 0: " + (text.splitlines()[-1] if text else "(silent)")
    if not errors:
        return "unhandled", f"exit status {done.returncode} without an error message"
    return "handled", errors[-1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("-k", default="", help="only the cases whose name contains this")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parent.parent
    counts = {"handled": 0, "torchrun's": 0, "traceback": 0, "unhandled": 0}
    rows = []
    with tempfile.TemporaryDirectory(prefix="course-bad-inputs-") as tmp:
        for case in cases(Path(tmp)):
            if args.k not in case.name:
                continue
            kind, seen = verdict(case, root)
            counts[kind] += 1
            rows.append([case.name, kind, textwrap.shorten(seen, 90)])
            print(f"{kind:>9}  {case.name}", flush=True)
    print(Table(["case", "verdict", "what the user saw"], rows,
                title="Bad inputs and faults, each in a fresh process"))
    print(Table(list(counts), [list(counts.values())],
                title=f"{len(rows)} cases"))
    return 0 if counts["traceback"] == counts["unhandled"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
